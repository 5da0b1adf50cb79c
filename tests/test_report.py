import copy
import re

import pytest

from gate.report import GITHUB_COMMENT_LIMIT, MARKER, escape_markdown, render_comment


def metric(name="hit_rate@5", **kw):
    row = {
        "name": name,
        "n_pairs": 10,
        "label": "Hit rate@5",
        "gated": True,
        "base_mean": 0.9,
        "head_mean": 0.7,
        "delta": -0.2,
        "ci_low": -0.3,
        "ci_high": -0.1,
        "p_value": 0.0004,
        "p_adjusted": 0.0012,
        "status": "fail",
        "ratio": None,
        "ratio_ci_low": None,
        "ratio_ci_high": None,
        "mde": 0.05,
        "icc": None,
        "se": 0.04,
        "test_method": "mcnemar-exact",
        "recommendation": None,
        "margin": 0.03,
        "aggregates": {
            "base": {"n": 10, "mean": 0.9, "sd": 0.3, "p10": 0.0},
            "head": {"n": 10, "mean": 0.7, "sd": 0.4, "p10": 0.0},
        },
    }
    row.update(kw)
    return row


EVIL = "| <script>alert(1)</script> `rm -rf` @octocat [x](http://e.vil) <!-- hide -->\n# H"


def case(i, text="What?"):
    return {
        "id": f"case-{i}",
        "question": text,
        "answer_base": "base answer",
        "answer_head": text,
        "metrics": [
            {
                "name": "hit_rate@5",
                "base": 1.0,
                "head": 0.0,
                "effect": -1.0,
                "p_value": None,
                "p_adjusted": None,
                "status": "regressed",
                "evidence": "single observation",
            }
        ],
        "claims": [{"claim": text, "verdict": "contradicted", "chunk_id": "doc-1", "chunk_text": text, "reason": "x"}],
        "dropped_docs": [text],
        "expected_doc_ids": ["doc-1"],
    }


@pytest.fixture
def report():
    return {
        "schema_version": 1,
        "verdict": "fail",
        "reasons": ["Hit rate@5 dropped"],
        "warnings": ["golden sets differ"],
        "gate_version": "0.1.0",
        "n_cases": 3,
        "n_out_of_domain": 1,
        "repeats": {"base": 1, "head": 1},
        "seed": 0,
        "alpha": 0.05,
        "strict": False,
        "error_rate": 0.0,
        "error_budget": 0.05,
        "base": {
            "git_sha": "abc",
            "golden_sha256": "f" * 64,
            "n_cases": 3,
            "repeats": 1,
            "judge": {"id": "lexical"},
            "n_prediction_errors": 0,
        },
        "head": {
            "git_sha": "def",
            "golden_sha256": "f" * 64,
            "n_cases": 3,
            "repeats": 1,
            "judge": {"id": "lexical"},
            "n_prediction_errors": 0,
        },
        "metrics": [metric()],
        "regressed_cases": [case(1, EVIL)],
        "suspected_cases": [],
        "improved_cases": [],
        "flaky_cases": [],
        "ood_failures": [{"id": "ood-1", "question": EVIL, "answer": EVIL, "new": True}],
        "new_ood_failures": 1,
        "unpaired_cases": [],
        "errors": [],
    }


def test_escape_markdown_neutralises_markup():
    out = escape_markdown(EVIL)
    assert "<" not in out and ">" not in out and "\n" not in out
    assert "@octocat" not in out and "@\u2060octocat" in out
    assert re.search(r"(?<!\\)[|`\[\]]", out) is None  # every pipe, backtick and bracket is escaped
    assert escape_markdown("x" * 500, limit=10) == "x" * 9 + "…"
    assert escape_markdown("see #12 and a\u202eb\u200bc, rate@5") == "see #\u206012 and abc, rate@5"


def test_comment_starts_with_marker_and_verdict(report):
    text = render_comment(report)
    lines = text.splitlines()
    assert lines[0] == MARKER
    assert lines[1].startswith("## ❌ rag-gate: **fail**")
    assert "| Hit rate@5 | 0.900 | 0.700 | -0.200 | [-0.300, -0.100] | <0.001 (0.001) | ❌ fail |" in text
    assert "single observations" in text
    assert "> ⚠️ golden sets differ" in text


def test_untrusted_text_cannot_break_the_comment(report):
    text = render_comment(report)
    body = text.split("\n", 1)[1]
    assert "<script>" not in body and "<!-- hide" not in body
    assert "@octocat" not in body
    assert re.search(r"(?<!\\)\]\(http", body) is None  # no live markdown link
    table_rows = [row for row in body.splitlines() if row.startswith("| Hit rate")]
    assert all(row.count("|") - row.count("\\|") == 8 for row in table_rows)


def test_comment_is_capped_with_a_note(report):
    big = copy.deepcopy(report)
    big["regressed_cases"] = [case(i, "long question " * 20) for i in range(2000)]
    text = render_comment(big)
    assert len(text) <= 60_000 < GITHUB_COMMENT_LIMIT
    m = re.search(r"…and (\d+) more not shown: the full list is in `report.json`", text)
    assert m is not None
    shown = text.count("- **case-")
    assert shown + int(m.group(1)) == 2000 and shown > 10
