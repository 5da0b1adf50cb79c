"""Judge evaluation: metrics against hand-computed values, loaders on the real datasets, measured rates.

The lexical judge's measured rates are floors (measured value minus the former tolerance): a better judge must
not fail a test. Judging a whole data set takes 5-25 s, so those tests are marked ``slow`` (CI runs ``-m slow``).
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from helpers import SHARED_DATA
from judgeeval import (
    DEFAULT_THRESHOLD,
    LabeledCase,
    PairResult,
    agreement_summary,
    calibration_sample,
    choose_cut,
    choose_threshold,
    counterfactual_rates,
    detection,
    flags_hallucination,
    hallucination_score,
    judge_cases,
    load_faithbench,
    load_ragtruth,
    load_rgb_counterfactual,
    mcnemar_worse,
    quality,
    split_by_source,
    word_novelty,
    yelp_chunks,
)
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

from gate.errors import InputError
from gate.judges import LexicalJudge
from gate.judges.base import ClaimVerdict, Judgment
from gate.models import Chunk

DATA = SHARED_DATA


def judgment(*verdicts: str) -> Judgment:
    return Judgment(claims=tuple(ClaimVerdict(claim=f"c{i}", verdict=v) for i, v in enumerate(verdicts)))


def case(i: int, hallucinated: bool, source: str = "s") -> LabeledCase:
    return LabeledCase(f"x{i}", "", (), "answer", hallucinated, "m", f"{source}{i}", "QA")


def test_rule_contradiction_or_low_faithfulness_and_no_claims_never_flagged():
    assert flags_hallucination(judgment("supported", "contradicted", "supported", "supported"), 0.5)
    assert flags_hallucination(judgment("supported", "unverifiable", "unverifiable"), 0.5)  # 1/3 < 0.5
    assert not flags_hallucination(judgment("supported", "unverifiable"), 0.5)  # 1/2 is not < 0.5
    assert not flags_hallucination(judgment(), 0.5)  # refusal: NaN faithfulness
    assert not flags_hallucination(Judgment(error="timeout"), 0.5)


def test_quality_against_hand_computed_figures():
    # truth:  H H H H F F F F F F ; judge flags: H H H F H F F F F F  -> tp=3 fn=1 fp=1 tn=5
    truth = [True] * 4 + [False] * 6
    flagged = [True, True, True, False, True] + [False] * 5
    cases = [case(i, t) for i, t in enumerate(truth)]
    judgments = [judgment("contradicted") if f else judgment("supported") for f in flagged]
    q = quality(cases, judgments, 0.5)
    assert q.confusion == (5, 1, 1, 3)
    assert q.balanced_accuracy == pytest.approx((3 / 4 + 5 / 6) / 2)
    assert (q.precision, q.recall, q.f1) == pytest.approx((3 / 4, 3 / 4, 3 / 4))
    p_o, p_e = 8 / 10, (4 / 10) * (4 / 10) + (6 / 10) * (6 / 10)  # Cohen 1960
    assert q.kappa == pytest.approx((p_o - p_e) / (1 - p_e))
    assert (q.n, q.n_hallucinated, q.n_errors, q.kappa_judges) == (10, 4, 0, None)


def test_quality_excludes_judge_failures_and_computes_inter_judge_kappa():
    cases = [case(i, i < 2) for i in range(5)]
    first = [judgment("contradicted"), judgment("contradicted"), judgment("supported"), judgment(), Judgment(error="x")]
    second = [judgment("contradicted"), judgment("supported"), judgment("supported"), judgment("supported"), judgment()]
    q = quality(cases, first, 0.5, second=second)
    assert (q.n, q.n_errors, q.n_no_claims) == (4, 1, 1)
    # flags first: 1 1 0 0, second: 1 0 0 0 -> p_o = 3/4, p_e = (2/4)(1/4) + (2/4)(3/4) = 1/2
    assert q.kappa_judges == pytest.approx((0.75 - 0.5) / 0.5)
    with pytest.raises(ValueError, match="same length"):
        quality(cases, first[:2])


def test_word_novelty_counts_answer_tokens_absent_from_the_context():
    chunks = (Chunk("a", "The hotel has 1,000 rooms."), Chunk("b", "A spa opened in 1998."))
    # tokens: the hotel has a casino and a spa -> absent: casino, and (a is in chunk b) -> 2 / 8
    assert word_novelty("The hotel has a casino and a spa", chunks) == 2 / 8
    assert word_novelty("", chunks) == 0.0


def test_hallucination_score_orders_contradictions_above_unsupported_claims():
    assert hallucination_score(judgment("supported", "contradicted")) == 1.5
    assert hallucination_score(judgment("supported", "unverifiable", "unverifiable", "supported")) == 0.5
    assert hallucination_score(judgment()) == 0.0 and hallucination_score(Judgment(error="x")) == 0.0


def test_choose_cut_and_detection_against_sklearn_and_hand_computed_cuts():
    truth = [False, False, True, True, False, True]
    scores = [0.1, 0.4, 0.35, 0.8, 0.2, 0.9]
    assert choose_cut(truth, scores) == 0.2  # flags 0.35, 0.4, 0.8, 0.9: recall 1, specificity 2/3
    found = detection("x", truth, scores, 0.2, ["a", "a", "b", "b", "c", "c"], np.random.default_rng(1), 300)
    assert found.balanced_accuracy.value == pytest.approx((1 + 2 / 3) / 2)
    assert found.auroc.value == pytest.approx(roc_auc_score(truth, scores))
    assert found.auroc.low <= found.auroc.value <= found.auroc.high
    assert (found.n, found.n_hallucinated, found.flag_rate) == (6, 3, pytest.approx(4 / 6))


def test_mcnemar_worse_is_the_one_sided_exact_binomial_on_discordant_pairs():
    base = [False] * 6 + [True] + [False] * 3
    head = [True] * 5 + [False, False] + [False] * 3  # b = 5 (base ok, head bad), c = 1
    assert mcnemar_worse(base, head) == pytest.approx(7 / 64)  # P(X >= 5), X ~ Bin(6, 1/2)
    assert mcnemar_worse(base, head) == pytest.approx(binomtest(5, 6, 0.5, alternative="greater").pvalue)
    assert mcnemar_worse(head, base) == pytest.approx(63 / 64)
    assert mcnemar_worse([True, False], [True, False]) == 1.0


def test_choose_threshold_maximises_balanced_accuracy_on_the_given_cases():
    cases = [case(i, h) for i, h in enumerate([True, True, False, False])]
    judgments = [
        judgment("supported", "unverifiable", "unverifiable"),
        judgment("supported", "unverifiable"),
        judgment("supported", "supported", "unverifiable"),
        judgment("supported"),
    ]  # 1/3, 1/2, 2/3, 1
    assert choose_threshold(cases, judgments, grid=[0.3, 0.4, 0.6, 0.9]) == 0.6
    assert quality(cases, judgments, 0.6).balanced_accuracy == 1.0


def test_split_by_source_keeps_sources_together_and_is_deterministic():
    cases = [LabeledCase(f"x{i}", "", (), "a", False, "m", f"src{i % 7}", "QA") for i in range(70)]
    dev, test = split_by_source(cases)
    assert len(dev) + len(test) == 70 and dev and test
    assert not {c.source_id for c in dev} & {c.source_id for c in test}
    assert split_by_source(cases) == (dev, test)


def test_loader_errors_name_file_line_and_field(tmp_path):
    bad = tmp_path / "cases.jsonl"
    bad.write_text('{"id": "a", "context": "x", "response": "r", "label": "faithful", "source_id": "s"}\n{"id": "b"}\n')
    with pytest.raises(InputError, match=r"cases.jsonl:2: context: missing field"):
        load_faithbench(tmp_path)
    bad.write_text('{"id": "a", "context": "x", "response": "r", "label": "maybe", "source_id": "s"}\n')
    with pytest.raises(InputError, match=r"cases.jsonl:1: label: must be 'hallucinated' or 'faithful'"):
        load_faithbench(bad)
    bad.write_text("not json\n")
    with pytest.raises(InputError, match=r"cases.jsonl:1: invalid JSON"):
        load_faithbench(bad)
    with pytest.raises(InputError, match="no such file"):
        load_ragtruth(tmp_path / "missing")


def test_yelp_record_is_linearised_with_negated_false_attributes():
    record = {
        "name": "Finch & Fork",
        "state": "CA",
        "hours": {"Sunday": "9:0-14:0"},
        "attributes": {
            "OutdoorSeating": False,
            "WiFi": "free",
            "Music": None,
            "BusinessParking": {"valet": True, "lot": False},
        },
        "business_stars": 4.0,
        "review_info": [{"review_stars": 5.0, "review_date": "2022-01-09 19:18:59", "review_text": "Great brunch."}],
    }
    business, review = yelp_chunks(record, "r1")
    assert business.text == (
        "Name: Finch & Fork. State: CA (California). Sunday 9:00 to 14:00. No outdoor seating. Wifi: free. "
        "Valet business parking. No lot business parking. Rating: 4.0 stars."
    )
    assert (review.id, review.text) == ("r1/review1", "Review of January 9, 2022, 5.0 stars. Great brunch.")
    judge = LexicalJudge()
    assert [c.verdict for c in judge.judge("", "It offers outdoor seating.", (business,)).claims] == ["contradicted"]
    assert [c.verdict for c in judge.judge("", "Sunday: 9 am to 2 pm.", (business,)).claims] == ["supported"]
    assert [c.verdict for c in judge.judge("", "Sunday: 9 am to 3 pm.", (business,)).claims] == ["contradicted"]


@pytest.mark.shared_data("ragtruth-subset")
def test_ragtruth_loader_matches_the_dataset_readme():
    cases = load_ragtruth(DATA / "ragtruth-subset")
    assert len(cases) == 676 and sum(c.hallucinated for c in cases) == 260
    assert Counter(c.task_type for c in cases) == {"QA": 149, "Summary": 264, "Data2txt": 263}
    per_model = Counter((c.model, c.hallucinated) for c in cases)
    assert (per_model["gpt-4-0613", True], per_model["gpt-4-0613", False]) == (10, 99)
    assert per_model["mistral-7B-instruct", True] == 71
    qa = next(c for c in cases if c.task_type == "QA")
    assert qa.question and len(qa.chunks) >= 1 and qa.chunks[0].id == f"{qa.id}/p1"
    assert all(c.spans for c in cases if c.hallucinated)


@pytest.mark.shared_data("faithbench", "rgb-counterfactual")
def test_faithbench_and_rgb_loaders_match_the_readmes():
    faith = load_faithbench(DATA / "faithbench")
    assert (len(faith), sum(c.hallucinated for c in faith)) == (600, 424)
    items = load_rgb_counterfactual(DATA / "rgb-counterfactual")
    assert len(items) == 75
    assert sum(len(i.supporting) for i in items) == 314 == sum(len(i.contradicting) for i in items)
    assert items[0].answer == "Tampa, Florida" and items[0].fake_answer == "Glendale, Arizona"


@pytest.mark.slow
@pytest.mark.shared_data("rgb-counterfactual")
def test_rgb_minimal_pairs_supported_and_contradicted_rates():
    items = load_rgb_counterfactual(DATA / "rgb-counterfactual")
    passages = counterfactual_rates(LexicalJudge(), items, "passage")
    assert passages.n == 312  # two of the 314 pairs are identical and left out
    assert passages.supported_rate >= 0.97  # measured 1.000
    assert passages.contradicted_rate >= 0.80  # measured 0.849
    sentences = counterfactual_rates(LexicalJudge(), items, "sentence")
    assert sentences.supported_rate >= 0.74  # measured 0.800
    assert sentences.contradicted_rate >= 0.60  # measured 0.680


@pytest.mark.slow
@pytest.mark.shared_data("ragtruth-subset")
def test_ragtruth_test_split_figures_and_seeded_calibration_sample():
    _, test = split_by_source(load_ragtruth(DATA / "ragtruth-subset"))
    judgments = judge_cases(LexicalJudge(), test)
    q = quality(test, judgments, DEFAULT_THRESHOLD)
    assert q.n == 359
    assert q.balanced_accuracy >= 0.65  # measured 0.691; chance is 0.5
    assert q.f1 >= 0.59  # measured 0.642
    sample = calibration_sample(test, judgments, np.random.default_rng(7), size=20)
    again = calibration_sample(test, judgments, np.random.default_rng(7), size=20)
    assert len(sample) == 20 and sample == again and len({s["id"] for s in sample}) == 20
    assert json.loads(json.dumps(sample)) == sample
    assert all(isinstance(s["human_hallucinated"], bool) and s["claims"] is not None for s in sample)
    assert any(math.isfinite(s["faithfulness"]) for s in sample if s["faithfulness"] is not None)


@pytest.mark.slow
@pytest.mark.shared_data("ragtruth-subset", "faithbench")
def test_response_level_detection_floors_next_to_the_word_novelty_baseline():
    judge = LexicalJudge()
    measured = {}
    for name, cases in (
        ("ragtruth", load_ragtruth(DATA / "ragtruth-subset")),
        ("faithbench", load_faithbench(DATA / "faithbench")),
    ):
        _, test = split_by_source(cases)
        truth = [c.hallucinated for c in test]
        judged = judge_cases(judge, test)
        unsupported = [len(j.claims) - j.n_supported + j.n_contradicted for j in judged]
        novelty = [word_novelty(c.response, c.chunks) for c in test]
        measured[name] = (roc_auc_score(truth, unsupported), roc_auc_score(truth, novelty))
    assert measured["ragtruth"][0] >= 0.72  # measured 0.750 (word novelty 0.773)
    assert measured["faithbench"][0] >= 0.60  # measured 0.637
    assert measured["faithbench"][0] > measured["faithbench"][1]  # above the baseline (0.596)


def test_agreement_summary_counts_catches_misses_and_false_fails():
    def pair(p, verdict):
        return PairResult("a", "b", 80, 0.1, 0.3, p, verdict, (), {})

    pairs = [pair(0.001, "fail"), pair(0.01, "inconclusive"), pair(0.03, "fail"), pair(0.2, "fail"), pair(0.6, "pass")]
    assert agreement_summary(pairs) == (
        "  people see a significant drop in 3 of 5 pairs: the gate fails on 2 (misses 1); false fails 1 of 2"
    )
