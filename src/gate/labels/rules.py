"""The per-answer rules that turn a judged metric into a call on one answer (unfaithful or not).

The gate averages a judged metric over the answers; a hand label says whether one answer is faithful. To check the
judge on what is gated, ``judge-check`` turns each gated judged metric's per-answer value into a call by the rule
below, the one that separates an answer the metric counts against the system from one it does not:

- ``hallucinated_claim_rate > 0`` and ``contradiction_rate > 0``: some claim of the answer is hallucinated
  (contradicted);
- ``hallucination_rate = 1``: the answer has a contradicted or unsupported main claim (the metric is 0/1);
- ``grounded_answer_rate < 0.5``: the judge holds the answer more likely ungrounded than grounded (the lexical
  judge's value is a probability; a verdict judge's is 1 or 0);
- ``faithfulness < 1``: a claim the judge did not find supported (reported as a secondary line: the gate does not
  decide on it unless it is gated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gate.manifest import Manifest


@dataclass(frozen=True)
class Rule:
    """A judged metric's per-answer rule: the answer is flagged (unfaithful) when ``value op threshold``."""

    metric: str
    """The registry name of the judged metric, e.g. ``hallucinated_claim_rate``."""
    op: Literal[">", "<", "="]
    """How the value is compared with ``threshold``."""
    threshold: float
    """The threshold, on the metric's own scale."""
    gated: bool = True
    """Whether the run's policy gates the metric (False: a secondary line)."""

    @property
    def text(self) -> str:
        """The rule as shown, e.g. ``hallucinated_claim_rate > 0``."""
        return f"{self.metric} {self.op} {self.threshold:g}"

    def call(self, value: float) -> bool | None:
        """The call on an answer: True flagged (unfaithful), False not, None without a value (NaN)."""
        if math.isnan(value):
            return None
        if self.op == ">":
            return value > self.threshold
        if self.op == "<":
            return value < self.threshold
        return value == self.threshold


RULES: dict[str, Rule] = {
    "hallucinated_claim_rate": Rule("hallucinated_claim_rate", ">", 0.0),
    "hallucination_rate": Rule("hallucination_rate", "=", 1.0),
    "contradiction_rate": Rule("contradiction_rate", ">", 0.0),
    "grounded_answer_rate": Rule("grounded_answer_rate", "<", 0.5),
    "faithfulness": Rule("faithfulness", "<", 1.0),
}
"""The rule of each judged metric a faithfulness label can check, by registry name."""

SECONDARY = Rule("faithfulness", "<", 1.0, gated=False)
"""The answer-level faithfulness rule, shown beside the gated ones when faithfulness is not gated."""


def gated_metrics(manifest: Manifest) -> list[str]:
    """The metrics the run's policy gated (its ``gate:``, else the default choice over its ``metrics``)."""
    from gate.config import default_gated

    gated = manifest.gated
    if gated is None:
        gated = list(default_gated(tuple(manifest.metrics))) if manifest.metrics else []
    return list(gated)


def rules_for(manifest: Manifest) -> list[Rule]:
    """The rules to check for a run: each gated metric that has a rule, in gate order, then :data:`SECONDARY`.

    Without a gated metric that a label can check (no judge, or only retrieval metrics gated), the faithfulness
    rule alone, marked not gated.
    """
    return rules_of(gated_metrics(manifest))


def rules_of(gated: Sequence[str]) -> list[Rule]:
    """The rules of the ``gated`` metrics that have one, in order, then :data:`SECONDARY` (see :func:`rules_for`)."""
    rules = [RULES[name] for name in gated if name in RULES]
    if not any(rule.metric == SECONDARY.metric for rule in rules):
        rules.append(SECONDARY)
    return rules


def margin_of(manifest: Manifest, metric: str) -> float:
    """The margin the run's policy set for ``metric`` (its ``margins:``, else the registry default)."""
    from gate.metrics import resolve

    margins = (manifest.evaluation or {}).get("margins") or {}
    return float(margins.get(metric, resolve(metric).spec.default_margin))


def describe(rules: Sequence[Rule]) -> str:
    """The rules as shown in one line, e.g. ``hallucinated_claim_rate > 0 (gated); faithfulness < 1``."""
    return "; ".join(f"{rule.text}{' (gated)' if rule.gated else ''}" for rule in rules)
