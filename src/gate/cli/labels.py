"""``rag-gate label`` (answers to label by hand, and the page to label them) and ``rag-gate judge-check``.

Exit codes (DESIGN §6): 0 done (judge-check: κ at or above ``--min-kappa``) · 1 κ below ``--min-kappa`` · 2 bad
input or usage · 3 the check could not run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gate.cli.common import CONTEXT, handle_errors
from gate.errors import InputError
from gate.sanitize import inert_json, one_line


def _page_path(out: Path) -> Path:
    """The HTML page beside ``out``: ``to-label.jsonl`` → ``to-label.html``."""
    return out.with_suffix(".html")


@click.command(context_settings=CONTEXT)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--n", "count", type=click.IntRange(min=1, max=10_000), default=20, show_default=True,
              help="Answers to add.")  # fmt: skip
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("to-label.jsonl"),
              show_default=True, help="The rows to label (appended to); the page goes beside it.")  # fmt: skip
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Sampling seed.")
@click.option("--head", "head_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Pairwise: the head run (RUN_DIR is the base); needs --pairwise.")  # fmt: skip
@click.option("--pairwise", "pairwise_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Pairwise: pairwise.jsonl of `rag-gate compare --out` (the judge's verdicts).")  # fmt: skip
@handle_errors
def label(run_dir: Path, count: int, out: Path, seed: int, head_dir: Path | None, pairwise_file: Path | None) -> None:
    """Sample answers of RUN_DIR to label by hand, and write a page to label them in a browser.

    Writes OUT (JSONL rows: the question, the answer, its retrieved chunks, the judge's call and reasons, empty
    labels) and OUT with .html (a self-contained page, no network: open it from disk, label with the keyboard,
    press s to download labels.jsonl). The sample is seeded and stratified (answers the judge flagged and did not,
    in-domain and out-of-domain, equally); an answer already in OUT is never added again.

    \b
    Example:
      rag-gate label runs/head --n 20 --out to-label.jsonl
      rag-gate judge-check --labels labels.jsonl --run runs/head
    """
    from gate.files import prepare_output_file, refuse_output_clashes, write_text_atomic
    from gate.jsonl import dumps
    from gate.labels.sampling import judged_answers, pair_rows, read_to_label, sample, sample_rows, to_label_row
    from gate.outputs.label_page import write_label_page

    if (head_dir is None) != (pairwise_file is None):
        raise InputError("--head and --pairwise go together (pairwise labels: RUN_DIR is the base run)")
    refuse_output_clashes(  # e.g. --out x.html: the page beside it would replace the rows
        {f"--out {out}": out, f"the page beside --out ({_page_path(out)})": _page_path(out)},
        inputs={"--pairwise": pairwise_file},
    )
    prepare_output_file(out, f"--out {out}")
    existing = read_to_label(out)
    done = [(row["id"], row["repeat"]) for row in existing]
    if pairwise_file is not None and head_dir is not None:
        if existing and any(row.get("kind") != "pair" for row in existing):
            raise InputError(f"{out}: holds single answers; write pairs to another file")
        _, rows = pair_rows(run_dir, head_dir, pairwise_file)
        new = sample_rows(rows, count, seed, exclude=done)
    else:
        if existing and any(row.get("kind") == "pair" for row in existing):
            raise InputError(f"{out}: holds pairs; write single answers to another file")
        manifest, answers = judged_answers(run_dir)
        new = [to_label_row(a, manifest) for a in sample(answers, count, seed, exclude=done)]
    rows_all = existing + new
    write_text_atomic(out, "".join(dumps(row) + "\n" for row in rows_all))
    page = write_label_page(_page_path(out), rows_all)
    strata: dict[str, int] = {}
    for row in new:
        strata[row["stratum"]] = strata.get(row["stratum"], 0) + 1
    mix = ", ".join(f"{n} {name}" for name, n in sorted(strata.items())) or "none left to add"
    click.echo(f"added {len(new)} answer(s) to {out} ({len(rows_all)} in all): {mix}", err=True)
    click.echo(f"open {page} in a browser, label with the keyboard, press s to save labels.jsonl", err=True)


@click.command("judge-check", context_settings=CONTEXT)
@click.option("--labels", "labels_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="labels.jsonl (saved by the page of `rag-gate label`).")  # fmt: skip
@click.option("--run", "run_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The run whose answers were labelled (the base run, for pairwise labels).")  # fmt: skip
@click.option("--head", "head_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Pairwise: the head run.")  # fmt: skip
@click.option("--pairwise", "pairwise_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Pairwise: pairwise.jsonl of the comparison (the judge's verdicts).")  # fmt: skip
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Judge the labelled answers again with this config's judge (or pairwise judge).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--min-kappa", type=click.FloatRange(-1, 1), help="Exit 1 when Cohen's κ is below this (or undefined).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Bootstrap seed.")
@handle_errors
def judge_check(
    labels_path: Path,
    run_dir: Path,
    head_dir: Path | None,
    pairwise_file: Path | None,
    config_path: Path | None,
    fmt: str,
    min_kappa: float | None,
    seed: int,
) -> None:
    """Check the judge against answers labelled by hand: agreement, disagreements, a plain verdict.

    Positive = unfaithful: the judge flags an answer when its faithfulness is below 1 (a claim not supported;
    the llm rubric: faithfulness 2 or 1 of 3). Prints n, the confusion matrix, balanced accuracy and Cohen's κ
    with 95 % percentile bootstrap intervals (2000 resamples, seeded), each disagreement with the judge's reasons,
    and a verdict: "agrees with your labels" (κ ≥ 0.6, lower bound ≥ 0.4), "disagrees: do not gate on it" (upper
    bound < 0.6) or "too few labels to tell" (under 15 labels, under 3 of a class, or in between).

    \b
    Example:
      rag-gate judge-check --labels labels.jsonl --run runs/head
      rag-gate judge-check --labels labels.jsonl --run runs/head --config other-judge.yml --min-kappa 0.6
    """
    import math

    from gate.labels import agreement as lb
    from gate.labels import rejudge, sampling

    if (head_dir is None) != (pairwise_file is None):
        raise InputError("--head and --pairwise go together (pairwise labels: --run is the base run)")
    labels = lb.load_labels(labels_path)
    pairwise = labels[0].pairwise
    if pairwise and head_dir is None:
        raise InputError(f"{labels_path}: pairwise labels (better): give --head and --pairwise too")
    if not pairwise and head_dir is not None:
        raise InputError(f"{labels_path}: single-answer labels (faithful): --head and --pairwise are for pairs")
    config = None
    if config_path is not None:
        from gate.config import load_config

        config = load_config(config_path)
    manifest, answers = sampling.judged_answers(run_dir)
    warnings = lb.stale(labels, None, manifest.golden_sha256)
    keys = [label.key for label in labels]
    if pairwise and head_dir is not None and pairwise_file is not None:
        if config is not None:
            _, head_answers = sampling.judged_answers(head_dir)
            judge, calls = rejudge.rejudge_pairs(answers, head_answers, keys, config.evaluation)
        else:
            _, rows = sampling.pair_rows(run_dir, head_dir, pairwise_file)
            judge, calls = (rows[0]["judge"]["id"] if rows else "pairwise"), sampling.pair_calls(rows)
    elif config is not None:
        judge, calls = rejudge.rejudge(answers, keys, config.evaluation)
    else:
        judge, calls = (manifest.judge.id if manifest.judge else "?"), lb.run_calls(answers)
    result = lb.check(labels, calls, judge=judge, seed=seed, warnings=warnings)
    if fmt == "json":
        from gate.jsonl import pretty_json

        click.echo(inert_json(pretty_json(result.to_dict())), nl=False)
    else:
        click.echo(render_check(result))
    if result.agreement.n == 0:  # labels of another run (or repeats): nothing was checked, which is no pass
        raise InputError(f"{labels_path}: no labelled answer is in {run_dir}: were the labels made on another run?")
    kappa = result.agreement.kappa.value
    if min_kappa is not None and (math.isnan(kappa) or kappa < min_kappa):
        shown = "undefined (the labels or the judge's calls are all one class)" if math.isnan(kappa) else f"{kappa:.3f}"
        click.echo(f"rag-gate: κ {shown} is below --min-kappa {min_kappa:g}", err=True)
        sys.exit(1)


def render_check(result: object) -> str:
    """The plain-text report of ``judge-check`` (untrusted text on one line each)."""
    from gate.labels.agreement import VERDICTS, Check

    assert isinstance(result, Check)
    a = result.agreement

    def ci(x: object) -> str:
        v = x.value, x.low, x.high  # type: ignore[attr-defined]
        return "n/a" if v[0] != v[0] else f"{v[0]:.3f} (95 % CI {v[1]:.3f} to {v[2]:.3f})"

    lines = [f"judge {one_line(result.judge)} against {a.n} labelled answer(s): {VERDICTS[a.verdict]}"]
    if len(a.classes) == 2:
        c = a.counts()
        lines += [
            "confusion matrix (positive = unfaithful; the judge flags when faithfulness < 1, llm rubric: grade ≤ 2):",
            "                     judge flags   judge passes",
            f"  label unfaithful   {c['tp']:>11}   {c['fn']:>12}",
            f"  label faithful     {c['fp']:>11}   {c['tn']:>12}",
        ]
    else:
        lines.append("confusion matrix (rows: your label, columns: the judge; which answer is better):")
        lines.append("           " + "".join(f"{name:>8}" for name in a.classes))
        for name, row in zip(a.classes, a.matrix, strict=True):
            lines.append(f"  {name:<8} " + "".join(f"{v:>8}" for v in row))
    lines += [
        f"balanced accuracy {ci(a.balanced_accuracy)}",
        f"Cohen's kappa     {ci(a.kappa)}",
        f"intervals: {a.method}",
    ]
    if result.disagreements:
        lines.append(f"{len(result.disagreements)} disagreement(s):")
        for d in result.disagreements:
            why = "; ".join(d.reasons) or "no reason given"
            note = f" · your note: {d.label.note}" if d.label.note else ""
            lines.append(
                one_line(f"  {d.label.id} repeat {d.label.repeat}: you {d.truth}, judge {d.call} — {why}{note}")
            )
    for line in result.skipped:
        lines.append(one_line(f"skipped {line}"))
    for line in result.warnings:
        lines.append(one_line(f"warning: {line}"))
    return "\n".join(lines)
