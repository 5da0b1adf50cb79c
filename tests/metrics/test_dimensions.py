"""The five generation dimensions — faithfulness, answer relevance, correctness, completeness and
form — as metrics: their deterministic parts (no model), the rubric judge's one call that grades all five, how
the two combine, the form rules of the config and of a case, and a gate that fails on a form regression."""

from __future__ import annotations

import itertools
import json
import math
import re

import pytest
from helpers import compare, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.config import GatePolicy
from gate.judges.lexical import LexicalJudge
from gate.metrics import resolve, score_case
from gate.metrics.generation import (
    citation_markers,
    cites_retrieved,
    form_rules_met,
    points_covered,
    strip_citations,
    token_recall,
    word_count,
)
from gate.models import Chunk, FormRules, GoldenCase, Prediction
from gate.scoring import score_one

FIVE = ("faithfulness", "answer_relevance", "correctness", "completeness", "form")

# ------------------------------------------------------------------ deterministic parts, hand-computed


def test_token_recall_is_the_share_of_reference_tokens_in_the_answer_best_reference():
    answer = "The capital of France is Paris, a city of 2 million people."
    # SQuAD normalisation drops punctuation and articles: "Paris, France" → {paris, france}, both in the answer.
    assert token_recall(answer, ["Paris, France"]) == 1.0
    assert token_recall(answer, ["Lyon, France"]) == 0.5  # france of {lyon, france}
    assert token_recall(answer, ["Lyon, France", "Marseille"]) == 0.5  # the best reference
    assert token_recall("very good", ["very very good"]) == pytest.approx(2 / 3)  # multiset: one "very" matches
    # a long answer that also explains keeps full recall (F1 would drop to 2·(1/8)·1/(1/8 + 1) ≈ 0.22)
    assert token_recall("Paris is the answer you are looking for here", ["Paris"]) == 1.0
    assert math.isnan(token_recall(answer, [])) and math.isnan(token_recall(answer, ["the", "!"]))


def test_points_covered_is_the_mean_token_recall_of_the_points():
    answer = "The tower is 330 metres tall and opened in 1889."
    points = ["330 metres tall", "opened in 1889", "designed by Gustave Eiffel"]
    # recalls: 3/3, 3/3, 0/4 ("designed", "by", "gustave", "eiffel") → mean 2/3
    assert points_covered(answer, points) == pytest.approx(2 / 3)
    assert points_covered(answer, ["330 metres", "built by Eiffel"]) == pytest.approx((1 + 0) / 2)
    assert points_covered(answer, ["tower opened 1890"]) == pytest.approx(2 / 3)
    assert math.isnan(points_covered(answer, [])) and math.isnan(points_covered(answer, ["?"]))


def test_citation_must_name_a_retrieved_id_as_a_whole_token():
    ids = ["doc-7", "d1"]
    assert cites_retrieved("It is 330 m tall [doc-7].", ids)
    assert cites_retrieved("(source: d1) It opened in 1889.", ids)
    assert not cites_retrieved("It is 330 m tall [doc-70].", ids)  # a longer id
    assert not cites_retrieved("See xd1 and doc-7b.", ids)  # part of another word
    assert not cites_retrieved("It is 330 m tall [doc-9].", ids)  # an id that was not retrieved
    assert not cites_retrieved("It is 330 m tall.", [])


def test_citations_are_not_claims_for_a_claim_level_judge():
    ids = ["d1", "d2", "doc-7"]
    assert strip_citations("It is 330 metres tall [d1].", ids) == "It is 330 metres tall."
    assert strip_citations("Tall (source: d1, d2). Opened [d1][d2].", ids) == "Tall. Opened."
    # a bracketed reference is a marker even when its id was not retrieved (a fabricated citation is no claim)
    assert strip_citations("See [doc-70] (a note).", ids) == "See (a note)."
    # through scoring: the lexical judge would read "d1" as the number 1 and call the claim contradicted
    policy = GatePolicy(metrics=("faithfulness",))
    cited = _scores(CASE, "The Eiffel Tower is 330 metres tall [d1].", policy, LexicalJudge())
    assert cited["faithfulness"].value == 1.0


@pytest.mark.parametrize(
    ("answer", "stripped"),
    [
        ("Paris is the capital [1].", "Paris is the capital."),
        ("Paris is the capital [1, 2] of France [^3].", "Paris is the capital of France."),
        ("It opened in 1889 (source: the annual report).", "It opened in 1889."),
        ("It opened in 1889 (sources: d1, d2).", "It opened in 1889."),
        ("It opened in 1889【4:0†source】.", "It opened in 1889."),
        ("It opened in 1889 [doc-7] (doc-7).", "It opened in 1889."),
        ("It opened in 1889 (see d1) [source 2] [Paris].", "It opened in 1889."),
        ("Paris[1]is big.", "Paris is big."),
        # prose in brackets stays: a year, a name with digits, a word, a placeholder, a figure
        ("The tower (1889) fought COVID-19 (COVID-19) in (Paris) as of [date] (see Figure 2).", None),
    ],
)
def test_only_citation_markers_are_removed(answer, stripped):
    ids = ["d1", "d2", "doc-7", "Paris"]
    assert strip_citations(answer, ids) == (answer if stripped is None else stripped)


def test_ids_that_are_words_stay_in_the_sentence():
    """A bare id in running text is a word of the answer: judging "Rome is the capital of France." against chunks
    [Paris] and [Rome] must read "Rome", not " is the capital of France." (supported once the name is gone)."""
    assert strip_citations("Paris is the capital of France.", ["france", "Paris"]) == "Paris is the capital of France."
    assert cites_retrieved("Paris is the capital of France.", ["Paris"])  # the form rule's whole-token match is kept
    chunks = (Chunk("Paris", "Paris is the capital of France."), Chunk("Rome", "Rome is the capital of Italy."))
    case = GoldenCase(id="q", question="What is the capital of France?")
    policy = GatePolicy(metrics=("faithfulness",))
    scores = _scores(case, "Rome is the capital of France.", policy, LexicalJudge(), retrieved=chunks)
    claims = scores["faithfulness"].detail["claims"]
    assert [(c["claim"], c["verdict"]) for c in claims] == [("Rome is the capital of France.", "contradicted")]
    assert scores["faithfulness"].value == 0.0


_ID_ALPHABET = "ad1-[]()., :"


@settings(max_examples=300, deadline=None)
@given(
    answer=st.text(_ID_ALPHABET + "x ", max_size=30),
    ids=st.lists(st.text(_ID_ALPHABET, max_size=4), max_size=4),
)
def test_stripping_removes_exactly_the_markers(answer, ids):
    """strip_citations removes the marker spans and nothing else: outside them every character stays, in order;
    cites_retrieved's substring test (no pattern compiled per id) changes no result (ids that splice included)."""
    assert cites_retrieved(answer, ids) == any(
        d and re.search(rf"(?<![\w-]){re.escape(d)}(?![\w-])", answer) for d in ids
    )
    spans = citation_markers(answer, ids)
    assert all(a < b <= c < d for (a, b), (c, d) in itertools.pairwise(spans))
    expected, last = "", 0
    for start, end in spans:
        assert answer[start:end].strip()[0] in "[(【" and answer[start:end][-1] in "])】"
        glue = start and end < len(answer) and answer[start - 1].isalnum() and answer[end].isalnum()
        expected += answer[last:start] + (" " if glue else "")
        last = end
    assert strip_citations(answer, ids) == expected + answer[last:]
    assert strip_citations(answer, ids) == answer or spans


def test_form_rules_met_is_the_share_of_rules_that_hold():
    ids = ["d1"]
    assert word_count("one two  three\nfour") == 4
    assert form_rules_met("one two three [d1]", ids, max_words=4, cite=True) == 1.0
    assert form_rules_met("one two three four [d1]", ids, max_words=4, cite=True) == 0.5  # five words
    assert form_rules_met("one two three four five", ids, max_words=4, cite=True) == 0.0
    assert form_rules_met("one two", ids, max_words=None, cite=True) == 0.0
    assert form_rules_met("one two", ids, max_words=2, cite=False) == 1.0
    assert math.isnan(form_rules_met("one two", ids, max_words=None, cite=False))


def test_case_form_rules_override_the_config_key_by_key():
    config = FormRules(max_words=50, cite=True, rules="Answer in English.")
    assert config.override(None) == config
    assert config.override(FormRules(max_words=10)) == FormRules(10, True, "Answer in English.")
    assert config.override(FormRules(cite=False, rules="Answer in Italian.")) == FormRules(
        50, False, "Answer in Italian."
    )


CASE = GoldenCase(
    id="c1",
    question="How tall is the Eiffel Tower and when did it open?",
    expected_doc_ids=("d1",),
    reference_answers=("330 metres",),
    required_points=("330 metres tall", "opened in 1889"),
)
CHUNKS = (Chunk("d1", "The Eiffel Tower is 330 metres tall. It opened in 1889."),)


def _scores(case, answer, policy, judge=None, **prediction):
    metrics = [resolve(n) for n in policy.metrics]
    pred = Prediction(id=case.id, answer=answer, retrieved=prediction.pop("retrieved", CHUNKS), **prediction)
    return {s.metric: s for s in score_one(case, pred, metrics, policy, judge)}


def test_without_a_grading_judge_the_dimensions_are_deterministic_or_not_applicable():
    policy = GatePolicy(metrics=FIVE, form={"max_words": 12, "cite": True})
    scores = _scores(CASE, "The Eiffel Tower is 330 metres tall [d1].", policy, LexicalJudge())
    values = {name: s.value for name, s in scores.items()}
    assert values["faithfulness"] == 1.0  # the lexical judge
    assert math.isnan(values["answer_relevance"])  # only a rubric judge grades relevance
    assert values["correctness"] == 1.0  # reference "330 metres" fully recalled
    assert values["completeness"] == pytest.approx((1 + 0) / 2)  # "opened in 1889" is missing
    assert values["form"] == 1.0  # 8 words ≤ 12, cites d1
    padded = _scores(CASE, "The Eiffel Tower is 330 metres tall, as every guide to Paris will tell you.", policy)
    assert padded["form"].value == 0.0  # 15 words and no citation
    # a refusal of an answerable question is wrong and incomplete; its form is not graded
    refusal = _scores(CASE, "I don't have that information.", policy)
    assert (refusal["correctness"].value, refusal["completeness"].value) == (0.0, 0.0)
    assert math.isnan(refusal["form"].value)
    # out of domain: none applies
    ood = GoldenCase(id="o1", question="Who won?", out_of_domain=True)
    assert all(math.isnan(s.value) for s in _scores(ood, "Team A won [d1].", policy).values())
    # a case with no reference, no criteria and no points: correctness and completeness have nothing to check
    bare = GoldenCase(id="b1", question="Tell me about the tower.", expected_doc_ids=("d1",))
    bare_scores = _scores(bare, "It is 330 metres tall.", GatePolicy(metrics=FIVE))
    assert all(math.isnan(bare_scores[n].value) for n in ("correctness", "completeness", "form"))


def test_score_case_reads_the_case_form_over_the_config():
    case = GoldenCase(id="c", question="q", expected_doc_ids=("d1",), form=FormRules(cite=False, max_words=3))
    pred = Prediction(id="c", answer="one two three four", retrieved=(Chunk("d1"),))
    assert score_case(resolve("form"), case, pred, False, FormRules(cite=True)) == 0.0  # only the word limit: broken
    assert score_case(resolve("form"), case, pred, False, None) == 0.0
    loose = GoldenCase(id="c", question="q", expected_doc_ids=("d1",), form=FormRules(max_words=10))
    assert score_case(resolve("form"), loose, pred, False, FormRules(cite=True)) == 0.5  # cite from the config


# ------------------------------------------------------------------ the rubric judge grades all five at once

pytest.importorskip("openai")

from fake_openai import FakeOpenAI, Reply, fast_judge_options  # noqa: E402

from gate.judges.llm.rubric import RubricJudge  # noqa: E402


def rubric(f=3, r=3, c=3, p=3, form=3):
    reasons = {name: f"{name} reason" for name in FIVE}
    return Reply.json(
        {
            "faithfulness": f,
            "answer_relevance": r,
            "correctness": c,
            "completeness": p,
            "form": form,
            "reasons": reasons,
        }
    )


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def judge(fake, tmp_path):
    return RubricJudge(**fast_judge_options(fake, tmp_path / "cache", "judge-m"))


def test_one_call_grades_the_five_dimensions_with_the_case_in_the_prompt(fake, judge):
    case = GoldenCase(
        id="c1",
        question="How tall is the Eiffel Tower?",
        expected_doc_ids=("d1",),
        reference_answers=("330 metres", "1,083 feet"),
        criteria="Must give the height with its unit.",
        required_points=("330 metres tall",),
        form=FormRules(rules="Answer in one sentence, in a neutral tone."),
    )
    fake.script(rubric(f=3, r=2, c=3, p=1, form=2))
    policy = GatePolicy(metrics=(*FIVE, "hallucination_rate"), form={"max_words": 40, "cite": True})
    scores = _scores(case, "It is 330 metres tall [d1].", policy, judge)
    assert len(fake.requests) == 1
    prompt = fake.requests[0].prompt
    for part in ("<reference_answers>\n- 330 metres\n- 1,083 feet\n</reference_answers>",
                 "<criteria>\nMust give the height with its unit.\n</criteria>",
                 "<required_points>\n- 330 metres tall\n</required_points>",
                 "- at most 40 words", "- cite the id of a context passage",
                 "- Answer in one sentence, in a neutral tone.", "[1] (id: d1)"):  # fmt: skip
        assert part in prompt, part
    values = {name: s.value for name, s in scores.items()}
    # 1–3 → 0, 0.5, 1; form: min(rules met = 1, grade 0.5); a faithfulness grade of 3 is not a hallucination
    assert values == {"faithfulness": 1.0, "answer_relevance": 0.5, "correctness": 1.0, "completeness": 0.0,
                      "form": 0.5, "hallucination_rate": 0.0}  # fmt: skip
    detail = scores["faithfulness"].detail
    assert detail["extra"]["reasons"]["completeness"] == "completeness reason"
    assert detail["grades"] == {"answer_relevance": 0.5, "correctness": 1.0, "completeness": 0.0, "form": 0.5}


def test_a_broken_hard_rule_wins_over_the_judge_and_correctness_needs_something_to_check(fake, judge):
    fake.script(rubric(form=3, c=3))
    policy = GatePolicy(metrics=FIVE, form={"max_words": 3})
    bare = GoldenCase(id="b", question="How tall is it?", expected_doc_ids=("d1",))
    scores = _scores(bare, "It is 330 metres tall.", policy, judge)
    assert scores["form"].value == 0.0  # five words > 3, whatever the judge says
    assert math.isnan(scores["correctness"].value)  # no reference answer and no criteria
    assert scores["completeness"].value == 1.0  # the judge grades it against the question
    assert "<reference_answers>" not in fake.requests[0].prompt and "<criteria>" not in fake.requests[0].prompt


def test_refusals_are_not_sent_and_failures_are_failures_not_scores(fake, judge):
    policy = GatePolicy(metrics=FIVE)
    refusal = _scores(CASE, "I don't have that information.", policy, judge)
    assert fake.requests == []
    assert (refusal["correctness"].value, refusal["completeness"].value) == (0.0, 0.0)
    assert all(math.isnan(refusal[n].value) for n in ("faithfulness", "answer_relevance", "form"))
    fake.script(Reply.text('{"faithfulness": 3}'))
    failed = _scores(CASE, "It is 330 metres tall.", policy, judge)
    assert (failed["faithfulness"].value, failed["faithfulness"].error) == (1.0, None)
    left_out = ("answer_relevance", "correctness", "completeness", "form")
    assert all(math.isnan(failed[n].value) and failed[n].error.endswith(f"no grade for {n}") for n in left_out)
    fake.script(Reply.text('{"answer_relevance": 3, "correctness": 3, "completeness": 3, "form": 3}'))
    failed = _scores(CASE, "It is 324 metres tall.", policy, judge)
    assert all(s.error is not None and "'faithfulness' is a required property" in s.error for s in failed.values())


def test_config_form_key_is_validated_and_recorded(tmp_path):
    from gate.config import load_config
    from gate.errors import InputError

    write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "q"}])
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: golden.jsonl}\n"
        "form: {max_words: 80, cite: true, rules: Answer in Italian.}\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    assert config.policy.form == FormRules(80, True, "Answer in Italian.")
    assert GatePolicy.from_dict(json.loads(json.dumps(config.policy.to_dict()))).form == config.policy.form
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: golden.jsonl}\nform: {max_word: 80, cite: 1}\n"
    )
    with pytest.raises(InputError) as info:
        load_config(tmp_path / "rag-gate.yml")
    assert "form.max_word: unknown key; did you mean `max_words`?" in str(info.value)
    assert "form.cite: must be true or false, got 1" in str(info.value)


# ------------------------------------------------------------------ at gate level, offline


def test_a_head_that_stops_citing_fails_the_gate_on_form(tmp_path):
    n = 30
    cases = [
        {"id": f"q{i}", "question": f"What colour is item {i}?", "expected_doc_ids": [f"d{i}"],
         "reference_answers": [f"blue {i}"]}
        for i in range(n)
    ]  # fmt: skip
    write_jsonl(tmp_path / "golden.jsonl", cases)

    def rows(cite: bool):
        return [
            {"id": f"q{i}", "answer": f"Item {i} is blue {i}" + (f" [d{i}]." if cite else "."), "latency_ms": 1.0,
             "retrieved": [{"id": f"d{i}", "text": f"Item {i} is blue {i}."}]}
            for i in range(n)
        ]  # fmt: skip

    write_jsonl(tmp_path / "base.jsonl", rows(cite=True))
    write_jsonl(tmp_path / "head.jsonl", rows(cite=False))
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\n"
        "metrics: [correctness, form]\ngate: [correctness, form]\nform: {cite: true, max_words: 20}\n"
    )
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--config", str(tmp_path / "rag-gate.yml"))
    rows_by_name = {m["name"]: m for m in report["metrics"]}
    assert result.exit_code == 1 and report["verdict"] == "fail"
    assert rows_by_name["form"]["status"] == "fail"
    assert (rows_by_name["form"]["base_mean"], rows_by_name["form"]["head_mean"]) == (1.0, 0.5)  # cite lost
    assert rows_by_name["correctness"]["status"] == "pass" and rows_by_name["correctness"]["head_mean"] == 1.0
