"""Text the offline readers cannot read is never scored: language and script identification, answer F1."""

from __future__ import annotations

import math

import pytest

from gate.language import (
    UNSEGMENTED_SCRIPTS,
    Language,
    char_script,
    dominant_script,
    f1_unreadable,
    identify,
    unreadable,
    unsegmented_script,
)
from gate.metrics.generation import answer_f1, exact_match


@pytest.mark.parametrize(
    "text, code, script",
    [
        ("The hotel has a thousand rooms and a spa.", "en", "Latin"),
        ("Il negozio è aperto tutti i giorni, anche la domenica.", "it", "Latin"),
        ("El hotel tiene mil habitaciones y un spa.", "es", "Latin"),
        ("Das Hotel hat tausend Zimmer und einen Wellnessbereich.", "de", "Latin"),
        ("L'hôtel possède mille chambres, une piscine couverte et un spa ouvert toute l'année.", "fr", "Latin"),
        ("Отель имеет тысячу номеров и спа.", "ru", "Cyrillic"),
        ("東京は日本の首都です。", "ja", "Han"),
    ],
)
def test_identify_language_and_script(text, code, script):
    assert identify(text) == Language(code, script)


@pytest.mark.parametrize(
    "text",
    ["Paris est la capitale de la France.", "Le musée est fermé le lundi.", "Je ne sais pas."],
)
def test_a_short_french_sentence_is_french_not_english_or_italian(text):
    # "la", "le" are Italian function words too, and py3langid is below 0.9 on a few words, yet ten times surer of
    # French than of English or Italian
    assert identify(text).code == "fr"
    assert unreadable({"answer": text}) is not None


@pytest.mark.parametrize("text", ["Il museo è chiuso il lunedì.", "Roma è la capitale d'Italia."])
def test_a_short_italian_sentence_stays_italian(text):
    assert identify(text).code == "it"


def test_short_or_list_like_latin_text_gets_the_benefit_of_the_doubt():
    assert identify("Sunday: 9 am to 2 pm.").code == "en"
    assert identify("Pizza, pasta, salad.").code == "en"
    assert identify("1,000 / 2,000").code == "und"  # no letters at all


def test_scripts_from_unicode_names():
    assert dominant_script("abc Привет мир") == "Cyrillic"
    assert unsegmented_script("ราคา 500 บาท") == "Thai"
    assert unsegmented_script("The word 東京 in an English sentence about Tokyo and Kyoto") is None  # < 1/5 of letters


def test_ascii_text_takes_the_fast_path_exactly():
    """unsegmented_script returns None for ASCII text without reading Unicode names: every ASCII letter is Latin."""
    assert {char_script(chr(c)) for c in range(128) if chr(c).isalpha()} == {"Latin"}
    assert "Latin" not in UNSEGMENTED_SCRIPTS
    assert unsegmented_script("Tokyo is the capital of Japan.") is None


def test_unreadable_names_the_role_and_the_language():
    assert unreadable({"answer": "The hotel has a spa.", "context": "The hotel has a spa and a pool."}) is None
    message = unreadable(
        {"answer": "The hotel has a spa.", "context": "Das Hotel hat einen Wellnessbereich und ein Schwimmbad."}
    )
    assert message == "context is in German (de): the lexical judge reads English and Italian; not scored"


@pytest.mark.parametrize(
    "answer, references, role",
    [("东京", ["东京"], "answer"), ("Tokyo", ["東京都"], "reference answer"), ("กรุงเทพ", ["Bangkok"], "answer")],
)
def test_answer_f1_is_not_applicable_for_unsegmented_scripts(answer, references, role):
    assert math.isnan(answer_f1(answer, references))
    assert f1_unreadable(answer, references).startswith(f"{role} is in ")
    assert exact_match(answer, references) in (0.0, 1.0)  # whole-string comparison needs no word split


def test_answer_f1_still_scores_languages_written_with_spaces():
    assert answer_f1("Москва столица", ["Москва"]) == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert answer_f1("Paris", ["Paris"]) == 1.0
    assert f1_unreadable("Москва", ["Москва"]) is None
