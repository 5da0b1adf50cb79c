"""The ``rag-gate`` command group and the engine commands (validate, run, compare, merge).

Thin: each command parses options and calls the engine (``gate.produce``, ``gate.sides``);
``gate.cli.common.handle_errors`` maps errors to exit codes. Exit codes (DESIGN §6): 0 pass · 1 regression (the
gate failed) · 2 bad input or usage · 3 the evaluation itself could not run · 4 ``compare --adaptive`` not settled:
run the next batch (:data:`gate.cli.common.NOT_SETTLED`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gate import __version__
from gate.cli.common import (
    CONTEXT,
    NOT_SETTLED,
    EchoHandler,
    OneLineUsage,
    aggregate_lines,
    handle_errors,
    shard_option,
    terminate,
)
from gate.cli.history import history
from gate.cli.importing import import_
from gate.cli.labels import judge_check, label
from gate.cli.pr import pr
from gate.errors import InputError
from gate.sanitize import guard_std_streams, inert_json, one_line, shown

if TYPE_CHECKING:
    from gate.config import Config, GatePolicy
    from gate.manifest import Counts
    from gate.models import GoldenCase
    from gate.sides import Compared


@click.group(cls=OneLineUsage, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="rag-gate")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def main(debug: bool) -> None:
    """rag-gate: a regression gate for RAG systems.

    \b
    Evaluate the base and the head of a change on a golden set, compare them with
    paired statistics, and fail when answers got worse.
    Exit codes: 0 pass · 1 regression · 2 bad input · 3 evaluation could not run ·
    4 compare --adaptive not settled (run the next batch).
    """
    guard_std_streams()  # no untrusted text printed by any command can act as a workflow command or be unencodable
    logger = logging.getLogger("rag-gate")
    if not any(isinstance(h, EchoHandler) for h in logger.handlers):
        logger.addHandler(EchoHandler())
        logger.setLevel(logging.INFO)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, terminate)  # a cancelled CI job: stop cleanly, keep what is on disk
        if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            signal.signal(signal.SIGHUP, terminate)  # a closed terminal or SSH session: the same (nohup keeps running)


def _validate(path: Path) -> None:
    """``validate``'s work: print every problem (stderr) or a one-line summary (stdout).

    Raises:
        InputError: ``path`` has problems.
    """
    if path.is_dir():
        _foreign(path)
        raise InputError(f"{path}: is a directory; name a config (.yml) or a golden set (.jsonl)")
    if path.suffix.lower() in (".yml", ".yaml"):
        from gate.config import check_config

        config, problems = check_config(path)
    else:
        from gate.golden import check_golden

        config = None
        cases, problems = check_golden(path)
    if problems:
        _foreign(path)
    for problem in problems:
        click.echo(one_line(problem), err=True)
    if problems:
        raise InputError(f"{path}: {len(problems)} problem(s)")
    if config is None:
        n_ood = sum(c.out_of_domain for c in cases)
        click.echo(f"{shown(path)}: {len(cases)} cases ({n_ood} out-of-domain) — OK")
        return
    from gate.golden import load_golden

    cases = load_golden(config.golden)
    policy = config.policy
    source = config.pipeline.python or config.pipeline.command or config.pipeline.predictions
    golden = Path(config.golden)
    if golden.is_relative_to(path.resolve().parent):  # as the config names it (eval/golden.jsonl), else in full
        golden = golden.relative_to(path.resolve().parent)
    click.echo(
        f"{shown(path)}: OK — golden set {shown(golden)}: {len(cases)} cases "
        f"({sum(c.out_of_domain for c in cases)} out-of-domain); pipeline {source}; "
        f"{len(policy.metrics)} metrics ({len(policy.gated)} gated); judge {policy.judge['name']}; "
        f"repeats {config.repeats}"
    )
    if line := _detectable(cases, policy, config.repeats):
        click.echo(line)
    from gate.golden import ood_unchecked_warning

    for warning in (*_too_few_cases(cases, policy), *ood_unchecked_warning(cases, policy.metrics)):
        click.echo(f"{shown(path)}: warning: {warning}", err=True)


def _foreign(path: Path) -> None:
    """When ``path`` is another tool's dataset, say which importer converts it (one line) instead of every problem.

    Raises:
        InputError: ``path`` is a ragas, DeepEval, promptfoo or BEIR dataset, or a JSON array.
    """
    from gate.importers import sniff

    fmt, what = sniff(path)
    if fmt:
        raise InputError(
            f"{path}: {what}, not a rag-gate {'config' if path.suffix.lower() in ('.yml', '.yaml') else 'golden set'}"
            f"; convert it with `rag-gate import {fmt} {path} --out golden.jsonl` (see `rag-gate import --help`)"
        )
    if what.startswith("a JSON array"):
        raise InputError(
            f"{path}: a JSON array, not JSON Lines (a golden set is one JSON object per line: id, question, "
            "expected_doc_ids); convert it, or use `rag-gate import` if it comes from ragas, DeepEval, promptfoo, BEIR"
        )
    if what:
        raise InputError(f"{path}: {what}")


def _cases_scored(name: str, cases: Sequence[GoldenCase]) -> tuple[int, str]:
    """How many of ``cases`` the metric ``name`` scores, and which.

    Out-of-domain (``refusal``), every case (a metric that scores failed predictions too: ``error_rate``, latency,
    cost: ``""``) or in-domain (the others).
    """
    from gate.metrics import resolve

    spec, n_ood = resolve(name).spec, sum(c.out_of_domain for c in cases)
    if spec.out_of_domain:
        return n_ood, "out-of-domain"
    return (len(cases), "") if spec.scores_failures else (len(cases) - n_ood, "in-domain")


def _detectable(cases: Sequence[GoldenCase], policy: GatePolicy, repeats: int) -> str | None:
    """The minimum detectable worsening of each gated metric at this golden set's N and these repeats, before a run.

    The comment's MDE (:func:`gate.stats.power.detectable_drop`: the gate's own rule, the test at Holm's first-step
    level α/M and Δ̂ ≤ −m, with 80 % power) under the best case a plan can assume before any run: no run-to-run
    noise (a deterministic pipeline, whose repeats add nothing) and a PR that breaks cases at random from a base that
    passes each (exact McNemar, no discordance without a change). Real noise only makes it larger; the comment
    prints the measured one. Ratio metrics (latency, cost) depend on timing noise alone and are named without a value.
    """
    from gate.metrics import resolve
    from gate.stats import numbers
    from gate.stats.power import ZERO_MARGIN_ALPHA, detectable_drop

    gated = [name for name in policy.metrics if name in policy.gated]
    items = []
    for name in gated:
        spec, margin = resolve(name).spec, policy.margin(name)
        n, which = _cases_scored(name, cases)
        if spec.kind == "ratio" or n == 0:
            items.append(f"{name} – ({'run-to-run noise decides' if n else 'no case'})")
            continue
        level = (ZERO_MARGIN_ALPHA if margin == 0 else policy.alpha) / len(gated)
        drop = detectable_drop(n, level=level, margin=margin, var0=0.0, mcnemar=True, base_rate=1.0)
        value = "none: too few cases" if drop != drop else numbers.number(drop)
        items.append(f"{name} {value} ({n} {which + ' ' if which == 'out-of-domain' else ''}cases)")
    if not items:
        return None
    return (
        f"minimum detectable worsening (80 % power, repeats {repeats}; no run-to-run noise, a PR that breaks cases "
        "at random, every gated metric varying — noise makes it larger, fewer varying metrics smaller; the comment "
        f"prints the measured one): {' · '.join(items)}"
    )


def _too_few_cases(cases: Sequence[GoldenCase], policy: GatePolicy) -> list[str]:
    """A warning when the golden set is too small for some gated metrics to ever fail (one line, or none).

    A metric over n cases, one of k gated metrics, can fail only when k·2^−n ≤ its α
    (:func:`gate.stats.power.smallest_holm_p`), i.e. with n ≥ log2(k/α) cases.
    """
    import math

    from gate.metrics import resolve
    from gate.stats.inputs import MetricPolicy
    from gate.stats.power import smallest_holm_p

    gated = [name for name in policy.metrics if name in policy.gated]
    short = []
    for name in gated:
        spec = resolve(name).spec
        n, which = _cases_scored(name, cases)
        alpha = MetricPolicy(spec.kind, spec.direction, policy.margin(name), policy.alpha).alpha
        if smallest_holm_p(n, len(gated)) > alpha:
            need = math.ceil(math.log2(len(gated) / alpha))
            short.append(f"{name} ({n} {which + ' ' if which else ''}case(s), needs ≥ {need})")
    if not short:
        return []
    return [
        f"too few cases for {len(short)} of {len(gated)} gated metrics to ever fail, even if every case got worse "
        f"(the smallest Holm-adjusted p-value is {len(gated)}·2^-n): {', '.join(short)}; a crash on a case the "
        "base answered still fails the gate"
    ]


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@handle_errors
def validate(path: Path) -> None:
    """Check a config (and every file it names) or a golden set; print every problem as file:line: field: message.

    A .yml/.yaml file is a config: the config itself, its golden set and its precomputed predictions are
    checked. Any other file is a golden set. A file from another tool (a ragas, DeepEval or promptfoo
    dataset, a BEIR folder, a JSON array) gets one line naming the `rag-gate import` that converts it.

    \b
    Example:
      rag-gate validate rag-gate.yml
      rag-gate validate eval/golden.jsonl
    """
    _validate(path)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@handle_errors
def init(directory: Path) -> None:
    """Scaffold rag-gate in DIRECTORY (default: here), then validate the config.

    Writes rag-gate.yml, eval/golden.jsonl (a template with in-domain and
    out-of-domain cases), rag_pipeline.py (a working stub whose docstring is
    the function contract) and .github/workflows/rag-gate.yml. A file that
    exists is kept, never overwritten.

    \b
    Example:
      rag-gate init
      rag-gate run --config rag-gate.yml --out runs/first
    """
    from gate.scaffold import CONFIG, WORKFLOW, pin_advice, scaffold

    for item in scaffold(directory):
        click.echo(f"{item.action}: {shown(item.path)}" + (" (exists, left as it is)" if item.action == "kept" else ""))
    if advice := pin_advice(directory / WORKFLOW, _direct_url()):
        click.echo(f"note: {advice}", err=True)
    _validate(directory / CONFIG)
    click.echo(
        f"next: edit {shown(directory / 'rag_pipeline.py')} to call your pipeline and "
        f"{shown(directory / 'eval/golden.jsonl')} with your questions, then "
        f"`rag-gate run --config {shown(directory / CONFIG)} --out runs/first`",
        err=True,
    )


def _direct_url() -> str | None:
    """The installed rag-gate's ``direct_url.json`` (PEP 610), or None (see :func:`gate.scaffold.installed_commit`)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return distribution("rag-gate").read_text("direct_url.json")
    except PackageNotFoundError:
        return None


@main.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The side's rag-gate.yml.",
)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Run directory.")
@click.option("--repeats", type=click.IntRange(min=1), help="Runs per case (overrides the config).")
@click.option("--shard", "shard_text", metavar="I/N", help="Run only the I-th of N shards of the golden set.")
@click.option(
    "--upto-batch",
    type=click.IntRange(min=1),
    metavar="K",
    help="A stage of the staged adaptive evaluation (needs `adaptive: true`): the must-pass and out-of-domain "
    "cases and the first K batches of the adaptive order (of the shard, with --shard), every repeat; extends OUT.",
)
@click.option(
    "--head-sha",
    metavar="SHA",
    help="With --upto-batch: the PR's head commit, which seeds the adaptive order with the config's seed (as "
    "`rag-gate pr` does), so that a PR cannot know which cases are left out; the same on both sides.",
)
@click.option("--git-sha", help="Commit of this side, recorded in the manifest.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=256),
    help="Worker processes that score answers (1: none); default: the config's scoring.jobs, else every core.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="How the side's aggregates are printed on stdout: a table, or JSON.",
)
@handle_errors
def run(
    config_path: Path,
    out: Path,
    repeats: int | None,
    shard_text: str | None,
    upto_batch: int | None,
    head_sha: str | None,
    git_sha: str | None,
    progress: bool | None,
    jobs: int | None,
    fmt: str,
) -> None:
    """Run the golden set through one side's pipeline and score it.

    Writes OUT/predictions.jsonl, OUT/scores.jsonl and OUT/manifest.json, incrementally:
    re-running the same command resumes an interrupted run. Prints the side's aggregates
    (per metric: mean, cases with a value, failed scores) on stdout, as a table or JSON.

    With --upto-batch K (a stage of the staged adaptive evaluation, for a CI matrix):
    only the must-pass and out-of-domain cases and the first K batches of the adaptive
    order run (the order `rag-gate pr --adaptive on` uses), restricted to the shard's
    cases with --shard; OUT is extended (earlier batches are neither run nor scored
    again) and stays `partial` until every case ran (K past the last batch: every
    case). Every repeat runs. Then `merge` the shards and `compare --adaptive`.

    \b
    Example:
      rag-gate run --config examples/squad/base.yml --out out/base
      rag-gate run --config rag-gate.yml --out runs/first --format json
      rag-gate run --config rag-gate.yml --shard 1/2 --upto-batch 1 --out runs/s1
    """
    from gate.config import load_config
    from gate.sandbox import protect_process

    protect_process(os.environ)  # the pipeline cannot read this process's secrets from /proc
    config = load_config(config_path, repeats=repeats)  # before importing the engine: bad input fails fast
    if head_sha is not None and upto_batch is None:
        raise InputError("--head-sha seeds the order of a stage: it needs --upto-batch")
    stage, cases, seed = _stage_cases(config, upto_batch, head_sha) if upto_batch is not None else (None, None, None)
    from gate.produce import run_side

    show = sys.stderr.isatty() if progress is None else progress
    run_side(
        config, out, repeats=repeats, progress=show, git_sha=git_sha, shard_spec=shard_option(shard_text), jobs=jobs,
        cases=cases, upto_batch=stage, order=(seed, head_sha) if seed is not None else None,
    )  # fmt: skip
    from gate.manifest import Counts
    from gate.runs import read_manifest

    manifest = read_manifest(out)
    counts = manifest.counts or Counts(predictions=0, prediction_errors=0, scores=0)
    click.echo(
        f"wrote {shown(out)}: {counts.predictions} predictions ({counts.prediction_errors} failed), "
        f"{counts.scores} scores ({counts.judge_failures} judge failures)",
        err=True,
    )
    kinds = manifest.prediction_errors or ()
    if kinds:
        kept = shown(out / "predictions.jsonl")
        click.echo(f"{len(kinds)} distinct pipeline error(s), all kept in {kept}:", err=True)
        for kind in kinds[:3]:
            click.echo(f"  {kind.count}× {one_line(kind.message)}", err=True)
        if len(kinds) > 3:
            click.echo(f"  … and {len(kinds) - 3} more", err=True)
    from gate.history.entries import run_aggregates
    from gate.produce import unmatched_retrieval

    metrics = run_aggregates(out, partial=upto_batch is not None)
    if (unmatched := unmatched_retrieval(config, out, metrics)) is not None:
        click.echo(f"rag-gate: warning: {unmatched}", err=True)
    _print_aggregates(out, fmt, counts, metrics)


def _stage_cases(config: Config, upto_batch: int, head_sha: str | None) -> tuple[int, list[str], int]:
    """``run --upto-batch K``'s stage: (K or the order's last batch, when K is past it; its cases' ids; the seed).

    The order is the PR flow's (:func:`gate.compare.sequential.policy_order`, seeded with ``head_sha`` when given:
    without it the config's seed alone tells a PR which cases are left out); ``--shard`` then keeps the shard's
    cases among them (:func:`gate.produce.run_side` shards the golden set, then keeps ``cases``).

    Raises:
        InputError: ``adaptive`` is off in the config.
    """
    if not config.policy.adaptive.enabled:
        raise InputError(f"--upto-batch {upto_batch}: {config.path} does not turn on `adaptive: true`")
    from gate.compare.sequential import policy_order
    from gate.golden import load_golden

    order = policy_order(load_golden(config.golden), config.policy, head_sha)
    stage = min(upto_batch, max(1, len(order.ends)))
    return stage, order.prefix(stage - 1), order.seed


def _print_aggregates(out: Path, fmt: str, counts: Counts, metrics: dict[str, dict[str, float | int | None]]) -> None:
    """The side's aggregates on stdout: the table ``history add`` prints (:func:`aggregate_lines`), or JSON."""
    import json

    import msgspec

    if fmt == "json":
        document = {"run": str(out), "counts": msgspec.to_builtins(counts), "metrics": metrics}
        click.echo(inert_json(json.dumps(document, ensure_ascii=False, indent=2)))
        return
    for line in aggregate_lines(metrics):
        click.echo(line)


@main.command()
@click.argument("base", type=click.Path(exists=True, path_type=Path))
@click.argument("head", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--golden",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Golden set (required when BASE/HEAD are predictions files).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Evaluation settings (metrics, margins, judge); default: those of the BASE run.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("rag-gate-report"),
    show_default=True,
    help="Where report.json, comment.md and report.html go.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    help="What to print on stdout: text (default on a terminal), markdown (the comment; default when piped) or json.",
)
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write JUnit XML (a test case per gated metric and per regressed case) to this file.",
)
@click.option("--strict", is_flag=True, help="Treat an inconclusive verdict as fail.")
@click.option(
    "--adaptive",
    is_flag=True,
    help="The staged adaptive evaluation (needs `adaptive: true` in the base's config): the looks over the batches "
    "both run directories hold (run --upto-batch K); not settled: no verdict, exit 4 (run the next batch).",
)
@click.option("--head-sha", metavar="SHA", help="With --adaptive: the head commit the stages' order was seeded with.")
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=256),
    help="Worker processes that score answers (1: none); default: the config's scoring.jobs, else every core.",
)
@click.option(
    "--labels",
    "labels_paths",
    nargs=2,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="BASE_LABELS HEAD_LABELS: hand labels of each run's answers; prints the judge-corrected (prediction-powered) "
    "head − base share of unfaithful answers against the margin (stderr; the verdict is unchanged).",
)
@handle_errors
def compare(
    base: Path,
    head: Path,
    golden: Path | None,
    config_path: Path | None,
    out: Path,
    fmt: str | None,
    junit: Path | None,
    strict: bool,
    adaptive: bool,
    head_sha: str | None,
    jobs: int | None,
    labels_paths: tuple[Path, Path] | None,
) -> None:
    """Compare BASE and HEAD (run directories or predictions JSONL files).

    Prints the result (plain text on a terminal, the markdown comment when piped, or
    the JSON report), writes OUT/report.json, OUT/comment.md and OUT/report.html (every
    case side by side, opens offline), and exits 0 on pass or inconclusive, 1 on fail.

    With --adaptive (the staged adaptive evaluation: both sides run with --upto-batch K,
    shards merged), the looks of `rag-gate pr --adaptive on` are taken over the batches
    both sides hold. Stopped (a fail, a must-pass case, every metric decided) or every
    case run: the comparison as `pr` makes it. Otherwise no verdict and no report: one
    line naming the next batch, `next_batch=K` and `settled=false` in $GITHUB_OUTPUT
    (`settled=true` once settled), exit 4.

    \b
    Example:
      rag-gate compare out/base out/head --out out/report
      rag-gate compare --golden golden.jsonl base.jsonl head.jsonl --out out/report
      rag-gate compare out/base out/head --labels base-labels.jsonl head-labels.jsonl
      rag-gate compare runs/base runs/head --adaptive --out out/report
    """
    from gate import outputs
    from gate.comparison import exit_code_for
    from gate.config import load_config
    from gate.sides import compare_sides, golden_file_of

    _refuse_compare_clashes(base, head, golden, config_path, out, junit)
    config = load_config(config_path) if config_path else None
    if labels_paths:  # bad labels are refused before the comparison's work, not after
        from gate.labels.agreement import load_labels

        for path in labels_paths:
            load_labels(path)
    if junit is not None:
        from gate.files import prepare_output_file

        prepare_output_file(junit, f"--junit {junit}")  # a missing folder is made now, not a failure after the work
    if head_sha is not None and not adaptive:
        raise InputError("--head-sha seeds the order of the staged adaptive evaluation: it needs --adaptive")
    if adaptive:
        compared = _compare_stages(base, head, out, config, golden, strict=strict, jobs=jobs, head_sha=head_sha)
    else:
        compared = compare_sides(base, head, out, config=config, golden=golden, strict=strict, jobs=jobs)
    comparison = compared.comparison
    options = outputs.RenderOptions(golden_file=golden_file_of(base, golden) if junit is not None else None)
    texts = outputs.write(comparison, out, options=options, cases=compared.cases(), junit=junit)
    fmt = fmt or ("text" if sys.stdout.isatty() else "markdown")
    chosen = {"json": outputs.Output.JSON, "markdown": outputs.Output.COMMENT, "text": outputs.Output.TEXT}[fmt]
    text = texts.get(chosen) or outputs.render(comparison, chosen)
    text = inert_json(text) if fmt == "json" else text
    _echo_in_pieces(text, nl=fmt == "markdown")
    if labels_paths:
        from gate.labels.corrected import compare_labelled

        policy = compared.policy
        for found in compare_labelled(base, head, *labels_paths, policy.gated, policy.margin):
            click.echo(one_line(f"labels: {found.line()}"), err=True)
    click.echo(f"verdict: {comparison.verdict} (report: {shown(outputs.path(out, outputs.Output.JSON))})", err=True)
    sys.exit(exit_code_for(comparison.verdict, "fail", strict=comparison.strict))


def _compare_stages(
    base: Path,
    head: Path,
    out: Path,
    config: Config | None,
    golden: Path | None,
    *,
    strict: bool,
    jobs: int | None,
    head_sha: str | None,
) -> Compared:
    """``compare --adaptive``: the settled comparison (``settled=true`` to ``$GITHUB_OUTPUT``), or exit 4.

    Not settled: one line on stdout, ``next_batch`` and ``settled=false`` to ``$GITHUB_OUTPUT`` when set, no
    report, exit :data:`NOT_SETTLED` (:func:`gate.stages.compare_stages`).

    Raises:
        InputError: ``--golden`` given, no config (``--config`` or the base run's), or as ``compare_stages``.
    """
    from gate.config import load_config
    from gate.pr.github import write_outputs
    from gate.runs import read_manifest
    from gate.stages import compare_stages

    if golden is not None:
        raise InputError("--adaptive takes the golden set from the base's config; leave out --golden")
    for side in (base, head):
        if not side.is_dir():
            raise InputError(f"{side}: --adaptive compares run directories (rag-gate run --upto-batch K), not a file")
    if config is None:
        recorded = read_manifest(base).config
        if not recorded or not Path(recorded).is_file():
            raise InputError(f"{base}: --adaptive needs the base's config: its run's config is gone; pass --config")
        config = load_config(Path(recorded))
    staged = compare_stages(base, head, out, config=config, strict=strict, jobs=jobs, head_sha=head_sha)
    outputs_file = os.environ.get("GITHUB_OUTPUT")
    if staged.compared is None:
        click.echo(
            f"adaptive: not settled after look {staged.looks} of {staged.looks_max} ({staged.cases_run} of "
            f"{staged.n_cases} cases): run `--upto-batch {staged.next_batch}` on both sides, then compare again"
        )
        if outputs_file:
            write_outputs(Path(outputs_file), {"settled": "false", "next_batch": staged.next_batch})
        sys.exit(NOT_SETTLED)
    if outputs_file:
        write_outputs(Path(outputs_file), {"settled": "true"})
    return staged.compared


def _refuse_compare_clashes(
    base: Path, head: Path, golden: Path | None, config_path: Path | None, out: Path, junit: Path | None
) -> None:
    """``compare``'s outputs never overwrite each other or its inputs: refused before any work (exit 2)."""
    from gate.files import refuse_output_clashes
    from gate.runs import MANIFEST, PREDICTIONS, SCORES
    from gate.sides import comparison_outputs

    files, folders = comparison_outputs(out, f"--out {out}")
    inputs: dict[str, Path | None] = {"--golden": golden, "--config": config_path}
    for which, side in (("BASE", base), ("HEAD", head)):
        names = (PREDICTIONS, SCORES, MANIFEST) if side.is_dir() else ("",)
        inputs.update({f"{which} ({name})" if name else which: side / name for name in names})
    refuse_output_clashes({**files, f"--junit {junit}": junit}, folders, inputs)


def _echo_in_pieces(text: str, *, nl: bool, size: int = 1 << 20) -> None:
    """Print ``text`` whole lines at a time, about ``size`` characters per write.

    The guarded stdout copies each write a few times over (:class:`gate.sanitize.GuardedStream`), and the JSON report
    grows with the cases (tens of MB at 100,000). A write that ends a line leaves nothing pending, so the output is
    the same.
    """
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        click.echo(text[start:end], nl=False)
        start = end
    if nl:
        click.echo("")


@main.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Merged run directory.")
@handle_errors
def merge(shards: tuple[Path, ...], out: Path) -> None:
    """Merge the run directories of sharded runs (run --shard i/n) into one.

    Shards of one stage of the staged adaptive evaluation (the same run --upto-batch K)
    merge into a partial run of that stage; an interrupted shard, or shards of different
    K, are refused.

    \b
    Example:
      rag-gate run --config rag-gate.yml --shard 1/2 --out runs/s1
      rag-gate run --config rag-gate.yml --shard 2/2 --out runs/s2
      rag-gate merge runs/s1 runs/s2 --out runs/head
    """
    from gate.shards import merge_runs

    merge_runs(list(shards), out)
    click.echo(f"wrote {shown(out)}", err=True)


main.add_command(pr)
main.add_command(history)
main.add_command(label)
main.add_command(judge_check)
main.add_command(import_)
