"""The comparison's warnings: the example that shows retrieved ids never matching is never cut in the comment."""

import pytest
from helpers import compare, write_jsonl

from gate.compare import notes
from gate.compare.inputs import metric_inputs
from gate.comparison import ChangedFile, Changes, DefinitionScore, EditedCase, GoldenChanges
from gate.config import GatePolicy
from gate.golden import GoldenDiff
from gate.metrics.retrieval import ID_ADVICE, shown_id
from gate.models import GoldenCase
from gate.results import PolicyChange

GOLDEN = [
    {"id": f"question_{i}_of_the_long_golden_set", "question": f"Capital of country {i}?",
     "expected_doc_ids": [f"library/os_path_{i}.html"], "reference_answers": [f"City {i}"]}
    for i in range(8)
]  # fmt: skip


def side(prefix: str) -> list[dict]:
    return [
        {"id": case["id"], "answer": f"City {i}", "latency_ms": 5.0,
         "retrieved": [{"id": f"{prefix}library/os_path_{i}.html#chunk_{i:04d}\u200b", "text": f"City {i}."}]}
        for i, case in enumerate(GOLDEN)
    ]  # fmt: skip


@pytest.mark.parametrize("prefix", ["", "https://docs.python.org/3.12/" + "x" * 60 + "/"])
def test_the_comment_shows_the_decisive_ids_whole_and_escaped(tmp_path, prefix):
    write_jsonl(tmp_path / "golden.jsonl", GOLDEN)
    write_jsonl(tmp_path / "base.jsonl", side(prefix))
    write_jsonl(tmp_path / "head.jsonl", side(prefix))
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 3, result.output
    (reason,) = [r for r in report["reasons"] if r.startswith("retrieval cannot be scored")]
    got = f"{prefix}library/os_path_0.html#chunk_0000\\u200b"  # the zero-width space that breaks the match, shown
    if len(got) > 60:
        got = got[:30] + "…" + got[-29:]  # both ends: where a chunk id differs from a document id
    example = f'e.g. base "question_0_of_t…ong_golden_set" expects "library/os_path_0.html", got "{got}"'
    assert example in reason
    assert shown_id(f"{prefix}library/os_path_0.html#chunk_0000\u200b") == f'"{got}"'
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    escaped = example.replace("\\", "\\\\").replace("_", "\\_")  # markdown escapes of the comment
    escaped = escaped.replace("https:", "https:\u2060")  # and a word joiner: no link, no cross-reference
    assert escaped in comment


def test_a_case_whose_must_pass_flag_the_pr_changes_is_a_policy_change():
    """Config keys first, then each kept case whose own must_pass flag moved (– when unset), in the base's order;
    cases edited otherwise, added or removed are golden-set changes, not policy changes."""
    from gate.compare.notes import policy_changes
    from gate.config import GatePolicy
    from gate.golden import diff_golden
    from gate.models import GoldenCase

    base = [GoldenCase("o1", "Q1?", out_of_domain=True), GoldenCase("q2", "Q2?", must_pass=True),
            GoldenCase("q3", "Q3?"), GoldenCase("q4", "Q4?", must_pass=True)]  # fmt: skip
    head = [GoldenCase("o1", "Q1?", out_of_domain=True, must_pass=False), GoldenCase("q2", "Q2?"),
            GoldenCase("q3", "Q3 edited?"), GoldenCase("q5", "Q5?", must_pass=True)]  # fmt: skip
    moved = policy_changes(GatePolicy(), GatePolicy(fail_on_new_ood=False), diff_golden(base, head))
    assert [(c.key, c.base, c.head) for c in moved] == [
        ("fail_on_new_ood", "true", "false"),
        ("case o1 must_pass", "–", "false"),
        ("case q2 must_pass", "true", "–"),
    ]
    assert policy_changes(GatePolicy(), GatePolicy(), None) == ()


# ----------------------------------------------------------------- gate.compare.notes, unit by unit (hand values)

NOTES_GOLDEN = [GoldenCase(f"q{i}", f"Question {i}?", (f"d{i}",), line=i + 1) for i in range(3)] + [
    GoldenCase("ood", "Unanswerable?", (), out_of_domain=True, line=4)
]
RETRIEVAL = GatePolicy(metrics=("hit_rate@1",), gated=("hit_rate@1",))


def test_pipeline_diff_is_a_unified_diff_of_the_sections_or_nothing():
    base = {"python": "rag:answer", "options": {"top_k": 5}}
    head = {"python": "rag:answer", "options": {"top_k": 3}}
    assert notes.pipeline_diff(base, head) == (
        "--- base",
        "+++ head",
        "@@ -1,4 +1,4 @@",
        " pipeline:",
        "   python: rag:answer",
        "   options:",
        "-    top_k: 5",
        "+    top_k: 3",
    )
    assert notes.pipeline_diff(base, dict(base)) == ()
    assert notes.pipeline_diff(None, head) == notes.pipeline_diff(base, None) == ()


def test_changes_are_unknown_without_sections_or_files(make_side):
    scores = {"hit_rate@1": [[1]] * 4}
    bare = make_side("base", NOTES_GOLDEN, scores)
    assert notes.changes(bare, bare) is None
    files = [ChangedFile("rag.py", 3, 1)]
    assert notes.changes(bare, bare, files, "2 commits") == Changes((), False, tuple(files), "2 commits")
    with_sections = [
        make_side(label, NOTES_GOLDEN, scores, manifest={"pipeline": {"python": f"rag:{fn}"}})
        for label, fn in (("base", "answer"), ("head", "answer2"))
    ]
    found = notes.changes(*with_sections)
    assert found.pipeline_known and found.files is None and found.commits is None
    assert found.pipeline_diff[-2:] == ("-  python: rag:answer", "+  python: rag:answer2")


def test_golden_warnings_name_different_sets_or_one_sided_cases(make_side):
    scores = {"hit_rate@1": [[1]] * 4}
    base = make_side("base", NOTES_GOLDEN, scores, manifest={"golden_sha256": "a" * 64})
    head = make_side("head", NOTES_GOLDEN, scores, manifest={"golden_sha256": "b" * 64})
    assert notes.golden_warnings(base, head, 4, 2) == [
        f"base and head were evaluated on different golden sets ({'a' * 12} vs {'b' * 12}): 4 case(s) paired by id, "
        "2 only on one side; cases whose expected documents or answers changed are compared against different "
        "references"
    ]
    assert notes.golden_warnings(base, base, 4, 3) == ["3 case(s) are only on one side and are not compared"]
    assert notes.golden_warnings(base, base, 4, 0) == []


def test_golden_changes_score_heads_answers_under_both_definitions(make_side):
    before = NOTES_GOLDEN[0]
    after = GoldenCase("q0", "Question 0?", ("d9",), line=1)  # the expected document changed: d0 → d9
    head = make_side("head", NOTES_GOLDEN, {"hit_rate@1": [[1]] * 4}, retrieved={"q0": ["d0"]})
    diff = GoldenDiff(removed=(NOTES_GOLDEN[1],), edited=((before, after),), added=(GoldenCase("new", "?"),))
    policy = GatePolicy(metrics=("hit_rate@1", "faithfulness"), gated=("hit_rate@1",), golden_changes="head")
    found = notes.golden_changes(head, diff, policy)
    # head retrieved d0: a hit under the base's definition, a miss under the head's; the judged metric is left out
    edited = EditedCase("q0", ("expected_doc_ids",), (DefinitionScore("hit_rate@1", 1.0, 0.0),))
    assert found == GoldenChanges(policy="head", removed=("q1",), edited=(edited,), added=("new",))


def test_policy_changes_list_each_moved_key_in_field_order():
    base = GatePolicy(metrics=("hit_rate@5", "mrr"), gated=("hit_rate@5",))
    head = GatePolicy(
        metrics=("hit_rate@5", "mrr"), gated=("hit_rate@5", "mrr"), margins={"mrr": 0.05}, alpha=0.1, seed=3
    )
    assert notes.policy_changes(base, head) == (
        PolicyChange("gate", "[hit_rate@5]", "[hit_rate@5, mrr]"),
        PolicyChange("margins.mrr", "0.03", "0.05"),  # unset on base: the registry's default margin of mrr
        PolicyChange("alpha", "0.05", "0.1"),
    )  # the seed does not decide what blocks a merge: not listed
    assert notes.policy_changes(base, base) == ()


def test_unmatched_ids_says_why_retrieval_cannot_be_scored(make_side):
    zeros = {"hit_rate@1": [[0]] * 4}
    chunks = {f"q{i}": [f"d{i}#chunk_1"] for i in range(3)}
    base = make_side("base", NOTES_GOLDEN, zeros, retrieved=chunks)
    head = make_side("head", NOTES_GOLDEN, zeros, retrieved=chunks)
    found, _ = metric_inputs(base, head, NOTES_GOLDEN, RETRIEVAL)
    assert notes.unmatched_ids(base, head, NOTES_GOLDEN, found) == (
        "retrieval cannot be scored: no retrieved id on either side matches an expected id (3 in-domain cases); "
        f'e.g. base "q0" expects "d0", got "d0#chunk_1". {ID_ADVICE}'
    )
    empty = make_side("head", NOTES_GOLDEN, zeros)
    assert notes.unmatched_ids(empty, empty, NOTES_GOLDEN, found) == (
        "retrieval cannot be scored: neither side retrieved a chunk for any of the 3 in-domain cases, so every "
        "retrieval metric is 0 on both sides (return the chunks the generator read, with their document ids, or "
        "remove the retrieval metrics from the config)"
    )


def test_unmatched_ids_is_silent_when_an_id_matches_anywhere(make_side):
    zeros = {"hit_rate@1": [[0]] * 4}
    base = make_side("base", NOTES_GOLDEN, zeros, retrieved={"q0": ["x"], "q1": ["x"], "q2": ["x"]})
    # head's q2 retrieved d2 at rank 2: hit_rate@1 is 0 everywhere, but an id matched, so ids are not the problem
    head = make_side("head", NOTES_GOLDEN, zeros, retrieved={"q0": ["x"], "q1": ["x"], "q2": ["x", "d2"]})
    found, _ = metric_inputs(base, head, NOTES_GOLDEN, RETRIEVAL)
    assert notes.unmatched_ids(base, head, NOTES_GOLDEN, found) is None
    hits = make_side("head", NOTES_GOLDEN, {"hit_rate@1": [[1], [0], [0], [0]]})
    found, _ = metric_inputs(base, hits, NOTES_GOLDEN, RETRIEVAL)
    assert notes.unmatched_ids(base, hits, NOTES_GOLDEN, found) is None  # a positive value proves a match
    no_retrieval = GatePolicy(metrics=("answer_f1",), gated=("answer_f1",))
    found, _ = metric_inputs(base, head, NOTES_GOLDEN, no_retrieval)
    assert notes.unmatched_ids(base, head, NOTES_GOLDEN, found) is None
