"""A PR the gate cannot slip past — breakage is a regression, a broken evaluation never passes, every
failed row counts, incomplete runs are refused, one identity decides reuse, metrics with nothing to measure are
left out, and regressed cases say why (retrieval, generation, error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import GOLDEN_SIZE, answer, compare, golden, write_jsonl, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.cli import main

N = GOLDEN_SIZE


# ------------------------------------------------------------------ system errors: breakage is a regression


@settings(max_examples=6, deadline=None)
@given(broken=st.sets(st.integers(0, N - 1), min_size=1, max_size=4))
def test_any_case_the_head_breaks_fails_the_gate(tmp_path_factory, broken):
    """For any set of cases the base answered and the head crashes on, the gate fails and lists exactly them."""
    tmp = tmp_path_factory.mktemp("broken")
    cases = golden()
    head = [answer(c, error="KeyError: 'source' (rag.py:7)") if i in broken else answer(c) for i, c in enumerate(cases)]
    write_pair(tmp, cases, [answer(c) for c in cases], head)
    (tmp / "fast.yml").write_text(  # no judged metric: six compares stay fast
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmetrics: [hit_rate@5, mrr, answer_f1, error_rate]\n"
    )
    result, report = compare(tmp, "base.jsonl", "head.jsonl", "out", "--config", str(tmp / "fast.yml"))
    assert result.exit_code == 1 and report["verdict"] == "fail", report["reasons"]
    assert report["reasons"][0] == (
        f"the pipeline fails on {len(broken)} case(s) that ran without error on base (system errors)"
    )
    regressed = {c["id"]: c for c in report["regressed_cases"]}
    assert set(regressed) == {cases[i]["id"] for i in broken}
    assert all(c["cause"] == "error" and c["error"] == "KeyError: 'source' (rag.py:7)" for c in regressed.values())
    error_rate = next(m for m in report["metrics"] if m["name"] == "error_rate")
    assert (error_rate["base_mean"], error_rate["head_mean"]) == (0.0, pytest.approx(len(broken) / N))
    assert error_rate["gated"] and error_rate["direction"] == "lower" and error_rate["margin"] == 0.0


def test_a_head_that_fixes_base_crashes_does_not_fail(tmp_path):
    cases = golden()
    base = [answer(c, error="TimeoutError") if i < 3 else answer(c) for i, c in enumerate(cases)]
    write_pair(tmp_path, cases, base, [answer(c) for c in cases])
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert report["verdict"] == "pass" and result.exit_code == 0 and report["regressed_cases"] == []


def test_every_failed_repeat_counts(tmp_path):
    """R = 3, head repeats 1 and 2 fail on every case: 40 of 60 rows; the error rate says so and the gate fails."""
    cases = golden(20)
    base = [answer(c, repeat=r) for r in range(3) for c in cases]
    head = [
        answer(c, repeat=r) if r == 0 else answer(c, repeat=r, error="RateLimitError") for r in range(3) for c in cases
    ]
    write_pair(tmp_path, cases, base, head)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    error_rate = next(m for m in report["metrics"] if m["name"] == "error_rate")
    assert error_rate["head_mean"] == pytest.approx(2 / 3) and report["error_rate"] == pytest.approx(2 / 3)
    assert report["verdict"] == "fail" and result.exit_code == 1
    assert len([e for e in report["errors"] if e["side"] == "head"]) == 40


# ------------------------------------------------------------------ evaluation errors: the budget per metric and side


def _run_dir(tmp: Path, name: str, rows: list[dict]) -> Path:
    write_jsonl(tmp / f"{name}.jsonl", rows)
    (tmp / f"{name}.yml").write_text(f"golden: golden.jsonl\npipeline: {{predictions: {name}.jsonl}}\n")
    result = CliRunner().invoke(main, ["run", "--config", str(tmp / f"{name}.yml"), "--out", str(tmp / name)])
    assert result.exit_code == 0, result.output
    return tmp / name


JUDGED_GATED = "grounded_answer_rate"  # a judged metric gated by default


def _fail_judgments(run: Path, ids: set[str], metric: str = JUDGED_GATED) -> None:
    """Turn a run's judged scores of ``ids`` into judge failures, as a failing judge endpoint leaves them."""
    rows = [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]
    for row in rows:
        if row["metric"] == metric and row["id"] in ids:
            row.update(value=None, error="judge failed: HTTP 429 Too Many Requests", detail=None)
    write_jsonl(run / "scores.jsonl", rows)


@pytest.mark.parametrize(("n_failed", "verdict"), [(2, "pass"), (3, "error")])
def test_evaluation_failures_beyond_the_budget_of_one_metric_on_one_side_are_an_error(tmp_path, n_failed, verdict):
    """2 of 40 head judgments (5.0 %) is within the 5 % budget; 3 (7.5 %) is not, whatever the other metrics and
    the base side show (no averaging over metrics or sides)."""
    cases = golden()
    write_jsonl(tmp_path / "golden.jsonl", cases)
    base = _run_dir(tmp_path, "base", [answer(c) for c in cases])
    head = _run_dir(tmp_path, "head", [answer(c) for c in cases])
    _fail_judgments(head, {c["id"] for c in cases[:n_failed]})
    result = CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == verdict and result.exit_code == {"pass": 0, "error": 3}[verdict]
    (use,) = report["error_budget_use"]
    assert (use["metric"], use["side"], use["failed"], use["expected"]) == (JUDGED_GATED, "head", n_failed, N)
    assert use["messages"] == [f"{n_failed}× judge failed: HTTP 429 Too Many Requests"]
    if verdict == "error":
        assert report["reasons"] == [
            f"{JUDGED_GATED} on head: 3 of 40 evaluations failed (7.5%, budget 5.0%): {use['messages'][0]}"
        ]


def test_a_missing_score_row_is_a_failure_not_not_applicable(tmp_path):
    cases = golden()
    write_jsonl(tmp_path / "golden.jsonl", cases)
    base = _run_dir(tmp_path, "base", [answer(c) for c in cases])
    head = _run_dir(tmp_path, "head", [answer(c) for c in cases])
    rows = [json.loads(line) for line in (head / "scores.jsonl").read_text().splitlines()]
    write_jsonl(head / "scores.jsonl", [r for r in rows if r["id"] not in {"q00", "q01", "q02"}])
    result = CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "error" and result.exit_code == 3
    head_uses = [u for u in report["error_budget_use"] if u["side"] == "head"]
    assert head_uses and all(u["messages"] == ["3× no score row (scoring did not finish)"] for u in head_uses)


# ------------------------------------------------------------------ incomplete runs and the run identity


def test_an_incomplete_run_is_refused(tmp_path):
    cases = golden()
    write_jsonl(tmp_path / "golden.jsonl", cases)
    base = _run_dir(tmp_path, "base", [answer(c) for c in cases])
    head = _run_dir(tmp_path, "head", [answer(c) for c in cases])
    manifest = json.loads((head / "manifest.json").read_text())
    (head / "manifest.json").write_text(json.dumps(manifest | {"status": "running"}))
    result = CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert f"{head}: the run is not complete (manifest status 'running')" in result.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_scores_are_reused_only_under_the_policys_identity(tmp_path):
    """A head scored with other judge options is rescored with the base's judge; a base scored by another rag-gate
    version is rescored too, and the report says so (naming the version) and shows the judge that scored."""
    cases = golden()
    write_jsonl(tmp_path / "golden.jsonl", cases)
    base = _run_dir(tmp_path, "base", [answer(c) for c in cases])
    rows = [answer(c, text=f"Item {c['id'][1:]} is blue. It was painted by Zorblax in 1850.") for c in cases]
    write_jsonl(tmp_path / "head.jsonl", rows)
    (tmp_path / "head.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\njudge: {name: lexical, support: 0.0}\n"
    )
    CliRunner().invoke(main, ["run", "--config", str(tmp_path / "head.yml"), "--out", str(tmp_path / "head")])
    result = CliRunner().invoke(main, ["compare", str(base), str(tmp_path / "head"), "--out", str(tmp_path / "a")])
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert (tmp_path / "a" / "head" / "scores.jsonl").exists()  # rescored
    assert any(
        w.startswith("head: scores recomputed with the policy's judge because its judge options")
        for w in report["warnings"]
    )
    faith = next(m for m in report["metrics"] if m["name"] == "faithfulness")
    assert faith["head_mean"] == pytest.approx(0.5) and result.exit_code == 1  # one of two claims unsupported

    manifest = json.loads((base / "manifest.json").read_text())
    old = base.parent / "base-old"
    old.mkdir()
    for name in ("predictions.jsonl", "scores.jsonl"):
        (old / name).write_bytes((base / name).read_bytes())
    manifest |= {"gate_version": "0.0.9", "judge": manifest["judge"] | {"version": "0"}}
    (old / "manifest.json").write_text(json.dumps(manifest))
    CliRunner().invoke(main, ["compare", str(old), str(base), "--out", str(tmp_path / "b")])
    report = json.loads((tmp_path / "b" / "report.json").read_text())
    assert any("scored by rag-gate 0.0.9" in w for w in report["warnings"])
    assert report["base"]["judge"]["version"] != "0" and (tmp_path / "b" / "base" / "scores.jsonl").exists()


# ------------------------------------------------------------------ metrics with nothing to measure


@pytest.mark.parametrize("kind", ["no out-of-domain cases", "no reference answers"])
def test_a_metric_that_applies_to_no_case_does_not_hold_the_verdict(tmp_path, kind):
    cases = golden(references=kind != "no reference answers")
    rows = [answer(c) for c in cases]
    write_pair(tmp_path, cases, rows, rows)
    for options in ((), ("--strict",)):
        result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", *options)
        assert report["verdict"] == "pass" and result.exit_code == 0, report["reasons"]
    statuses = {m["name"]: m["status"] for m in report["metrics"]}
    empty = "refusal" if kind == "no out-of-domain cases" else "answer_f1"
    assert statuses[empty] == "not_applicable"
    assert "➖ not applicable" in (tmp_path / "out" / "comment.md").read_text()
    mde = {m["name"]: m["mde"] for m in report["metrics"]}
    assert mde["hit_rate@5"] is None  # no variation at all: undefined, not 0.000


# ------------------------------------------------------------------ triage


def test_regressed_cases_say_whether_retrieval_or_generation_broke(tmp_path):
    cases = golden()
    head = []
    for i, c in enumerate(cases):
        if i < 6:
            head.append(answer(c, doc="elsewhere"))  # the expected document fell out; same answer
        elif i < 10:
            head.append(answer(c, text="Item is red."))  # same retrieval, wrong answer
        else:
            head.append(answer(c))
    write_pair(tmp_path, cases, [answer(c) for c in cases], head)
    _, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    causes = {c["id"]: (c["cause"], c["identical_answer"]) for c in report["regressed_cases"]}
    assert {k for k, v in causes.items() if v == ("retrieval", True)} == {f"q{i:02d}" for i in range(6)}
    assert {k for k, v in causes.items() if v[0] == "generation"} == {f"q{i:02d}" for i in range(6, 10)}
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "10 regressed: 6 retrieval, 4 generation" in comment


def test_compare_of_runs_on_different_golden_sets_holds_the_base_set_as_the_contract(tmp_path):
    """The head ran a golden set without the 5 cases it breaks, with one edited and one added case: compared on
    the base's set, the 5 missing cases are failures of the head, the edit is scored with the base definition."""
    cases = golden()
    write_jsonl(tmp_path / "golden.jsonl", cases)
    base = _run_dir(tmp_path, "base", [answer(c) for c in cases])
    trimmed = [c | ({"reference_answers": ["red"]} if c["id"] == "q10" else {}) for c in cases[5:]]
    trimmed.append({"id": "q99", "question": "What colour is item 99?", "expected_doc_ids": ["d99"]})
    (tmp_path / "head").mkdir()
    write_jsonl(tmp_path / "head" / "golden.jsonl", trimmed)
    write_jsonl(tmp_path / "head" / "preds.jsonl", [answer(c) for c in trimmed[:-1]] + [answer(trimmed[-1], doc="d99")])
    (tmp_path / "head" / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\n")
    run = CliRunner().invoke(
        main, ["run", "--config", str(tmp_path / "head" / "rag-gate.yml"), "--out", str(tmp_path / "h")]
    )
    assert run.exit_code == 0, run.output
    result = CliRunner().invoke(main, ["compare", str(base), str(tmp_path / "h"), "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert result.exit_code == 1 and report["n_cases"] == N
    changes = report["golden_changes"]
    assert changes["removed"] == [f"q{i:02d}" for i in range(5)] and changes["added"] == ["q99"]
    assert [e["id"] for e in changes["edited"]] == ["q10"]
    assert {c["id"] for c in report["regressed_cases"] if c["cause"] == "error"} == {f"q{i:02d}" for i in range(5)}
    f1 = next(m for m in report["metrics"] if m["name"] == "answer_f1")
    assert f1["head_mean"] == 1.0  # q10 scored with its base reference ("Item 10 is blue."), not "red"
    assert any("1 case(s) not in the compared golden set left out" in w for w in report["warnings"])


def test_text_a_scorer_cannot_read_is_not_scored_and_the_report_says_so(tmp_path):
    """An answer in a language the lexical judge does not read, or in a script answer F1 cannot split, is not
    applicable (never 0 or 1), and the comparison warns, naming the language or script."""
    cases = golden()
    head = [answer(c) for c in cases]
    head[0] = answer(cases[0], text="El artículo 0 es azul y fue pintado en mil ochocientos cincuenta.")
    head[1] = answer(cases[1], text="物品一是蓝色的。")
    write_pair(tmp_path, cases, [answer(c) for c in cases], head)
    _, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    hallucination = next(m for m in report["metrics"] if m["name"] == "hallucination_rate")
    assert hallucination["n_pairs"] == N - 2  # neither answer was scored, so neither is paired
    warnings = [w for w in report["warnings"] if w.startswith("head: 1 answer(s)")]
    assert any("Spanish" in w and "not judged" in w for w in warnings), report["warnings"]
    assert any("Han script" in w for w in warnings), report["warnings"]


# ------------------------------------------------------------------ a head the judge cannot read


def test_a_head_that_answers_in_a_language_the_judge_cannot_read_is_not_a_pass(tmp_path):
    """Base answers in English (judged), head in German with wrong colours (the lexical judge does not read German):
    the gated hallucination rate would be unmeasured on the head, an inconclusive exit 0. Counted as evaluation
    failures of the head, past the budget: verdict error (exit 3), naming why. Both sides in German: not applicable,
    no error (nothing changed in what the judge can read)."""
    cases = golden(references=False)
    german = [answer(c, text=f"Artikel {int(c['id'][1:])} ist rot und wurde im Jahr 1850 gebaut.") for c in cases]
    write_pair(tmp_path, cases, [answer(c) for c in cases], german)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 3 and report["verdict"] == "error", report["reasons"]
    (use,) = [u for u in report["error_budget_use"] if u["metric"] == JUDGED_GATED]
    assert (use["side"], use["failed"], use["expected"]) == ("head", N, N)
    assert "not judged (" in use["messages"][0] and "where the other side was" in use["messages"][0]
    (tmp_path / "both").mkdir()
    write_pair(tmp_path / "both", cases, german, german)
    result, report = compare(tmp_path / "both", "base.jsonl", "head.jsonl", "out")
    assert report["verdict"] != "error" and not report["error_budget_use"], report["reasons"]
