"""The lexical judge: offline, deterministic claim-level faithfulness (DESIGN §3, backend ``lexical``).

Each claim of the answer is attributed to the closest chunk sentence by TF-IDF cosine, then checked word by
word against the chunk: content words (stemmed, stop words removed), numbers, dates, entities and negation.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from gate.judges.base import ClaimVerdict, ContradictionLevel, Judgment
from gate.judges.claims import claim_spans, distinct_claims, split_sentences
from gate.judges.hallucination import ClaimSignals, HallucinationModel, shipped_model
from gate.judges.lexicon import antonyms
from gate.judges.text import Facts, Lang, Quantity, analyzer, detect_language, facts
from gate.language import unreadable
from gate.models import Chunk

_CONTEXT_CHARS = 5000
"""Characters of the context whose language is checked (the first chunks, in rank order)."""


@dataclass(frozen=True)
class _Evidence:
    """One chunk, split into sentences, with the facts of each sentence."""

    chunk: Chunk
    sentences: tuple[str, ...]
    facts: tuple[Facts, ...]
    stems: frozenset[str] = field(default_factory=frozenset)
    positive: frozenset[str] = frozenset()
    negated: frozenset[str] = frozenset()
    numbers: tuple[Quantity, ...] = ()
    months: frozenset[int] = frozenset()

    @functools.cached_property
    def uses(self) -> tuple[dict[str, list[tuple[frozenset[str], frozenset[str]]]], ...]:
        """Verb → its sides in each sentence that uses it, in order; from ``relations()`` and ``relations(near=2)``."""
        found: tuple[dict[str, list[tuple[frozenset[str], frozenset[str]]]], ...] = ({}, {})
        for f in self.facts:
            for side, relations in zip(found, f.roles, strict=True):
                for verb, sides in relations.items():
                    side.setdefault(verb, []).append(sides)
        return found

    @functools.cached_property
    def values(self) -> frozenset[float]:
        """The values of ``numbers`` other than clock times (a claim's number with one of them is in the chunk)."""
        return frozenset(q.value for q in self.numbers if q.kind != "time")

    @functools.cached_property
    def ordered_stems(self) -> tuple[str, ...]:
        """``stems`` in sorted order (for :func:`_known`)."""
        return tuple(sorted(self.stems))


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
    absent_facts: tuple[str, ...] = ()
    """The claim's numbers, months and names that this chunk does not hold."""


def tfidf_similarities(claims: Sequence[str], sentences: Sequence[str], lang: Lang = "en") -> np.ndarray:
    """TF-IDF cosine similarity of every claim with every evidence sentence.

    The values are those of scikit-learn's ``TfidfVectorizer`` with its defaults (smoothed IDF, l2 norm) and
    :func:`gate.judges.text.analyzer` as analyzer, fitted on ``sentences`` only, and of the sparse product of the
    claims' rows with the sentences' rows, to the last bit: the same floating-point operations in the same order
    (the sentences' squared weights summed in the order their words were first met, the claims' and the products in
    alphabetical order of the features; tests/judges/test_lexical.py compares the two). scikit-learn's checks cost
    about a millisecond per answer, more than the rest of the judge.

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
    rows = [Counter(analyzer(sentence, lang)) for sentence in sentences]  # feature → count, in order of appearance
    vocabulary: dict[str, int] = {}  # feature → order of first appearance in the sentences
    for row in rows:
        for feature in row:
            vocabulary.setdefault(feature, len(vocabulary))
    if not vocabulary:  # empty vocabulary
        return np.zeros((len(claims), len(sentences)))
    features = sorted(vocabulary)  # scikit-learn's column order
    column = {f: c for c, f in enumerate(features)}
    documents = Counter(f for row in rows for f in row)
    df = np.array([documents[f] for f in features], dtype=float)
    idf = np.full_like(df, fill_value=len(sentences) + 1)  # smoothed: one more document, holding every feature
    idf /= df + 1.0
    np.log(idf, out=idf)
    idf += 1.0
    weights = idf.tolist()
    postings: dict[int, list[tuple[int, float]]] = {}  # column → (sentence, l2-normalised weight)
    for j, row in enumerate(rows):
        stored = sorted(row, key=vocabulary.__getitem__)  # scikit-learn keeps a row's features in this order
        for c, w in _normalised([(column[f], row[f] * weights[column[f]]) for f in stored]):
            postings.setdefault(c, []).append((j, w))
    out = np.zeros((len(claims), len(sentences)))
    for i, claim in enumerate(claims):
        found = Counter(column[f] for f in analyzer(claim, lang) if f in column)
        sums = [0.0] * len(sentences)
        for c, a in _normalised([(c, n * weights[c]) for c, n in sorted(found.items())]):
            for j, b in postings[c]:
                sums[j] += a * b
        out[i] = sums
    return out.clip(0.0, 1.0)


def _normalised(row: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``row``'s weights divided by their l2 norm (squares summed in ``row``'s order); an all-zero row as it is."""
    total = 0.0
    for _, w in row:
        total += w * w
    if total == 0.0:
        return row
    norm = math.sqrt(total)
    return [(c, w / norm) for c, w in row]


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

    model: HallucinationModel = field(default_factory=shipped_model, init=False, repr=False)
    """The hallucination model that turns each claim's signals into a probability and the answer's into a
    hallucination score (:mod:`gate.judges.hallucination`); the shipped one by default."""

    id: ClassVar[str] = "lexical"
    version: ClassVar[str] = "7"
    """2: refusals detected by gate.metrics.refusal (the rule scoring uses); 3: antonyms, role swaps, relations,
    polarity across sentences, lower-case name swaps, duplicate claims, unsupported languages; 4: a sentence that
    states the claim with exactly its words outweighs a negated neighbour with more words; 5: a near-duplicate claim
    that differs from its twin by negation, a number, a month, a name or a listed antonym is kept and judged; 6: each
    claim's hallucination probability and the answer's grounded score (1 − its hallucination score; 0 when no claim is
    supported) from the fitted hallucination model; only citation markers are left out of the judged text (never a
    word that is a retrieved id), and each claim is shown as written; 7: Italian number words are read in Italian text
    only ("due to" is no 2), a hyphenated word with a first part of one or two letters is one word ("Wi-Fi" = "WiFi"),
    four bare digits stand where a year does ("1111" against "1889" is a contradiction); the model refitted."""

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a score: name, version, the two thresholds and the hallucination model's version."""
        return {
            "name": self.id,
            "version": self.version,
            "cover": self.cover,
            "support": self.support,
            "model": self.model.version,
        }

    def __post_init__(self) -> None:
        if not (0.0 <= self.cover <= 1.0 and 0.0 <= self.support <= 1.0):
            raise ValueError(f"lexical judge: need 0 <= cover, support <= 1, got {self.cover}, {self.support}")

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Judge ``answer`` against ``chunks`` claim by claim.

        Args:
            question: the user question; its words need no support when no chunk has them.
            answer: the generated answer as written; its citation markers are not judged
                (:func:`gate.judges.claims.claim_spans`); a refusal or an empty answer gives no claims.
            chunks: retrieved chunks, rank order; may be empty (every claim is then unverifiable).
            repeat: the repeat index; ignored (the lexical judge is deterministic).

        Returns:
            A :class:`Judgment` with one :class:`ClaimVerdict` per distinct claim, in answer order (a claim that
            repeats an earlier one is dropped and counted in ``extra["duplicates"]``); each verdict's ``claim`` is
            the claim's span of ``answer`` as written. When the answer or the
            context is in a language other than English or Italian, no claim is judged and ``not_applicable``
            names the language.

        """
        context = " ".join(c.text for c in chunks)[:_CONTEXT_CHARS]
        warning = unreadable({"answer": answer, "context": context})
        if warning is not None:
            return Judgment(claims=(), not_applicable=warning)
        lang = detect_language(" ".join([answer, *(c.text[:2000] for c in chunks[:3])]))
        spans, duplicates = distinct_claims(claim_spans(answer, lang, [c.id for c in chunks]), lang)
        claims = [span.text for span in spans]  # judged; a verdict shows span.shown, the answer as written
        extra = {"language": lang, "duplicates": duplicates}
        if not claims:
            return Judgment(claims=(), extra=extra)
        evidence = [_evidence(chunk, lang) for chunk in chunks]
        sentences = [s for ev in evidence for s in ev.sentences]
        sims = tfidf_similarities(claims, sentences, lang).tolist()
        asked = facts(question or "", lang)
        everywhere = frozenset().union(*(ev.stems for ev in evidence))
        given = asked.content - everywhere
        model = self.model
        verdicts, signals = [], []
        for row, claim in enumerate(claims):
            claim_facts, offset, checks = facts(claim, lang), 0, []
            lower_case = claim[1:] == claim[1:].lower()
            for index, ev in enumerate(evidence):
                row_sims = sims[row][offset : offset + len(ev.sentences)]
                checks.append(self._check(claim_facts, given, index, ev, row_sims, lang, lower_case))
                offset += len(ev.sentences)
            verdict = self._verdict(claim, checks, evidence)
            found = _signals(claim_facts, given, verdict, evidence, everywhere, asked, lang)
            signals.append(found)
            p = round(model.claim_probability(found), 6)
            verdicts.append(replace(verdict, claim=spans[row].shown, p_hallucinated=p, signals=found))
        hallucinated = any(v.verdict == "contradicted" or v.unsupported_facts for v in verdicts)
        # a non-answer is not grounded: no claim of it is supported (benchmarks/judge_quality.py prints how many
        # answers people judge faithful have a supported claim)
        grounded = 1.0 - model.answer_score(signals) if any(v.verdict == "supported" for v in verdicts) else 0.0
        return Judgment(claims=tuple(verdicts), extra=extra, hallucinated=hallucinated, grounded=round(grounded, 6))

    def _check(
        self,
        claim: Facts,
        given: frozenset[str],
        index: int,
        ev: _Evidence,
        sims: list[float],
        lang: Lang,
        lower_case: bool = False,
    ) -> _Check:
        best_sentence = max(range(len(sims)), key=sims.__getitem__) if sims else 0  # the first of equals
        best = ev.facts[best_sentence]
        opposite = antonyms() if lang == "en" else {}
        required = claim.content - given or claim.content
        # "not available" is covered by "unavailable" (an antonym under negation), and the reverse
        equivalent = {
            w
            for w in required - ev.stems
            if (w in claim.negated and opposite.get(w, frozenset()) & ev.positive)
            or (w in claim.positive and opposite.get(w, frozenset()) & ev.negated)
        }
        coverage = len(required & (ev.stems | equivalent)) / len(required) if required else 1.0
        absent_numbers = [
            q
            for q in claim.numbers
            if not (q.kind != "time" and q.value in ev.values or any(q.matches(o) for o in ev.numbers))
        ]
        absent_months = sorted(claim.months - ev.months)
        absent_entities = sorted(e for e in claim.entities if not _known(e, ev.stems, ev.ordered_stems))
        absent_facts = (
            [f"number {q.value:g}" for q in absent_numbers]
            + [f"month {m}" for m in absent_months]
            + ([f"entity {', '.join(absent_entities)}"] if absent_entities else [])
        )
        missing = list(absent_facts)
        # A conflict counts only when the closest sentence and its neighbours (for "It has ...") state the same
        # thing otherwise: they hold at least `cover` of the claim's other content words.
        rest = required - set(absent_entities)
        window = ev.facts[max(0, best_sentence - 1) : best_sentence + 2]
        # a word whose antonym stands in the sentence is about the same thing ("rose" / "fell")
        window_stems = _with_opposites(rest, frozenset().union(*(f.content for f in window)), opposite)
        same_statement = _share(rest, window_stems) >= self.cover
        conflicts: list[str] = []
        if same_statement:
            for q in absent_numbers:
                kind = _slot(q)
                said = sorted({f"{o.value:g}" for f in window for o in f.numbers if _slot(o) == kind})
                if said:
                    conflicts.append(f"number {q.value:g} not in chunk; chunk says {', '.join(said[:3])}")
            window_months = sorted(frozenset().union(*(f.months for f in window)))
            if absent_months and window_months:
                conflicts.append(f"month {absent_months} not in chunk; chunk says {window_months}")
            candidates = best.entities - claim.content
            ordered = sorted(claim.content) if candidates else []
            others = sorted(e for e in candidates if not _known(e, claim.content, ordered))
            if absent_entities and others:
                conflicts.append(
                    f"entity {', '.join(absent_entities)} not in chunk; chunk names {', '.join(others[:3])}"
                )
            substituted, swapped_words = _substitutions(claim, best, required - ev.stems - equivalent, lower_case)
            conflicts.extend(substituted)
            missing.extend(swapped_words)
        # Polarity (negation, antonyms) is checked in every sentence that states the same thing, not only the
        # closest one: "WiFi is available in the lobby. It is not available in the rooms."
        antonymous = [(w, opposite[w]) for w in rest if w in opposite]
        statements = [
            k
            for k in range(len(ev.facts))
            if (k == best_sentence and same_statement) or _states(rest, antonymous, ev.facts[k], self.cover)
        ]
        conflicts.extend(_polarity_conflicts(claim, rest, [ev.facts[k] for k in statements], opposite))
        role_conflicts, unstated = _role_conflicts(claim, ev)
        conflicts.extend(role_conflicts)
        missing.extend(unstated)
        return _Check(
            index=index,
            coverage=coverage,
            similarity=sims[best_sentence] if sims else 0.0,
            best_sentence=best_sentence,
            about=same_statement or bool(statements),
            conflicts=tuple(conflicts),
            missing=tuple(missing),
            absent_facts=tuple(absent_facts),
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
            return ClaimVerdict(
                claim=claim,
                verdict="unverifiable",
                reason="no chunk shares a content word",
                unsupported_facts=check.absent_facts,
            )
        ev = evidence[check.index]
        return ClaimVerdict(
            claim=claim,
            verdict=verdict,
            chunk_id=ev.chunk.id,
            chunk_text=ev.sentences[check.best_sentence],
            similarity=check.similarity,
            contradiction_level=level,
            reason=reason,
            unsupported_facts=check.absent_facts if verdict == "unverifiable" else (),
        )


def _signals(
    claim: Facts,
    given: frozenset[str],
    verdict: ClaimVerdict,
    evidence: Sequence[_Evidence],
    everywhere: frozenset[str],
    asked: Facts,
    lang: Lang,
) -> ClaimSignals:
    """The hallucination model's inputs for one claim (:class:`~gate.judges.hallucination.ClaimSignals`).

    Content words are the claim's stems less the question's words that no chunk holds (``given``); the closest
    sentence is the one the verdict names (its ``chunk_text``); ``everywhere`` holds the stems of every chunk and
    ``asked`` the question's facts. A fact is absent when no chunk holds it (numbers compared as values, names with
    their word family) and the question does not state it.
    """
    required = claim.content - given or claim.content
    closest = facts(verdict.chunk_text, lang).content if verdict.chunk_text else frozenset()
    asked_values = {q.value for q in asked.numbers}
    numbers = [
        q
        for q in claim.numbers
        if q.value not in asked_values
        and not any(
            q.kind != "time" and q.value in ev.values or any(q.matches(o) for o in ev.numbers) for ev in evidence
        )
    ]
    months = claim.months - frozenset().union(*(ev.months for ev in evidence)) - asked.months
    names = [
        e
        for e in claim.entities
        if e not in asked.content and not any(_known(e, ev.stems, ev.ordered_stems) for ev in evidence)
    ]
    return ClaimSignals(
        novelty_closest=_share_absent(required, closest),
        novelty_context=_share_absent(required, everywhere),
        absent_facts=len(numbers) + len(months) + len(names),
        contradicted=verdict.verdict == "contradicted",
    )


def _slot(number: Quantity) -> str:
    """The kind of slot ``number`` fills: its kind, with four bare digits read as a year.

    "in 1111" stands where a chunk says "in 1889" (a year outside 1800–2100 is still written as one); "1,200 rooms"
    is no year.
    """
    if number.kind == "num" and number.four_digits:
        return "year"
    return number.kind


def _share_absent(words: frozenset[str], stems: frozenset[str]) -> float:
    """Share of ``words`` not in ``stems`` (0 when ``words`` is empty)."""
    return len(words - stems) / len(words) if words else 0.0


def _share(words: frozenset[str], stems: frozenset[str]) -> float:
    """Share of ``words`` found in ``stems`` (1 when ``words`` is empty)."""
    return len(words & stems) / len(words) if words else 1.0


def _with_opposites(
    words: frozenset[str], stems: frozenset[str], opposite: dict[str, frozenset[str]]
) -> frozenset[str]:
    """``stems`` plus the words of ``words`` whose antonym is in ``stems``."""
    return stems | {w for w in words if opposite.get(w, frozenset()) & stems}


def _states(rest: frozenset[str], antonymous: list[tuple[str, frozenset[str]]], sentence: Facts, cover: float) -> bool:
    """True when ``sentence`` itself holds ≥ ``cover`` of ``rest``, leaving out words whose antonym it has.

    ``antonymous`` lists the words of ``rest`` that have antonyms, with them. At least two words must be compared:
    a claim of one content word is about too little to conflict with every sentence that uses it.
    """
    content = sentence.content
    compared = rest.difference([w for w, opposites in antonymous if opposites & content]) if antonymous else rest
    return len(compared) >= 2 and _share(compared, content) >= cover


def _polarity(claim: Facts, sentence: Facts, opposite: dict[str, frozenset[str]]) -> list[str]:
    """Where ``sentence`` says the opposite of ``claim``: a word negated on one side only, or an antonym."""
    flipped = sorted(
        ((claim.positive & sentence.negated) - sentence.positive)
        | ((claim.negated & sentence.positive) - sentence.negated)
    )
    out = [f"negation differs on {', '.join(flipped)}"] if flipped else []
    for word in sorted(w for w in claim.positive - sentence.content if w in opposite):
        said = sorted((opposite[word] & sentence.positive) - claim.content)
        if said:
            out.append(f"antonym: claim says {_surface(claim, word)}, chunk says {_surface(sentence, said[0])}")
    return out


def _surface(found: Facts, stem: str) -> str:
    """The word behind ``stem`` in ``found`` (the stem itself when absent)."""
    return next((w for t, w in zip(found.terms, found.surfaces, strict=True) if t == stem), stem)


def _polarity_conflicts(
    claim: Facts, rest: frozenset[str], statements: list[Facts], opposite: dict[str, frozenset[str]]
) -> list[str]:
    """Polarity conflicts with the sentences that state the claim, unless a sentence closer to it agrees.

    A sentence that states the claim with the same polarity outweighs a conflicting one when it holds more of the
    claim's words (an antonym does not count as the claim's word), or as many with fewer other words (higher
    Jaccard similarity of content words): "pour out the hot water" is stated by "pour out the hot water" and not
    contradicted by "pour cold water over the eggs"; "ALL is the class of all decision problems" is stated by
    itself, not contradicted by "#P is a class of counting problems (not decision problems)" next to it. Full ties
    go to the conflict ("available in the lobby" vs "not available in the rooms" for the claim "available in the
    rooms").
    """

    def closeness(f: Facts) -> tuple[float, float]:
        return _share(rest, f.content), len(rest & f.content) / (len(rest | f.content) or 1)

    found = [(closeness(f), _polarity(claim, f, opposite)) for f in statements]
    agreeing = max((close for close, reasons in found if not reasons), default=(-1.0, -1.0))
    return [r for close, reasons in found if reasons and close >= agreeing for r in reasons][:3]


def _role_conflicts(claim: Facts, ev: _Evidence) -> tuple[list[str], list[str]]:
    """(conflicts, missing) for the claim's directed relations ("the English defeated the Normans").

    A relation is stated when a sentence has the same verb with one of the claim's words on each side (agent
    first, passive voice normalised); swapped when a sentence has them on the opposite sides (a conflict); and
    not stated when the chunk uses the verb only between other words (the claim's words come from elsewhere in
    the passage: missing, so not supported).
    """
    conflicts: list[str] = []
    missing: list[str] = []
    relations, claim_nearest = claim.roles
    if not relations:
        return conflicts, missing
    for verb, (left, right) in relations.items():
        uses = ev.uses[0].get(verb, ())
        if not uses or any(left & sl and right & sr for sl, sr in uses):
            continue
        near_left, near_right = claim_nearest[verb]
        swapped = next(((sl, sr) for sl, sr in ev.uses[1].get(verb, ()) if near_left & sr and near_right & sl), None)
        if swapped:
            agent, patient = sorted(near_right & swapped[0])[0], sorted(near_left & swapped[1])[0]
            conflicts.append(f"roles swapped around '{_surface(claim, verb)}': chunk says {agent} → {patient}")
        else:
            missing.append(f"relation '{_surface(claim, verb)}' between these words")
    return conflicts, missing


def _substitutions(
    claim: Facts, sentence: Facts, absent: frozenset[str], lower_case: bool
) -> tuple[list[str], list[str]]:
    """(conflicts, missing) for claim words absent from the chunk that stand where the sentence has another word.

    Aligned: the same preceding and following content words on both sides ("was played in glendale in 2021" /
    "was played in Tampa in 2021"); in a claim written in lower case, where names cannot be told by their
    capital, one matching neighbour is enough and replacing a name of the chunk is a conflict. Otherwise the
    word is missing, not contradicted (a synonym cannot be told from a changed fact by spelling). Absent names
    of a normally written claim are left to the entity rule.
    """
    conflicts: list[str] = []
    missing: list[str] = []
    terms = claim.terms
    for k, term in enumerate(terms):
        if term not in absent or term in claim.entities:
            continue
        before = terms[k - 1] if k else None
        after = terms[k + 1] if k + 1 < len(terms) else None
        if (before is None and after is None) or (not lower_case and (before is None or after is None)):
            continue
        other = next(
            (
                j
                for j, candidate in enumerate(sentence.terms)
                if candidate not in claim.content
                and (before is None or (j > 0 and sentence.terms[j - 1] == before))
                and (after is None or (j + 1 < len(sentence.terms) and sentence.terms[j + 1] == after))
            ),
            None,
        )
        if other is None:
            continue
        if lower_case and sentence.terms[other] in sentence.entities:
            conflicts.append(f"{claim.surfaces[k]} where the chunk names {sentence.surfaces[other]}")
        else:
            missing.append(f"word {claim.surfaces[k]} where the chunk says {sentence.surfaces[other]}")
    return conflicts, missing


def _known(stem: str, stems: frozenset[str], ordered: Sequence[str] | None = None) -> bool:
    """True when ``stem`` or a word of the same family ("singapor" / "singaporean") is in ``stems``.

    Family: one of the two, of four letters or more, begins with the other. ``ordered`` is ``sorted(stems)``
    (sorted here when not given).
    """
    if stem in stems:
        return True
    if len(stem) < 4:
        return False
    if any(stem[:n] in stems for n in range(4, len(stem))):  # a shorter word of the family
        return True
    ordered = sorted(stems) if ordered is None else ordered
    k = bisect.bisect_left(ordered, stem)  # the words that begin with ``stem`` come first after it
    return k < len(ordered) and ordered[k].startswith(stem)


def _evidence(chunk: Chunk, lang: Lang) -> _Evidence:
    sentences = tuple(split_sentences(chunk.text)) or (chunk.text,)
    found = tuple(facts(s, lang) for s in sentences)
    return _Evidence(
        chunk=chunk,
        sentences=sentences,
        facts=found,
        stems=frozenset().union(*(f.content for f in found)),
        positive=frozenset().union(*(f.positive for f in found)),
        negated=frozenset().union(*(f.negated for f in found)),
        numbers=tuple(q for f in found for q in f.numbers),
        months=frozenset().union(*(f.months for f in found)),
    )
