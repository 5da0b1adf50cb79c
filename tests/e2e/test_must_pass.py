"""Must-pass cases are a contract (STATISTICS.md §7): a certain flip blocks whatever the statistics say, a flip that
cannot be told from noise is listed and does not block; a PR that changes the gate's policy says so."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import answer, compare, golden, write_jsonl, write_pair

from gate.cli import main

NONSENSE = "The best topping is `functools.partial`."
BAD = ("o0", "o1", "o2", "o3")


def _twelve_ood(tmp: Path, repeats: int, *, sampled: bool = False) -> list[dict]:
    """The issue's newcomer set: 46 in-domain and 12 out-of-domain cases; head answers 4 of the 12 in every repeat.

    ``sampled``: the generator words its in-domain answers differently in each repeat (a sampled generator).
    """
    cases = golden(46, ood=12)

    def text(case: dict, r: int) -> str | None:
        if sampled and not case.get("out_of_domain"):
            return f"Item {int(case['id'][1:])} is blue." + (" Indeed." if r % 2 else "")
        return None

    base = [answer(c, repeat=r, text=text(c, r)) for r in range(repeats) for c in cases]
    head = [answer(c, repeat=r, text=NONSENSE if c["id"] in BAD else text(c, r)) for r in range(repeats) for c in cases]
    write_pair(tmp, cases, base, head)
    return cases


@pytest.mark.parametrize("repeats", [2, 3])
def test_four_new_out_of_domain_answers_of_a_deterministic_pipeline_block(tmp_path, repeats):
    """The issue's PR: base refuses all 4 in every repeat, head answers all 4 in every repeat, nothing else varies.
    12 cases cannot make the refusal drop significant; the must-pass rule blocks it anyway, listed first."""
    _twelve_ood(tmp_path, repeats)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--junit", str(tmp_path / "junit.xml"))
    assert result.exit_code == 1 and report["verdict"] == "fail", report["reasons"]
    assert report["reasons"][0] == (
        "4 must-pass case(s) passed on base in every repeat and fail on head in every repeat (o0, o1, o2, o3)"
    )
    flips = report["must_pass_failures"]
    assert [f["id"] for f in flips] == list(BAD)
    assert all(f["certain"] and f["out_of_domain"] and f["why"] == "answered instead of refusing" for f in flips)
    assert flips[0]["answer"] == NONSENSE and (flips[0]["repeats_base"], flips[0]["repeats_head"]) == (repeats,) * 2
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "**4 must-pass failed** (4 blocking) · 0 regressed · out-of-domain failures: 4 new" in comment
    assert comment.index("### Must-pass cases that failed (4)") < comment.index("| metric |")
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    must = junit.findall(".//testcase[@classname='rag-gate.must-pass']")
    assert [c.get("name") for c in must] == list(BAD) and all(c.find("failure") is not None for c in must)
    assert not junit.findall(".//testcase[@classname='rag-gate.out-of-domain']")  # listed once


def test_one_run_per_side_lists_the_flips_without_blocking(tmp_path):
    """R = 1: a sampled generator's flip cannot be told from noise; listed, warned, not blocking, with the advice."""
    _twelve_ood(tmp_path, 1)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 0 and report["verdict"] != "fail"
    assert [f["certain"] for f in report["must_pass_failures"]] == [False] * 4
    (warning,) = [w for w in report["warnings"] if "must-pass" in w]
    assert "one run per side cannot tell a flip" in warning and "`repeats: 2` on a deterministic pipeline" in warning
    assert not any("refused on base are answered on head" in w for w in report["warnings"])  # not twice
    assert "**4 must-pass failed** (0 blocking)" in (tmp_path / "out" / "comment.md").read_text()


def test_two_repeats_of_a_sampled_generator_do_not_block(tmp_path):
    """R = 2 and answers that vary across repeats: not deterministic, so an all-repeat flip is not certain."""
    _twelve_ood(tmp_path, 2, sampled=True)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 0, report["reasons"]
    assert [f["certain"] for f in report["must_pass_failures"]] == [False] * 4
    (warning,) = [w for w in report["warnings"] if "must-pass" in w]
    # 4 varying must-pass cases: exact p = 1/C(4, 2) = 1/6 each, Holm 4/6; 1/C(2R, R) ≤ 0.05/4 first at R = 5
    assert "with 2 repeats that vary a flip can be noise (exact p = 0.167, Holm = 0.667" in warning
    assert "`repeats: 5` on a sampled one" in warning


@pytest.mark.parametrize(("repeats", "blocks"), [(3, False), (5, True)])
def test_a_sampled_generator_blocks_when_the_exact_test_survives_holm(tmp_path, repeats, blocks):
    """The 12-case PR on a sampled generator: the 4 flips are the only must-pass cases whose outcomes vary, so each
    is tested at 0.05/4 by Holm's first step: p = 1/C(6, 3) = 0.05 at R = 3 does not block, 1/C(10, 5) = 1/252
    at R = 5 does (Holm 4/252)."""
    _twelve_ood(tmp_path, repeats, sampled=True)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    flips = report["must_pass_failures"]
    assert [f["certain"] for f in flips] == [blocks] * 4
    p = 1 / math.comb(2 * repeats, repeats)
    assert all(f["p_value"] == pytest.approx(p) and f["p_adjusted"] == pytest.approx(4 * p) for f in flips)
    assert result.exit_code == (1 if blocks else 0), report["reasons"]
    assert [f["repeats_to_block"] for f in flips] == ([None] * 4 if blocks else [5] * 4)


def test_a_lone_flaky_must_pass_case_is_its_own_family(tmp_path):
    """One out-of-domain case flips in all 3 repeats on a sampled generator while the other must-pass cases refuse in
    every run: the family is that one case, p = 1/20 ≤ α = 0.05, so it blocks; a second varying must-pass case (o1
    answered once on base) makes the family 2 and the flip a warning."""
    cases = golden(20, ood=4)

    def rows(side: str, o1_once: bool = False) -> list[dict]:
        out = []
        for r in range(3):
            for c in cases:
                text = (
                    f"Item {int(c['id'][1:])} is blue." + (" Indeed." if r % 2 else "") if c["id"][0] == "q" else None
                )
                if side == "head" and c["id"] == "o0" or (o1_once and c["id"] == "o1" and r == 0):
                    text = NONSENSE
                out.append(answer(c, repeat=r, text=text))
        return out

    write_pair(tmp_path, cases, rows("base"), rows("head"))
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    ((flip,),) = [report["must_pass_failures"]]
    assert (flip["id"], flip["certain"], flip["p_adjusted"]) == ("o0", True, pytest.approx(0.05))
    assert result.exit_code == 1
    write_pair(tmp_path, cases, rows("base", o1_once=True), rows("head"))
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out2")
    ((flip,),) = [report["must_pass_failures"]]
    assert (flip["certain"], flip["p_adjusted"], flip["repeats_to_block"]) == (False, pytest.approx(0.1), 4)


def test_a_deterministic_a_a_comparison_never_blocks(tmp_path):
    cases = golden(46, ood=12)
    rows = [answer(c, repeat=r) for r in range(3) for c in cases]
    write_pair(tmp_path, cases, rows, rows)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 0 and report["verdict"] == "pass" and report["must_pass_failures"] == []


def test_an_in_domain_must_pass_case_blocks_when_its_document_falls_out(tmp_path):
    """q05 is must-pass: its expected document leaves head's top 5 in both repeats. q06 (not must-pass) does the same
    and is only a regressed case; o0 says must_pass: false, so its answer does not block as a must-pass case."""
    cases = golden(30, ood=2)
    cases[5]["must_pass"] = True
    cases[30]["must_pass"] = False
    base = [answer(c, repeat=r) for r in range(2) for c in cases]
    head = [
        answer(
            c,
            repeat=r,
            doc="elsewhere" if c["id"] in ("q05", "q06") else None,
            text=NONSENSE if c["id"] == "o0" else None,
        )
        for r in range(2)
        for c in cases
    ]
    write_pair(tmp_path, cases, base, head)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 1
    (flip,) = report["must_pass_failures"]
    assert (flip["id"], flip["out_of_domain"], flip["why"], flip["certain"]) == ("q05", False, "hit_rate@5 = 0", True)
    assert report["reasons"][0].startswith("1 must-pass case(s) passed on base in every repeat")


def test_must_pass_out_of_domain_false_turns_the_default_off(tmp_path):
    _twelve_ood(tmp_path, 3)
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmust_pass: {out_of_domain: false}\n"
    )
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--config", str(tmp_path / "rag-gate.yml"))
    assert report["must_pass_failures"] == []
    assert not any(r.startswith("4 must-pass") for r in report["reasons"])


# ------------------------------------------------------------------ a PR that changes the gate's policy says so


def _run(tmp: Path, name: str, rows: list[dict], extra: str = "") -> Path:
    write_jsonl(tmp / f"{name}.jsonl", rows)
    (tmp / f"{name}.yml").write_text(f"golden: golden.jsonl\npipeline: {{predictions: {name}.jsonl}}\n{extra}")
    result = CliRunner().invoke(main, ["run", "--config", str(tmp / f"{name}.yml"), "--out", str(tmp / name)])
    assert result.exit_code == 0, result.output
    return tmp / name


def test_a_head_run_under_a_relaxed_policy_is_called_out(tmp_path):
    """The issue's relaxation: judged under the base's policy, and the comment, report.json and JUnit say what changes
    after merge (old → new)."""
    cases = golden(20, ood=2)
    write_jsonl(tmp_path / "golden.jsonl", cases)
    rows = [answer(c) for c in cases]
    base = _run(tmp_path, "base", rows)
    relaxed = "gate: [hit_rate@5]\nmargins: {refusal: 0.5}\nfail_on_new_ood: false\nmust_pass: {out_of_domain: false}\n"
    head = _run(tmp_path, "head", rows, relaxed)
    junit = tmp_path / "junit.xml"
    result = CliRunner().invoke(
        main, ["compare", str(base), str(head), "--out", str(tmp_path / "out"), "--junit", str(junit)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    changes = {c["key"]: (c["base"], c["head"]) for c in report["policy_changes"]}
    assert changes == {
        "gate": ("[hit_rate@5, mrr, grounded_answer_rate, contradiction_rate, answer_f1, refusal, false_refusal, "
                 "error_rate]", "[hit_rate@5]"),
        "margins.refusal": ("0.03", "0.5"),
        "fail_on_new_ood": ("true", "false"),
        "must_pass.out_of_domain": ("true", "false"),
    }  # fmt: skip
    assert [m["name"] for m in report["metrics"] if m["gated"]][1] == "mrr"  # still the base's gate list
    comment = (tmp_path / "out" / "comment.md").read_text()
    lines = comment.splitlines()
    (at,) = [i for i, x in enumerate(lines) if "changes the gate's policy" in x]
    assert "applies after merge; this PR is judged under the base's" in lines[at]
    # four changes: a list, each in full (the one line was cut at 300 characters: "… fail_on_new_ood tru…")
    assert lines[at + 1 : at + 5] == [
        "> - gate \\[hit\\_rate@5, mrr, grounded\\_answer\\_rate, contradiction\\_rate, answer\\_f1, refusal, "
        "false\\_refusal, error\\_rate\\] → \\[hit\\_rate@5\\]",
        "> - margins.refusal 0.03 → 0.5",
        "> - fail\\_on\\_new\\_ood true → false",
        "> - must\\_pass.out\\_of\\_domain true → false",
    ]
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["policy_changes"].endswith("fail_on_new_ood true → false; must_pass.out_of_domain true → false")


def test_an_unchanged_policy_has_no_line(tmp_path):
    cases = golden(10)
    write_jsonl(tmp_path / "golden.jsonl", cases)
    rows = [answer(c) for c in cases]
    base, head = _run(tmp_path, "base", rows), _run(tmp_path, "head", rows)
    CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["policy_changes"] == [] and "policy" not in (tmp_path / "out" / "comment.md").read_text()


# ------------------------------------------------------------------ a margin relative to the base's value


def test_a_relative_margin_is_the_share_of_the_base_and_the_comment_shows_it(tmp_path):
    """false_refusal on base 4/40 = 0.1; `{relative: 0.5}` makes the margin 0.05 (shown "0.050 (50 % of base)")."""
    cases = golden(40)
    rows = [answer(c, text="I don't have that information." if i < 4 else None) for i, c in enumerate(cases)]
    write_pair(tmp_path, cases, rows, rows)
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmetrics: [hit_rate@5, false_refusal]\n"
        "margins: {false_refusal: {relative: 0.5, min: 0.01}}\n"
    )
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--config", str(tmp_path / "rag-gate.yml"))
    assert result.exit_code == 0
    row = next(m for m in report["metrics"] if m["name"] == "false_refusal")
    assert (row["base_mean"], row["margin"], row["margin_relative"]) == (0.1, pytest.approx(0.05), 0.5)
    assert "| False refusal | 0.050 (50 % of base) |" in (tmp_path / "out" / "comment.md").read_text()


def test_a_run_made_with_a_relative_margin_is_recorded_and_compared(tmp_path):
    """README's `margins: {m: {relative: r, min: x}}` in a run's config: the manifest keeps it, compare reads it."""
    cases = golden(20, ood=2)
    write_jsonl(tmp_path / "golden.jsonl", cases)
    relative = "margins: {contradiction_rate: {relative: 0.5, min: 0.005}}\n"
    base = _run(tmp_path, "base", [answer(c) for c in cases], relative)
    head = _run(tmp_path, "head", [answer(c) for c in cases], relative)
    manifest = json.loads((head / "manifest.json").read_text())
    assert manifest["evaluation"]["margins"]["contradiction_rate"] == {"relative": 0.5, "min": 0.005}
    result = CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output


def test_a_short_policy_change_is_one_line(tmp_path):
    cases = golden(10, ood=2)
    write_jsonl(tmp_path / "golden.jsonl", cases)
    rows = [answer(c) for c in cases]
    base, head = _run(tmp_path, "base", rows), _run(tmp_path, "head", rows, "margins: {refusal: 0.1}\nalpha: 0.1\n")
    CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(tmp_path / "out")])
    comment = (tmp_path / "out" / "comment.md").read_text()
    (line,) = [x for x in comment.splitlines() if "changes the gate's policy" in x]
    assert line.endswith("judged under the base's): margins.refusal 0.03 → 0.1; alpha 0.05 → 0.1")
    assert "\n> - " not in comment
