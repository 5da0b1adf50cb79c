"""History and the trend alarm: the reference values of the method, through the CLI.

Oracles: the method's worked example (weekly faithfulness, per-answer aggregation), hand computations written out
below, ``statistics`` from the standard library and the normal tail via ``math.erfc``.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from gate.cli import main
from gate.config import TrendPolicy
from gate.history.entries import HistoryEntry, append_entry, read_history
from gate.history.trend import relative_drop, trend_report
from gate.stats.summary import Aggregate, aggregate, run_se

WEEKS = [0.88, 0.86, 0.89, 0.87, 0.85, 0.84, 0.82, 0.76]
N_CASES = 100


def make_run(path, per_case, *, golden="g" * 64, config="c" * 64, sha=None, finished=None, gated=None):
    """A complete run directory (manifest.json + scores.jsonl) with given per-case values.

    ``per_case``: metric → list over cases of a list over repeats (None = failed score).
    """
    path.mkdir(parents=True)
    metrics = list(per_case)
    repeats = len(next(iter(per_case.values()))[0])
    manifest = {
        "schema_version": 1,
        "golden_sha256": golden,
        "config_sha256": config,
        "repeats": repeats,
        "shard": None,
        "gate_version": "0.1.0",
        "git_sha": sha,
        "git_ref": "main" if sha else None,
        "n_cases": len(next(iter(per_case.values()))),
        "judge": {"id": "lexical-v1", "version": "1"},
        "evaluation": {"metrics": metrics, "gated": gated or metrics},
        "status": "complete",
        "golden": "golden.jsonl",
        "counts": {"predictions": 0, "prediction_errors": 0, "scores": 0},
        "started": finished or "2025-01-01T00:00:00+00:00",
        "finished": finished or "2025-01-01T00:00:00+00:00",
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    rows = []
    for metric, cases in per_case.items():
        for i, repeats_values in enumerate(cases):
            for r, value in enumerate(repeats_values):
                row = {"id": f"q{i}", "repeat": r, "metric": metric, "value": value}
                if value is None:
                    row["error"] = "judge: timeout"
                rows.append(row)
    (path / "scores.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def binary_run(path, mean, **kwargs):
    """A run whose N_CASES binary faithfulness scores have exactly ``mean`` (a multiple of 0.01)."""
    ones = round(mean * N_CASES)
    return make_run(path, {"faithfulness": [[1.0] if i < ones else [0.0] for i in range(N_CASES)]}, **kwargs)


def cli(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def add_runs(tmp_path, means, history, **kwargs):
    for week, mean in enumerate(means, start=1):
        run = binary_run(
            tmp_path / f"run{week}", mean, sha=f"{week:040x}", finished=f"2025-01-{week:02d}T00:00:00+00:00", **kwargs
        )
        result = cli("history", "add", run, "--history", history)
        assert result.exit_code == 0, result.output


def check(history, *options):
    result = cli("history", "check", "--history", history, "--format", "json", *options)
    return result, (json.loads(result.stdout) if result.stdout.strip().startswith("{") else None)


# ------------------------------------------------------------------------------------ reference values


def test_per_answer_aggregation_reference_values_through_history_add(tmp_path):
    scores = [1.0, 1.0, 0.75, 1.0, 0.0, 0.5, 1.0, 1.0]
    run = make_run(tmp_path / "run", {"faithfulness": [[s] for s in scores]}, sha="a" * 40)
    result = cli("history", "add", run, "--history", tmp_path / "h.jsonl")
    assert result.exit_code == 0, result.output
    entry = json.loads((tmp_path / "h.jsonl").read_text())["metrics"]["faithfulness"]
    assert round(entry["mean"], 3) == 0.781
    assert round(entry["sd"], 3) == 0.364 and entry["sd"] == pytest.approx(statistics.stdev(scores))
    assert round(entry["p10"], 3) == 0.350  # numpy linear: sorted[0] + 0.7 · (sorted[1] − sorted[0]) = 0.35
    assert entry["share_below_0_5"] == 0.125 and entry["n"] == 8 and entry["run_se"] is None


def test_weekly_reference_weeks_5_to_7_ok_week_8_critical(tmp_path):
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, WEEKS, history)
    lines = history.read_text().splitlines()
    expected = {  # week: (status, baseline, drop) — hand-computed from the worked example
        5: ("ok", (0.88 + 0.86 + 0.89 + 0.87) / 4, None),
        6: ("ok", (0.86 + 0.89 + 0.87 + 0.85) / 4, None),
        7: ("ok", 0.8625, 0.049),
        8: ("critical", 0.845, 0.1006),
    }
    for week, (status, baseline, drop) in expected.items():
        prefix = tmp_path / f"h{week}.jsonl"
        prefix.write_text("\n".join(lines[:week]) + "\n")
        result, report = check(prefix, "--window", 4, "--warning", 0.05, "--critical", 0.10)
        assert result.exit_code == (1 if status == "critical" else 0), result.output
        metric = report["metrics"][0]
        assert metric["status"] == status and metric["baseline"] == pytest.approx(baseline)
        if drop is not None:
            assert round(metric["drop"], 4 if week == 8 else 3) == drop
    for week in (2, 4):  # fewer than 4 previous entries: no baseline yet, never an alarm
        prefix = tmp_path / f"h{week}.jsonl"
        prefix.write_text("\n".join(lines[:week]) + "\n")
        result, report = check(prefix)
        assert result.exit_code == 0 and report["metrics"][0]["status"] == "insufficient"
        assert f"{week - 1} comparable main entr" in report["metrics"][0]["note"]


def test_week_8_text_output_and_a_critical_threshold_of_0_11_stays_silent(tmp_path):
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, WEEKS, history)
    result = cli("history", "check", "--history", history)
    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if line.startswith("faithfulness"))
    assert row.split()[:4] == ["faithfulness", "0.760", "0.845", "+10.1"] and "CRITICAL" in row
    assert "overall (gated metrics): CRITICAL" in result.stdout

    quiet, report = check(history, "--critical", 0.11)
    assert quiet.exit_code == 0 and report["metrics"][0]["status"] == "warning"
    assert check(history, "--fail-on", "warning", "--critical", 0.11)[0].exit_code == 1
    assert check(history, "--fail-on", "never")[0].exit_code == 0


def test_natural_variability_of_week_8(tmp_path):
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, WEEKS, history)
    _, report = check(history)
    metric = report["metrics"][0]
    window = [0.87, 0.85, 0.84, 0.82]
    sd = statistics.stdev(window)
    assert metric["window"] == pytest.approx(window) and metric["window_sd"] == pytest.approx(sd)
    # No repeats: the run's noise is taken to be the window's; SD of (value − mean of 4) = sd·√(1 + 1/4).
    assert metric["noise_sd"] == pytest.approx(sd * math.sqrt(1.25))
    assert metric["beyond_noise"] is True  # 0.085 > 2 × 0.0233


# ------------------------------------------------------------------------------------------ slow drift


STABLE = [0.90, 0.91, 0.89, 0.90, 0.91, 0.90, 0.89, 0.90]
DRIFT = [round(0.90 - 0.03 * k, 2) for k in range(1, 13)]  # 3 points per run from run 9: each PR within 0.05
# Hand computation (window 4): run 9: b = 0.900, drop 3.3 % ok · run 10: b = 0.890, v = 0.84, 5.6 % WARNING ·
# 11: b = 0.875, 7.4 % · 12: b = 0.855, 8.8 % · 13: b = 0.825, 9.1 % · 14: b = 0.795, 9.4 % · 15: b = 0.765,
# 9.8 % WARNING · run 16: b = 0.735, v = 0.66, 0.075 / 0.735 = 10.2 % CRITICAL, and critical from then on.
EXPECTED = ["ok"] * 5 + ["warning"] * 6 + ["critical"] * 5  # runs 5..20


def test_planted_slow_drift_warns_then_goes_critical_at_the_predicted_runs(tmp_path):
    from gate.metrics import resolve

    means = STABLE + DRIFT
    assert len(means) == 20
    margin = resolve("faithfulness").spec.default_margin
    assert all(a - b < margin for a, b in zip(means, means[1:], strict=False))  # every PR passes its margin
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, means, history)
    lines = history.read_text().splitlines()
    statuses, codes = [], []
    for run in range(5, 21):
        prefix = tmp_path / f"p{run}.jsonl"
        prefix.write_text("\n".join(lines[:run]) + "\n")
        result, report = check(prefix, "--fail-on", "warning")
        statuses.append(report["metrics"][0]["status"])
        codes.append(result.exit_code)
    assert statuses == EXPECTED
    assert codes == [0] * 5 + [1] * 11
    assert statuses.index("warning") + 5 == 10 and statuses.index("critical") + 5 == 16


def test_a_steady_drift_shows_as_its_rate_times_window_plus_one_over_two():
    """Against the mean of the previous W runs, a drift of d per run shows as d·(W+1)/2: the alarm sees the rate.

    With 1 point per run around 0.85, window 4 sees 2.5 points (≈ 3 %): never a WARNING; window 8 sees 4.5 points
    (5.3 % at a baseline of 0.85): WARNING. (README: choosing the window.)
    """
    means = [round(0.95 - 0.01 * k, 2) for k in range(12)]
    entries = [HistoryEntry(record(m, i)) for i, m in enumerate(means)]
    four = trend_report(entries, trend=TrendPolicy(window=4)).metrics[0]
    assert four.baseline - four.value == pytest.approx(0.025) and four.status == "ok"
    eight = trend_report(entries, trend=TrendPolicy(window=8)).metrics[0]
    assert eight.baseline - eight.value == pytest.approx(0.045)
    assert eight.drop == pytest.approx(0.045 / (0.84 + 0.045)) and eight.status == "warning"


def record(mean, i=0, *, golden="g", config="c", metric="faithfulness", se=None, sha=None):
    return {
        "schema_version": 1,
        "timestamp": f"t{i}",
        "sha": sha or f"{i:040x}",
        "ref": "main",
        "golden_sha256": golden,
        "config_sha256": config,
        "n_cases": 10,
        "repeats": 1,
        "metrics": {metric: {"mean": mean, "sd": 0.1, "p10": 0.0, "share_below_0_5": 0.0, "n": 10, "run_se": se}},
    }


# -------------------------------------------------------------------------- comparability, direction


def test_entries_of_another_golden_set_or_config_are_skipped_and_counted(tmp_path):
    history = tmp_path / "h.jsonl"
    rows = [record(m, i) for i, m in enumerate(WEEKS[:7])]
    rows.insert(5, record(0.10, 90, config="other"))  # an outlier under another config…
    rows.insert(4, record(0.20, 91, golden="other"))  # …and under another golden set, both within the window
    rows.append(record(WEEKS[7], 7))
    history.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, report = check(history)
    metric = report["metrics"][0]
    assert metric["baseline"] == pytest.approx(0.845) and metric["status"] == "critical"
    assert report["skipped"] == {"different config": 1, "different golden set": 1}
    text = cli("history", "check", "--history", history).stdout
    assert "skipped: 1 different config; 1 different golden set" in text


def test_lower_is_better_metrics_drop_when_they_rise():
    assert relative_drop(0.12, 0.10, "lower") == pytest.approx(0.20)
    assert relative_drop(0.08, 0.10, "lower") == pytest.approx(-0.20)
    assert relative_drop(0.08, 0.10, "higher") == pytest.approx(0.20)
    entries = [HistoryEntry(record(m, i, metric="contradiction_rate")) for i, m in enumerate([0.1] * 4 + [0.106])]
    trend = trend_report(entries, trend=TrendPolicy()).metrics[0]
    assert trend.direction == "lower" and trend.drop == pytest.approx(0.06) and trend.status == "warning"
    better = [HistoryEntry(record(m, i, metric="contradiction_rate")) for i, m in enumerate([0.1] * 4 + [0.05])]
    assert trend_report(better, trend=TrendPolicy()).metrics[0].status == "ok"


def test_check_of_a_run_directory_excludes_entries_of_the_same_commit(tmp_path):
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, WEEKS[:7], history)
    head = binary_run(tmp_path / "head", 0.76, sha=f"{7:040x}")  # same commit as week 7: not its own baseline
    result, report = check(history, "--run", head)
    assert result.exit_code == 1, result.output
    assert report["metrics"][0]["baseline"] == pytest.approx((0.89 + 0.87 + 0.85 + 0.84) / 4)
    assert report["skipped"] == {"same commit as the run": 1}
    other = binary_run(tmp_path / "other", 0.76, sha="f" * 40)
    result, report = check(history, "--run", other)
    assert result.exit_code == 1 and report["metrics"][0]["baseline"] == pytest.approx(0.845)


def test_only_gated_metrics_decide_the_exit_code(tmp_path):
    history = tmp_path / "h.jsonl"
    rows = [record(m, i) for i, m in enumerate(WEEKS)]
    for row in rows:
        row["metrics"]["answer_f1"] = dict(row["metrics"]["faithfulness"], mean=0.5)
        row["gated"] = ["answer_f1"]
    history.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result, report = check(history)
    assert result.exit_code == 0 and report["status"] == "ok"
    assert [m["gated"] for m in report["metrics"]] == [False, True]
    assert report["metrics"][0]["status"] == "critical"  # reported, not gated


# ----------------------------------------------------------------------------------- malformed history


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"schema_version": 1, "timestamp": "t"', "h.jsonl:6: invalid JSON"),
        (json.dumps(record(0.9))[:120], "h.jsonl:6: invalid JSON"),  # a line cut short by a killed writer
        ("[1, 2]", "h.jsonl:6: expected a JSON object, got list"),
        (json.dumps({k: v for k, v in record(0.9).items() if k != "metrics"}), "h.jsonl:6: metrics: required field"),
        (json.dumps(record(0.9) | {"schema_version": 2}), "h.jsonl:6: schema_version: entry format 2 is newer"),
        (json.dumps(record(0.9) | {"repeats": "3"}), "h.jsonl:6: repeats: must be an integer, got str"),
        (json.dumps(record(0.9)).replace('"mean": 0.9', '"mean": 1e999'),
         "h.jsonl:6: metrics.faithfulness.mean: 1e999 is not a finite number (it overflows a 64-bit float"),
        (json.dumps(record(0.9)).replace('"sd": 0.1', '"sd": -1e999'),
         "h.jsonl:6: metrics.faithfulness.sd: -1e999 is not a finite number (it overflows a 64-bit float"),
        (json.dumps(record(7.0)), "h.jsonl:6: metrics.faithfulness.mean: 7 is outside the metric's range [0, 1]"),
        (json.dumps(record(-5.0, metric="latency_ms")),
         "h.jsonl:6: metrics.latency_ms.mean: -5 is outside the metric's range ≥ 0"),
        (json.dumps(record(0.9, se=1e300)),
         "h.jsonl:6: metrics.faithfulness.run_se: 1e+300 is outside the metric's range [0, 1]"),
    ],
)  # fmt: skip
def test_check_skips_a_damaged_line_with_a_warning_naming_file_and_line(tmp_path, line, message):
    """A cut, invalid or out-of-range line is reported (file:line) and skipped; the rest is still checked."""
    history = tmp_path / "h.jsonl"
    entries = [record(0.9, i) for i in range(4)] + [record(0.8, 4)]  # an 11 % drop: CRITICAL
    history.write_text("".join(json.dumps(e) + "\n" for e in entries) + line + "\n")
    result, report = check(history)
    assert result.exit_code == 1, result.output  # the last valid entry was checked: CRITICAL blocks
    assert report["metrics"][0]["status"] == "critical" and report["metrics"][0]["value"] == 0.8
    assert result.stderr.startswith(f"rag-gate: warning: skipped {tmp_path / message}"), result.stderr
    assert len(report["problems"]) == 1 and report["problems"][0].startswith(str(tmp_path / message))
    assert "Traceback" not in result.output and "error" not in result.stderr


def test_check_after_a_cut_last_line_and_a_new_entry_reads_the_new_entry(tmp_path):
    """What a killed ``history add`` leaves (a line cut short), then the next add: check reads past it."""
    history = tmp_path / "h.jsonl"
    history.write_text("".join(json.dumps(record(0.9, i)) + "\n" for i in range(4)) + json.dumps(record(0.9, 4))[:60])
    append_entry(history, record(0.8, 5))
    lines = history.read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[5])["sha"] == f"{5:040x}"  # the new entry stands on its own line
    result, report = check(history, "--fail-on", "never")
    assert result.exit_code == 0 and report["run"] == f"{5:040x}"[:7]
    assert report["metrics"][0]["status"] == "critical" and report["metrics"][0]["drop"] == pytest.approx(1 / 9)
    assert f"rag-gate: warning: skipped {history}:5: invalid JSON" in result.stderr


@pytest.mark.parametrize("scale", [1.0, 1e300, 1.7e308])
def test_huge_finite_values_still_show_a_50_percent_rise_as_critical(tmp_path, scale):
    """A baseline of four huge latencies must not overflow to inf (which made a 50 % rise read "ok")."""
    history = tmp_path / "h.jsonl"
    entries = [record(scale / 1.5, i, metric="latency_ms", se=scale / 1e3) for i in range(4)]
    entries.append(record(scale, 4, metric="latency_ms", se=scale / 1e3))
    history.write_text("".join(json.dumps(e) + "\n" for e in entries))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way either
        result, report = check(history, "--fail-on", "never")
    assert result.exit_code == 0, result.output
    trend = report["metrics"][0]
    assert trend["status"] == "critical" and trend["drop"] == pytest.approx(0.5)
    assert trend["baseline"] == pytest.approx(scale / 1.5) and trend["beyond_noise"] is True
    assert trend["window_sd"] == 0.0


def test_a_truncated_line_is_skipped_when_reading_and_appending_after_it_keeps_the_entry(tmp_path):
    history = tmp_path / "h.jsonl"
    history.write_text(json.dumps(record(0.9, 0)) + "\n" + json.dumps(record(0.9, 1))[:40])  # killed writer
    append_entry(history, record(0.8, 2))
    read = read_history(history)
    assert [e.value("faithfulness") for e in read.entries] == [0.9, 0.8]
    assert len(read.problems) == 1 and read.problems[0].startswith(f"{history}:2: invalid JSON")
    result = cli("history", "show", "--history", history, "--out", tmp_path / "show")
    assert result.exit_code == 0 and f"rag-gate: skipped {history}:2: invalid JSON" in result.stderr


def test_missing_history_and_bad_options_are_usage_errors(tmp_path):
    result = cli("history", "check", "--history", tmp_path / "none.jsonl")
    assert result.exit_code == 2 and "none.jsonl: file not found" in result.stderr
    (tmp_path / "h.jsonl").write_text(json.dumps(record(0.9)) + "\n")
    result = cli("history", "check", "--history", tmp_path / "h.jsonl", "--warning", 0.2, "--critical", 0.1)
    assert result.exit_code == 2 and "--critical 0.1 is below --warning 0.2" in result.stderr
    assert cli("history", "check", "--history", tmp_path / "h.jsonl", "--window", 0).exit_code == 2


def test_add_refuses_an_incomplete_run(tmp_path):
    run = binary_run(tmp_path / "run", 0.5)
    manifest = json.loads((run / "manifest.json").read_text()) | {"status": "running"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = cli("history", "add", run, "--history", tmp_path / "h.jsonl")
    assert result.exit_code == 2 and "the run is not complete" in result.stderr
    assert not (tmp_path / "h.jsonl").exists()


# ------------------------------------------------------------------------------------------- history add


def test_add_reads_git_for_defaults_and_flags_override(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "trunk"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(repo)
    run = binary_run(tmp_path / "run", 0.5)  # no git_sha in its manifest
    history = tmp_path / "h.jsonl"
    assert cli("history", "add", run, "--history", history).exit_code == 0
    flags = ("--sha", "abc", "--ref", "r", "--timestamp", "T")
    assert cli("history", "add", run, "--history", history, *flags).exit_code == 0
    first, second = (json.loads(line) for line in history.read_text().splitlines())
    assert (first["sha"], first["ref"], first["timestamp"]) == (head, "trunk", "2025-01-01T00:00:00+00:00")
    assert (second["sha"], second["ref"], second["timestamp"]) == ("abc", "r", "T")


def test_failed_scores_and_not_applicable_cases_are_left_out_and_repeats_give_a_run_se(tmp_path):
    run = make_run(tmp_path / "run", {"faithfulness": [[1.0, 0.0], [1.0, 1.0], [0.5, 1.0], [None, None]]})
    cli("history", "add", run, "--history", tmp_path / "h.jsonl")
    entry = json.loads((tmp_path / "h.jsonl").read_text())["metrics"]["faithfulness"]
    assert entry["n"] == 3 and entry["mean"] == pytest.approx((0.5 + 1.0 + 0.75) / 3)
    # Hand: within-case variances (ddof 1) 0.5, 0, 0.125; SE² = Σ sᵢ²/R / n² = (0.25 + 0 + 0.0625) / 9.
    assert entry["run_se"] == pytest.approx(math.sqrt(0.3125 / 9))


def test_aggregate_and_run_se_edge_cases():
    assert aggregate(np.full((3, 2), np.nan)) == Aggregate(0, None, None, None, None)
    assert aggregate(np.array([[0.4]])) == Aggregate(n=1, mean=0.4, sd=0.0, p10=0.4, share_below_0_5=1.0)
    assert run_se(np.array([[1.0], [0.0]])) is None
    assert run_se(np.array([[1.0, 1.0], [0.0, 0.0]])) == 0.0  # deterministic metric: no run-to-run noise


# ------------------------------------------------------------------------------------------ history show


def test_show_writes_a_png_per_gated_metric_and_a_markdown_table(tmp_path):
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, WEEKS, history)
    result = cli("history", "show", "--history", history, "--out", tmp_path / "show")
    assert result.exit_code == 0, result.output
    png = (tmp_path / "show" / "faithfulness.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (960, 432)  # 8 × 3.6 inches at 120 dpi, drawn by matplotlib
    page = (tmp_path / "show" / "history.md").read_text()
    assert "![Faithfulness over time](faithfulness.png)" in page
    rows = [line for line in page.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 8
    assert rows[6].split(" | ")[3:6] == ["0.820", "0.862", "+4.9 %"] and "ok" in rows[6]
    assert rows[7].split(" | ")[3:6] == ["0.760", "0.845", "+10.1 %"] and "CRITICAL" in rows[7]


def test_show_without_matplotlib_writes_the_tables_and_says_how_to_get_charts(tmp_path, monkeypatch):
    """README's `plot` extra is for the charts: without it `show` still writes history.md (exit 0) and says so in
    one line; asking for the charts (--charts) is then a usage error naming the extra."""
    history = tmp_path / "h.jsonl"
    add_runs(tmp_path, WEEKS, history)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on an install without the plot extra
    result = cli("history", "show", "--history", history, "--out", tmp_path / "show")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "rag-gate: no charts: charts need matplotlib, which is not installed (pip install 'rag-gate[plot]'); "
        "history.md has the tables only"
    )
    assert sorted(p.name for p in (tmp_path / "show").iterdir()) == ["history.md"]
    page = (tmp_path / "show" / "history.md").read_text()
    assert "](faithfulness.png)" not in page
    rows = [line for line in page.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 8 and "CRITICAL" in rows[7]
    required = cli("history", "show", "--history", history, "--out", tmp_path / "required", "--charts")
    assert required.exit_code == 2 and not (tmp_path / "required").exists()
    assert (
        required.stderr.strip()
        .splitlines()[-1]
        .endswith("--charts: charts need matplotlib, which is not installed (pip install 'rag-gate[plot]')")
    )
    none = cli("history", "show", "--history", history, "--out", tmp_path / "none", "--no-charts")
    assert none.exit_code == 0 and "no charts" not in none.stderr


# ------------------------------------------------------------------------------------------- calibration


def test_calibrate_across_runs_suggests_thresholds_above_the_noise(tmp_path):
    runs = [binary_run(tmp_path / f"aa{i}", m) for i, m in enumerate([0.80, 0.82, 0.78])]
    result = cli("history", "calibrate", *runs, "--format", "json")
    assert result.exit_code == 0, result.output
    (cal,) = json.loads(result.stdout)
    relative = 0.02 * math.sqrt(1 + 1 / 4) / 0.80  # SD 0.02 of the three means, against a window of 4
    assert cal["method"] == "across runs" and cal["run_sd"] == pytest.approx(0.02)
    assert cal["relative_noise"] == pytest.approx(relative)
    assert cal["suggested_warning"] == 0.06 and cal["suggested_critical"] == 0.085  # 2σ = 5.59 %, 3σ = 8.39 %
    assert cal["false_alarm_warning"] == pytest.approx(0.5 * math.erfc(0.05 / relative / math.sqrt(2)))
    text = cli("history", "calibrate", *runs).stdout
    assert "suggested warning 0.06, critical 0.085" in text


def test_calibrate_a_metric_that_is_always_zero(tmp_path):
    """A stable error rate of 0 in every run has no noise: the smallest thresholds, no false alarm (it crashed)."""
    stable = [binary_run(tmp_path / f"zero{i}", 0.0) for i in range(3)]
    result = cli("history", "calibrate", *stable, "--format", "json")
    assert result.exit_code == 0, result.output
    (cal,) = json.loads(result.stdout)
    assert (cal["mean"], cal["relative_noise"], cal["false_alarm_warning"]) == (0.0, 0.0, 0.0)
    assert (cal["suggested_warning"], cal["suggested_critical"]) == (0.01, 0.02)  # MIN_WARNING, MIN_CRITICAL


def test_calibrate_from_one_run_with_repeats_and_refuses_one_repeat(tmp_path):
    run = make_run(tmp_path / "rep", {"faithfulness": [[1.0, 0.0], [1.0, 1.0], [0.5, 1.0]]})
    (cal,) = json.loads(cli("history", "calibrate", run, "--format", "json").stdout)
    assert cal["method"] == "within-run repeats" and cal["run_sd"] == pytest.approx(math.sqrt(0.3125 / 9))
    single = binary_run(tmp_path / "one", 0.5)
    result = cli("history", "calibrate", single)
    assert result.exit_code == 2 and "one run with one repeat shows no run-to-run variability" in result.stderr
    other = binary_run(tmp_path / "other", 0.5, config="d" * 64)
    result = cli("history", "calibrate", single, other)
    assert result.exit_code == 2 and "config_sha256 differs" in result.stderr


def test_calibrated_false_alarm_rate_matches_a_simulated_stable_history():
    """A stable system with run-to-run SD σ: the share of WARNINGs is what calibration predicts."""
    from gate.history.calibrate import calibrate
    from gate.history.entries import RunSummary

    rng = np.random.default_rng(13)
    sigma, mean, n = 0.01, 0.80, 4000
    means = rng.normal(mean, sigma, n)
    trend = TrendPolicy(window=4, warning=0.025, critical=0.04)
    entries = [HistoryEntry(record(float(m), i)) for i, m in enumerate(means)]
    statuses = [trend_report(entries[i - 4 : i + 1], trend=trend).metrics[0].status for i in range(4, n)]
    observed = statuses.count("warning") / len(statuses) + statuses.count("critical") / len(statuses)
    runs = [RunSummary(f"r{i}", "g", "c", {"faithfulness": np.array([[m]])}) for i, m in enumerate(means)]
    (cal,) = calibrate(runs, trend)
    predicted = 0.5 * math.erfc(0.025 / (sigma * math.sqrt(1.25) / mean) / math.sqrt(2))  # 3.7 %
    assert cal.false_alarm_warning == pytest.approx(predicted, rel=0.1)  # σ estimated from the same 4000 runs
    assert observed == pytest.approx(predicted, abs=0.01)


def test_noise_comes_from_the_runs_repeat_errors_when_every_run_has_one():
    """The window's SD also measures a drift inside the window; repeat SEs measure run-to-run noise alone."""
    means = [0.90, 0.87, 0.84, 0.81, 0.78]
    with_se = [HistoryEntry(record(m, i, se=0.01)) for i, m in enumerate(means)]
    trend = trend_report(with_se, trend=TrendPolicy()).metrics[0]
    assert trend.noise_sd == pytest.approx(math.sqrt(0.01**2 + 0.01**2 / 4)) and trend.beyond_noise is True
    without = [HistoryEntry(record(m, i)) for i, m in enumerate(means)]
    trend = trend_report(without, trend=TrendPolicy()).metrics[0]
    sd = statistics.stdev(means[:4])
    assert trend.noise_sd == pytest.approx(sd * math.sqrt(1.25)) and trend.beyond_noise is False  # 0.075 < 2 × 0.043
