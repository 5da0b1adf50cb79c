"""The comment a reviewer reads: statuses only where the gate decides, columns that are the tested
statistic, labelled p-values, intervals in range, words by direction, collapsed old failures, what changed, and
plain text for a terminal. Every comparison here is made by the real code from scored sides."""

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from gate.compare import compare
from gate.comparison import Comparison, load_report
from gate.config import GatePolicy
from gate.judges import get_judge
from gate.models import Chunk, GoldenCase, Prediction
from gate.outputs import Output, render
from gate.outputs.escape import code_block
from gate.outputs.markdown import render_comment
from gate.runs import Side
from gate.scoring import score_all

METRICS = ("hit_rate@1", "recall@1", "false_refusal", "refusal", "contradiction_rate", "latency_ms")
POLICY = GatePolicy(metrics=METRICS, gated=("hit_rate@1", "false_refusal", "refusal"))
REFUSAL = "I don't have that information."
BASE_PIPELINE = {"python": "rag:answer", "options": {"top_k": 5, "refusal_threshold": 0.25}}
HEAD_PIPELINE = {"python": "rag:answer", "options": {"top_k": 1, "refusal_threshold": 0.25}}


def _side(label, golden, answers, latency, pipeline):
    table = {
        (c.id, 0): Prediction(
            id=c.id,
            answer=answers[c.id][0],
            retrieved=(Chunk(answers[c.id][1], f"{c.question} The answer is {c.reference_answers[:1]}."),),
            latency_ms=latency[c.id],
        )
        for c in golden
    }
    scores = score_all(golden, table, 1, POLICY, get_judge(POLICY.judge))
    manifest = {"golden_sha256": "f" * 64, "judge": {"id": "lexical", "version": "1"}, "pipeline": pipeline}
    return Side(label, golden, table, 1, scores, manifest)


GOLDEN = [GoldenCase(f"q{i}", f"Question {i}?", (f"d{i}",), (f"answer {i}",), line=i + 1) for i in range(40)] + [
    GoldenCase(f"ood{i}", f"Unanswerable {i}?", (), (), out_of_domain=True, line=41 + i) for i in range(6)
]
BASE_LATENCY = {c.id: 10.0 * (1 + i % 5) for i, c in enumerate(GOLDEN)}
HEAD_LATENCY = {c.id: BASE_LATENCY[c.id] * (0.7 if i % 2 else 1.2) for i, c in enumerate(GOLDEN)}


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    """Head loses the expected document on 10 cases (3 with the same answer), stops refusing 2 answerable
    questions (better) and answers 2 out-of-domain questions base refused (new) and 2 that base answered too."""
    base = {f"q{i}": (f"The answer is answer {i}.", f"d{i}") for i in range(40)}
    base |= {"q30": (REFUSAL, "d30"), "q31": (REFUSAL, "d31")}
    base |= {f"ood{i}": (REFUSAL, "x") for i in range(4)} | {f"ood{i}": (f"Made up {i}.", "x") for i in (4, 5)}
    head = dict(base)
    for i in range(10):
        head[f"q{i}"] = (base[f"q{i}"][0] if i < 3 else f"Something else {i}.", "elsewhere")
    head |= {"q30": ("The answer is answer 30.", "d30"), "q31": ("The answer is answer 31.", "d31")}
    head |= {"ood0": ("Invented 0.", "x"), "ood1": ("Invented 1.", "x")}
    return compare(
        _side("base", GOLDEN, base, BASE_LATENCY, BASE_PIPELINE),
        _side("head", GOLDEN, head, HEAD_LATENCY, HEAD_PIPELINE),
        POLICY,
    )


def _row(comparison, name):
    return next(m for m in comparison.metrics if m.name == name)


def _table_row(text, label):
    return next(line for line in text.splitlines() if line.startswith(f"| {label}"))


def test_a_metric_that_is_not_gated_shows_its_direction_never_a_gate_status(comparison):
    text = render_comment(comparison)
    recall = _table_row(text, "Recall@")
    assert recall.endswith("| ↓ worse · not gated |") and "❌" not in recall and "✅" not in recall
    latency = _table_row(text, "Latency (ms)")
    assert "not gated" in latency and "❌" not in latency and "✅" not in latency
    unchanged = _table_row(text, "Contradiction rate")
    assert unchanged.endswith("| = unchanged · not gated |")
    for row in (_table_row(text, label) for label in ("Recall@", "Latency (ms)", "Contradiction rate")):
        assert row.split("|")[6].strip() == "–"  # no Holm p: they are not in the family
    hit = _table_row(text, "Hit rate@")
    assert hit.endswith("| ❌ fail |")
    assert (
        "| metric | base | head | Δ (head − base) | CI (Holm-adjusted level) | p (Holm-adjusted) "
        "| cases worse / tie / better | status |" in text
    )


def test_latency_columns_are_the_geometric_means_the_ratio_is_made_of(comparison):
    row = _row(comparison, "latency_ms")
    base = np.array(list(BASE_LATENCY.values()))
    head = np.array(list(HEAD_LATENCY.values()))
    assert row.statistic == "geometric mean"
    assert (row.base_value, row.head_value) == pytest.approx((stats.gmean(base), stats.gmean(head)), rel=1e-12)
    assert row.ratio == pytest.approx(row.head_value / row.base_value, rel=1e-12)
    assert row.base_value != pytest.approx(base.mean())  # the arithmetic mean would not match Δ
    assert row.moved == "fell" and row.change == "better"
    cells = [c.strip() for c in _table_row(render_comment(comparison), "Latency (ms)").split("|")]
    assert cells[1] == "Latency (ms), geometric mean"
    assert cells[2:5] == [f"{stats.gmean(base):.3f}", f"{stats.gmean(head):.3f}", f"×{row.ratio:.3f}"]


def test_differences_are_head_minus_base_and_words_follow_the_direction(comparison):
    false_refusal = _row(comparison, "false_refusal")  # lower is better: 2 of 40 refused on base, 0 on head
    assert false_refusal.difference == pytest.approx(-2 / 40) and false_refusal.delta == pytest.approx(2 / 40)
    assert false_refusal.moved == "fell" and false_refusal.change == "better"
    assert false_refusal.difference_ci_low <= false_refusal.difference <= false_refusal.difference_ci_high
    hit = _row(comparison, "hit_rate@1")
    assert (hit.moved, hit.change, hit.difference) == ("fell", "worse", pytest.approx(-10 / 40))
    assert comparison.reasons[0].startswith("hit_rate@1: fell beyond the margin of 0.030, significantly (worse)")
    text = render_comment(comparison)
    assert "drop" not in _table_row(text, "False refusal")
    # per case: a refusal flip says what happened and whether that is better or worse for the metric
    improved = next(c for c in comparison.improved_cases if c.id == "q30")
    assert "False refusal: refused → answered, better (single observation)" in text
    assert improved.metrics[0].name == "false_refusal"
    assert "Hit rate@1: 1.000 → 0.000, worse (single observation)" in text


def test_one_number_format_in_reasons_and_table(comparison):
    hit = _row(comparison, "hit_rate@1")
    text = render_comment(comparison)
    row = _table_row(text, "Hit rate@")
    delta, interval, p = (c.strip() for c in row.split("|")[4:7])
    reason = comparison.reasons[0]
    assert f"Δ = {delta}" in reason and f"CI {interval}" in reason
    raw = stats.binomtest(0, 10, 0.5, alternative="less").pvalue  # exact McNemar: 10 lost, none gained
    family = [m.p_value for m in comparison.gated]  # all three gated metrics moved: all in the Holm family
    assert hit.p_adjusted == pytest.approx(multipletests(family, method="holm")[1][0], rel=1e-12)
    assert hit.p_adjusted == pytest.approx(3 * raw) and p == f"{3 * raw:.3f}" == "0.003"
    assert f"p (Holm-adjusted) = {p} ≤ 0.05" in reason
    assert not re.search(r"\de-\d", text)  # no scientific notation anywhere


def test_identical_answers_are_marked_and_shown_once(comparison):
    same = [c for c in comparison.regressed_cases if c.identical_answer]
    assert {c.id for c in same} == {"q0", "q1", "q2"}
    text = render_comment(comparison)
    entry = text[text.index("**q0**") :].split("\n- **", 1)[0]
    assert "**identical answer** on both sides" in entry and "answer (both sides): “The answer is answer 0.”" in entry


def test_out_of_domain_failures_list_the_new_and_collapse_the_old(comparison):
    text = render_comment(comparison)
    assert "### Out-of-domain failures: 2 new, 2 not new" in text
    head, collapsed = text.split("<details><summary>Not new: 2 answered on base too", 1)
    assert "**new** **ood0**" in head and "**new** **ood1**" in head and "ood4" not in head
    assert "**ood4**" in collapsed.split("</details>")[0] and "**ood5**" in collapsed.split("</details>")[0]


def test_what_changed_is_in_the_run_details_with_the_pipeline_diff(comparison):
    assert comparison.changes is not None and comparison.changes.pipeline_known
    assert "-    top_k: 5" in comparison.changes.pipeline_diff and "+    top_k: 1" in comparison.changes.pipeline_diff
    text = render_comment(comparison)
    details = text[text.index("<details><summary>Run details") :]
    assert details.index("#### What changed") < details.index("```diff") < details.index("-    top_k: 5")
    assert "Files changed: not known here" in details
    # the minimum detectable effect is advice for the gate's owner: only in the run details
    top = text[: text.index("<details><summary>Run details")]
    assert "Minimum detectable" not in top and "Minimum detectable worsening" in details


def test_an_unchanged_pipeline_and_changed_files_read_as_such(comparison):
    from gate.comparison import ChangedFile, Changes

    files = (ChangedFile("rag.py", 12, 4), ChangedFile("index.bin", None, None), ChangedFile("`x` @user.py", 1, 0))
    changed = dataclasses.replace(comparison, changes=Changes((), True, files, "abc1234..def5678"))
    text = render_comment(changed)
    assert "The config's `pipeline:` section is the same on both sides." in text
    assert "Files changed (abc1234..def5678): 3 file(s), +13 -4" in text
    assert "- rag.py (+12 -4)" in text and "- index.bin (binary)" in text
    assert "- \\`x\\` @\u2060user.py (+1 -0)" in text  # an untrusted file name is escaped like any other text


def test_code_block_cannot_be_closed_by_its_content():
    hostile = ["+  command: echo ```", "+  x: ````` and \u202eevil", "</details> <!--"]
    block = code_block(hostile, "diff")
    fence = block.splitlines()[0][:-4]
    assert block.startswith("``````diff\n") and fence == "``````"  # longer than the 5-backtick run inside
    assert block.rstrip("\n").endswith("\n``````") and "\u202e" not in block
    assert code_block([f"line {i}" for i in range(100)], limit=3).splitlines()[-2] == "… 97 more line(s)"


def test_intervals_stay_in_the_metric_range_and_say_when_they_were_cut():
    golden = [GoldenCase(f"q{i}", f"Q{i}?", (f"d{i}",), (f"a{i}",), line=i + 1) for i in range(3)]
    policy = GatePolicy(metrics=("recall@1",), gated=("recall@1",))

    def side(label, docs):
        table = {(c.id, 0): Prediction(id=c.id, answer="x", retrieved=(Chunk(docs[i]),)) for i, c in enumerate(golden)}
        return Side(label, golden, table, 1, score_all(golden, table, 1, policy, get_judge(policy.judge)), {})

    comparison = compare(side("base", ["d0", "z", "d2"]), side("head", ["z", "d1", "z"]), policy)
    row = comparison.metrics[0]
    assert row.ci_clipped and -1 <= row.difference_ci_low <= row.difference_ci_high <= 1
    text = render_comment(comparison)
    assert "[-1.000, +1.000] †" in _table_row(text, "Recall@") and "† interval cut to [-1, +1]" in text


def test_terminal_text_is_plain(comparison):
    text = render(comparison, Output.TEXT)
    assert "\\" not in text and "<details>" not in text and "**" not in text and "\u2060" not in text
    assert text.startswith("rag-gate: FAIL\n")
    assert re.search(r"^Hit rate@1 +1\.000 +0\.750 +-0\.250 +\[-", text, re.M)  # the same figures, aligned
    assert "Recall@1" in text and "↓ worse · not gated" in text
    assert "+    top_k: 1" in text


def test_report_of_schema_2_reads_back_with_the_display_fields(comparison, tmp_path):
    data = comparison.to_dict()
    data["schema_version"] = 2
    del data["changes"]
    for row in data["metrics"]:
        for key in ("ci_clipped", "statistic", "base_value", "head_value", "difference", "difference_ci_low",
                    "difference_ci_high", "moved", "change", "beyond_noise", "timed"):  # fmt: skip
            del row[key]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = load_report(tmp_path / "old.json")
    hit, latency = old.metrics[0], next(m for m in old.metrics if m.name == "latency_ms")
    assert (hit.moved, hit.change, hit.difference) == ("fell", "worse", pytest.approx(-0.25))
    assert latency.statistic == "mean" and latency.timed and old.changes is None
    assert math.isnan(latency.difference)


def test_mermaid_chart_shows_base_head_and_heads_interval_of_the_gated_metrics(comparison):
    text = render_comment(comparison)
    chart = text[text.index("```mermaid") : text.index("```\n", text.index("```mermaid") + 3)]
    series = {kind: [] for kind in ("bar", "line")}
    for line in chart.splitlines():
        kind, _, values = line.strip().partition(" ")
        if kind in series:
            series[kind].append([float(x) for x in values.strip("[]").split(",")])
    drawn = [m for m in comparison.gated if m.kind != "ratio"]
    assert [m.name for m in drawn] == ["hit_rate@1", "false_refusal", "refusal"]
    expected_bars = [v for m in drawn for v in (m.base_value, m.head_value)]
    assert series["bar"] == [pytest.approx(expected_bars, abs=5e-4)]
    low, high = series["line"]
    for i, m in enumerate(drawn):  # the lines start at base and open to base + the interval of Δ (within [0, 1])
        assert low[2 * i] == high[2 * i] == pytest.approx(m.base_value, abs=5e-4)
        assert low[2 * i + 1] == pytest.approx(max(0.0, m.base_value + m.difference_ci_low), abs=5e-4)
        assert high[2 * i + 1] == pytest.approx(min(1.0, m.base_value + m.difference_ci_high), abs=5e-4)
        assert low[2 * i + 1] <= m.head_value <= high[2 * i + 1]


def test_a_metric_without_an_interval_is_drawn_at_heads_value_never_nan(comparison):
    from dataclasses import replace

    from gate.outputs.charts import mermaid_metrics

    first = comparison.gated[0]  # hit_rate@1, the first metric drawn
    metrics = tuple(
        replace(m, difference_ci_low=math.nan, difference_ci_high=math.nan) if m.name == first.name else m
        for m in comparison.metrics
    )
    chart = mermaid_metrics(replace(comparison, metrics=metrics))
    assert "nan" not in chart
    lows, highs = ([float(x) for x in line.split("[")[1].rstrip("]").split(",")] for line in chart.splitlines()
                   if line.strip().startswith("line "))  # fmt: skip
    assert lows[1] == highs[1] == pytest.approx(first.head_value, abs=5e-4)


def test_the_artifact_gets_a_png_of_every_drawable_metric(comparison, tmp_path):
    pytest.importorskip("matplotlib")
    from gate.outputs import write_chart
    from gate.outputs.charts import plot_metrics

    path = write_chart(comparison, tmp_path)
    assert path == tmp_path / "metrics.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(path).shape
    assert width == 7 * 120 and height > 200  # 7 inches at 120 dpi, a row per metric
    drawn = plot_metrics(comparison, tmp_path / "again.png")
    assert [b.label for b in drawn] == [m.label for m in comparison.metrics if m.kind != "ratio"]
    hit = next(b for b in drawn if b.label == "Hit rate@1")
    assert (hit.base, hit.head, hit.worse, hit.gated) == (1.0, 0.75, True, True)


def test_the_detectable_worsening_line_says_why_it_is_empty():
    """Identical, deterministic sides: the metrics vary from case to case, their per-case differences do not
    (all 0), so every MDE is undefined; the line says that in words instead of ending in a bare colon."""
    answers = {c.id: (f"The answer is answer {i}.", f"d{i}" if i % 3 else "elsewhere") for i, c in enumerate(GOLDEN)}
    side = _side("base", GOLDEN, answers, BASE_LATENCY, BASE_PIPELINE)
    same = compare(side, dataclasses.replace(side, label="head"), POLICY)
    assert all(math.isnan(m.mde) for m in same.metrics if m.gated)
    comment = render_comment(same)
    assert _row(same, "hit_rate@1").aggregates.base.sd == pytest.approx(np.std([i % 3 > 0 for i in range(40)], ddof=1))
    assert (
        "repeat(s)): none to show: the per-case differences (head − base) of every gated metric did not vary from "
        "case to case, so the noise (and the smallest change the test can detect) is unknown." in comment
    )
    assert "repeat(s)): ." not in comment
