"""One refusal detector for scoring, comparison and the judges (gate.metrics.refusal), with hand-labelled answers.

The long answers are shaped after RAGTruth responses (Niu et al., ACL 2024) whose prompt asks for "Unable to
answer based on given passages" when the passages do not answer: some answers are that refusal followed by an
explanation, others are real answers that quote the phrase further on.
"""

from __future__ import annotations

import math

import pytest

import gate.judges.claims
import gate.scoring
from gate.config import GatePolicy
from gate.judges import get_judge
from gate.metrics.refusal import DEFAULT_REFUSAL_PHRASES, MAX_REFUSAL_WORDS, is_refusal
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


def test_the_word_limit_separates_short_and_long_answers():
    base = "The hotel has a spa but no information is given about the pool"
    short = base + "."
    assert len(short.split()) <= MAX_REFUSAL_WORDS and is_refusal(short)
    long = "The hotel has a spa. " + " ".join(["word"] * MAX_REFUSAL_WORDS) + ". No information about the pool."
    assert len(long.split()) > MAX_REFUSAL_WORDS and not is_refusal(long)


def test_an_explicit_flag_wins():
    assert is_refusal("The Normans came from Normandy.", True) is True
    assert is_refusal("I don't know.", False) is False


def test_custom_phrases_replace_the_defaults():
    assert is_refusal("Keine Angabe.", None, ("keine angabe",))
    assert not is_refusal("I don't know.", None, ("keine angabe",))
    assert is_refusal("Je ne sais pas", None, ("Je ne sais pas",))
    assert not is_refusal("I don't know.", None, ())
    assert "i don't have that information" in DEFAULT_REFUSAL_PHRASES
    assert all(p == p.casefold() for p in DEFAULT_REFUSAL_PHRASES)


def test_scoring_comparison_and_judges_share_the_detector():
    assert gate.judges.claims.is_refusal is is_refusal
    assert gate.scoring.is_refusal is is_refusal
    evaluation = GatePolicy()
    answers = [
        "Unable to answer based on given passages.",
        "It has 1,000 rooms.",
        "I'm sorry for the delay. " + LONG_ANSWER,
    ]
    judge = get_judge({"name": "lexical"})
    for answer in answers:
        refused = detect_refusal(Prediction(id="a", answer=answer), evaluation)
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
