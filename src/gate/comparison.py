"""The typed result of comparing base with head: :class:`Comparison`, and ``report.json``, its serialisation.

Everything a renderer shows (the PR comment, the job summary, annotations, JSON) is read from a :class:`Comparison`;
nothing is recomputed or decided while rendering. ``report.json`` is :meth:`Comparison.to_dict` as JSON (NaN as
``null``, validated by ``gate/schemas/report.schema.json``); :func:`load_report` reads it back, older versions too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from gate.errors import InputError
from gate.jsonl import clean_nan, from_builtins, pretty_json
from gate.manifest import JudgeUsage as JudgeUsage  # re-exported: part of the comparison
from gate.results import Aggregate, CaseStatus, ErrorBudgetUse, MetricResult, Verdict, raw_difference

# isort: split
from gate.adaptive import AdaptiveRun
from gate.results import MustPassFailure, PolicyChange
from gate.trends import TrendBlock, TrendReport

SCHEMA_VERSION = 7
"""Version of ``report.json``; :func:`load_report` migrates older versions."""
TEXT_LIMIT = 600
"""Characters of untrusted text (questions, answers, chunks) kept per field in a comparison."""
MESSAGE_LIMIT = 300
"""Characters of an error message kept per entry."""
Cause = Literal["error", "retrieval", "generation", "retrieval+generation"]
"""Why a case regressed: the pipeline failed on it, retrieval got worse, generation got worse, or both."""
CASE_FIELDS = ("regressed_cases", "suspected_cases", "improved_cases", "flaky_cases")
"""The fields of a :class:`Comparison` that list golden cases (:class:`CaseEntry`)."""
FailOn = Literal["fail", "inconclusive", "never"]
"""Which verdicts block a merge (exit 1): fail; inconclusive (and fail); never."""
FAIL_ON: tuple[FailOn, ...] = ("fail", "inconclusive", "never")


def clip(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """``text`` cut to at most ``limit`` characters (the last one an ellipsis when cut); None stays None."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


@dataclass(frozen=True)
class SideAggregates:
    """A metric's :class:`Aggregate` on each side."""

    base: Aggregate
    """Base side."""
    head: Aggregate
    """Head side."""


Movement = Literal["rose", "fell", "unchanged"]
"""How a metric's value moved from base to head, whatever its direction."""
Change = Literal["better", "worse", "unchanged"]
"""Whether that movement is an improvement or a worsening (by the metric's direction)."""
TIMED_METRICS = frozenset({"latency_ms"})
"""Metrics measured with a wall clock: on a shared CI runner they also measure the runner's load."""


@dataclass(frozen=True)
class MetricRow(MetricResult):
    """One metric of the comparison: the statistics of :class:`~gate.stats.decision.MetricResult` plus display data.

    The display values are those the test is about: arithmetic means for binary and graded metrics (Δ is a
    difference of means), geometric means for ratio metrics (Δ is a geometric-mean ratio, so
    ``head_value / base_value == ratio``).
    """

    label: str
    """Display label, e.g. ``Hit rate@5``."""
    aggregates: SideAggregates
    """Per-side summaries of the per-case means."""
    statistic: Literal["mean", "geometric mean"]
    """What ``base_value`` and ``head_value`` are: the mean of the per-case means, or their geometric mean."""
    base_value: float
    """``statistic`` of base's per-case means over the paired cases (metric units)."""
    head_value: float
    """``statistic`` of head's per-case means over the paired cases."""
    difference: float
    """head − base in metric units (binary and graded metrics; NaN for ratio metrics, see ``ratio``)."""
    difference_ci_low: float
    """Lower end of the interval of ``difference`` (the oriented interval, negated for lower-is-better metrics)."""
    difference_ci_high: float
    """Upper end of that interval."""
    moved: Movement | None
    """Whether the value rose, fell or stayed (None when nothing was paired)."""
    change: Change | None
    """Whether head is better, worse or unchanged (None when nothing was paired)."""
    beyond_noise: bool
    """The interval excludes "no change": the movement is more than noise at the metric's level."""
    timed: bool
    """A wall-clock measurement (latency): noisy on shared CI runners."""
    margin_relative: float | None = None
    """r of a margin relative to the base's value (``margin`` is then r × base, at least ``min``); None: absolute."""


def metric_row(
    result: MetricResult,
    *,
    label: str,
    aggregates: SideAggregates,
    base_value: float,
    head_value: float,
    statistic: Literal["mean", "geometric mean"],
    margin_relative: float | None = None,
) -> MetricRow:
    """A :class:`MetricRow`: ``result`` with its label, aggregates and the values, movement and change it shows.

    Args:
        result: the metric's statistics.
        label: display label.
        aggregates: per-side summaries.
        base_value: base's ``statistic`` over the paired cases.
        head_value: head's ``statistic`` over the paired cases.
        statistic: ``mean`` (binary, graded) or ``geometric mean`` (ratio metrics).
        margin_relative: the factor of a margin relative to the base's value, None for an absolute margin.

    Returns:
        The row; ``moved`` and ``change`` follow the sign of the oriented Δ̂ (0: unchanged; NaN: None).
    """
    if result.kind == "ratio":
        difference = low = high = math.nan
    else:
        difference, low, high = raw_difference(result.direction, result.delta, result.ci_low, result.ci_high)
    moved: Movement | None
    change: Change | None
    if math.isnan(result.delta):
        moved = change = None
    elif result.delta == 0:
        moved = change = "unchanged"
    else:
        change = "better" if result.delta > 0 else "worse"
        rose = (result.delta > 0) == (result.direction == "higher")
        moved = "rose" if rose else "fell"
    return MetricRow(
        **{f.name: getattr(result, f.name) for f in fields(MetricResult)},
        label=label,
        aggregates=aggregates,
        statistic=statistic,
        base_value=base_value,
        head_value=head_value,
        difference=difference,
        difference_ci_low=low,
        difference_ci_high=high,
        moved=moved,
        change=change,
        beyond_noise=bool(result.ci_low > 0 or result.ci_high < 0),
        timed=result.name in TIMED_METRICS,
        margin_relative=margin_relative,
    )


@dataclass(frozen=True)
class CaseMetric:
    """How one metric moved on one case."""

    name: str
    """Metric name."""
    base: float
    """Mean over the case's valid base repeats (metric units)."""
    head: float
    """Mean over the case's valid head repeats."""
    effect: float
    """Oriented head − base (negative = worse)."""
    p_value: float
    """One-sided per-case p for "head worse"; NaN for a single observation per side."""
    p_adjusted: float
    """Benjamini–Hochberg adjusted p across the metric's cases; NaN when ``p_value`` is."""
    status: CaseStatus
    """The case's status for this metric."""
    evidence: Literal["tested", "single observation"]
    """Whether a per-case test backs the status, or it rests on one observation per side."""


@dataclass(frozen=True)
class Claim:
    """A claim of the head's answer that the judge did not find supported, with its closest chunk."""

    claim: str
    """The claim text."""
    verdict: str
    """``contradicted`` or ``unverifiable`` (supported claims are not listed)."""
    chunk_id: str | None = None
    """Id of the closest chunk, if any."""
    chunk_text: str | None = None
    """That chunk's text (or its best-matching sentence), clipped."""
    similarity: float = 0.0
    """Similarity of claim and chunk in [0, 1]."""
    contradiction_level: str = "NONE"
    """NONE, SOMETIMES or ALL across the chunks that cover the claim."""
    reason: str = ""
    """The judge's one-line reason."""
    unsupported_facts: tuple[str, ...] = ()
    """Numbers, dates or names the claim states that no chunk holds."""
    p_hallucinated: float | None = None
    """The judge's probability in [0, 1] that the claim is hallucinated; None from a judge without one."""


@dataclass(frozen=True)
class CaseEntry:
    """A golden case listed in the comparison (regressed, suspected, improved or flaky)."""

    id: str
    """Golden case id."""
    question: str
    """The question (clipped)."""
    line: int
    """1-based line of the case in the golden file (0 when unknown)."""
    metrics: tuple[CaseMetric, ...]
    """The metrics that put the case in its list."""
    cause: Cause | None
    """Regressed and suspected cases: why (see :func:`gate.compare.cases.triage`); None in the other lists."""
    answer_base: str | None
    """Base's first valid answer (clipped), None when every repeat failed."""
    answer_head: str | None
    """Head's first valid answer (clipped)."""
    identical_answer: bool
    """Base's and head's first valid answers are byte-identical (the change is elsewhere: retrieval, judge)."""
    error: str | None
    """Head's first failure message on the case (a system error), clipped; None when it never failed."""
    claims: tuple[Claim, ...]
    """Unsupported and contradicted claims of head's first judged answer."""
    dropped_docs: tuple[str, ...]
    """Expected documents in base's top k that are not in head's top k."""
    expected_doc_ids: tuple[str, ...]
    """The case's expected documents."""
    latency_ms: float | None = None
    """Head's mean pipeline latency on the case over its valid repeats, in milliseconds (the JUnit test case's
    ``time``); None when not measured."""


@dataclass(frozen=True)
class OodFailure:
    """An out-of-domain case that head answered instead of refusing (in most repeats)."""

    id: str
    """Golden case id."""
    question: str
    """The question (clipped)."""
    line: int
    """1-based line of the case in the golden file (0 when unknown)."""
    answer: str | None
    """Head's first non-refusing answer (clipped)."""
    new: bool
    """Base refused in every repeat and head answered in every repeat."""
    base_refusal_rate: float
    """Share of base's valid repeats that refused (NaN when all failed)."""
    head_refusal_rate: float
    """Share of head's valid repeats that refused."""
    latency_ms: float | None = None
    """Head's mean pipeline latency on the case over its valid repeats, in milliseconds; None when not measured."""


@dataclass(frozen=True)
class ErrorEntry:
    """A failed prediction or judge call."""

    side: Literal["base", "head"]
    """Which side failed."""
    id: str
    """Golden case id."""
    repeat: int
    """0-based repeat index."""
    metric: str | None
    """The metric a judge failure hit; None for a failed prediction."""
    message: str
    """Why (clipped to :data:`MESSAGE_LIMIT` characters)."""


@dataclass(frozen=True)
class DefinitionScore:
    """One metric of head's answers to an edited case, under the base's and under the head's definition."""

    name: str
    """Metric name."""
    under_base: float
    """Mean over head's valid repeats, scored against the base's definition (the one that is gated)."""
    under_head: float
    """The same against the head's edited definition (reported only)."""


@dataclass(frozen=True)
class EditedCase:
    """A golden case whose id the PR kept but whose definition it changed."""

    id: str
    """Golden case id."""
    fields: tuple[str, ...]
    """The fields that changed."""
    metrics: tuple[DefinitionScore, ...]
    """Head's scores under both definitions (metrics computed without a judge)."""


@dataclass(frozen=True)
class GoldenChanges:
    """How the PR changed the golden set, and which set was evaluated (DESIGN §8: the base's is the contract)."""

    policy: Literal["base", "head"]
    """``base``: every base case with its base definition plus the added ones was evaluated on both sides;
    ``head``: the PR's own set (the base config's ``golden_changes: head``)."""
    removed: tuple[str, ...]
    """Ids of base cases the PR removed (still evaluated under ``base``)."""
    edited: tuple[EditedCase, ...]
    """Cases the PR edited (gated with the base definition under ``base``)."""
    added: tuple[str, ...]
    """Ids of cases the PR added (evaluated on both sides and gated)."""


@dataclass(frozen=True)
class JudgeInfo:
    """The judge that scored a side."""

    id: str
    """Judge id."""
    version: str
    """Judge version."""


@dataclass(frozen=True)
class SideInfo:
    """What was evaluated on one side."""

    label: Literal["base", "head"]
    """Which side."""
    git_sha: str | None
    """Commit evaluated, when known."""
    git_ref: str | None
    """Ref evaluated, when known."""
    golden_sha256: str | None
    """sha256 of the golden set file the side ran."""
    config_sha256: str | None
    """sha256 of the side's config file."""
    judge: JudgeInfo | None
    """The judge that scored the side."""
    repeats: int
    """Repeats per case (≥ 1)."""
    n_cases: int
    """Cases in the side's golden set."""
    n_prediction_errors: int
    """Failed predictions (case × repeat rows with an error)."""
    warmup_ms: tuple[float, ...] = ()
    """Each pipeline worker's first call, in milliseconds: cold start (imports, index loading), recorded apart and
    left out of latency; empty when the adapter did not measure it."""
    judge_usage: JudgeUsage | None = None
    """What the judge's calls took to score the side (the run's, or the rescoring's when compare rescored it);
    None for a run recorded before rag-gate kept it."""
    mean_answer_words: float | None = None
    """Mean words (whitespace-separated) per answer over the paired in-domain cases' valid predictions, every
    repeat; None without any. A claim-level judge finds more claims in longer answers (see the table notes)."""


@dataclass(frozen=True)
class PairwiseCase:
    """The pairwise judge's verdict on one case: base's answer against head's, asked in both orders."""

    id: str
    """Golden case id."""
    outcome: Literal["win", "tie", "loss"] | None
    """Head's outcome: preferred in both orders (win), base preferred in both (loss), else a tie; None when not
    judged (a side has no valid answer) or when the judge failed (``error``)."""
    base_first: Literal["base", "head", "tie"] | None
    """The judge's choice with base's answer shown first; None without a call."""
    head_first: Literal["base", "head", "tie"] | None
    """The judge's choice with head's answer shown first; None without a call."""
    reason: str
    """The judge's one-line reasons, base-first order then head-first order (clipped)."""
    identical: bool
    """The two answers are the same text: a tie, no call made."""
    error: str | None
    """Why the judge could not decide (clipped), else None."""


@dataclass(frozen=True)
class PairwiseReport:
    """The pairwise judge's result on the comparison (the ``head_win_rate`` metric's wins, ties and losses)."""

    judge: JudgeInfo
    """The pairwise judge's id and version."""
    wins: int
    """Cases where head's answer was preferred in both orders."""
    ties: int
    """Cases with a tie: the orders disagreed (position bias), the judge said tie, or the answers are identical."""
    losses: int
    """Cases where base's answer was preferred in both orders (head's losses are the regressed cases)."""
    order_disagreements: int
    """Ties where the two orders preferred different answers: the judge followed the position, not the content."""
    identical: int
    """Ties without a call: the two answers are the same text."""
    not_judged: int
    """Cases left out: a side has no valid answer, or the judge failed."""
    win_rate: float
    """wins / (wins + losses) in [0, 1]; NaN without a decided case."""
    p_value: float
    """One-sided exact sign test of wins against losses for "head worse" (``scipy.stats.binomtest``); ties left out."""
    usage: JudgeUsage
    """What the judge's calls took (two per judged case, fewer with cache hits)."""
    cases: tuple[PairwiseCase, ...]
    """Every compared case, in case order."""


@dataclass(frozen=True)
class Repeats:
    """Repeats per case on each side."""

    base: int
    """Base side."""
    head: int
    """Head side."""


@dataclass(frozen=True)
class ChangedFile:
    """A file the change touched (``git diff --numstat`` of merge base..head)."""

    path: str
    """Path in the repository (the new path of a rename)."""
    added: int | None
    """Lines added; None for a binary file."""
    deleted: int | None
    """Lines deleted; None for a binary file."""


@dataclass(frozen=True)
class Changes:
    """What changed between base and head: the why behind the numbers."""

    pipeline_diff: tuple[str, ...]
    """Unified diff (base → head) of the configs' ``pipeline:`` sections, one line per item; empty when equal."""
    pipeline_known: bool
    """Both sides recorded their ``pipeline:`` section (False: runs made before it was recorded, or prediction
    files): ``pipeline_diff`` says nothing then."""
    files: tuple[ChangedFile, ...] | None
    """Files changed between the merge base and head (``git diff``), None when not known (no git range)."""
    commits: str | None
    """The range ``files`` is of, ``base..head`` (abbreviated shas), None when not known."""


@dataclass(frozen=True)
class Comparison:
    """Base against head: per-metric statistics, case lists, failures and the gate's verdict.

    Built by :func:`gate.compare.compare`; read by every renderer in :mod:`gate.outputs`. Floats that are
    undefined are NaN here and ``null`` in ``report.json``.
    """

    schema_version: int
    """:data:`SCHEMA_VERSION` of the model that wrote it."""
    verdict: Verdict
    """pass, fail, inconclusive or error (see :func:`gate.stats.decision.gate_decision`)."""
    reasons: tuple[str, ...]
    """One line per failing, inconclusive or budget-breaking item, or one line for a pass."""
    warnings: tuple[str, ...]
    """Things a reviewer should know that did not decide the verdict."""
    gate_version: str
    """rag-gate version that made the comparison."""
    n_cases: int
    """Cases the metrics compare: present in both golden sets, less those the PR added (checked case by case)."""
    n_out_of_domain: int
    """Of those, out-of-domain cases."""
    repeats: Repeats
    """Repeats per case on each side."""
    seed: int
    """Seed of the bootstrap and the randomization tests."""
    alpha: float
    """One-sided family-wise level across gated metrics (Holm)."""
    strict: bool
    """Whether inconclusive counted as fail."""
    error_rate: float
    """Largest share of failed rows (system errors and evaluation failures) of a gated metric on one side."""
    error_budget: float
    """Largest tolerated share of evaluation failures of a gated metric on one side (beyond it: ``error``)."""
    error_budget_use: tuple[ErrorBudgetUse, ...]
    """Evaluation failures per gated metric and side (only those with at least one failure)."""
    base: SideInfo
    """The base side."""
    head: SideInfo
    """The head side."""
    metrics: tuple[MetricRow, ...]
    """One row per configured metric, in config order."""
    regressed_cases: tuple[CaseEntry, ...]
    """Cases that regressed (worst first)."""
    suspected_cases: tuple[CaseEntry, ...]
    """Cases whose drop exceeds τ but is not significant (worst first)."""
    improved_cases: tuple[CaseEntry, ...]
    """Cases that improved (best first)."""
    flaky_cases: tuple[CaseEntry, ...]
    """Cases whose outcome varies across repeats on a side."""
    ood_failures: tuple[OodFailure, ...]
    """Out-of-domain cases head answered (new ones first)."""
    new_ood_failures: int
    """How many of ``ood_failures`` are new."""
    unpaired_cases: tuple[str, ...]
    """Ids present in only one side's golden set."""
    errors: tuple[ErrorEntry, ...]
    """Failed predictions and judge calls on both sides."""
    trend: TrendReport | None = None
    """Head against the main-branch history ("Trend vs main"), when the PR flow has a history to read."""
    golden_changes: GoldenChanges | None = None
    """How the golden set changed between base and head; None when it did not (or was not compared)."""
    changes: Changes | None = None
    """What changed between base and head (the pipeline config, the files), when anything is known."""
    pairwise: PairwiseReport | None = None
    """The pairwise judge's wins, ties and losses (``pairwise:`` in the config); None without a pairwise judge."""
    judge_labels: str | None = None
    """The judge's agreement with the answers labelled by hand (``judge_labels:``), one line; None without labels."""
    must_pass_failures: tuple[MustPassFailure, ...] = ()
    """Must-pass cases base passed in every repeat and head failed in every repeat (certain ones, first, block)."""
    policy_changes: tuple[PolicyChange, ...] = ()
    """Gate settings the PR's config changes (applied after merge; this PR is judged under the base's)."""
    adaptive: AdaptiveRun | None = None
    """How an adaptive evaluation ran and why it stopped (None: every case ran); case lists cover the cases run."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form of ``report.json`` (NaN and ±inf as None; tuples as lists)."""
        return clean_nan(asdict(self))

    def to_json(self) -> str:
        """``report.json``'s text (:func:`gate.jsonl.pretty_json`), non-ASCII kept; byte-identical for equal inputs."""
        return pretty_json(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        """Build a comparison from ``report.json``'s object (current schema version; see :func:`load_report`).

        Raises:
            ValueError: a field is missing or unknown, or has the wrong type (the message names its path).
        """
        return from_builtins(data, cls)

    @property
    def gated(self) -> tuple[MetricRow, ...]:
        """The metrics that decide the verdict."""
        return tuple(m for m in self.metrics if m.gated)


def exit_code_for(
    verdict: Verdict | None,
    fail_on: FailOn = "fail",
    *,
    strict: bool = False,
    trend: TrendReport | None = None,
    trend_block: TrendBlock = "never",
) -> int:
    """The process exit code of a check: the one place that decides what blocks a merge (DESIGN §6, §8).

    ``rag-gate pr``, ``rag-gate compare`` (``fail_on="fail"``) and ``rag-gate history check`` (``verdict=None``) all
    exit with what this returns; nothing else derives an exit code from a verdict. The whole rule is this table
    ("trend blocks": ``trend`` is given and a gated metric reached ``trend_block``; ``± strict``: either value):

    ============  ============  ====  =============  =======================  ================
    verdict       trend blocks  fail  fail + strict  inconclusive (± strict)  never (± strict)
    ============  ============  ====  =============  =======================  ================
    pass          no            0     0              0                        0
    pass          yes           1     1              1                        1
    inconclusive  no            0     1              1                        0
    inconclusive  yes           1     1              1                        1
    fail          no            1     1              1                        0
    fail          yes           1     1              1                        1
    error         no            3     3              3                        3
    error         yes           3     3              3                        3
    None          no            0     0              0                        0
    None          yes           1     1              1                        1
    ============  ============  ====  =============  =======================  ================

    How the three "inconclusive blocks" knobs combine: strict mode is on when ``--strict`` is given *or* the
    (base's) config says ``strict: true`` (:func:`gate.sides.compare_sides` ORs them; ``Comparison.strict`` records
    the result). Strict mode acts first in the statistics, which report an inconclusive metric as ``fail``, so the
    verdict is ``fail`` already; here it also makes an ``inconclusive`` verdict block. ``--fail-on inconclusive``
    blocks ``inconclusive`` whether strict is on or not, so the two together block exactly what either one does.
    ``--fail-on never`` wins over strict: no verdict blocks (a strict ``fail`` included), only ``error`` (3) and
    the trend alarm. The trend alarm blocks whatever ``fail_on``; ``error`` is 3 whatever the rest.

    Args:
        verdict: ``pass`` | ``fail`` | ``inconclusive`` | ``error``, or None when nothing was compared (a push
            that records the history, ``history check``): only the trend decides then.
        fail_on: ``fail``, ``inconclusive`` or ``never`` (``--fail-on``).
        strict: inconclusive counts as fail (``--strict`` or ``strict:``, as recorded in ``Comparison.strict``).
        trend: the head against the main-branch history, when one was read.
        trend_block: the trend level that blocks (``never``, ``warning``, ``critical``: ``trend.block`` in the
            config, or ``history check --fail-on``); ``never`` never blocks.

    Returns:
        0, 1 or 3 (2 is reserved for bad input, raised as an error before any verdict).

    Raises:
        InputError: unknown ``fail_on``.
    """
    if fail_on not in FAIL_ON:
        raise InputError(f"--fail-on: must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    if verdict == "error":
        return 3
    blocking = {"fail": {"fail", "inconclusive"} if strict else {"fail"}, "inconclusive": {"fail", "inconclusive"},
                "never": set()}[fail_on]  # fmt: skip
    trend_blocks = trend is not None and trend.blocks(trend_block)
    return 1 if verdict in blocking or trend_blocks else 0


def relocate(comparison: Comparison, lines: Mapping[str, int]) -> Comparison:
    """The comparison with each listed case's ``line`` taken from ``lines`` (case id → line; 0 when absent).

    The PR flow evaluates a contract golden set in its output directory; reviewers need the PR's own file's lines.
    """
    changes: dict[str, Any] = {}
    for name in (*CASE_FIELDS, "ood_failures", "must_pass_failures"):
        changes[name] = tuple(replace(entry, line=lines.get(entry.id, 0)) for entry in getattr(comparison, name))
    return replace(comparison, **changes)


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 → 2: lines and triage in case entries, the error budget per metric and side, judge failures."""
    out = dict(data, schema_version=2, error_budget_use=[], trend=None, golden_changes=None, pairwise=None)
    new = {"line": 0, "cause": None, "identical_answer": False, "error": None}
    for key in CASE_FIELDS:
        out[key] = [new | entry for entry in data.get(key, [])]
    out["ood_failures"] = [{"line": 0} | entry for entry in data.get("ood_failures", [])]
    return out


def _migrate_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 → 3: the values, movement and change each metric row shows; warm-up calls; what changed.

    Rows of version 2 keep their arithmetic means (a ratio metric's geometric means were not recorded).
    """
    rows = []
    for row in data.get("metrics", []):
        row = dict(row, ci_clipped=False, n_worse=None, n_tied=None, n_better=None, non_inferior=None)
        keep = {k: v for k, v in row.items() if k in _RESULT_FIELDS}
        values: dict[str, Any] = {k: _float(v) if k in _FLOAT_FIELDS else v for k, v in keep.items()}
        display = metric_row(
            MetricResult(**values),
            label=row["label"],
            aggregates=SideAggregates(Aggregate(**row["aggregates"]["base"]), Aggregate(**row["aggregates"]["head"])),
            base_value=_float(row["base_mean"]),
            head_value=_float(row["head_mean"]),
            statistic="mean",
        )
        rows.append(clean_nan(asdict(display)))
    return dict(data, schema_version=3, metrics=rows, changes=None)


def _migrate_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 → 4: each metric row's counts of paired cases worse, tied and better (not recorded before: null)."""
    rows = [{"n_worse": None, "n_tied": None, "n_better": None} | row for row in data.get("metrics", [])]
    return dict(data, schema_version=4, metrics=rows)


def _migrate_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 or 5 → 6: must-pass failures, policy changes, relative margins (5), non-inferiority (6): none before."""
    rows = [{"margin_relative": None, "non_inferior": None} | row for row in data.get("metrics", [])]
    return {"must_pass_failures": [], "policy_changes": []} | dict(data, schema_version=6, metrics=rows)


_RESULT_FIELDS = frozenset(f.name for f in fields(MetricResult))
_FLOAT_FIELDS = frozenset(f.name for f in fields(MetricResult) if f.type in ("float", "float | None"))
_MIGRATIONS = {1: _migrate_v1, 2: _migrate_v2, 3: _migrate_v3, 4: _migrate_v4, 5: _migrate_v4,  # 7: repeats_* added
               6: lambda data: dict(data, schema_version=7)}  # fmt: skip


def load_report(path: Path | str) -> Comparison:
    """Read a ``report.json`` written by this or an older rag-gate (schema versions 1 to 7).

    Raises:
        InputError: the file is missing, not JSON, of an unknown schema version, or does not match the schema.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON report ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    version = data.get("schema_version")
    while version in _MIGRATIONS:
        data = _MIGRATIONS[version](data)
        version = data["schema_version"]
    if version != SCHEMA_VERSION:
        raise InputError(f"{path}: schema_version {data.get('schema_version')!r} is not supported")
    try:
        return Comparison.from_dict(data)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
