"""The offline judge neither rewards nor punishes length, and says what it cannot see.

End to end through ``rag-gate compare`` with the default config (lexical judge, default gated metrics): a PR whose
answers are the base's answers padded with sentences copied from their own retrieved context passes, and the comment
reports the change in mean answer length; a PR that changes a number, a negation or a name in every answer fails,
padded or not.
"""

from __future__ import annotations

import re

import pytest
from helpers import compare, write_jsonl

from gate.judges.claims import extract_claims
from gate.outputs.cells import LENGTH_CHANGE_NOTE, LEXICAL_SCOPE_NOTE

N = 24
FIRST = ["Anna", "Marco", "Lucia", "Peter", "Sofia", "Hans", "Clara", "Omar"]
LAST = ["Rossi", "Keller", "Moreau", "Novak", "Silva", "Jensen", "Haddad", "Ferri"]
PLACES = ["Harbour", "Castle", "River", "Garden", "Bridge", "Forest", "Tower", "Valley"]


def venue(i: int) -> dict:
    """One museum: its facts, the chunk that states them, and the base's faithful answer."""
    v = {
        "name": f"{PLACES[i % 8]} Museum",
        "year": 1901 + 3 * i,
        "rooms": 12 + i,
        "price": 5 + i % 7,
        "director": f"{FIRST[i % 8]} {LAST[(i + 3) % 8]}",
        "other": f"{FIRST[(i + 4) % 8]} {LAST[(i + 6) % 8]}",
    }
    v["sentences"] = [
        f"The {v['name']} opened in {v['year']}.",
        "It is not open on Mondays.",
        f"The director of the museum is {v['director']}.",
        f"It has {v['rooms']} rooms of paintings and sculptures.",
        f"Tickets cost {v['price']} euros for adults.",
        "The garden cafe serves coffee and cake in the afternoon.",
    ]
    return v


VENUES = [venue(i) for i in range(N)]


def base_answer(v: dict) -> str:
    return " ".join(v["sentences"][:3])


def padded(v: dict) -> str:
    """The base answer and three more sentences copied from the retrieved chunk: longer, as faithful."""
    return " ".join([base_answer(v), *v["sentences"][3:]])


WRONG = {
    "number": lambda v, a: a.replace(f"opened in {v['year']}", f"opened in {v['year'] + 2}"),
    "negation": lambda v, a: a.replace("It is not open on Mondays.", "It is open on Mondays."),
    "name": lambda v, a: a.replace(v["director"], v["other"]),
}


def write_pair(tmp_path, head_answer) -> None:
    write_jsonl(
        tmp_path / "golden.jsonl",
        [{"id": f"m{i}", "question": f"Tell me about the {v['name']}.", "expected_doc_ids": [f"d{i}"]}
         for i, v in enumerate(VENUES)],
    )  # fmt: skip
    for side, answer in (("base", base_answer), ("head", head_answer)):
        write_jsonl(
            tmp_path / f"{side}.jsonl",
            [
                {
                    "id": f"m{i}",
                    "answer": answer(v),
                    "latency_ms": 1.0,
                    "retrieved": [{"id": f"d{i}", "text": " ".join(v["sentences"])}],
                }
                for i, v in enumerate(VENUES)
            ],
        )


def row(report: dict, name: str) -> dict:
    return next(m for m in report["metrics"] if m["name"] == name)


def test_a_length_only_pr_of_faithful_padded_answers_passes_and_the_comment_says_the_length_changed(tmp_path):
    write_pair(tmp_path, padded)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 0 and report["verdict"] == "pass", report["reasons"]
    gated = row(report, "grounded_answer_rate")
    assert gated["gated"] and gated["status"] == "pass" and gated["delta"] == pytest.approx(0.0, abs=1e-9)
    assert not row(report, "hallucination_rate")["gated"] and not row(report, "hallucinated_claim_rate")["gated"]
    words = [len(base_answer(v).split()) for v in VENUES], [len(padded(v).split()) for v in VENUES]
    assert report["base"]["mean_answer_words"] == pytest.approx(sum(words[0]) / N)
    assert report["head"]["mean_answer_words"] == pytest.approx(sum(words[1]) / N)
    change = sum(words[1]) / sum(words[0]) - 1
    assert change > LENGTH_CHANGE_NOTE  # a large change: the comment warns
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    line = next(x for x in comment.splitlines() if "Mean answer length" in x)
    shown = re.search(r"base (\d+) → head (\d+) words \(([+-]\d+)%\)", line)
    assert shown and (int(shown[1]), int(shown[2])) == (round(sum(words[0]) / N), round(sum(words[1]) / N))
    assert int(shown[3]) == round(100 * change)
    assert "moves `answer_f1`, `exact_match`, `hallucination_rate`, `faithfulness` by length alone" in line
    assert "`grounded_answer_rate` averages over an answer's claims and does not" in line
    assert LEXICAL_SCOPE_NOTE.split(";")[0] in comment  # what the judge checks, next to the table


def test_a_small_length_change_is_reported_without_the_warning(tmp_path):
    write_pair(tmp_path, lambda v: f"{base_answer(v)} It has {v['rooms']} rooms.")  # 20 → 24 words: +20 %
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 0, report["reasons"]
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    line = next(x for x in comment.splitlines() if "Mean answer length" in x)
    assert "base 20 → head 24 words (+20%)." in line and "by length alone" not in line


def test_an_unsupported_sentence_in_every_answer_lowers_the_grounded_share(tmp_path):
    """ "Worth a visit." is in no chunk: each answer's share of hallucination rises (its claim's words are new), so
    the gated grounded share falls in every answer — by less than one invented fact would move it."""
    write_pair(tmp_path, lambda v: f"{base_answer(v)} Worth a visit.")
    _, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    gated = row(report, "grounded_answer_rate")
    assert -0.05 < gated["delta"] < 0


@pytest.mark.parametrize("pad", [False, True], ids=["same-length", "padded"])
@pytest.mark.parametrize("kind", sorted(WRONG))
def test_a_changed_number_negation_or_name_still_fails(tmp_path, kind, pad):
    write_pair(tmp_path, lambda v: WRONG[kind](v, padded(v) if pad else base_answer(v)))
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 1 and report["verdict"] == "fail", report["reasons"]
    failed = {m["name"] for m in report["metrics"] if m["gated"] and m["status"] == "fail"}
    # a changed number or name is a fact no chunk holds (the grounded share falls); a negation flip is a
    # contradiction with the same words (the contradiction rate rises): 1 claim of 3, or 1 of 8 padded
    assert failed & {"grounded_answer_rate", "contradiction_rate"}, report["reasons"]
    n_claims = len(extract_claims(padded(VENUES[0]) if pad else base_answer(VENUES[0])))
    assert n_claims == (8 if pad else 3)
    if kind == "negation":
        assert row(report, "contradiction_rate")["head_value"] == pytest.approx(1 / n_claims)
    assert row(report, "contradiction_rate")["base_value"] == 0.0
