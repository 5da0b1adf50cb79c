"""``rag-gate label`` (answers to label by hand, and the page to label them) and ``rag-gate judge-check``.

Exit codes (DESIGN §6): 0 done (judge-check: κ at or above ``--min-kappa`` on every rule the gate uses) · 1 κ below
``--min-kappa`` (or undefined) on any of them · 2 bad input or usage · 3 the check could not run.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from gate.cli.common import CONTEXT, handle_errors
from gate.errors import InputError
from gate.sanitize import inert_json, one_line, shown


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
@click.option("--stratify", is_flag=True,
              help="Stratify by the judge's call on the gated rule and the domain (equal allocation); default: a "
                   "simple random sample. Each row records its inclusion probability either way.")  # fmt: skip
@handle_errors
def label(
    run_dir: Path, count: int, out: Path, seed: int, head_dir: Path | None, pairwise_file: Path | None, stratify: bool
) -> None:
    """Sample answers of RUN_DIR to label by hand, and write a page to label them in a browser.

    Writes OUT (JSONL rows: the question, the answer, its retrieved chunks, the judge's call and reasons, empty
    labels) and OUT with .html (a self-contained page, no network: open it from disk, label with the keyboard,
    press s to download labels.jsonl; or fill in "faithful" in OUT itself: it is a labels file too). The sample is
    seeded and a simple random sample of the answers the judge made a call on; with --stratify, answers the judge
    flagged (by the gated rule) and did not, in-domain and out-of-domain, equally, each row recording the
    probability it had of being drawn so that judge-check weights it back. An answer already in OUT is never added
    again.

    \b
    Example:
      rag-gate label runs/head --n 20 --out to-label.jsonl
      rag-gate judge-check --labels labels.jsonl --run runs/head
    """
    from gate.files import prepare_output_file, refuse_output_clashes, write_text_atomic
    from gate.jsonl import dumps
    from gate.labels.rules import rules_for
    from gate.labels.sampling import (
        Design,
        inclusion_probabilities,
        judged_answers,
        pair_rows,
        read_to_label,
        sample,
        sample_rows,
        to_label_row,
    )
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
        design: Design = "stratified" if stratify else "simple"
        if existing and any(row.get("design", "stratified") != design for row in existing):
            raise InputError(f"{out}: holds answers of another sampling design; write this sample to another file")
        rule = rules_for(manifest)[0]
        if design == "stratified" and any(row.get("stratified_by", "faithfulness") != rule.metric for row in existing):
            raise InputError(f"{out}: holds answers stratified by another rule than {rule.text}; use another file")
        picked = sample(answers, count, seed, exclude=done, design=design, rule=rule)
        new = [to_label_row(a, manifest, design=design, rule=rule) for a in picked]
        for row, pi in zip(existing + new, inclusion_probabilities(existing + new, answers, design), strict=True):
            row["inclusion_probability"] = round(pi, 12)
    rows_all = existing + new
    write_text_atomic(out, "".join(dumps(row) + "\n" for row in rows_all))
    page = write_label_page(_page_path(out), rows_all)
    strata: dict[str, int] = {}
    for row in new:
        strata[row["stratum"]] = strata.get(row["stratum"], 0) + 1
    mix = ", ".join(f"{n} {name}" for name, n in sorted(strata.items())) or "none left to add"
    click.echo(f"added {len(new)} answer(s) to {shown(out)} ({len(rows_all)} in all): {mix}", err=True)
    click.echo(f"open {shown(page)} in a browser, label with the keyboard, press s to save labels.jsonl", err=True)


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
@click.option("--min-kappa", type=click.FloatRange(-1, 1),
              help="Exit 1 when Cohen's κ on any rule the gate uses is below this (or undefined); the message "
                   "names each such rule.")  # fmt: skip
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

    Positive = unfaithful. Checks each gated judged metric by its per-answer rule (e.g. hallucinated_claim_rate > 0,
    named in the output), then faithfulness < 1 as a secondary line. Prints n, the confusion matrix, balanced
    accuracy, Cohen's κ, sensitivity and specificity, weighted by 1/π of each label's inclusion probability, with
    95 % percentile bootstrap intervals resampled within strata (2000 resamples, seeded), each disagreement with the
    judge's reasons, the share of unfaithful answers (judge only, labels only, prediction-powered), and a verdict:
    "agrees with your labels" (κ ≥ 0.6, lower bound ≥ 0.4), "disagrees: do not gate on it" (upper bound < 0.6) or
    "too few labels to tell" (under 15 labels, under 3 of a class, or in between).

    \b
    Example:
      rag-gate judge-check --labels labels.jsonl --run runs/head
      rag-gate judge-check --labels labels.jsonl --run runs/head --config other-judge.yml --min-kappa 0.6
    """
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
    checks: list[tuple[object, object, bool]] = []  # (Check, Corrected or None, gated), the gated rules first
    if pairwise and head_dir is not None and pairwise_file is not None:
        if config is not None:
            _, head_answers = sampling.judged_answers(head_dir)
            judge, calls = rejudge.rejudge_pairs(answers, head_answers, keys, config.policy)
        else:
            _, rows = sampling.pair_rows(run_dir, head_dir, pairwise_file)
            judge, calls = (rows[0]["judge"]["id"] if rows else "pairwise"), sampling.pair_calls(rows)
        checks.append((lb.check(labels, calls, judge=judge, seed=seed, warnings=warnings, rule="better"), None, True))
    else:
        from gate.labels.corrected import corrected
        from gate.labels.rules import rules_for

        rules = rules_for(manifest)
        if config is not None:
            judge, by_rule = rejudge.rejudge(answers, keys, config.policy, rules)
        else:
            judge = manifest.judge.id if manifest.judge else "?"
            by_rule = {rule.text: lb.run_calls(answers, rule) for rule in rules}
        for rule in rules:
            result = lb.check(labels, by_rule[rule.text], judge=judge, seed=seed, warnings=warnings, rule=rule.text)
            checks.append((result, None if config is not None else corrected(labels, answers, rule), rule.gated))
    primary = checks[0][0]
    assert isinstance(primary, lb.Check)
    if fmt == "json":
        from gate.jsonl import pretty_json

        click.echo(inert_json(pretty_json(check_dict(checks))), nl=False)
    else:
        click.echo(render_checks(checks))
    if primary.agreement.n == 0:  # labels of another run (or repeats): nothing was checked, which is no pass
        raise InputError(f"{labels_path}: no labelled answer is in {run_dir}: were the labels made on another run?")
    if min_kappa is not None:
        failed, checked = kappa_failures(checks, min_kappa)
        if failed:
            which = "the gate uses" if any(gated for _, _, gated in checks) else "checked (no gated metric has one)"
            click.echo(
                one_line(
                    f"rag-gate: κ below --min-kappa {min_kappa:g} (or undefined) on {len(failed)} of {checked} "
                    f"rule(s) {which}: {'; '.join(failed)}"
                ),
                err=True,
            )
            sys.exit(1)


def kappa_failures(checks: list[tuple[object, object, bool]], min_kappa: float) -> tuple[list[str], int]:
    """The rules whose Cohen's κ is below ``min_kappa`` or undefined, each as ``rule: κ value on n labelled answer(s)``.

    Every gated rule is checked (the gated ones come first in ``checks``); without a gated rule (no gated metric
    has a rule), the first rule shown. κ at the minimum (within 1e-9, float rounding) passes.

    Returns:
        The failures (rule names escaped to one line) and how many rules were checked.
    """
    from gate.labels.agreement import Check

    gated = [result for result, _, is_gated in checks if is_gated] or [checks[0][0]]
    failed = []
    for result in gated:
        assert isinstance(result, Check)
        a = result.agreement
        kappa = a.kappa.value
        if a.n == 0:
            shown = "undefined (no labelled answer has a call by this rule)"
        elif math.isnan(kappa):
            shown = "undefined (the labels or the judge's calls are all one class)"
        elif kappa < min_kappa - 1e-9:  # float rounding: κ 0.39999999999999 is 0.4
            shown = f"{kappa:.3f}"
        else:
            continue
        failed.append(f"{one_line(result.rule)}: κ {shown} on {a.n} labelled answer(s)")
    return failed, len(gated)


def check_dict(checks: list[tuple[object, object, bool]]) -> dict[str, object]:
    """``judge-check --format json``: the first (gated) rule's check at the top, every rule's under ``rules``."""
    out: dict[str, object] = {}
    rules = []
    for result, fixed, gated in checks:
        entry = result.to_dict()  # type: ignore[attr-defined]
        entry["gated"] = gated
        if fixed is not None:
            entry["share_unfaithful"] = fixed.to_dict()  # type: ignore[attr-defined]
        rules.append(entry)
    out.update(rules[0])
    out["rules"] = rules
    return out


def render_checks(checks: list[tuple[object, object, bool]]) -> str:
    """The plain-text report of ``judge-check``: each rule's check (the gated ones first), the corrected share."""
    from gate.labels.corrected import Corrected, corrected_line

    parts = []
    for i, (result, fixed, gated) in enumerate(checks):
        text = render_check(result, secondary=i > 0 and not gated, gated=gated)
        if isinstance(fixed, Corrected) and (gated or i == 0):
            text += "\n" + corrected_line(fixed)
        parts.append(text)
    return "\n\n".join(parts)


def render_check(result: object, *, secondary: bool = False, gated: bool = True) -> str:
    """The plain-text report of one rule's check (untrusted text on one line each).

    A secondary check (the answer-level faithfulness rule beside the gated one) is shown in a few lines, without
    its disagreements; ``gated`` says whether the gate decides on the rule.
    """
    from gate.labels.agreement import VERDICTS, Check

    assert isinstance(result, Check)
    a = result.agreement

    def ci(x: object) -> str:
        v = x.value, x.low, x.high  # type: ignore[attr-defined]
        if v[0] != v[0]:
            return "n/a"
        if v[1] != v[1]:
            return f"{v[0]:.3f} (no interval: every resample of these labels gives the same value)"
        return f"{v[0]:.3f} (95 % CI {v[1]:.3f} to {v[2]:.3f})"

    if secondary:
        lines = [
            f"secondary, not what the gate decides on: {one_line(result.rule)}: {VERDICTS[a.verdict]}, "
            f"{a.n} labelled answer(s), balanced accuracy {ci(a.balanced_accuracy)}, Cohen's kappa {ci(a.kappa)}"
        ]
        lines += [f"  {line}" for line in a.undefined]
        return "\n".join(lines)
    why = "" if result.rule == "better" else " — the rule the gate uses" if gated else " (no gated metric has a rule)"
    lines = [
        f"judge {one_line(result.judge)} against {a.n} labelled answer(s): {VERDICTS[a.verdict]}",
        f"rule checked: an answer is flagged (unfaithful) when {one_line(result.rule)}{why}",
    ]
    if len(a.classes) == 2:
        c = a.counts()
        (tn, fp), (fn, tp) = a.weighted or ((math.nan, math.nan), (math.nan, math.nan))
        lines += [
            "confusion matrix (positive = unfaithful; labelled answers, and [share of the run] weighted by 1/π):",
            "                     judge flags        judge passes",
            f"  label unfaithful   {c['tp']:>5} [{tp:.3f}]   {c['fn']:>6} [{fn:.3f}]",
            f"  label faithful     {c['fp']:>5} [{fp:.3f}]   {c['tn']:>6} [{tn:.3f}]",
        ]
    else:
        lines.append("confusion matrix (rows: your label, columns: the judge; which answer is better):")
        lines.append("           " + "".join(f"{name:>8}" for name in a.classes))
        for name, row in zip(a.classes, a.matrix, strict=True):
            lines.append(f"  {name:<8} " + "".join(f"{v:>8}" for v in row))
    lines += [
        f"balanced accuracy {ci(a.balanced_accuracy)}",
        f"Cohen's kappa     {ci(a.kappa)}",
    ]
    if len(a.classes) == 2:
        lines += [f"sensitivity       {ci(a.sensitivity)}", f"specificity       {ci(a.specificity)}"]
    lines += [f"  {line}" for line in a.undefined]
    lines += [f"intervals: {a.method}; weights: {a.weights}"]
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
