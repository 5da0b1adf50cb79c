"""The lexical judge: offline, deterministic claim-level faithfulness (DESIGN §3, backend ``lexical``).

Each claim of the answer is attributed to the closest chunk sentence by TF-IDF cosine, then checked word by
word against the chunk: content words (stemmed, stop words removed), numbers, dates, entities and negation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from gate.judges.base import ClaimVerdict, ContradictionLevel, Judgment
from gate.judges.claims import extract_claims, split_sentences
from gate.judges.text import Facts, Lang, Quantity, analyzer, detect_language, facts
from gate.models import Chunk


@dataclass(frozen=True)
class _Evidence:
    """One chunk, split into sentences, with the facts of each sentence."""

    chunk: Chunk
    sentences: tuple[str, ...]
    facts: tuple[Facts, ...]
    stems: frozenset[str] = field(default_factory=frozenset)
    numbers: tuple[Quantity, ...] = ()
    months: frozenset[int] = frozenset()


@dataclass(frozen=True)
class _Check:
    """A claim checked against one chunk."""

    index: int
    coverage: float
    similarity: float
    best_sentence: int
    about: bool
    """The closest sentence holds ≥ ``cover`` of the claim's content words (other than absent entities)."""
    conflicts: tuple[str, ...]
    missing: tuple[str, ...]


def tfidf_similarities(claims: Sequence[str], sentences: Sequence[str], lang: Lang = "en") -> np.ndarray:
    """TF-IDF cosine similarity of every claim with every evidence sentence.

    The vectorizer is scikit-learn's ``TfidfVectorizer`` with its defaults (smoothed IDF, l2 norm) and
    :func:`gate.judges.text.analyzer` as analyzer, fitted on ``sentences`` only.

    Args:
        claims: m claim texts.
        sentences: n evidence sentences (all chunks, in order).
        lang: "en" or "it".

    Returns:
        Array of shape (m, n), values in [0, 1]; all zeros when the sentences have no content word.

    Source: Salton & Buckley 1988, "Term-weighting approaches in automatic text retrieval",
    doi:10.1016/0306-4573(88)90021-0.

    """
    if not claims or not sentences:
        return np.zeros((len(claims), len(sentences)))
    vectorizer = TfidfVectorizer(analyzer=lambda text: analyzer(text, lang))
    try:
        evidence = vectorizer.fit_transform(sentences)
    except ValueError:  # empty vocabulary
        return np.zeros((len(claims), len(sentences)))
    return np.asarray((vectorizer.transform(claims) @ evidence.T).todense()).clip(0.0, 1.0)


@dataclass(frozen=True)
class LexicalJudge:
    """Claim-level verification by word overlap, numbers, dates, entities and negation.

    Per claim and chunk: *coverage* is the share of the claim's content stems found in the chunk (stems that
    come only from the question and are in no chunk are not required); the *closest sentence* is the chunk
    sentence with the highest TF-IDF cosine to the claim.

    - supported: some chunk has coverage ≥ ``support``, contains every number, month and entity of the
      claim (numbers compared as values, after rounding), and has no conflict;
    - contradicted: otherwise, when a chunk's closest sentence states the same thing (with its neighbours,
      it holds ≥ ``cover`` of the claim's other content words) but disagrees: a number of the claim is not
      in the chunk while these sentences state another number of the same kind (year, percent, time,
      quantity), a month differs, an entity is not in the chunk while the closest sentence names another
      one, or a content word is negated on one side only (in the closest sentence);
    - unverifiable: otherwise.

    The contradiction level is NONE, SOMETIMES or ALL according to how many of the chunks whose closest
    sentence states the same thing conflict with it. Deterministic and thread-safe (no mutable state).

    Source: claim-level faithfulness as in RAGAS (Es et al. 2024, arXiv:2309.15217); supported /
    contradicted / unverifiable after RAGTruth's conflict vs baseless spans (Niu et al. 2024, ACL).
    """

    cover: float = 0.75
    """Share in [0, 1] of the claim's content words a sentence must hold for a disagreement to count as a
    contradiction."""
    support: float = 0.75
    """Coverage in [0, 1] from which a chunk supports the claim (if it also agrees on every fact)."""

    id: ClassVar[str] = "lexical"
    version: ClassVar[str] = "2"  # 2: refusals detected by gate.metrics.refusal (the rule scoring uses)

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a score: name, version and the two thresholds."""
        return {"name": self.id, "version": self.version, "cover": self.cover, "support": self.support}

    def __post_init__(self) -> None:
        if not (0.0 <= self.cover <= 1.0 and 0.0 <= self.support <= 1.0):
            raise ValueError(f"lexical judge: need 0 <= cover, support <= 1, got {self.cover}, {self.support}")

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Judge ``answer`` against ``chunks`` claim by claim.

        Args:
            question: the user question; its words need no support when no chunk has them.
            answer: the generated answer; a refusal or an empty answer gives no claims (faithfulness NaN).
            chunks: retrieved chunks, rank order; may be empty (every claim is then unverifiable).
            repeat: the repeat index; ignored (the lexical judge is deterministic).

        Returns:
            A :class:`Judgment` with one :class:`ClaimVerdict` per claim, in answer order.

        """
        lang = detect_language(" ".join([answer, *(c.text[:2000] for c in chunks[:3])]))
        claims = extract_claims(answer, lang)
        if not claims:
            return Judgment(claims=(), extra={"language": lang})
        evidence = [_evidence(chunk, lang) for chunk in chunks]
        sentences = [s for ev in evidence for s in ev.sentences]
        sims = tfidf_similarities(claims, sentences, lang)
        given = facts(question or "", lang).content - frozenset().union(*(ev.stems for ev in evidence))
        verdicts = []
        for row, claim in enumerate(claims):
            claim_facts, offset, checks = facts(claim, lang), 0, []
            for index, ev in enumerate(evidence):
                row_sims = sims[row, offset : offset + len(ev.sentences)]
                checks.append(self._check(claim_facts, given, index, ev, row_sims))
                offset += len(ev.sentences)
            verdicts.append(self._verdict(claim, checks, evidence))
        return Judgment(claims=tuple(verdicts), extra={"language": lang})

    def _check(self, claim: Facts, given: frozenset[str], index: int, ev: _Evidence, sims: np.ndarray) -> _Check:
        best_sentence = int(np.argmax(sims)) if len(sims) else 0
        best = ev.facts[best_sentence]
        required = claim.content - given or claim.content
        coverage = len(required & ev.stems) / len(required) if required else 1.0
        absent_numbers = [q for q in claim.numbers if not any(q.matches(o) for o in ev.numbers)]
        absent_months = sorted(claim.months - ev.months)
        absent_entities = sorted(e for e in claim.entities if not _known(e, ev.stems))
        missing = (
            [f"number {q.value:g}" for q in absent_numbers]
            + [f"month {m}" for m in absent_months]
            + ([f"entity {', '.join(absent_entities)}"] if absent_entities else [])
        )
        # A conflict counts only when the closest sentence and its neighbours (for "It has ...") state the same
        # thing otherwise: they hold at least `cover` of the claim's other content words.
        window = ev.facts[max(0, best_sentence - 1) : best_sentence + 2]
        rest = required - set(absent_entities)
        window_stems = frozenset().union(*(f.content for f in window))
        same_statement = (len(rest & window_stems) / len(rest) if rest else 1.0) >= self.cover
        conflicts: list[str] = []
        if same_statement:
            for q in absent_numbers:
                said = sorted({f"{o.value:g}" for f in window for o in f.numbers if o.kind == q.kind})
                if said:
                    conflicts.append(f"number {q.value:g} not in chunk; chunk says {', '.join(said[:3])}")
            window_months = sorted(frozenset().union(*(f.months for f in window)))
            if absent_months and window_months:
                conflicts.append(f"month {absent_months} not in chunk; chunk says {window_months}")
            others = sorted(e for e in best.entities - claim.content if not _known(e, claim.content))
            if absent_entities and others:
                conflicts.append(
                    f"entity {', '.join(absent_entities)} not in chunk; chunk names {', '.join(others[:3])}"
                )
            flipped = sorted(
                ((claim.positive & best.negated) - best.positive) | ((claim.negated & best.positive) - best.negated)
            )
            if flipped:
                conflicts.append(f"negation differs on {', '.join(flipped)}")
        return _Check(
            index=index,
            coverage=coverage,
            similarity=float(sims[best_sentence]) if len(sims) else 0.0,
            best_sentence=best_sentence,
            about=same_statement,
            conflicts=tuple(conflicts),
            missing=tuple(missing),
        )

    def _verdict(self, claim: str, checks: list[_Check], evidence: list[_Evidence]) -> ClaimVerdict:
        covering = [c for c in checks if c.about]
        conflicting = [c for c in covering if c.conflicts]
        supporting = [c for c in checks if c.coverage >= self.support and not c.conflicts and not c.missing]
        level: ContradictionLevel = (
            "NONE" if not conflicting else "ALL" if len(conflicting) == len(covering) else "SOMETIMES"
        )

        def closest(candidates: list[_Check]) -> _Check:
            return max(candidates, key=lambda c: (c.similarity, c.coverage, -c.index))

        if supporting:
            check, verdict = closest(supporting), "supported"
            reason = f"{check.coverage:.0%} of content words in chunk"
        elif conflicting:
            check, verdict = closest(conflicting), "contradicted"
            reason = "; ".join(check.conflicts)
        elif checks:
            check, verdict = closest(checks), "unverifiable"
            reason = f"{check.coverage:.0%} of content words in chunk" + "".join(
                f"; {m} not in chunk" for m in check.missing
            )
        else:
            return ClaimVerdict(claim=claim, verdict="unverifiable", reason="no chunks")
        if check.similarity <= 0.0 and verdict == "unverifiable" and check.coverage == 0.0:
            return ClaimVerdict(claim=claim, verdict="unverifiable", reason="no chunk shares a content word")
        ev = evidence[check.index]
        return ClaimVerdict(
            claim=claim,
            verdict=verdict,
            chunk_id=ev.chunk.id,
            chunk_text=ev.sentences[check.best_sentence],
            similarity=check.similarity,
            contradiction_level=level,
            reason=reason,
        )


def _known(stem: str, stems: frozenset[str]) -> bool:
    """True when ``stem`` or a word of the same family ("singapor" / "singaporean") is in ``stems``."""
    return stem in stems or (
        len(stem) >= 4 and any(s.startswith(stem) or stem.startswith(s) for s in stems if len(s) >= 4)
    )


def _evidence(chunk: Chunk, lang: Lang) -> _Evidence:
    sentences = tuple(split_sentences(chunk.text)) or (chunk.text,)
    found = tuple(facts(s, lang) for s in sentences)
    return _Evidence(
        chunk=chunk,
        sentences=sentences,
        facts=found,
        stems=frozenset().union(*(f.content for f in found)),
        numbers=tuple(q for f in found for q in f.numbers),
        months=frozenset().union(*(f.months for f in found)),
    )
