"""The lexical judge's hallucination model: per-claim signals → a probability, per answer → a hallucination score.

The lexical judge reads words, not meaning, so no single rule of it separates a paraphrase from an invention. What
separates them best on human-labelled data (RAGTruth, FaithBench: ``benchmarks/judge_quality.py``) is how much of a
claim is *new*: content words that the closest chunk sentence does not hold, content words that no chunk holds, and
numbers, dates and names that no chunk holds. The model combines these signals of each claim in a logistic
regression fitted to human span labels (a claim is hallucinated when a human marked a span inside it), then
combines the claims of an answer into its hallucination score

    ``s = mean_c p_c + (1 − mean_c p_c) · HARD_WEIGHT · 1[some claim is a hard hallucination]`` ∈ [0, 1],

where a *hard* claim states a number, date or name that no chunk holds **and** most of its content words are in no
chunk (an invented sentence, not a reworded one). The mean keeps the score from growing with the number of claims (a
longer faithful answer scores like a short one); the hard term keeps one invented sentence from being diluted by a
paragraph of faithful ones. ``s`` is a ranking score, not a probability (the claim probabilities are calibrated on
the claims they were fitted on; the answers' base rates differ too much between data sets for one calibration to
hold). The coefficients are
fitted on the development halves of RAGTruth and FaithBench only (``scripts/fit_hallucination_model.py``; the halves
are fixed by a hash of each prompt's source id, ``tests/judgeeval.split_by_source``) and ship in
``gate/judges/data/hallucination_model.json``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

HARD_WEIGHT = 0.5
"""Weight in [0, 1] of a hard hallucination in the answer score (a design constant, not fitted: it decides how far
one invented sentence moves an otherwise faithful answer; 0.5 moves it about halfway to certain)."""

HARD_NOVELTY = 0.5
"""A claim is a hard hallucination when it states a fact no chunk holds and at least this share of its content
words is in no chunk."""


@dataclass(frozen=True)
class ClaimSignals:
    """What the lexical judge measured on one claim: the model's inputs."""

    novelty_closest: float
    """Share in [0, 1] of the claim's content words (stems; question words in no chunk left out) that the closest
    chunk sentence does not hold; 1 when no chunk sentence is close."""
    novelty_context: float
    """Share in [0, 1] of the claim's content words that no chunk holds."""
    absent_facts: int
    """Numbers, months and names of the claim that no chunk and not the question holds, ≥ 0."""
    contradicted: bool
    """The judge's verdict on the claim is ``contradicted``."""

    @property
    def hard(self) -> bool:
        """An invented statement: a fact no chunk holds, and most content words in no chunk."""
        return self.absent_facts > 0 and self.novelty_context >= HARD_NOVELTY

    def features(self) -> tuple[float, float, float, float]:
        """The model's feature vector: (novelty_closest, novelty_context, log(1 + absent_facts), contradicted)."""
        return (self.novelty_closest, self.novelty_context, math.log1p(self.absent_facts), float(self.contradicted))


FEATURES = ("novelty_closest", "novelty_context", "log1p_absent_facts", "contradicted")
"""Names of :meth:`ClaimSignals.features`, in order (the model file lists them too)."""


@dataclass(frozen=True)
class HallucinationModel:
    """Fitted coefficients of the claim-level logistic regression."""

    intercept: float
    """The linear predictor's intercept (log-odds of a claim whose features are all 0)."""
    weights: tuple[float, ...]
    """One weight per entry of :data:`FEATURES`."""
    version: str
    """Changes whenever the coefficients change (part of the judge's identity)."""

    def claim_probability(self, signals: ClaimSignals) -> float:
        """P(the claim is hallucinated) = σ(intercept + w · features), in (0, 1).

        Source: logistic regression (Cox 1958, "The regression analysis of binary sequences", JRSS-B 20(2),
        doi:10.1111/j.2517-6161.1958.tb00292.x).
        """
        z = self.intercept + sum(w * x for w, x in zip(self.weights, signals.features(), strict=True))
        return _sigmoid(z)

    def answer_score(self, signals: Sequence[ClaimSignals]) -> float:
        """The answer's hallucination score in [0, 1] from its claims' signals (module docstring for the formula).

        Args:
            signals: one per distinct claim of the answer, at least one.

        Raises:
            ValueError: for an answer without claims (it has nothing to be grounded on: the caller decides).

        """
        if not signals:
            raise ValueError("an answer without claims has no hallucination score")
        mean = sum(map(self.claim_probability, signals)) / len(signals)
        return mean + (1.0 - mean) * HARD_WEIGHT * any(s.hard for s in signals)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (the model file's coefficient keys)."""
        return {
            "version": self.version,
            "features": list(FEATURES),
            "intercept": self.intercept,
            "weights": list(self.weights),
        }


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@functools.cache
def shipped_model() -> HallucinationModel:
    """The model shipped in ``gate/judges/data/hallucination_model.json`` (read once).

    Raises:
        ValueError: the file lists other features than :data:`FEATURES` (a file from another version).

    """
    text = resources.files("gate.judges").joinpath("data/hallucination_model.json").read_text(encoding="utf-8")
    data = json.loads(text)
    if tuple(data["features"]) != FEATURES:
        raise ValueError(f"hallucination_model.json: features {data['features']} are not {list(FEATURES)}")
    return HallucinationModel(
        intercept=float(data["intercept"]),
        weights=tuple(float(w) for w in data["weights"]),
        version=str(data["version"]),
    )
