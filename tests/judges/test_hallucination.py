"""The lexical judge's hallucination model (gate.judges.hallucination) and the gated grounded_answer_rate."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from helpers import REPO, SHARED_DATA
from scipy.special import expit

from gate.config import GatePolicy
from gate.judges import LexicalJudge
from gate.judges.base import ClaimVerdict, Judgment
from gate.judges.hallucination import HARD_WEIGHT, ClaimSignals, HallucinationModel, shipped_model
from gate.metrics import resolve
from gate.models import Chunk, GoldenCase, Prediction
from gate.scoring import score_one

MODEL = HallucinationModel(intercept=-2.0, weights=(0.5, 0.25, 1.5, 0.75), version="test")
FAITHFUL = ClaimSignals(novelty_closest=0.2, novelty_context=0.0, absent_facts=0, contradicted=False)
INVENTED = ClaimSignals(novelty_closest=1.0, novelty_context=0.8, absent_facts=2, contradicted=False)


def test_claim_probability_is_the_logistic_of_the_features():
    # oracle: scipy's expit of the linear predictor written out by hand
    assert MODEL.claim_probability(FAITHFUL) == pytest.approx(expit(-2.0 + 0.5 * 0.2), abs=1e-15)
    z = -2.0 + 0.5 * 1.0 + 0.25 * 0.8 + 1.5 * math.log(3) + 0.0
    assert MODEL.claim_probability(INVENTED) == pytest.approx(expit(z), abs=1e-15)
    contradicted = ClaimSignals(0.0, 0.0, 0, True)
    assert MODEL.claim_probability(contradicted) == pytest.approx(expit(-1.25), abs=1e-15)


def test_answer_score_is_the_mean_raised_by_a_hard_claim():
    p_faithful, p_invented = expit(-1.9), MODEL.claim_probability(INVENTED)
    assert MODEL.answer_score([FAITHFUL, FAITHFUL]) == pytest.approx(p_faithful)
    mean = (3 * p_faithful + p_invented) / 4
    assert MODEL.answer_score([FAITHFUL] * 3 + [INVENTED]) == pytest.approx(mean + (1 - mean) * HARD_WEIGHT)
    with pytest.raises(ValueError, match="without claims"):
        MODEL.answer_score([])


def test_a_hard_claim_states_an_absent_fact_with_mostly_new_words():
    assert ClaimSignals(1.0, 0.5, 1, False).hard
    assert not ClaimSignals(1.0, 0.49, 1, False).hard  # a reworded sentence with a new number
    assert not ClaimSignals(1.0, 1.0, 0, False).hard  # new words, no checkable fact


def test_the_score_does_not_grow_with_the_number_of_faithful_claims():
    assert MODEL.answer_score([FAITHFUL] * 2) == pytest.approx(MODEL.answer_score([FAITHFUL] * 20))


def test_the_shipped_model_loads_and_names_its_version():
    model = shipped_model()
    assert len(model.weights) == 4 and model.version
    assert LexicalJudge().identity["model"] == model.version
    data = json.loads((REPO / "src" / "gate" / "judges" / "data" / "hallucination_model.json").read_text())
    assert model.to_dict() == {k: data[k] for k in ("version", "features", "intercept", "weights")}
    # fitted on human labels: an absent fact and a contradiction each raise a claim's probability
    assert all(w > 0 for w in model.weights)


PARAGRAPH = (
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in France. "
    "They were descended from Norse raiders and pirates from Denmark, Iceland and Norway. "
    "Their leader Rollo agreed to swear fealty to King Charles III of West Francia."
)
CHUNKS = [Chunk("normans-0", PARAGRAPH)]
QUESTION = "Who were the Normans?"
SHORT = "The Normans gave their name to Normandy, a region in France."
LONG = (
    "The Normans gave their name to Normandy, a region in France. They were descended from Norse raiders and pirates "
    "from Denmark, Iceland and Norway. Their leader Rollo agreed to swear fealty to King Charles III of West Francia."
)
INVENTION = " In 1187 the Normans sold Normandy to Lord Whitmore for 40,000 marks."


def grounded(answer: str) -> float:
    return LexicalJudge().judge(QUESTION, answer, CHUNKS).grounded_answer_rate


def test_one_invented_sentence_is_not_diluted_by_a_faithful_paragraph():
    judgment = LexicalJudge().judge(QUESTION, LONG + INVENTION, CHUNKS)
    invented = judgment.claims[-1]
    assert invented.signals is not None and invented.signals.hard
    assert invented.p_hallucinated > 0.5 > max(c.p_hallucinated for c in judgment.claims[:-1])
    assert grounded(LONG) - grounded(LONG + INVENTION) > 0.4
    assert grounded(SHORT) - grounded(SHORT + INVENTION) > 0.4


def test_a_longer_faithful_answer_is_not_less_grounded():
    assert grounded(LONG) >= grounded(SHORT) - 0.02
    assert grounded(SHORT) > 0.8


@pytest.mark.parametrize(
    "answer",
    ["It depends on several factors, so it is hard to say in general.", "There are many aspects to consider here."],
)
def test_a_vague_non_answer_is_not_grounded(answer):
    assert grounded(answer) == 0.0


def test_grounded_answer_rate_of_judges_without_a_model():
    supported = ClaimVerdict("a", "supported")
    assert Judgment(claims=(supported, supported)).grounded_answer_rate == 1.0
    assert Judgment(claims=(supported, ClaimVerdict("b", "unverifiable"))).grounded_answer_rate == 0.0
    assert Judgment(claims=()).grounded_answer_rate == 0.0  # no checkable claim: not grounded
    assert Judgment(score=0.5).grounded_answer_rate == 0.5  # a score-only judge
    assert math.isnan(Judgment(error="down").grounded_answer_rate)
    assert math.isnan(Judgment(not_applicable="es").grounded_answer_rate)


def test_a_refusal_scores_zero_on_an_answerable_case_and_nan_out_of_domain():
    metrics = [resolve("grounded_answer_rate")]
    judge = LexicalJudge()
    refusal = Prediction("q", 0, "I don't know.", (Chunk("normans-0", PARAGRAPH),))
    answerable = GoldenCase("q", QUESTION, ("normans-0",))
    [score] = score_one(answerable, refusal, metrics, GatePolicy(), judge)
    assert score.value == 0.0
    [score] = score_one(GoldenCase("q", QUESTION, (), out_of_domain=True), refusal, metrics, GatePolicy(), judge)
    assert math.isnan(score.value)
    answer = Prediction("q", 0, SHORT, (Chunk("normans-0", PARAGRAPH),))
    [score] = score_one(answerable, answer, metrics, GatePolicy(), judge)
    assert score.value == pytest.approx(grounded(SHORT))


@pytest.mark.slow
@pytest.mark.shared_data("ragtruth-subset", "faithbench")
def test_the_shipped_model_is_what_its_script_fits(tmp_path):
    """scripts/fit_hallucination_model.py on the development halves reproduces the shipped coefficients."""
    out = tmp_path / "model.json"
    command = [sys.executable, str(REPO / "scripts" / "fit_hallucination_model.py"), "--data", str(SHARED_DATA)]
    subprocess.run([*command, "--out", str(out)], check=True, capture_output=True, timeout=900)
    shipped = json.loads((REPO / "src" / "gate" / "judges" / "data" / "hallucination_model.json").read_text())
    assert json.loads(out.read_text()) == shipped


def test_the_report_and_the_comment_show_each_flagged_claim_s_probability(tmp_path):
    from helpers import compare, write_jsonl

    golden = [{"id": f"q{i}", "question": QUESTION, "expected_doc_ids": ["normans-0"]} for i in range(12)]
    chunk = [{"id": "normans-0", "text": PARAGRAPH}]
    write_jsonl(tmp_path / "golden.jsonl", golden)
    write_jsonl(tmp_path / "base.jsonl", [{"id": g["id"], "answer": SHORT, "retrieved": chunk} for g in golden])
    write_jsonl(
        tmp_path / "head.jsonl", [{"id": g["id"], "answer": SHORT + INVENTION, "retrieved": chunk} for g in golden]
    )
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 1 and report["verdict"] == "fail", report["reasons"]
    claims = [c for case in report["regressed_cases"] for c in case["claims"]]
    invented = next(c for c in claims if "Whitmore" in c["claim"])
    assert invented["p_hallucinated"] > 0.5 and "number 1187" in invented["unsupported_facts"]
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    assert f"(p hallucinated {invented['p_hallucinated']:.2f})" in comment
