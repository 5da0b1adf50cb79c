"""Loading two sides and comparing them (``rag-gate compare``): a run directory or a predictions file per side.

A side's stored scores are reused only when they have the policy's identity, else it is rescored
(:func:`gate.produce.score_to`); a run that is incomplete or no longer matches its golden set or config is refused
(:func:`require_complete`, :func:`refuse_stale_run`). The comparison itself is :func:`gate.compare.compare`; the
judge's agreement with hand labels (``judge_labels:``) and the pairwise judge are added here.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from gate.config import Config, GatePolicy
from gate.errors import InputError
from gate.files import atomic_writer, make_dirs
from gate.golden import GoldenDiff, diff_golden, file_sha256, load_golden
from gate.jsonl import dumps
from gate.judges import get_pairwise_judge
from gate.judges.base import judge_usage
from gate.manifest import JudgeRecord, Manifest
from gate.predictions import scan_predictions
from gate.produce import make_judge, require_some_predictions, run_identity, score_to
from gate.runs import PREDICTIONS, SCORES, RunIdentity, Side, not_complete, read_manifest, read_scores
from gate.scoring import PairwiseRun, judge_pairs, pair_scores

if TYPE_CHECKING:  # the comparison (and scipy, which it needs) is imported by compare_sides: loading needs neither
    from gate.caseview import CaseView
    from gate.compare.core import Decided
    from gate.comparison import ChangedFile, Comparison
    from gate.stats.ppi import MeanEstimate

log = logging.getLogger("rag-gate")


def _load_side(
    label: Literal["base", "head"],
    source: Path,
    golden_path: Path | None,
    policy: GatePolicy | None,
    out_dir: Path,
    jobs: int | None = None,
    only: Collection[str] | None = None,
) -> tuple[Side, GatePolicy]:
    """Load a run directory or a predictions file; score it unless its scores have the policy's identity.

    Scores stored in a run directory are reused only when they were computed against the same golden set, and
    the judge (its configuration, id and version), the scoring settings and the rag-gate version equal the
    policy's, and the run scored every policy metric; otherwise the side is rescored and the comparison says
    why. Predictions of cases that are not in ``golden_path`` are left out (a head's added cases, when the base's
    golden set is the contract). With ``only`` (an adaptive evaluation), the side is the golden set's cases of
    those ids, and a ``partial`` run directory is taken.

    Raises:
        InputError: an unreadable or incomplete run directory (status not ``complete``), bad files, or an output
            directory that would overwrite the run's own scores.
    """
    manifest = Manifest()
    if source.is_dir():
        manifest = read_manifest(source)
        if only is None or manifest.status != "partial":
            require_complete(source, manifest)
        predictions = scan_predictions(source / PREDICTIONS)
        preds_path = source / PREDICTIONS
        golden_path = golden_path or Path(manifest.golden or "")
    else:
        if golden_path is None:
            raise InputError(f"{source}: a predictions file needs --golden")
        predictions = scan_predictions(source)
        preds_path = source
    golden = load_golden(golden_path)
    if only is not None:
        chosen = set(only)
        golden = [case for case in golden if case.id in chosen]
    policy = policy or (GatePolicy.from_dict(manifest.evaluation) if manifest.evaluation is not None else GatePolicy())
    warnings: list[str] = []
    ids = {case.id for case in golden}
    if source.is_dir() and (extra := predictions.ids - ids):
        predictions = predictions.restricted(ids)
        if only is None:  # an adaptive evaluation's cases not run yet are said once, in its own report
            warnings.append(
                f"{label}: {len(extra)} case(s) not in the compared golden set left out (the base's golden set is "
                "the contract; `rag-gate pr` evaluates added cases on both sides)"
            )
    table = predictions.index(golden, manifest.repeats if source.is_dir() else None)  # a file's: inferred
    repeats = table.repeats
    if manifest.case_repeats:  # repeats an adaptive evaluation skipped are neither missing nor errors
        table.skip(manifest.case_repeats)
    if label == "base":  # nothing to compare against; a head that fails everywhere is a regression (compare)
        require_some_predictions(table, preds_path)
    judge = make_judge(policy)
    stored = manifest.identity
    wanted = run_identity(policy, judge, file_sha256(golden_path), stored.config_sha256, repeats, stored.shard)
    stale = stored.differences(wanted, ("golden_sha256", *RunIdentity.SCORE_FIELDS))
    scored = set(policy.metrics) - set(policy.paired_metrics)  # paired metrics are scored at compare time
    missing = sorted(scored - set(manifest.metrics))
    if source.is_dir() and not stale and not missing and (source / SCORES).exists():
        scores = read_scores(source / SCORES, [case.id for case in golden], repeats)
    else:
        if source.is_dir():
            warnings.append(_rescored(label, stored, wanted, stale, missing))
            if (out_dir / label).resolve() == source.resolve():
                raise InputError(
                    f"--out {out_dir}: rescoring {label} would overwrite {source / SCORES}; use another --out"
                )
        make_dirs(out_dir / label)
        scores = score_to(out_dir / label / SCORES, golden, table, repeats, policy, judge, jobs=jobs)
        manifest = msgspec.structs.replace(
            manifest,
            judge=JudgeRecord(**wanted.judge),
            judge_usage=judge_usage(judge),
            golden_sha256=wanted.golden_sha256,
        )
    return Side(label, golden, table, repeats, scores, manifest, tuple(warnings)), policy


def _rescored(label: str, stored: RunIdentity, wanted: RunIdentity, stale: list[str], missing: list[str]) -> str:
    """Why a side's stored scores were not reused (a warning of the comparison)."""
    why = []
    if "gate_version" in stale:
        why.append(f"it was scored by rag-gate {stored.gate_version or 'unknown'}, this is {wanted.gate_version}")
    if "judge" in stale:
        old, new = stored.judge, wanted.judge
        if (old.get("id"), old.get("version")) != (new.get("id"), new.get("version")):
            why.append(
                f"judge {old.get('id', '?')} v{old.get('version', '?')}, the policy's is {new['id']} v{new['version']}"
            )
        else:
            why.append(f"its judge options {old.get('config')} differ from the policy's {new['config']}")
    if "scoring" in stale:
        why.append("its refusal or form settings differ from the policy's")
    if "golden_sha256" in stale:
        why.append("it was scored against another golden set (the compared one is the contract)")
    if missing:
        why.append(f"it has no scores for {', '.join(missing)}")
    return f"{label}: scores recomputed with the policy's judge because " + "; ".join(why)


def require_complete(run_dir: Path, manifest: Manifest) -> None:
    """Refuse a run directory that did not finish: it would be compared on part of its cases.

    Raises:
        InputError: the manifest's status is not ``complete`` (a ``partial`` adaptive run is named so), or its
            scores.jsonl is missing (exit 2).
    """
    if manifest.status != "complete":
        raise InputError(not_complete(run_dir, manifest.status))
    if not (run_dir / SCORES).exists():
        raise InputError(f"{run_dir}: {SCORES} is missing; re-run `rag-gate run` to rescore the run")


def refuse_stale_run(run_dir: Path, manifest: Manifest, golden: Path | None, config: Config | None) -> None:
    """Refuse a run directory that no longer matches its golden set or config (DESIGN §8 "one run directory").

    A run's predictions answer the golden set and come from the config it was made with (their sha256 are in
    its manifest); compared as if they answered another version, they would be judged against expectations they
    never saw. Refused: the run's own golden file changed since the run; the golden set given to the comparison
    (``--golden``) is not the one the run answered; the config given (``--config``) is the run's own config file,
    edited since the run. Files that are gone (a worktree removed, a run made elsewhere) cannot be checked.

    Raises:
        InputError: naming the run directory, the file and both sha256 (exit code 2).
    """
    recorded = manifest.golden_sha256 or ""
    own = Path(manifest.golden) if manifest.golden else None
    if own is not None and own.is_file() and (now := file_sha256(own)) != recorded:
        raise InputError(
            f"{run_dir}: its golden set {own} changed since the run (sha256 {recorded[:12]} recorded, now "
            f"{now[:12]}): its predictions answer the old cases; re-run `rag-gate run` on it, or compare on the "
            "golden set the run answered"
        )
    if golden is not None and Path(golden).is_file() and (given := file_sha256(Path(golden))) != recorded:
        raise InputError(
            f"{run_dir}: the run answered another golden set than --golden {golden} (sha256 {recorded[:12]} "
            f"recorded, {given[:12]} given); re-run it on {golden}"
        )
    if config is None or not manifest.config:
        return
    own_config = Path(manifest.config)
    if own_config.resolve() == Path(config.path).resolve() and config.sha256 != manifest.config_sha256:
        raise InputError(
            f"{run_dir}: its config {own_config} changed since the run (sha256 "
            f"{(manifest.config_sha256 or '')[:12]} recorded, now {config.sha256[:12]}): the run's "
            "predictions come from the old config; re-run `rag-gate run`, or compare with the config it was made with"
        )


def _golden_contract(base: Path, head: Path) -> tuple[Path | None, GoldenDiff | None]:
    """Two run directories on different golden sets: the base's set is the contract both are compared on.

    Returns:
        (the base's golden file, the diff) when the two runs answered different golden sets, else (None, None).
    """
    base_golden, head_golden = (Path(read_manifest(d).golden or "") for d in (base, head))
    if base_golden == head_golden or file_sha256(base_golden) == file_sha256(head_golden):
        return None, None
    return base_golden, diff_golden(load_golden(base_golden), load_golden(head_golden))


def golden_file_of(base: Path, golden: Path | None) -> str | None:
    """The golden set whose lines a comparison's cases name, as a report should show it.

    ``golden`` when given, else the base run's (its manifest's ``golden``: the contract both sides are compared
    on); relative to the current directory when it lies inside it (the repository root in CI), else as it is.

    Args:
        base: the base side (a run directory or a predictions file).
        golden: ``--golden`` (None when not given).

    Returns:
        The path, or None when unknown (a predictions file without ``golden``, a manifest without it).
    """
    if golden is None:
        try:
            recorded = read_manifest(base).golden if Path(base).is_dir() else None
        except InputError:
            recorded = None
        if not isinstance(recorded, str) or not recorded:
            return None
        golden = Path(recorded)
    if golden.is_absolute():
        try:
            return golden.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return golden.as_posix()
    return golden.as_posix()


@dataclasses.dataclass(frozen=True)
class Compared:
    """A comparison with the two loaded sides it was made from (what ``report.html`` shows case by case)."""

    comparison: Comparison
    """The comparison."""
    base: Side
    """The base side, loaded and scored."""
    head: Side
    """The head side."""
    policy: GatePolicy
    """The policy the sides were compared under."""

    def cases(self, lines: Mapping[str, int] | None = None) -> Iterator[CaseView]:
        """The comparison's per-case view, read from the sides in batches (:func:`gate.compare.views.case_views`).

        Args:
            lines: case id → line in the golden file a reviewer edits (the PR's own); default: the sides' lines.
        """
        from gate.compare.views import case_views

        names = [m.name for m in self.comparison.metrics]
        return case_views(self.base, self.head, self.policy, names, lines)


def comparison_outputs(out_dir: Path, what: str, extra: Sequence[str] = ()) -> tuple[dict[str, Path], dict[str, Path]]:
    """What a comparison writes into its output folder, for :func:`gate.files.refuse_output_clashes`.

    Args:
        out_dir: the output folder (``compare --out``, ``pr --out-dir``).
        what: how the user named it (e.g. ``--out rep``); each entry is labelled ``<what> (<name>)``.
        extra: more file names the command writes there (``pr``: the golden contract, the trend, the history copy).

    Returns:
        (label → file: report.json, comment.md, report.html, metrics.png, pairwise.jsonl and ``extra``;
        label → folder: ``base/`` and ``head/``, the scores of sides scored here).
    """
    from gate import outputs

    names = [
        outputs.path(out_dir, outputs.Output.JSON).name,
        outputs.path(out_dir, outputs.Output.COMMENT).name,
        outputs.HTML_FILE,
        outputs.CHART_FILE,
        PAIRWISE_FILE,
        *extra,
    ]
    files = {f"{what} ({name})": out_dir / name for name in names}
    return files, {f"{what} ({label}/)": out_dir / label for label in ("base", "head")}


def compare_runs(base: Path, head: Path, out_dir: Path, **options: Any) -> Comparison:
    """:func:`compare_sides`' comparison alone (the same arguments; the loaded sides are dropped)."""
    return compare_sides(base, head, out_dir, **options).comparison


def compare_sides(
    base: Path,
    head: Path,
    out_dir: Path,
    *,
    config: Config | None = None,
    golden: Path | None = None,
    strict: bool = False,
    diff: GoldenDiff | None = None,
    files: Sequence[ChangedFile] | None = None,
    commits: str | None = None,
    jobs: int | None = None,
    cases: Collection[str] | None = None,
    decided: Decided | None = None,
    check_head_config: bool = True,
) -> Compared:
    """Load (and, where needed, score) two sides and compare them; the sides are kept for per-case reports.

    The gate's policy (metrics, margins, judge, seed) comes from ``config`` when given, otherwise from the base
    run's manifest — the base branch's settings, so that a PR cannot relax its own gate. Rendering and writing
    the outputs is the caller's choice (:func:`gate.outputs.write`).

    Args:
        base: base run directory or predictions file.
        head: head run directory or predictions file.
        out_dir: where the scores of sides that had to be scored go (``out_dir/base``, ``out_dir/head``).
        config: evaluation settings to use.
        golden: the golden set (required when a side is a predictions file).
        strict: turn an inconclusive verdict into fail.
        diff: how the head's golden set differs from the base's when both sides ran the contract set
            (:func:`gate.golden.contract`); reported in the comparison. Two run directories that answered
            different golden sets are compared on the base's (the contract: a head's missing rows are failures,
            its added cases are left out) and the diff is computed here.
        files: the files changed between base and head (the PR flow's git diff), shown under "What changed".
        commits: the range ``files`` is of, e.g. ``abc123..def456``.
        jobs: worker processes that score a side that needs scoring (``--jobs``); None: ``config``'s
            ``scoring.jobs``, else every core.
        cases: compare on the golden set's cases of these ids only (an adaptive evaluation's cases run so far;
            ``partial`` run directories are taken); None: every case.
        decided: metric → (status, reason) decided by an adaptive evaluation's sequential test, which replace the
            fixed-N statuses, or a function of the fixed-N results that gives them (:func:`gate.compare.compare`).
        check_head_config: also refuse a head run whose own config file is ``config``'s path, edited since
            (:func:`refuse_stale_run`). False when the head ran its own config at the base's path (a CI job per
            side, each checking out its commit in one place: ``compare --adaptive``).

    Raises:
        InputError: bad inputs (missing golden, malformed files, unknown ids, no case in common), or a run
            directory that no longer matches its golden set or config (:func:`refuse_stale_run`).

    """
    out_dir = Path(out_dir)
    for source, checked in ((Path(base), config), (Path(head), config if check_head_config else None)):
        if source.is_dir():
            refuse_stale_run(source, read_manifest(source), golden, checked)
    if golden is None and diff is None and Path(base).is_dir() and Path(head).is_dir():
        golden, diff = _golden_contract(Path(base), Path(head))
    base_side, head_side, policy = load_sides(base, head, out_dir, config=config, golden=golden, jobs=jobs,
                                              cases=cases)  # fmt: skip
    judged_under = policy
    if strict and not policy.strict:
        policy = dataclasses.replace(policy, strict=True)
    pairwise = None
    if policy.pairwise is not None and policy.paired_metrics:
        base_side, head_side, pairwise = judge_pairwise(base_side, head_side, policy, out_dir)
    from gate.compare import compare

    comparison = compare(
        base_side, head_side, policy, diff=diff, files=files, commits=commits, pairwise=pairwise, decided=decided
    )
    if Path(head).is_dir() and head_side.manifest.evaluation is not None:  # the head run's own policy
        from gate.compare.notes import policy_changes

        moved = policy_changes(judged_under, GatePolicy.from_dict(head_side.manifest.evaluation), diff)
        comparison = dataclasses.replace(comparison, policy_changes=moved)
    if policy.judge_labels:
        root = config.root if config is not None else Path(base_side.manifest.config or ".").parent
        run_dir = Path(base) if Path(base).is_dir() else None
        line, stale = judge_labels_line(root / policy.judge_labels, base_side.manifest, policy.seed, run_dir)
        comparison = dataclasses.replace(comparison, judge_labels=line, warnings=(*comparison.warnings, *stale))
    return Compared(comparison, base_side, head_side, policy)


def load_sides(
    base: Path,
    head: Path,
    out_dir: Path,
    *,
    config: Config | None = None,
    golden: Path | None = None,
    jobs: int | None = None,
    cases: Collection[str] | None = None,
) -> tuple[Side, Side, GatePolicy]:
    """The two sides :func:`compare_sides` compares, loaded (and scored where needed), and the policy they are under.

    Also what an adaptive evaluation's looks need after each batch, without the comparison itself. The arguments
    are :func:`compare_sides`' (``golden``: the golden set both are compared on, when known); stale runs are
    refused by :func:`compare_sides` only (:func:`refuse_stale_run`).

    Returns:
        (base side, head side, the policy: ``config``'s, else the base run's).

    Raises:
        InputError: unreadable, incomplete or badly scored sides, or no case in common.
    """
    policy = config.policy if config else None
    jobs = jobs if jobs is not None else config.scoring_jobs if config is not None else None
    base_side, policy = _load_side("base", Path(base), golden, policy, out_dir, jobs, cases)
    head_side, _ = _load_side("head", Path(head), golden, policy, out_dir, jobs, cases)
    if not {c.id for c in base_side.golden} & {c.id for c in head_side.golden}:
        raise InputError(f"{base} and {head} have no case in common: they were run on different golden sets")
    return base_side, head_side, policy


def judge_labels_line(path: Path, manifest: Manifest, seed: int, run_dir: Path | None = None) -> tuple[str, list[str]]:
    """The comment's line on the judge's agreement with ``judge_labels:`` and the stale-label warnings.

    With base's run directory, the agreement is on the first gated rule (:func:`gate.labels.rules.rules_for`) and
    the line adds the prediction-powered share of unfaithful answers (:mod:`gate.labels.corrected`); without it
    (base is a predictions file), the judge's calls recorded in the labels (faithfulness below 1) against the
    labels. The labels are stale when made with another judge identity than the run's or on another golden set.
    A labels file that cannot be read is a warning, never a failed comparison.
    """
    from gate.labels import agreement as lb
    from gate.labels.sampling import judge_key

    try:
        labels = lb.load_labels(path)
    except InputError as exc:
        return f"cannot read the labels: {exc}", [f"judge_labels: {exc}"]
    stale = lb.stale(labels, judge_key(manifest), manifest.golden_sha256)
    judge = manifest.judge.id if manifest.judge else ""
    fixed = ""

    def ci(x: lb.Interval | MeanEstimate) -> str:
        """``0.81 (95 % CI 0.62 to 0.93)``, ``0.81`` without an interval, or ``n/a``."""
        value, low, high = (x.value, x.low, x.high) if isinstance(x, lb.Interval) else (x.estimate, x.low, x.high)
        if math.isnan(value):
            return "n/a"
        return f"{value:.2f}" + ("" if math.isnan(low) else f" (95 % CI {low:.2f} to {high:.2f})")

    if run_dir is not None and not labels[0].pairwise:
        from gate.labels.corrected import corrected
        from gate.labels.rules import rules_for
        from gate.labels.sampling import judged_answers

        try:
            _, answers = judged_answers(run_dir)
        except InputError as exc:
            return f"cannot read base's run for the labels: {exc}", [f"judge_labels: {exc}"]
        rule = rules_for(manifest)[0]
        result = lb.check(labels, lb.run_calls(answers, rule), judge=judge, seed=seed, rule=rule.text)
        c = corrected(labels, answers, rule)
        if not c.note:
            fixed = f"; share of unfaithful answers PPI++ {ci(c.ppi)}, judge alone {ci(c.judge_only)}"
    else:
        result = lb.check(labels, lb.recorded_calls(labels), judge=judge, seed=seed)
    a = result.agreement
    undefined = f" (undefined: {'; '.join(u.split(':')[0] for u in a.undefined)})" if a.undefined else ""
    line = (
        f"{lb.VERDICTS[a.verdict]} on {result.rule} ({a.n} labels): κ {ci(a.kappa)}, balanced accuracy "
        f"{ci(a.balanced_accuracy)}{undefined}{fixed}"
    )
    if stale:  # in full among the warnings
        line += " · stale: " + "; ".join(re.split(r" \(|:| than ", warning)[0] for warning in stale)
    return line, [f"judge_labels: {warning}" for warning in stale]


PAIRWISE_FILE = "pairwise.jsonl"
"""The pairwise judge's verdicts of a comparison, one row per case, in ``--out``."""


def judge_pairwise(base: Side, head: Side, policy: GatePolicy, out_dir: Path) -> tuple[Side, Side, PairwiseRun]:
    """Judge base's answer against head's on every shared case (both orders) and add the ``head_win_rate`` rows.

    Each side's first valid answer of a case is compared; answers are cached like the rubric judge's. The
    verdicts are written to ``out_dir/pairwise.jsonl``.

    Returns:
        The two sides with their ``head_win_rate`` score rows added, and the judge's verdicts and accounting.

    Raises:
        InputError: invalid pairwise options or the ``llm`` extra missing (exit 2).
        JudgeConfigError: the endpoint rejected the judge's configuration (exit 3).

    """
    try:
        judge = get_pairwise_judge(policy.pairwise_spec())
    except (ValueError, TypeError) as exc:
        raise InputError(f"pairwise: {exc}") from None
    base_ids = {c.id for c in base.golden}
    cases = [c for c in head.golden if c.id in base_ids]
    try:
        judgments = judge_pairs([(c, base.first_valid(c.id), head.first_valid(c.id)) for c in cases], judge, policy)
    finally:
        usage = judge_usage(judge)
        judge.close()
    rows = [pair_scores(c.id, j) for c, j in zip(cases, judgments, strict=True)]
    make_dirs(out_dir)
    with atomic_writer(out_dir / PAIRWISE_FILE) as sink:
        for case, judgment in zip(cases, judgments, strict=True):
            record = {"id": case.id, **(dataclasses.asdict(judgment) if judgment else {"outcome": None})}
            sink.write(dumps(record) + "\n")
    run = PairwiseRun(judge.id, judge.version, tuple((c.id, j) for c, j in zip(cases, judgments, strict=True)), usage)
    base = dataclasses.replace(base, scores=base.scores.extended(b for b, _ in rows))
    head = dataclasses.replace(head, scores=head.scores.extended(h for _, h in rows))
    return base, head, run
