"""SQuAD F1 / exact match against the official v2.0 script's behaviour (hand-checked), and the answer-level
rules of score_case (refusal detection: test_refusal.py)."""

from __future__ import annotations

import math

import pytest

from gate.metrics import resolve, score_case
from gate.metrics.generation import answer_f1, exact_match, normalize_answer
from gate.models import GoldenCase, Prediction


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The  Quick, Brown-Fox!", "quick brownfox"),  # punctuation is deleted, not replaced by a space
        ("An apple a day", "apple day"),
        ("theatre", "theatre"),  # articles only as whole words
        ("“Paris”", "“paris”"),  # only ASCII string.punctuation is removed, as in the official script
        ("  ", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_answer_f1_hand_checked():
    refs = ["10th and 11th centuries", "in the 10th and 11th centuries"]
    # pred tokens [in, 10th, century]: vs ref 1, 1 common → P 1/3, R 1/4, F1 2/7; vs ref 2, 2 common → P 2/3,
    # R 2/5, F1 1/2; the case takes the max.
    assert answer_f1("in 10th century", refs) == pytest.approx(0.5)
    assert answer_f1("in 10th century", refs[:1]) == pytest.approx(2 / 7)
    assert answer_f1("The Denmark, Iceland and Norway.", ["Denmark, Iceland and Norway"]) == 1.0
    # Multiset overlap: "paris paris" vs "paris" → 1 common, P 1/2, R 1 → 2/3.
    assert answer_f1("Paris paris", ["Paris"]) == pytest.approx(2 / 3)
    assert answer_f1("London", ["Paris"]) == 0.0
    assert answer_f1("", ["Paris"]) == 0.0
    assert answer_f1("the", ["Paris"]) == 0.0  # normalises to no token


def test_exact_match_hand_checked():
    assert exact_match("The Eiffel Tower.", ["eiffel  tower"]) == 1.0
    assert exact_match("Eiffel Tower in Paris", ["Eiffel Tower"]) == 0.0
    assert exact_match("“Paris”", ["Paris"]) == 0.0  # curly quotes are not in string.punctuation
    assert exact_match("France", ["Germany", "france"]) == 1.0


@pytest.mark.parametrize("fn", [answer_f1, exact_match])
def test_no_usable_reference_is_nan(fn):
    assert math.isnan(fn("Paris", []))
    assert math.isnan(fn("Paris", ["", " the ", "."]))  # the official script drops references that normalise to ""
    assert fn("Paris", ["", "Paris"]) == 1.0


def _case(ood: bool = False, refs: tuple[str, ...] = ("Normandy",)) -> GoldenCase:
    return GoldenCase(
        id="c",
        question="Where?",
        expected_doc_ids=() if ood else ("d",),
        reference_answers=() if ood else refs,
        out_of_domain=ood,
    )


def _score(name: str, case: GoldenCase, answer: str = "in Normandy", refused: bool = False, **kw) -> float:
    return score_case(resolve(name), case, Prediction(id="c", answer=answer, **kw), refused)


def test_score_case_answer_metrics():
    assert _score("answer_f1", _case()) == pytest.approx(2 / 3)
    assert _score("exact_match", _case(), answer="Normandy") == 1.0
    # An in-domain refusal scores 0, even when its words overlap a reference.
    assert _score("answer_f1", _case(refs=("no information",)), answer="No information.", refused=True) == 0.0
    assert math.isnan(_score("answer_f1", _case(refs=())))
    assert math.isnan(_score("exact_match", _case(ood=True)))


def test_score_case_refusal_metrics():
    assert _score("refusal", _case(ood=True), refused=True) == 1.0
    assert _score("refusal", _case(ood=True), refused=False) == 0.0
    assert math.isnan(_score("refusal", _case(), refused=True))
    assert _score("false_refusal", _case(), refused=True) == 1.0
    assert _score("false_refusal", _case(), refused=False) == 0.0
    assert math.isnan(_score("false_refusal", _case(ood=True), refused=True))


def test_score_case_latency_cost_and_judged():
    assert _score("latency_ms", _case(ood=True), latency_ms=12.5) == 12.5
    assert math.isnan(_score("latency_ms", _case()))
    assert _score("cost_usd", _case(), cost_usd=0.002) == 0.002
    assert math.isnan(_score("cost_usd", _case()))
    for name in ("faithfulness", "contradiction_rate"):
        with pytest.raises(ValueError, match="is judged"):
            _score(name, _case())


def test_answer_f1_and_exact_match_read_the_answer_without_its_citation_markers():
    from gate.models import Chunk

    case = GoldenCase("q", "Capital of France?", ("d1",), reference_answers=("Paris",))
    cited = Prediction("q", 0, "Paris [d1]", (Chunk("d1", "Paris is the capital."),))
    plain = Prediction("q", 0, "Paris", (Chunk("d1", "Paris is the capital."),))
    for name in ("answer_f1", "exact_match"):
        metric = resolve(name)
        assert score_case(metric, case, cited, refused=False) == score_case(metric, case, plain, refused=False) == 1.0
