"""The comment below its verdict: each statistical method said once (a legend, not on every row), lists that are
never empty, counts that are counted, only what was measured. Every comparison here is made by the real code from
scored sides (gate.compare over gate.scoring), and rendered by the shipped template."""

from __future__ import annotations

import dataclasses
import re

import pytest

from gate.compare import compare
from gate.compare.notes import golden_changes
from gate.config import GatePolicy
from gate.golden import diff_golden
from gate.judges import get_judge
from gate.models import Chunk, GoldenCase, Prediction
from gate.outputs.cells import LEXICAL_SCOPE_NOTE
from gate.outputs.markdown import render_comment
from gate.runs import Side
from gate.scoring import NO_CHECKABLE_CLAIM, score_all

METRICS = ("hit_rate@1", "recall@1", "answer_f1", "refusal", "error_rate", "latency_ms")
POLICY = GatePolicy(metrics=METRICS, gated=("hit_rate@1", "refusal"))
REFUSAL = "I don't have that information."
GOLDEN = [GoldenCase(f"q{i}", f"Question {i}?", (f"d{i}",), (f"answer {i}",), line=i + 1) for i in range(30)] + [
    GoldenCase(f"ood{i}", f"Unanswerable {i}?", (), (), out_of_domain=True, line=31 + i) for i in range(4)
]


def side(label, answers, golden=GOLDEN, errors=(), policy=POLICY):
    """A scored side: ``answers`` maps id → (answer, retrieved id); ids in ``errors`` failed."""
    table = {
        (c.id, 0): Prediction(id=c.id, error="pipeline raised")
        if c.id in errors
        else Prediction(
            id=c.id,
            answer=answers[c.id][0],
            retrieved=(Chunk(answers[c.id][1], f"{c.question} The answer is answer {c.id[1:]}."),),
            latency_ms=10.0 + i,
        )
        for i, c in enumerate(golden)
    }
    scores = score_all(golden, table, 1, policy, get_judge(policy.judge))
    return Side(label, golden, table, 1, scores, {"golden_sha256": "f" * 64, "judge": {"id": "lexical"}})


BASE = {f"q{i}": (f"The answer is answer {i}.", f"d{i}") for i in range(30)} | {
    f"ood{i}": ("Made up.", "x") for i in range(4)
}


def cells_of(line: str) -> list[str]:
    """A GFM table row's cells: split on pipes that no backslash escapes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def run_details_table(text: str) -> list[str]:
    details = text[text.index("#### What this gate can detect") :]
    return [line for line in details.splitlines() if line.startswith("|")]


@pytest.fixture(scope="module")
def worse():
    """Head loses the expected document on 8 of 30 cases; answers stay; ood answered on both sides."""
    head = dict(BASE) | {f"q{i}": (f"Something else {i}.", "elsewhere") for i in range(8)}
    return compare(side("base", BASE), side("head", head), POLICY)


def test_each_method_is_said_once_in_a_legend_and_named_short_in_the_table(worse):
    text = render_comment(worse)
    rows = run_details_table(text)
    header = cells_of(rows[0])
    assert header[-2:] == ["test", "recommendation"] and all(len(cells_of(r)) == len(header) for r in rows)
    test_cell = {cells_of(r)[0]: cells_of(r)[header.index("test")] for r in rows[2:]}
    assert test_cell["Hit rate@1"] == "McNemar exact" and test_cell["Answer F1"] == "sign-flip randomization"
    # the full descriptions appear once each, in the legend, whatever the number of rows using them
    by_method: dict[tuple[str, str], list[str]] = {}
    for m in worse.metrics:
        by_method.setdefault((m.test_method, m.ci_method), []).append(m.label)
    assert len(by_method) == 2 and len(worse.metrics) == 6
    for (test, interval), labels in by_method.items():
        assert text.count(interval) == 1
        name, variant = test.split(" (", 1)
        line = f"- **{name}** ({variant}; interval: {interval} · {', '.join(labels)}"
        assert line in text, line
    assert "Monte Carlo B=10000" not in "".join(rows)


def test_the_legend_escapes_a_method_read_from_a_report(worse):
    """A report.json can be edited: its method strings are untrusted text like any other."""
    rows = list(worse.metrics)
    rows[0] = dataclasses.replace(rows[0], test_method="evil | <b>x</b> @someone (one-sided)")
    text = render_comment(dataclasses.replace(worse, metrics=tuple(rows)))
    table = run_details_table(text)
    assert all(len(cells_of(r)) == len(cells_of(table[0])) for r in table)  # the pipe did not add a cell
    assert "- **evil \\| &lt;b&gt;x&lt;/b&gt; @\u2060someone** (one-sided); interval:" in text
    assert "<b>" not in text and "@someone" not in text


def test_no_empty_list_of_new_out_of_domain_failures(worse):
    """Every out-of-domain answer was answered on base too: no "…instead of refusing:" with nothing under it."""
    assert worse.ood_failures and not any(f.new for f in worse.ood_failures)
    text = render_comment(worse)
    section = text[text.index("### Out-of-domain failures: 0 new, 4 not new") :]
    assert (
        section.split("<details>", 1)[0]
        .strip()
        .endswith("head answered instead of refusing: none is new, base answered each of them too.")
    )
    assert "refusing:\n\n<details>" not in text and "- **new**" not in text


def test_a_metric_that_applies_to_one_side_only_reads_not_applicable_without_counts():
    """Base's golden set marks no case out-of-domain, head's marks 4: refusal has nothing to compare."""
    in_domain = [dataclasses.replace(c, out_of_domain=False, expected_doc_ids=("x",)) for c in GOLDEN]
    base = side("base", BASE, golden=in_domain)
    comparison = compare(base, side("head", BASE), POLICY)
    refusal = next(m for m in comparison.metrics if m.name == "refusal")
    assert refusal.n_pairs == 0 and refusal.status == "not_applicable"
    row = next(r for r in render_comment(comparison).splitlines() if r.startswith("| Refusal"))
    assert cells_of(row)[6:] == ["–", "➖ not applicable"]  # not "0 / 0 / 0 ⚠️ inconclusive"


def test_a_pipeline_that_breaks_counts_the_cases_base_refused_apart():
    """Head fails on 6 cases that base ran: base answered 4 of them and refused 2, so it did not answer 6."""
    base_answers = BASE | {"q0": (REFUSAL, "d0"), "q1": (REFUSAL, "d1")}
    broken = {"q0", "q1", "q2", "q3", "q4", "q5"}
    comparison = compare(side("base", base_answers), side("head", base_answers, errors=broken), POLICY)
    assert comparison.verdict == "fail"
    assert (
        "the pipeline fails on 6 case(s) that ran without error on base: 4 answered there, 2 refused (system errors)"
        in comparison.reasons
    )


def test_a_golden_edit_lists_only_metrics_that_read_the_definition():
    """An edited reference answer changes answer F1 under the edited definition; latency and failures are
    measurements of the run, the same under any definition, and are not listed as if they were."""
    policy = dataclasses.replace(POLICY, metrics=METRICS + ("cost_usd",))
    head_golden = [dataclasses.replace(c, reference_answers=("something else",)) if c.id == "q3" else c for c in GOLDEN]
    head = side("head", BASE, golden=head_golden, policy=policy)
    changes = golden_changes(head, diff_golden(GOLDEN, head_golden), policy)
    (edited,) = changes.edited
    assert edited.id == "q3" and edited.fields == ("reference_answers",)
    scores = {m.name: (m.under_base, m.under_head) for m in edited.metrics}
    assert set(scores) == {"hit_rate@1", "recall@1", "answer_f1"}  # refusal: not applicable in domain, left out
    # "The answer is answer 3." → answer is answer 3 (SQuAD drops "the") vs "answer 3": 2 common tokens, P 2/4,
    # R 2/2 → F1 2/3; vs "something else": none in common → 0
    assert scores["answer_f1"] == (pytest.approx(2 / 3), 0.0)


def test_each_judge_caveat_is_said_once_on_a_pr_with_several_judged_metrics():
    """Five judged metrics, longer answers on head, claim-less answers on both sides: each note about the judge is
    one paragraph or line of the comment, however many rows or sides it concerns."""
    judged = ("faithfulness", "hallucination_rate", "grounded_answer_rate", "contradiction_rate")
    policy = GatePolicy(metrics=(*METRICS, *judged, "hallucinated_claim_rate"), gated=("hit_rate@1", *judged))
    longer = " It was built in 1850 by Napoleon in Paris and cost 40 million dollars."
    base_answers = BASE | {"q1": ("Yes.", "d1"), "q2": ("Ok.", "d2")}
    head_answers = BASE | {f"q{i}": (f"The answer is answer {i}.{longer}", f"d{i}") for i in range(12)}
    head_answers |= {"q20": ("Hm.", "d20"), "q21": ("No.", "d21"), "q22": ("Well.", "d22")}
    base, head = side("base", base_answers, policy=policy), side("head", head_answers, policy=policy)
    comparison = compare(base, head, policy)
    text = render_comment(comparison)
    claimless = {s.label: s.scores.unscored[NO_CHECKABLE_CLAIM] for s in (base, head)}
    assert claimless["base"] >= 2 and claimless["head"] >= 3  # both sides have some: one line says both counts
    assert text.count(NO_CHECKABLE_CLAIM) == 1
    assert f"base: {claimless['base']}, head: {claimless['head']} answer(s) {NO_CHECKABLE_CLAIM}" in text
    assert text.count(LEXICAL_SCOPE_NOTE) == 1 and text.count("Mean answer length:") == 1
    assert text.count("by length alone") == 1 and text.count("false alarm") == 1
    legend = text[text.index("Tests (each interval") :]
    for interval in {m.ci_method for m in comparison.metrics}:
        assert text.count(interval) == 1 and interval in legend  # each interval method once, in the legend
