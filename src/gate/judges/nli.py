"""The ``nli`` judge: claims checked by a local NLI cross-encoder against chunks and sentence windows.

Each claim of the answer (``gate.judges.claims.claim_spans``) is paired with every premise: each chunk's
whole text and every window of ``window`` adjacent sentences in it (a cross-encoder truncates long inputs, a
window keeps the evidence inside its limit). The model gives probabilities (softmax over its logits) whose
label order is read from the model's ``config.json`` ``id2label``, never assumed. A premise's label is its
most probable one; a chunk entails a claim when one of its premises does, else contradicts it when one of its
premises does. The claim is supported when some chunk entails it, contradicted when none does and some chunk
contradicts it, else unverifiable.

Needs the extra ``[nli]`` (sentence-transformers, torch) and a model on local disk: nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gate.judges.base import ClaimVerdict, ContradictionLevel, Judgment
from gate.judges.claims import claim_spans, split_sentences
from gate.models import Chunk

NLILabel = Literal["entailment", "neutral", "contradiction"]
LABELS: tuple[NLILabel, ...] = ("entailment", "neutral", "contradiction")
"""Column order of :meth:`NLIJudge.probabilities`, whatever the model's own order."""

VERSION = "nli-v2"
"""Bumped whenever claim extraction, premise construction or aggregation changes (v2: the shared refusal rule)."""


def canonical_label(name: str) -> NLILabel | None:
    """Map a model's label name to ``entailment`` / ``neutral`` / ``contradiction``, or None if unknown.

    Accepts the usual spellings: "ENTAILMENT", "entails", "contradiction", "CONTRADICTORY", "neutral",
    "not_entailment" / "non-entailment" (two-label models, counted as neutral).
    """
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    if key.startswith(("not_entail", "non_entail", "no_entail")):
        return "neutral"
    if key.startswith("entail"):
        return "entailment"
    if key.startswith("contradict"):
        return "contradiction"
    if key.startswith("neutral"):
        return "neutral"
    return None


def label_columns(id2label: Mapping[int, str]) -> list[NLILabel]:
    """Return, for each output index of the model (0, 1, ...), its canonical label.

    Args:
        id2label: the model config's mapping, output index → label name.

    Raises:
        ValueError: when a name is unknown or no index means entailment (the message shows the mapping and
            names the ``labels`` option).

    """
    names = [str(id2label[i]) for i in range(len(id2label))]
    columns = [canonical_label(n) for n in names]
    if None in columns or "entailment" not in columns:
        raise ValueError(
            f"cannot tell the NLI labels from the model's id2label {names}; pass the option 'labels' with "
            "one name per output index, e.g. labels: [contradiction, entailment, neutral]"
        )
    return columns  # type: ignore[return-value]


def model_fingerprint(path: Path, whole_below: int = 16 << 20, edge: int = 1 << 20) -> str:
    """SHA-256 fingerprint of a local model directory (config, weights, tokenizer), to tell models apart.

    Hashes every file under ``path`` in sorted order: its relative path, its size, and its bytes — all of them
    for files under ``whole_below`` bytes, the first and last ``edge`` bytes of larger ones (weights), so that
    a multi-gigabyte model is fingerprinted in milliseconds.

    Args:
        path: the model directory.
        whole_below: size in bytes under which a file is hashed whole.
        edge: bytes hashed at each end of a larger file.

    Returns:
        64 hex digits.

    """
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        size = file.stat().st_size
        digest.update(f"{file.relative_to(path).as_posix()}\0{size}\0".encode())
        with file.open("rb") as handle:
            if size < whole_below:
                digest.update(handle.read())
            else:
                digest.update(handle.read(edge))
                handle.seek(size - edge)
                digest.update(handle.read(edge))
    return digest.hexdigest()


@dataclass(frozen=True)
class Premise:
    """One piece of evidence a claim is checked against."""

    chunk_index: int
    """Index of its chunk in rank order (0 = rank 1)."""
    text: str
    """The whole chunk text or a window of adjacent sentences."""


def build_premises(chunks: Sequence[Chunk], window: int) -> list[Premise]:
    """Return every chunk's whole text, then its windows of ``window`` adjacent sentences, in rank order.

    A chunk of at most ``window`` sentences gives only its whole text; duplicates within a chunk are dropped;
    chunks with empty text give nothing.

    Args:
        chunks: retrieved chunks, rank 1 first.
        window: sentences per window, ≥ 1.

    """
    premises = []
    for index, chunk in enumerate(chunks):
        text = chunk.text.strip()
        if not text:
            continue
        sentences = split_sentences(text)
        texts = [text]
        if len(sentences) > window:
            texts += [" ".join(sentences[i : i + window]) for i in range(len(sentences) - window + 1)]
        premises += [Premise(index, t) for t in dict.fromkeys(texts)]
    return premises


def aggregate(
    claim: str, chunks: Sequence[Chunk], premises: Sequence[Premise], probabilities: np.ndarray
) -> ClaimVerdict:
    """Return the verdict on ``claim`` from its premise probabilities (the rule in the module docstring).

    Args:
        claim: the claim text.
        chunks: retrieved chunks, rank 1 first.
        premises: the premises, as :func:`build_premises` gives them.
        probabilities: shape (len(premises), 3), columns in :data:`LABELS` order, rows summing to 1.

    Returns:
        The verdict with the attributed chunk and premise (the most probable entailing premise when supported,
        the most probable contradicting one when contradicted, else the most entailing one),
        ``similarity`` = that premise's probability of the verdict's label (entailment when unverifiable), and
        the contradiction level across the chunks that entail or contradict the claim.

    """
    if not premises:
        return ClaimVerdict(claim, "unverifiable", reason="no retrieved text to check against")
    labels = probabilities.argmax(axis=1)  # 0 entailment, 1 neutral, 2 contradiction
    entailing = {p.chunk_index for p, lab in zip(premises, labels, strict=True) if lab == 0}
    contradicting = {p.chunk_index for p, lab in zip(premises, labels, strict=True) if lab == 2} - entailing
    covering = entailing | contradicting
    level: ContradictionLevel = "NONE" if not contradicting else "ALL" if contradicting == covering else "SOMETIMES"
    if entailing:
        verdict, column = "supported", 0
    elif contradicting:
        verdict, column = "contradicted", 2
    else:
        verdict, column = "unverifiable", 0
    candidates = [i for i, lab in enumerate(labels) if lab == column] if verdict != "unverifiable" else None
    best = max(candidates or range(len(premises)), key=lambda i: probabilities[i, column])
    premise, chunk = premises[best], chunks[premises[best].chunk_index]
    probability = float(probabilities[best, column])
    reason = (
        f"{LABELS[column]} p={probability:.2f} in {chunk.id}"
        if verdict != "unverifiable"
        else f"no chunk entails or contradicts it (best entailment p={probability:.2f} in {chunk.id})"
    )
    return ClaimVerdict(claim, verdict, chunk.id, premise.text, probability, level, reason)


class NLIJudge:
    """NLI cross-encoder judge (``judge: {name: nli, model_path: ./models/nli-deberta-v3-base}``).

    All options are keyword-only and validated here; the model is loaded here too, so a bad path fails early.

    Args:
        model_path: a local directory holding a sequence-classification NLI model (``config.json``, weights,
            tokenizer), e.g. a ``cross-encoder/nli-deberta-v3-base`` snapshot.
        labels: label names per output index, overriding the model's ``id2label`` when it says
            ``LABEL_0``...; any spelling :func:`canonical_label` knows.
        device: torch device ("cpu", "cuda", ...).
        batch_size: (claim, premise) pairs per forward pass, ≥ 1.
        max_length: tokens per pair, ≥ 16 (longer pairs are truncated by the tokenizer).
        window: sentences per premise window, ≥ 1.

    Raises:
        ValueError: on an invalid option, a path without ``config.json``, labels that cannot be read, or
            when the ``[nli]`` extra is not installed.

    Source: cross-encoder NLI as in Honovich et al. 2022, "TRUE: Re-evaluating Factual Consistency
    Evaluation", NAACL, doi:10.18653/v1/2022.naacl-main.287.

    """

    backend = "nli"

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str],
        labels: Sequence[str] | None = None,
        device: str = "cpu",
        batch_size: int = 32,
        max_length: int = 512,
        window: int = 2,
    ) -> None:
        path = Path(model_path).expanduser()
        if not (path / "config.json").is_file():
            raise ValueError(f"option 'model_path': no config.json in {str(path)!r} (a local model directory)")
        for name, value, low in (
            ("batch_size", batch_size, 1),
            ("max_length", max_length, 16),
            ("window", window, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"option {name!r} must be an integer ≥ {low}, got {value!r}")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise ValueError(f"the nli judge needs the extra: pip install 'rag-gate[nli]' ({exc})") from exc
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if labels is not None:
            if isinstance(labels, str) or not all(isinstance(n, str) for n in labels):
                raise ValueError(f"option 'labels' must be a list of label names, got {labels!r}")
            id2label = dict(enumerate(labels))
        else:
            id2label = {int(k): v for k, v in (config.get("id2label") or {}).items()}
        columns = label_columns(id2label)
        try:
            self._model = CrossEncoder(str(path), device=device, max_length=max_length, local_files_only=True)
        except (OSError, RuntimeError, ValueError) as exc:  # missing weights or tokenizer, bad device
            raise ValueError(f"option 'model_path': cannot load the model in {str(path)!r}: {exc}") from exc
        n_outputs = int(self._model.config.num_labels)
        if n_outputs != len(columns):
            raise ValueError(f"option 'labels': the model has {n_outputs} outputs, got {len(columns)} names")
        self._select = np.zeros((len(columns), len(LABELS)))
        for index, label in enumerate(columns):
            self._select[index, LABELS.index(label)] = 1.0
        self._lock = threading.Lock()
        self.batch_size, self.window, self.model_path = batch_size, window, path
        self.id = f"nli:{path.name}"
        self.version = VERSION
        self._identity = {
            "name": self.backend,
            "version": VERSION,
            "model": path.name,
            "model_sha256": model_fingerprint(path),
            "labels": list(columns),
            "max_length": max_length,
            "window": window,
        }

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a score, JSON-ready.

        Name, version, the model (its directory name and :func:`model_fingerprint`, not its path: the same
        files anywhere are the same model), label order, ``max_length`` and ``window``. ``device`` and
        ``batch_size`` only change speed and are left out.
        """
        return dict(self._identity)

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Return NLI probabilities for (premise, hypothesis) pairs, columns in :data:`LABELS` order.

        Args:
            pairs: (premise, hypothesis) text pairs, any number.

        Returns:
            Shape (len(pairs), 3), float64, each row the softmax of the model's logits (summing to 1), with
            the model's columns moved to (entailment, neutral, contradiction); labels the model lacks are 0.

        """
        if not pairs:
            return np.zeros((0, len(LABELS)))
        with self._lock:  # one forward pass at a time: torch already uses every core for one
            raw = self._model.predict(
                list(pairs), batch_size=self.batch_size, apply_softmax=True, show_progress_bar=False
            )
        return np.asarray(raw, dtype=np.float64).reshape(len(pairs), -1) @ self._select

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Judge each claim of ``answer`` against ``chunks``; never raises for a judge failure.

        Args:
            question: the user question (unused: NLI checks the answer against the evidence only).
            answer: the answer as written (its citation markers are not judged; each verdict's ``claim`` is its
                span of the answer); a refusal or empty answer has no claims (NaN faithfulness).
            chunks: retrieved chunks, rank 1 first.
            repeat: accepted for interface parity; the model is deterministic.

        Returns:
            One :class:`ClaimVerdict` per claim, or ``Judgment(error=reason)`` when the model fails to run.

        """
        spans = claim_spans(answer, retrieved_ids=[c.id for c in chunks])
        claims = [span.text for span in spans]  # judged; a verdict shows span.shown, the answer as written
        if not claims:
            return Judgment()
        premises = build_premises(chunks, self.window)
        pairs = [(p.text, claim) for claim in claims for p in premises]
        try:
            probs = self.probabilities(pairs)
        except (RuntimeError, ValueError) as exc:  # torch and tokenizer failures
            return Judgment(error=f"{self.id}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        n = len(premises)
        verdicts = tuple(
            replace(aggregate(claim, chunks, premises, probs[i * n : (i + 1) * n]), claim=spans[i].shown)
            for i, claim in enumerate(claims)
        )
        return Judgment(claims=verdicts)
