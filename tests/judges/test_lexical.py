"""The lexical judge: hand-written cases for each phenomenon, attribution against sklearn's TF-IDF cosine."""

from __future__ import annotations

import dataclasses
import json
import math
import threading

import numpy as np
import pytest
from helpers import EXAMPLE, REPO
from sklearn.feature_extraction.text import TfidfVectorizer

from gate.judges import JUDGES, LexicalJudge, get_judge
from gate.judges.claims import distinct_claims, extract_claims, is_refusal, split_sentences
from gate.judges.lexical import tfidf_similarities
from gate.judges.lexicon import antonyms
from gate.judges.text import analyzer, facts
from gate.language import identify, unsegmented_script
from gate.models import Chunk

JUDGE = LexicalJudge()
HOTEL = Chunk(
    "hotel",
    "The Grand Hotel opened in 1998. It has 1,000 rooms and a spa. WiFi is not available in the rooms. "
    "Breakfast costs $12 per person.",
)
BOWL = Chunk("bowl", "Super Bowl LV was played on February 7, 2021, at Raymond James Stadium in Tampa, Florida.")
NOISE = Chunk("noise", "Tickets for concerts are sold online. Parking is free on weekends.")


def verdicts(answer: str, chunks=(HOTEL, BOWL, NOISE), question: str = "") -> list[str]:
    return [c.verdict for c in JUDGE.judge(question, answer, chunks).claims]


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize("written", ["1,000", "1000", "one thousand", "1 thousand"])
def test_number_forms_all_support(written):
    assert verdicts(f"The hotel has {written} rooms.") == ["supported"]


def test_number_disagreeing_is_contradicted_and_says_what_the_chunk_says():
    claim = JUDGE.judge("", "The hotel has 1,200 rooms.", [HOTEL]).claims[0]
    assert claim.verdict == "contradicted"
    assert claim.reason == "number 1200 not in chunk; chunk says 1000"
    assert claim.contradiction_level == "ALL"


@pytest.mark.parametrize("answer", ["The Eiffel Tower was completed in 1111.", "1111"])
def test_four_digits_where_the_chunk_states_a_year_are_contradicted(answer):
    chunk = Chunk("eiffel", "The Eiffel Tower was completed in 1889. It is 330 metres tall.")
    claim = JUDGE.judge("When was the Eiffel Tower completed?", answer, [chunk]).claims[0]
    assert (claim.verdict, claim.reason) == ("contradicted", "number 1111 not in chunk; chunk says 1889")
    # "1,200" is a count, not a year: it is compared with the chunk's counts only
    count = JUDGE.judge("", "The tower has 1,200 steps.", [Chunk("t", "The tower has 1,665 steps, built in 1889.")])
    assert count.claims[0].reason == "number 1200 not in chunk; chunk says 1665"


def test_italian_number_words_are_no_numbers_in_english_and_wi_fi_is_wifi():
    chunk = Chunk("cafe", "Wifi: free. Closed due to renovation until spring.")
    judgment = JUDGE.judge("", "They offer free Wi-Fi. It is closed due to renovation.", [chunk])
    assert [c.verdict for c in judgment.claims] == ["supported", "supported"]
    assert not any(c.unsupported_facts for c in judgment.claims)


def test_number_absent_from_a_sentence_without_numbers_is_unverifiable_not_contradicted():
    assert verdicts("Parking is free for 3 hours on weekends.", [NOISE]) == ["unverifiable"]


@pytest.mark.parametrize(
    "text",
    [
        "Sorry, I'm not able to help with that one.",
        "That one is closed.",
        "The one near the lobby is closed.",
        "One of the pools is closed.",
        "No one answered the phone.",
        "Anyone can book it.",
        "Someone left it open.",
    ],
)
def test_one_as_a_pronoun_is_no_number_and_i_am_no_name(text):
    """'one' counts only before a scale word ("one thousand"); "I'm" in mid-sentence is no entity (it was read as
    the name "i'm", an unsupported fact that made a polite refusal a hallucination)."""
    found = facts(text)
    assert found.numbers == () and found.entities == frozenset()
    assert [q.value for q in facts("One hundred people came.").numbers] == [100.0]
    assert facts("Yesterday I'm told Rome was busy.").entities == {"rome"}


def test_money_and_percent_normalisation():
    parsed = facts("It earned $1.3 million, up 50 percent, in 2014")
    values = sorted((q.kind, q.value) for q in parsed.numbers)
    assert values == [("num", 1_300_000.0), ("percent", 50.0), ("year", 2014.0)]
    assert verdicts("It earned 1.3 million.", [Chunk("c", "It earned $1,312,000 last year.")]) == ["supported"]
    assert verdicts("Growth was 50%.", [Chunk("c", "Growth was 50 percent.")]) == ["supported"]


def test_clock_times_match_across_12_and_24_hour_forms():
    chunk = Chunk("c", "Open Monday 9:00 to 22:30.")
    assert verdicts("It is open Monday from 9 am to 10:30 pm.", [chunk]) == ["supported"]
    assert verdicts("It is open Monday from 9 am to 11 pm.", [chunk]) == ["contradicted"]


# ---------------------------------------------------------------- dates, entities, negation


def test_dates_same_day_in_another_format_supported_other_month_contradicted():
    assert verdicts("Super Bowl LV was played on Feb 7, 2021.", [BOWL]) == ["supported"]
    claim = JUDGE.judge("", "Super Bowl LV was played on March 7, 2021.", [BOWL]).claims[0]
    assert (claim.verdict, claim.reason) == ("contradicted", "month [3] not in chunk; chunk says [2]")
    assert verdicts("Super Bowl LV was played on February 7, 2020.", [BOWL]) == ["contradicted"]


def test_entity_swapped_is_contradicted():
    claim = JUDGE.judge("", "Super Bowl LV was played at Raymond James Stadium in Glendale, Arizona.", [BOWL]).claims[0]
    assert claim.verdict == "contradicted"
    assert claim.reason.startswith("entity arizona, glendal not in chunk; chunk names")


def test_negation_both_directions():
    assert verdicts("WiFi is available in the rooms.", [HOTEL]) == ["contradicted"]
    assert verdicts("WiFi is not available in the rooms.", [HOTEL]) == ["supported"]
    chunk = Chunk("c", "The museum has free parking.")
    assert verdicts("The museum has no free parking.", [chunk]) == ["contradicted"]
    assert facts("It is not only cheap").negated == frozenset()  # "not only" is no negation


def test_unrelated_claim_is_unverifiable_with_no_contradiction():
    claim = JUDGE.judge("", "The hotel has a casino and a golf course.", [HOTEL, NOISE]).claims[0]
    assert claim.verdict == "unverifiable"
    assert claim.contradiction_level == "NONE"


def test_contradiction_level_sometimes_when_one_chunk_supports_and_one_conflicts():
    old = Chunk("old", "The museum opened in 1990 and has 300 paintings.")
    new = Chunk("new", "The museum opened in 1990 and has 350 paintings.")
    claim = JUDGE.judge("", "The museum has 350 paintings.", [old, new]).claims[0]
    assert (claim.verdict, claim.chunk_id, claim.contradiction_level) == ("supported", "new", "SOMETIMES")
    both_wrong = JUDGE.judge("", "The museum has 400 paintings.", [old, new]).claims[0]
    assert (both_wrong.verdict, both_wrong.contradiction_level) == ("contradicted", "ALL")


# ---------------------------------------------------------------- antonyms, roles, cross-sentence negation


@pytest.mark.parametrize(
    "claim, source, said",
    [
        ("The company's shares rose 5% in March.", "The company's shares fell 5% in March after the report.", "fell"),
        ("Sales increased last year.", "Sales decreased last year.", "decreased"),
        ("The museum is open on Mondays.", "The museum is closed on Mondays.", "closed"),
        ("The home team won the final.", "The home team lost the final.", "lost"),
    ],
)
def test_antonym_is_contradicted(claim, source, said):
    verdict = JUDGE.judge("", claim, [Chunk("c", source)]).claims[0]
    assert verdict.verdict == "contradicted"
    assert verdict.reason.startswith("antonym: claim says") and verdict.reason.endswith(f"chunk says {said}")


def test_antonym_under_negation_agrees():
    assert verdicts("The museum is not closed on Mondays.", [Chunk("c", "The museum is open on Mondays.")]) == [
        "supported"
    ]
    assert verdicts("WiFi is not available in the rooms.", [Chunk("c", "WiFi is unavailable in the rooms.")]) == [
        "supported"
    ]


def test_antonym_of_another_sentence_that_states_the_claim_better_is_no_conflict():
    chunk = Chunk("c", "Pour out the hot water. Then pour cold water over the eggs.")
    assert verdicts("Pour out the hot water.", [chunk]) == ["supported"]


def test_antonyms_come_from_wordnet_with_irregular_forms():
    table = antonyms()
    assert "fall" in table["rise"] and "rise" in table["fall"]
    assert "decreas" in table["increas"] and "lose" in table["win"]
    assert facts("Prices rose").terms == ("price", "rise")  # "rose" is mapped to its lemma before stemming
    assert "employ" not in table.get("employe", frozenset())  # pairs whose stems collide are left out


def test_swapped_roles_are_contradicted_in_both_voices():
    chunk = Chunk("c", "The Normans defeated the English at Hastings in 1066.")
    claim = JUDGE.judge("", "The English defeated the Normans at Hastings in 1066.", [chunk]).claims[0]
    assert (claim.verdict, claim.reason) == (
        "contradicted",
        "roles swapped around 'defeated': chunk says norman → english",
    )
    assert verdicts("The English were defeated by the Normans at Hastings in 1066.", [chunk]) == ["supported"]
    assert verdicts("The Normans were defeated by the English at Hastings in 1066.", [chunk]) == ["contradicted"]


def test_symmetric_verbs_are_never_role_swaps():
    assert verdicts("Jones met Smith in Paris.", [Chunk("c", "Smith met Jones in Paris.")]) == ["supported"]


def test_relation_built_from_words_of_the_passage_is_not_supported():
    chunk = Chunk("c", "Harold met William in 1064. William founded the abbey after the battle.")
    claim = JUDGE.judge("", "Harold founded the abbey.", [chunk]).claims[0]
    assert claim.verdict == "unverifiable"
    assert "relation 'founded' between these words not in chunk" in claim.reason
    assert verdicts("William founded the abbey.", [chunk]) == ["supported"]


def test_negation_in_another_sentence_is_contradicted():
    chunk = Chunk("c", "WiFi is available in the lobby. It is not available in the rooms.")
    claim = JUDGE.judge("", "WiFi is available in the rooms.", [chunk]).claims[0]
    assert (claim.verdict, claim.reason) == ("contradicted", "negation differs on avail")
    assert verdicts("WiFi is available in the lobby.", [chunk]) == ["supported"]


def test_a_sentence_quoted_verbatim_is_not_contradicted_by_a_negated_neighbour():
    """The bundled example's case a1bfce4dee24bee05ee3ece59: the claim is the chunk's second sentence word for
    word; the first negates "decision problems" about something else (#P), with one more word ("counting")."""
    chunk = Chunk(
        "c", "#P is a class of counting problems (not decision problems). ALL is the class of all decision problems."
    )
    assert verdicts("ALL is the class of all decision problems.", [chunk]) == ["supported"]
    assert verdicts("Counting problems are decision problems.", [chunk]) == ["contradicted"]


def test_lower_case_entity_swap_is_contradicted():
    claim = JUDGE.judge("", "super bowl lv was played in glendale.", [BOWL]).claims[0]
    assert (claim.verdict, claim.reason) == ("contradicted", "glendale where the chunk names raymond")
    assert verdicts("super bowl lv was played in tampa.", [BOWL]) == ["supported"]


def test_word_replaced_in_a_normally_written_claim_is_not_supported():
    chunk = Chunk("c", "The council approved the new budget on Tuesday after a long debate.")
    claim = JUDGE.judge("", "The council rejected the new budget on Tuesday.", [chunk]).claims[0]
    assert claim.verdict != "supported"


# ---------------------------------------------------------------- gaming: padding and duplicates


def test_duplicate_and_near_duplicate_claims_count_once():
    padded = " ".join(["The hotel has 1,000 rooms."] * 20 + ["The hotel has one thousand rooms!", "It has a casino."])
    judgment = JUDGE.judge("", padded, [HOTEL])
    assert [c.verdict for c in judgment.claims] == ["supported", "unverifiable"]
    assert judgment.extra["duplicates"] == 20
    assert judgment.faithfulness == 0.5
    kept, dropped = distinct_claims(["The hotel has 1,000 rooms", "the hotel has 1000 rooms.", "It has a spa"])
    assert (kept, dropped) == (["The hotel has 1,000 rooms", "It has a spa"], 1)


MUSEUM_OPEN = Chunk("m", "The museum is open on Mondays from 9 am to 5 pm.")
MUSEUM_CLOSED = Chunk("m", "The museum is not open on Mondays.")


@pytest.mark.parametrize("chunk, contradicted", [(MUSEUM_OPEN, 0), (MUSEUM_CLOSED, 1)])
def test_a_contradiction_next_to_the_true_sentence_is_judged_not_dropped(chunk, contradicted):
    judgment = JUDGE.judge("", "The museum is not open on Mondays. The museum is open on Mondays.", [chunk])
    assert judgment.extra["duplicates"] == 0
    assert [c.verdict for c in judgment.claims].index("contradicted") == contradicted
    assert judgment.faithfulness == 0.5 and judgment.hallucination_rate == 1.0


def _jaccard(a: str, b: str) -> float:
    fa, fb = facts(a), facts(b)
    ka = fa.content | {f"#{q.value:g}" for q in fa.numbers} | {f"@{m}" for m in fa.months}
    kb = fb.content | {f"#{q.value:g}" for q in fb.numbers} | {f"@{m}" for m in fb.months}
    return len(ka & kb) / len(ka | kb)


@pytest.mark.parametrize(
    "first, twin",
    [
        (
            "The museum on the hill is not open to visitors on Mondays.",
            "The museum on the hill is open to visitors on Mondays.",
        ),
        (
            "The museum was founded in 1998 by the town council with public money for local art and history.",
            "The museum was founded in 1999 by the town council with public money for local art and history.",
        ),
        (
            "The museum opens its summer garden in June for local families, school children and tourists.",
            "The museum opens its summer garden in July for local families, school children and tourists.",
        ),
        (
            "The museum opened its modern wing designed by Piano for local families, children and tourists.",
            "The museum opened its modern wing designed by Gehry for local families, children and tourists.",
        ),
        (
            "The museum's ticket office on the ground floor stays open on public holidays and school breaks.",
            "The museum's ticket office on the ground floor stays closed on public holidays and school breaks.",
        ),
    ],
    ids=["negation", "number", "month", "name", "antonym"],
)
def test_near_duplicate_filter_keeps_a_twin_that_differs_by_a_fact(first, twin):
    assert _jaccard(first, twin) >= 0.8  # the filter's overlap test alone would drop the twin
    assert distinct_claims([first, twin]) == ([first, twin], 0)
    assert distinct_claims([first, first.replace("The museum", "the museum")]) == ([first], 1)


def test_padding_with_distinct_supported_sentences_still_shows_the_false_claim():
    sentences = [
        "The Grand Hotel opened in 1998.",
        "It has 1,000 rooms.",
        "It has a spa.",
        "WiFi is not available in the rooms.",
        "Breakfast costs $12 per person.",
    ]
    judgment = JUDGE.judge("", " ".join([*sentences, "Breakfast costs $15 per person."]), [HOTEL])
    assert judgment.n_contradicted == 1 and judgment.faithfulness == pytest.approx(5 / 6)
    assert judgment.hallucination_rate == 1.0  # binary per answer: padding cannot dilute it
    invented = JUDGE.judge("", " ".join([*sentences, "It was designed by Renzo Piano."]), [HOTEL])
    assert invented.n_contradicted == 0 and invented.hallucination_rate == 1.0
    assert invented.claims[-1].unsupported_facts == ("entity piano, renzo",)
    # the share of hallucinated claims: the one flagged claim of six
    assert invented.hallucinated_claim_rate == pytest.approx(1 / 6)
    assert judgment.hallucinated_claim_rate == pytest.approx(1 / 6)
    assert JUDGE.judge("", " ".join(sentences), [HOTEL]).hallucination_rate == 0.0


def test_a_correct_paraphrase_is_not_a_hallucination():
    chunk = Chunk("c", "The company's revenue increased by 20% in 2020, driven by online sales in Europe.")
    judgment = JUDGE.judge("", "In 2020 the firm's turnover grew 20%, thanks to web purchases in Europe.", [chunk])
    assert judgment.faithfulness < 1.0  # the words differ: the supported share cannot tell
    assert judgment.n_contradicted == 0 and judgment.hallucination_rate == 0.0  # same numbers, date and names
    wrong = JUDGE.judge("", "In 2021 the firm's turnover grew 20%, thanks to web purchases in Asia.", [chunk])
    assert wrong.hallucination_rate == 1.0


# ---------------------------------------------------------------- language and script


@pytest.mark.parametrize(
    "answer, chunks, language",
    [
        ("El hotel tiene mil habitaciones y un spa.", [HOTEL], "answer is in Spanish (es)"),
        ("Das Hotel hat tausend Zimmer und einen Wellnessbereich.", [HOTEL], "answer is in German (de)"),
        (
            "The hotel has 1,000 rooms.",
            [Chunk("zh", "酒店有一千个房间和一个水疗中心。")],
            "context is in Chinese (zh, Han script)",
        ),
        ("Отель имеет тысячу номеров.", [HOTEL], "answer is in Russian (ru, Cyrillic script)"),
    ],
)
def test_unsupported_language_is_not_applicable_never_scored(answer, chunks, language):
    judgment = JUDGE.judge("", answer, chunks)
    assert judgment.claims == () and judgment.error is None
    assert judgment.not_applicable == f"{language}: the lexical judge reads English and Italian; not scored"
    assert math.isnan(judgment.faithfulness) and math.isnan(judgment.contradiction_rate)
    assert judgment.to_dict()["not_applicable"] == judgment.not_applicable


def test_english_and_italian_and_short_texts_are_judged():
    assert JUDGE.judge("", "Sunday: 9 am to 2 pm.", [Chunk("c", "Sunday 9:00 to 14:00.")]).not_applicable is None
    assert identify("Il negozio è aperto la domenica.").code == "it"
    assert identify("Pizza, pasta, salad.").code == "en"  # too short to tell: benefit of the doubt
    assert unsegmented_script("东京是日本的首都") == "Han" and unsegmented_script("Tokyo is big") is None


# ---------------------------------------------------------------- claims


def test_conjunction_of_clauses_is_split_and_each_clause_judged():
    judgment = JUDGE.judge("", "The Grand Hotel opened in 1998 and it has a large casino.", [HOTEL])
    assert [c.claim for c in judgment.claims] == ["The Grand Hotel opened in 1998", "it has a large casino."]
    assert [c.verdict for c in judgment.claims] == ["supported", "unverifiable"]
    assert judgment.faithfulness == 0.5


def test_list_items_share_their_head():
    assert extract_claims("The restaurant serves pizza, pasta and salad.") == [
        "The restaurant serves pizza",
        "The restaurant serves pasta",
        "The restaurant serves salad.",
    ]
    assert extract_claims("Finch & Fork is in Santa Barbara, California.") == [
        "Finch & Fork is in Santa Barbara, California."
    ]


def test_sentences_keep_abbreviations_decimals_and_drop_list_markers_and_lead_ins():
    text = "Here is a summary:\n1. Dr. Smith paid $3.5 million.\n2. The U.S. Army agreed. It was late."
    assert split_sentences(text) == [
        "Here is a summary:",
        "Dr. Smith paid $3.5 million.",
        "The U.S. Army agreed.",
        "It was late.",
    ]
    assert extract_claims(text) == ["Dr. Smith paid $3.5 million.", "The U.S. Army agreed.", "It was late."]


@pytest.mark.parametrize(
    "answer",
    ["", "   ", "Unable to answer based on given passages.", "I don't know.", "Non ho informazioni sufficienti."],
)
def test_refusal_or_empty_answer_has_no_claims_and_nan_faithfulness(answer):
    judgment = JUDGE.judge("q", answer, [HOTEL])
    assert judgment.claims == ()
    assert math.isnan(judgment.faithfulness) and math.isnan(judgment.contradiction_rate)
    assert is_refusal(answer)


def test_long_answer_with_a_disclaimer_is_not_a_refusal():
    answer = "I'm sorry for the delay. " + "The Grand Hotel opened in 1998 and has 1,000 rooms with a spa. " * 4
    assert not is_refusal(answer)


def test_filler_pieces_are_dropped():
    assert extract_claims("Sure! It has 1,000 rooms.") == ["It has 1,000 rooms."]


def test_italian_stop_words_and_stems():
    chunk = Chunk("it", "Il negozio è aperto tutti i giorni, anche la domenica, e offre il parcheggio gratuito.")
    assert facts("Il negozio è aperto la domenica", "it").terms == ("negoz", "apert", "domen")
    assert verdicts("I negozi sono aperti la domenica.", [chunk]) == ["supported"]
    assert verdicts("Il negozio non è aperto la domenica.", [chunk]) == ["contradicted"]


def test_question_words_absent_from_the_chunks_are_not_required():
    chunk = Chunk("c", "Preheat the oven to 180 degrees and bake for 40 minutes.")
    question = "How do I bake a lemon cake?"
    assert verdicts("The lemon cake bakes for 40 minutes.", [chunk], question) == ["supported"]
    assert verdicts("The lemon cake bakes for 40 minutes.", [chunk]) == ["unverifiable"]


# ---------------------------------------------------------------- attribution


def test_attribution_picks_the_right_chunk_and_sentence_with_sklearn_tfidf_cosine():
    chunks = [HOTEL, BOWL, NOISE]
    claim_text = "Breakfast costs $12 per person at the hotel."
    claim = JUDGE.judge("", claim_text, chunks).claims[0]
    assert (claim.verdict, claim.chunk_id) == ("supported", "hotel")
    assert claim.chunk_text == "Breakfast costs $12 per person."
    # oracle: sklearn TfidfVectorizer fitted on every chunk sentence, cosine = dot product of l2 rows
    sentences = [s for c in chunks for s in split_sentences(c.text)]
    vectorizer = TfidfVectorizer(analyzer=analyzer).fit(sentences)
    evidence = vectorizer.transform(sentences).toarray()
    query = vectorizer.transform([claim_text]).toarray()[0]
    cosines = evidence @ query / (np.linalg.norm(evidence, axis=1) * np.linalg.norm(query))
    assert sentences[int(np.argmax(cosines))] == claim.chunk_text
    assert claim.similarity == pytest.approx(float(cosines.max()), abs=1e-12)
    assert 0.0 < claim.similarity < 1.0


def test_no_chunks_means_unverifiable_without_attribution():
    claim = JUDGE.judge("", "The hotel has 1,000 rooms.", []).claims[0]
    assert (claim.verdict, claim.chunk_id, claim.similarity) == ("unverifiable", None, 0.0)


# ---------------------------------------------------------------- contract, factory, determinism


def test_identity_and_factory():
    assert (JUDGE.id, JUDGE.version) == ("lexical", "7")
    assert isinstance(JUDGE.version, str)
    assert get_judge({"name": "lexical", "support": 0.6}) == LexicalJudge(support=0.6)
    assert sorted(JUDGES) == ["lexical", "llm", "nli", "ragas"]


def test_factory_rejects_unknown_names_and_options():
    with pytest.raises(ValueError, match="unknown judge 'oracle'; known judges: lexical, llm, nli, ragas"):
        get_judge({"name": "oracle"})
    with pytest.raises(ValueError, match="judge 'lexical': .*'temperature' was unexpected"):
        get_judge({"name": "lexical", "temperature": 0})
    with pytest.raises(ValueError, match="judge 'lexical': support: 1.5 is greater than the maximum of 1"):
        get_judge({"name": "lexical", "support": 1.5})
    with pytest.raises(ValueError, match="cover, support"):
        LexicalJudge(support=1.5)


def test_deterministic_and_thread_safe():
    answers = [
        "The hotel has 1,200 rooms and WiFi is available.",
        "Super Bowl LV was played in Tampa, Florida on February 7, 2021.",
        "Breakfast costs $15 and parking is free on weekends.",
    ] * 20
    expected = [JUDGE.judge("", a, [HOTEL, BOWL, NOISE]).to_dict() for a in answers]
    results: dict[int, list] = {}

    def work(k: int) -> None:
        judge = LexicalJudge()
        results[k] = [judge.judge("", a, [HOTEL, BOWL, NOISE]).to_dict() for a in answers]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[k] == expected for k in range(4))


def test_same_judgments_as_the_stored_oracle_on_squad_answers():
    """Everything the judge returns on 148 answers built from the example's SQuAD paragraphs (tests/oracles/
    make_lexical_squad.py: verbatim, a number changed, a negation added, a name replaced, an off-topic sentence) is
    what it returned when the oracle was written: a speed-up must not change a verdict, a reason or a similarity."""
    oracle = json.loads((REPO / "tests" / "oracles" / "lexical_squad_example.json").read_text(encoding="utf-8"))
    assert oracle["judge"] == JUDGE.identity
    texts = {p["id"]: p["text"] for p in map(json.loads, (EXAMPLE / "corpus.jsonl").open(encoding="utf-8"))}
    verdicts = {"supported": 0, "contradicted": 0, "unverifiable": 0}
    for case in oracle["cases"]:
        judgment = JUDGE.judge(case["question"], case["answer"], [Chunk(i, texts[i]) for i in case["chunk_ids"]])
        got = json.loads(json.dumps(dataclasses.asdict(judgment), ensure_ascii=False))
        assert got == case["judgment"], case["id"]
        for claim in judgment.claims:
            verdicts[claim.verdict] += 1
    assert len(oracle["cases"]) == 148 and min(verdicts.values()) >= 40, verdicts


def sklearn_similarities(claims: list[str], sentences: list[str]) -> np.ndarray:
    """The lexical judge's attribution as it was computed before: scikit-learn's vectorizer and sparse product."""
    vectorizer = TfidfVectorizer(analyzer=analyzer)
    try:
        evidence = vectorizer.fit_transform(sentences)
    except ValueError:  # empty vocabulary
        return np.zeros((len(claims), len(sentences)))
    return np.asarray((vectorizer.transform(claims) @ evidence.T).todense()).clip(0.0, 1.0)


def test_tfidf_similarities_equal_sklearn_to_the_last_bit():
    """tfidf_similarities repeats scikit-learn's floating-point operations in its order: on the SQuAD answers of the
    oracle, on one chunk and on three, the arrays are equal, not just close (scikit-learn 1.9, the newest CI installs).
    Older releases may order a sum differently (1.4, rag-gate's lower bound, does): there they agree within 16 units
    in the last place, and the judge's own values stay those of the stored oracle
    (test_same_judgments_as_the_stored_oracle_on_squad_answers, run at both bounds)."""
    import sklearn

    def same(ours, theirs):
        if tuple(int(x) for x in sklearn.__version__.split(".")[:2]) >= (1, 9):
            return np.array_equal(ours, theirs)
        np.testing.assert_array_max_ulp(ours, theirs, maxulp=16)  # raises beyond 16 units in the last place (5 seen)
        return ours.shape == theirs.shape

    oracle = json.loads((REPO / "tests" / "oracles" / "lexical_squad_example.json").read_text(encoding="utf-8"))
    texts = {p["id"]: p["text"] for p in map(json.loads, (EXAMPLE / "corpus.jsonl").open(encoding="utf-8"))}
    compared = 0
    for case in oracle["cases"]:
        claims = extract_claims(case["answer"])
        for ids in (case["chunk_ids"][:1], case["chunk_ids"]):
            sentences = [s for i in ids for s in split_sentences(texts[i])]
            ours = tfidf_similarities(claims, sentences)
            assert same(ours, sklearn_similarities(claims, sentences)), case["id"]
            compared += int(np.count_nonzero(ours))
    assert compared > 5_000
    # no content word in the sentences, none in a claim, no claim
    assert np.array_equal(tfidf_similarities(["Rome is old."], ["It is.", "Of the."]), np.zeros((1, 2)))
    assert same(tfidf_similarities(["It is."], ["Rome is old."]), sklearn_similarities(["It is."], ["Rome is old."]))
    assert tfidf_similarities([], ["Rome is old."]).shape == (0, 1)
