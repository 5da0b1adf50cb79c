"""Claim extraction (gate.judges.claims): the judge checks a normalised claim, a reviewer reads the answer as written.

Every claim shown (ClaimVerdict.claim, in comment.md, report.html, report.json and the labelling page) is a span of
the answer: checked here by hand on the shapes that change the text (list items, folded quotes and spaces,
citation markers, abbreviations), by hypothesis on generated answers, and on every claim the bundled example and
the team's data sets (RAGTruth, FaithBench, RGB) produce.
"""

from __future__ import annotations

import json
import sys

import pytest
from helpers import EXAMPLE, REPO, SHARED_DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.judges.claims import claim_spans, extract_claims, split_clauses, split_sentences
from gate.judges.lexical import LexicalJudge
from gate.judges.text import detect_language, fold, fold_offsets
from gate.models import Chunk


def shown(answer: str, ids=()) -> list[tuple[str, str]]:
    return [(c.text, c.shown) for c in claim_spans(answer, "en", ids)]


def test_a_list_item_is_judged_with_its_head_and_shown_alone():
    assert shown("The restaurant serves pizza, pasta and salad.") == [
        ("The restaurant serves pizza", "The restaurant serves pizza"),
        ("The restaurant serves pasta", "pasta"),
        ("The restaurant serves salad.", "salad."),
    ]


def test_coordinated_adjectives_of_one_noun_phrase_are_one_claim():
    """'the distinct cultural and ethnic identity of ...' names one thing: split at "and" it gave the claims "... the
    distinct cultural" and "ethnic identity of ...", neither of which an answer states. Clauses still split."""
    answer = "The Normans kept  the distinct cultural and ethnic identity of their duchy."
    assert shown(answer) == [
        ("The Normans kept the distinct cultural and ethnic identity of their duchy.", answer),
    ]
    assert split_clauses("It formed a political or economic union with Norway.") == [
        "It formed a political or economic union with Norway."
    ]
    # two clauses, and a verb pair, split as before: "the" and "destroyed" are no adjectives
    assert split_clauses("The Normans adopted the Frankish language and they converted to Christianity.") == [
        "The Normans adopted the Frankish language",
        "they converted to Christianity.",
    ]
    assert split_clauses("The Normans attacked and destroyed the city walls.") == [
        "The Normans attacked",
        "destroyed the city walls.",
    ]
    # a noun with an adjective's ending is no adjective: two noun phrases, split as before
    assert len(split_clauses("He played death metal and progressive rock for a decade.")) == 2
    assert len(split_clauses("Its cinematography used natural light and magical effects in every scene.")) == 2
    # a list after the phrase still gives one claim per item, each a span of the answer
    answer = "They kept the cultural and ethnic traditions, the language and the laws."
    assert [c.shown for c in claim_spans(answer)] == [
        "They kept the cultural and ethnic traditions",
        "the language",
        "the laws.",
    ]


def test_folded_text_is_judged_and_the_text_as_written_is_shown():
    answer = "- It  is \u201cvery\u201d old\u2026\n2. Dr. Smith paid \uff13 million\u00a0dollars \u2014 in 1889."
    assert shown(answer) == [
        ('It is "very" old...', "It  is \u201cvery\u201d old\u2026"),
        ("Dr. Smith paid 3 million dollars - in 1889.", "Dr. Smith paid \uff13 million\u00a0dollars \u2014 in 1889."),
    ]


def test_citation_markers_are_not_judged_and_stay_inside_the_shown_clause():
    answer = "Rome is the capital [Paris] of Italy [Rome], and it has 2,800,000 inhabitants (source: census)."
    assert shown(answer, ["Paris", "Rome"]) == [
        ("Rome is the capital of Italy", "Rome is the capital [Paris] of Italy"),
        ("it has 2,800,000 inhabitants.", "it has 2,800,000 inhabitants (source: census)."),
    ]
    # a bare id in running text is a word of the claim
    assert shown("Paris is the capital of France.", ["Paris", "france"]) == [
        ("Paris is the capital of France.", "Paris is the capital of France.")
    ]


def test_claim_texts_are_what_the_judge_judged_before_offsets_were_tracked():
    """extract_claims and split_sentences give the texts the stored oracle was written with (tests/judges/
    test_lexical.py checks the verdicts): the hand-written cases of that file, here with their spans."""
    assert extract_claims("Finch & Fork is in Santa Barbara, California.") == [
        "Finch & Fork is in Santa Barbara, California."
    ]
    text = "Dr. Smith paid $3.5 million. The U.S. Army agreed.\n\n1. It was late."
    assert split_sentences(text) == ["Dr. Smith paid $3.5 million.", "The U.S. Army agreed.", "It was late."]
    assert [c.shown for c in claim_spans(text)] == split_sentences(text)
    assert split_clauses("Danielle and Adam welcomed a baby in 2020") == ["Danielle and Adam welcomed a baby in 2020"]
    assert [c.text for c in claim_spans("Sure! It has 1,000 rooms.")] == ["It has 1,000 rooms."]


def test_fold_offsets_maps_each_folded_character_to_its_source():
    text = "  a  \u201cb\u201d\u00a0\u2014 c\u2026\ufb01 e\u0301 "
    folded, starts, ends = fold_offsets(text)
    assert folded == fold(text) == 'a "b" - c...fi \u00e9'
    assert [text[a:b] for a, b in zip(starts, ends, strict=True)] == [
        "a", "  ", "\u201c", "b", "\u201d", "\u00a0", "\u2014", " ", "c", "\u2026", "\u2026", "\u2026",
        "\ufb01", "\ufb01", " ", "e\u0301",
    ]  # fmt: skip
    assert fold_offsets("") == ("", [], [])


_PIECES = st.sampled_from(
    [
        "The hotel",
        "has",
        "1,000 rooms",
        "pizza",
        ", ",
        " and ",
        ". ",
        "; ",
        "\n",
        "\n- ",
        "\n1. ",
        "Dr.",
        "U.S.",
        "It opened",
        "in 1889",
        " [d1]",
        "[1, 2]",
        " (source: d2)",
        "\u30104:0\u2020source\u3011",
        "\u201cquoted\u201d",
        "  ",
        "\u00a0",
        "\u2014",
        "\u2026",
        "\uff13",
        "e\u0301",
        "Paris",
        "but",
        "not",
        "?",
        "!",
        ":",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=25).map("".join))
def test_every_claim_is_a_span_of_the_answer(answer):
    claims = claim_spans(answer, "en", ["d1", "d2", "Paris"])
    for claim in claims:
        assert 0 <= claim.start < claim.end <= len(answer)
        assert claim.shown == answer[claim.start : claim.end] and claim.shown == claim.shown.strip()
    assert [c.start for c in claims] == sorted(c.start for c in claims)


def _assert_shown_as_written(question: str, answer: str, chunks) -> int:
    lang = detect_language(answer)
    spans = claim_spans(answer, lang, [c.id for c in chunks])
    assert all(c.shown in answer and c.shown == answer[c.start : c.end] for c in spans), answer
    return len(spans)


def test_every_claim_of_the_bundled_example_is_shown_as_written():
    """The example pipeline's answers and the stored oracle's rewritten answers, through the lexical judge."""
    sys.path.insert(0, str(EXAMPLE))
    import rag

    judge = LexicalJudge()
    oracle = json.loads((REPO / "tests" / "oracles" / "lexical_squad_example.json").read_text(encoding="utf-8"))
    texts = {p["id"]: p["text"] for p in map(json.loads, (EXAMPLE / "corpus.jsonl").open(encoding="utf-8"))}
    cases = [(c["question"], c["answer"], [Chunk(i, texts[i]) for i in c["chunk_ids"]]) for c in oracle["cases"]]
    for case in map(json.loads, (EXAMPLE / "golden.jsonl").open(encoding="utf-8")):
        out = rag.answer(case)
        cases.append((case["question"], out["answer"], [Chunk(c["id"], c["text"]) for c in out["retrieved"]]))
    n = 0
    for question, answer, chunks in cases:
        claims = judge.judge(question, answer, chunks).claims
        assert all(c.claim in answer for c in claims), answer
        n += len(claims)
    assert len(cases) == 296 and n > 900


def _shared_answers():
    from judgeeval import load_faithbench, load_ragtruth, load_rgb_counterfactual

    for case in [*load_ragtruth(SHARED_DATA / "ragtruth-subset"), *load_faithbench(SHARED_DATA / "faithbench")]:
        yield case.question, case.response, case.chunks
    for item in load_rgb_counterfactual(SHARED_DATA / "rgb-counterfactual"):
        chunks = tuple(Chunk(f"{item.id}/s{i}", t) for i, t in enumerate((*item.supporting, *item.noise)))
        head = item.question.rstrip(" ?")
        for answer in (
            *item.supporting,
            *item.contradicting,
            f"{head}: {item.answer}.",
            f"{head}: {item.fake_answer}.",
        ):
            yield item.question, answer, chunks


@pytest.mark.shared_data("ragtruth-subset", "faithbench", "rgb-counterfactual")
def test_every_claim_of_the_shared_data_is_shown_as_written():
    """Every claim of every RAGTruth response, FaithBench summary and RGB passage or answer is a span of it; the
    lexical judge's verdicts show them (every 25th answer judged here, all of them in the slow test below)."""
    answers = list(_shared_answers())
    assert sum(_assert_shown_as_written(*a) for a in answers) > 20_000
    judge = LexicalJudge()
    for question, answer, chunks in answers[::25]:
        assert all(c.claim in answer for c in judge.judge(question, answer, chunks).claims), answer


@pytest.mark.slow
@pytest.mark.shared_data("ragtruth-subset", "faithbench", "rgb-counterfactual")
def test_every_verdict_on_the_shared_data_shows_the_answer_as_written():
    judge = LexicalJudge()
    for question, answer, chunks in _shared_answers():
        assert all(c.claim in answer for c in judge.judge(question, answer, chunks).claims), answer
