"""The comparison's warnings: the example that shows retrieved ids never matching is never cut in the comment."""

import pytest
from helpers import compare, write_jsonl

from gate.metrics.retrieval import shown_id

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
