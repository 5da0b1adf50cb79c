"""The golden set in the PR flow (gate.golden's diff and contract, gate.pr.sides.golden_contract): the base's golden
set is the contract, whatever the PR does to it, unless the base config opts into the head's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from scratch_repo import N_FACTS, git, make_scratch_repo

from gate.cli import main
from gate.golden import contract, diff_golden
from gate.models import GoldenCase

# ------------------------------------------------------------------ the diff and the contract (pure)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 12),
    removed=st.sets(st.integers(0, 11)),
    edited=st.sets(st.integers(0, 11)),
    added=st.integers(0, 4),
    shuffle=st.randoms(use_true_random=False),
)
def test_for_any_golden_diff_every_base_case_is_evaluated_with_its_base_definition(n, removed, edited, added, shuffle):
    base = [GoldenCase(f"c{i}", f"Question {i}?", (f"d{i}",), (f"a{i}",), line=i + 1) for i in range(n)]
    head = [
        GoldenCase(c.id, c.question + (" (edited)" if i in edited else ""), c.expected_doc_ids, c.reference_answers)
        for i, c in enumerate(base)
        if i not in removed
    ] + [GoldenCase(f"new{k}", f"New question {k}?") for k in range(added)]
    shuffle.shuffle(head)  # order and lines are not definitions
    diff = diff_golden(base, head)
    kept = {i for i in range(n) if i not in removed}
    assert [c.id for c in diff.removed] == [f"c{i}" for i in range(n) if i in removed]
    assert sorted(b.id for b, _ in diff.edited) == sorted(f"c{i}" for i in kept & edited)
    assert all(b.question != h.question for b, h in diff.edited)
    assert sorted(c.id for c in diff.added) == [f"new{k}" for k in range(added)]
    evaluated = contract(base, diff)
    assert evaluated[:n] == base  # every base case, in base order, with its base definition
    assert {c.id for c in evaluated[n:]} == {f"new{k}" for k in range(added)}
    assert bool(diff) == bool(removed & set(range(n)) or kept & edited or added)


# ------------------------------------------------------------------ the contract end to end (rag-gate pr)


def _trim_golden(repo: Path, drop: set[str], edit: dict[str, dict] | None = None, add: list[dict] = ()) -> None:
    rows = [json.loads(line) for line in (repo / "golden.jsonl").read_text().splitlines()]
    rows = [row | (edit or {}).get(row["id"], {}) for row in rows if row["id"] not in drop] + list(add)
    (repo / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def trimmed(tmp_path):
    """A PR that breaks retrieval on the even items, then deletes those 12 golden cases, edits q1 and adds one."""
    repo = tmp_path / "repo"
    make_scratch_repo(repo)
    broken = {f"q{i}" for i in range(0, 24, 2)}
    edit = {"q1": {"reference_answers": ["not the word"]}}
    added = [{"id": "q-new", "question": "What is the code word for item 3?", "expected_doc_ids": ["d3"]}]
    _trim_golden(repo, broken, edit, added)
    git(repo, "commit", "-q", "-am", "drop the golden cases the PR breaks")
    return repo, broken


def report_metrics(report: dict) -> set[str]:
    return {m["name"] for m in report["metrics"]}


def _local_pr(repo: Path, out: Path, *extra: str):
    args = ["pr", "--base-ref", "main", "--working-directory", str(repo), "--out-dir", str(out), *extra]
    return CliRunner().invoke(main, args, env={"GITHUB_ACTIONS": None, "GITHUB_EVENT_NAME": None})


def test_a_pr_that_deletes_the_cases_it_breaks_still_fails(trimmed, tmp_path):
    repo, broken = trimmed
    result = _local_pr(repo, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert result.exit_code == 1 and report["verdict"] == "fail", result.output
    assert report["n_cases"] == 28  # the base's 28 cases, removed ones included; the added one is checked per case
    changes = report["golden_changes"]
    assert changes["policy"] == "base" and set(changes["removed"]) == broken and changes["added"] == ["q-new"]
    (edited,) = changes["edited"]
    assert edited["id"] == "q1" and edited["fields"] == ["reference_answers"]
    f1 = next(m for m in edited["metrics"] if m["name"] == "answer_f1")
    assert "latency_ms" in report_metrics(report)  # measured, but no definition changes it: not listed
    assert not {m["name"] for m in edited["metrics"]} & {"latency_ms", "cost_usd", "error_rate"}
    # SQuAD F1 of "The code word for item 1 is basil." (7 tokens without "the"): vs "basil" P 1/7, R 1 → 0.25;
    # vs "not the word" ("not", "word") P 1/7, R 1/2 → 2/9
    assert (f1["under_base"], f1["under_head"]) == (pytest.approx(0.25), pytest.approx(2 / 9))
    assert {c["id"] for c in report["regressed_cases"]} == broken  # the removed cases are the regressed ones
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "**Golden set changed in this PR**: 12 removed · 1 edited · 1 added" in comment
    assert comment.index("Golden set changed") < comment.index("| metric |")  # the comment opens with it
    line_of = {json.loads(line)["id"]: n for n, line in enumerate((repo / "golden.jsonl").read_text().splitlines(), 1)}
    listed = {c["id"]: c["line"] for c in report["regressed_cases"]}
    assert all(listed[i] == (line_of.get(i, 0)) for i in listed)  # lines of the PR's own golden file; 0 if removed


def test_cases_a_pr_adds_cannot_dilute_a_regression(tmp_path):
    """The PR breaks 12 of 24 in-domain cases and adds 400 that it answers right: on all 428 cases hit rate@5 would
    fall by 12/424 ≈ 0.028, inside the 0.03 margin; gated on the base's cases it falls by 0.5 and fails."""
    repo = tmp_path / "repo"
    make_scratch_repo(repo)
    git(repo, "checkout", "-q", "main")
    (repo / "rag-gate.yml").write_text(
        (repo / "rag-gate.yml").read_text() + "metrics: [hit_rate@5, error_rate]\nfail_on_new_ood: false\n"
    )
    git(repo, "commit", "-q", "-am", "base policy: retrieval only, no out-of-domain rule")
    git(repo, "checkout", "-q", "feature")
    git(repo, "merge", "-q", "--no-edit", "main")
    odd = [i for i in range(N_FACTS) if i % 2] * 34
    easy = [
        {"id": f"easy{k}", "question": f"What is the code word for item {i}?", "expected_doc_ids": [f"d{i}"]}
        for k, i in enumerate(odd[:400])
    ]
    _trim_golden(repo, set(), add=easy)
    git(repo, "commit", "-q", "-am", "add 400 easy golden cases")
    result = _local_pr(repo, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert result.exit_code == 1 and report["verdict"] == "fail", report["reasons"]
    hit = next(m for m in report["metrics"] if m["name"] == "hit_rate@5")
    assert report["n_cases"] == N_FACTS + 4 and hit["delta"] == pytest.approx(-12 / N_FACTS)
    assert len(report["golden_changes"]["added"]) == 400
    assert "cannot dilute a regression" in (tmp_path / "out" / "comment.md").read_text()


def test_a_head_that_fails_on_every_case_fails_with_a_comment(tmp_path):
    """A PR whose pipeline raises on every case is a regression, exit 1, every case listed with its error; one that
    cannot even be imported is exit 3 (nothing ran: the evaluation could not run), with the reason."""
    repo = tmp_path / "repo"
    make_scratch_repo(repo)
    (repo / "rag.py").write_text(
        "def answer(case):\n    import retriever_that_does_not_exist  # noqa: F401\n    return {}\n"
    )
    git(repo, "commit", "-q", "-am", "a PR that breaks every call")
    result = _local_pr(repo, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert result.exit_code == 1 and report["verdict"] == "fail", result.output
    regressed = report["regressed_cases"]
    assert len(regressed) == N_FACTS + 4
    assert all(c["cause"] == "error" and "retriever_that_does_not_exist" in c["error"] for c in regressed)
    assert (
        "the pipeline fails on 28 case(s) that ran without error on base"
        in (tmp_path / "out" / "comment.md").read_text()
    )
    (repo / "rag.py").write_text("import retriever_that_does_not_exist  # noqa: F401\n")
    git(repo, "commit", "-q", "-am", "a PR that breaks the import")
    result = _local_pr(repo, tmp_path / "out")  # the same out-dir: the previous verdict must not stay in it
    assert result.exit_code == 3 and "cannot import rag:answer" in result.stderr, result.output
    assert not (tmp_path / "out" / "report.json").exists() and not (tmp_path / "out" / "comment.md").exists()


def test_the_base_config_may_opt_into_the_heads_golden_set(trimmed, tmp_path):
    repo, broken = trimmed
    git(repo, "checkout", "-q", "main")
    (repo / "rag-gate.yml").write_text((repo / "rag-gate.yml").read_text() + "golden_changes: head\n")
    git(repo, "commit", "-q", "-am", "base policy: the PR's golden set")
    git(repo, "checkout", "-q", "feature")
    git(repo, "merge", "-q", "--no-edit", "main")
    result = _local_pr(repo, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["golden_changes"]["policy"] == "head" and report["n_cases"] == 28 - 12 + 1
    assert not {c["id"] for c in report["regressed_cases"]} & broken and result.exit_code in (0, 1)
