"""One refusal detector for scoring, comparison and the judges (gate.metrics.refusal), with hand-labelled answers.

The long answers are shaped after RAGTruth responses (Niu et al., ACL 2024) whose prompt asks for "Unable to
answer based on given passages" when the passages do not answer: some answers are that refusal followed by an
explanation, others are real answers that quote the phrase further on.
"""

from __future__ import annotations

import json
import math
import sys

import pytest
from helpers import EXAMPLE, SHARED_DATA

import gate.judges.claims
import gate.scoring
from gate.config import GatePolicy
from gate.judges import get_judge
from gate.metrics.refusal import DEFAULT_REFUSAL_PHRASES, is_refusal
from gate.models import Chunk, Prediction
from gate.scoring import detect_refusal

FILLER = "The hotel has a pool, a spa and a gym, and breakfast is served from seven to ten every morning. "
LONG_ANSWER = "The Grand Hotel opened in 1998 and has 1,000 rooms. " + FILLER * 4


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("I don't have that information.", True),
        ("I don\u2019t know.", True),  # curly apostrophe
        ("Sorry, I CANNOT ANSWER that from the documents.", True),
        ("There is not enough information in the context.", True),
        ("Unable to answer based on given passages.", True),
        ("The passages do not mention the opening year.", True),
        ("Non ho informazioni sufficienti.", True),
        ("Non lo so.", True),
        ("", True),
        ("   \n", True),
        ("The Normans came from Normandy.", False),
        ("Non sono informazioni utili, ma l'hotel ha 1.000 camere.", False),  # "non so" is not inside "non sono"
        ("They give no informational value.", False),  # whole words only
        # Long: the opening sentence decides.
        ("Unable to answer based on given passages.\n\nThe provided passages only cover " + FILLER * 3, True),
        ("Based on the passages, the answer is:\n\nUnable to answer based on given passages. " + FILLER * 3, True),
        ("I'm sorry for the delay. " + LONG_ANSWER, False),
        (LONG_ANSWER + "Parking is not mentioned in the passages.", False),
    ],
)
def test_hand_labelled_answers(answer, expected):
    assert is_refusal(answer) is expected


@pytest.mark.parametrize(
    "answer",
    [
        "I'm afraid I can't help with this request.",
        "Sorry, I'm not able to help with that one.",
        "I am unable to assist with that.",
        "That is outside what I can answer.",
        "We are not in a position to provide that.",
        "It is not possible for me to answer this question.",
        "Thanks for asking! Unfortunately, I can't really assist with that.",
        "Sorry, but I can't help with that. Please contact the front desk.",  # the opening sentence declines
        "Hello! That's beyond my knowledge, I'm afraid. Is there anything else I can do?",
        "Non posso aiutarti con questa richiesta.",
    ],
)
def test_refusals_of_any_wording_are_refusals(answer):
    """None of these holds a listed phrase: the inability rule finds them (an unlisted refusal is no answer)."""
    assert not _pattern_only(answer)
    assert is_refusal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "The documents do not specify the year, but the treaty was signed in Paris.",
        "The hotel has a spa but no information is given about the pool.",
        "The hotel has a spa. No information is given about the pool.",  # the opening sentence answers
        "The passage does not say how long. However, it mentions that large cloves take an hour.",
        "There is no information about Brooks in the passage, but rather a mention of Einstein.",
        "I cannot stress enough how important the treaty was.",
        "It cannot offer parking to guests.",  # not first person: a fact about "it"
        "Paris. I don't know its population.",
        "Here is the answer:",
    ],
)
def test_answers_that_mention_a_limitation_are_answers(answer):
    assert not is_refusal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "The answer is not in the documents.",
        "I have no idea.",
        "This question cannot be answered from the context.",
        "Unfortunately, the provided context does not contain information about this.",
        "My knowledge doesn't cover that topic.",
        # the same kinds, other words
        "The information isn't found in the given passages.",
        "The year cannot be determined from these passages.",
        "Sorry, we've got no clue.",
        "That question is unanswerable.",
        "The retrieved documents don't mention the opening year.",
    ],
)
def test_refusals_that_say_the_sources_lack_the_answer_are_refusals(answer):
    """Missed in a user's trial: no listed phrase and no inability to help; the absence rule finds them."""
    assert not _pattern_only(answer)
    assert is_refusal(answer) and is_refusal(answer, None, ())  # a rule, not a phrase: it always applies


@pytest.mark.parametrize(
    "answer",
    [
        "The provided context does not mention Paris, but the treaty was signed in Rouen in 911.",
        "The answer is not in the first chapter but in the second: 1066.",
        "The winner cannot be determined until the votes are counted.",
        "The treaty does not mention Paris.",  # a fact about the treaty, not about the sources
        "I have no doubt the Normans won.",
        "The information is not included in the price.",
        "Rome was not built in a day.",
    ],
)
def test_statements_near_the_absence_rule_are_answers(answer):
    assert not is_refusal(answer)


def _pattern_only(answer: str) -> bool:
    """The old rule: a built-in phrase anywhere in the answer."""
    folded = " ".join(answer.casefold().replace("’", "'").split())
    return any(phrase in folded for phrase in DEFAULT_REFUSAL_PHRASES)


def test_an_explicit_flag_wins():
    assert is_refusal("The Normans came from Normandy.", True) is True
    assert is_refusal("I don't know.", False) is False


def test_custom_phrases_replace_the_defaults():
    assert is_refusal("Keine Angabe.", None, ("keine angabe",))
    assert not is_refusal("I don't know.", None, ("keine angabe",))
    assert is_refusal("Je ne sais pas", None, ("Je ne sais pas",))
    assert not is_refusal("I don't know.", None, ())
    assert is_refusal("I can't help with that.", None, ())  # the inability rule is no phrase: it always applies
    assert not is_refusal("The documents do not specify the year, but it was in Paris.", None, ("do not specify",))
    assert "i don't have that information" in DEFAULT_REFUSAL_PHRASES
    assert all(p == p.casefold() for p in DEFAULT_REFUSAL_PHRASES)


def test_scoring_comparison_and_judges_share_the_detector():
    assert gate.judges.claims.is_refusal is is_refusal
    assert gate.scoring.is_refusal is is_refusal
    policy = GatePolicy()
    answers = [
        "Unable to answer based on given passages.",
        "It has 1,000 rooms.",
        "I'm sorry for the delay. " + LONG_ANSWER,
    ]
    judge = get_judge({"name": "lexical"})
    for answer in answers:
        refused = detect_refusal(Prediction(id="a", answer=answer), policy)
        judgment = judge.judge("How many rooms?", answer, [Chunk("d", "The hotel has 1,000 rooms.")])
        assert refused is is_refusal(answer)
        assert (judgment.claims == ()) is refused and math.isnan(judgment.faithfulness) is refused


def test_detect_refusal_follows_the_configured_policy():
    flagged = Prediction(id="a", answer="It has 1,000 rooms.", refused=True)
    assert detect_refusal(flagged, GatePolicy())
    assert not detect_refusal(flagged, GatePolicy(refusal_use_field=False))
    custom = GatePolicy(refusal_phrases=("keine angabe",))
    assert detect_refusal(Prediction(id="a", answer="Keine Angabe."), custom)
    assert not detect_refusal(Prediction(id="a", answer="I don't know."), custom)


@pytest.mark.shared_data("ragtruth-subset", "faithbench")
def test_few_real_answers_are_read_as_refusals():
    """False positives, measured: RAGTruth responses and FaithBench summaries are real answers of real models; the
    only refusals among them are RAGTruth QA answers that open with the phrase its prompt asks for when the passages
    do not answer ("Unable to answer based on given passages."). Measured: 5 of 676 RAGTruth responses (all five
    that open with or lead in to that sentence), 0 of 600 FaithBench summaries; the same with the absence rule
    (16 RAGTruth responses and 4 FaithBench summaries have a sentence it matches, each after an answer or past a
    "but" that says something)."""
    from judgeeval import load_faithbench, load_ragtruth

    ragtruth = [c for c in load_ragtruth(SHARED_DATA / "ragtruth-subset") if is_refusal(c.response)]
    faithbench = [c for c in load_faithbench(SHARED_DATA / "faithbench") if is_refusal(c.response)]
    assert len(ragtruth) == 5 and not faithbench
    assert all("unable to answer based on given passages" in c.response.casefold() for c in ragtruth)
    assert all(c.task_type == "QA" and not c.hallucinated for c in ragtruth)


def test_the_bundled_example_refusals_are_the_pipeline_refusals():
    """The example pipeline's refusal flag and the text rule agree on every golden question."""
    sys.path.insert(0, str(EXAMPLE))
    import rag

    answers = [rag.answer(case) for case in map(json.loads, (EXAMPLE / "golden.jsonl").open(encoding="utf-8"))]
    assert sum(a["refused"] for a in answers) >= 1
    assert [is_refusal(a["answer"]) for a in answers] == [a["refused"] for a in answers]
