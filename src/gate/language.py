"""Language and script identification: which texts the lexical judge and the answer-F1 tokenizer can read.

The lexical judge reads English and Italian (stop words, Snowball stems, number words, negation cues). The SQuAD
answer-F1 tokenizer splits on whitespace, so it reads any script that puts spaces between words, but not Chinese,
Japanese, Thai, Lao, Khmer, Myanmar or Tibetan. A text either cannot read is *not applicable* (NaN with a
warning naming the language), never scored 0 or 1.

Language identification uses py3langid (a maintained fork of langid.py, Lui & Baldwin 2012, ACL demo,
https://aclanthology.org/P12-3005; BSD-3-Clause; the naive Bayes model over byte n-grams for 97 languages ships
inside the wheel, 4.6 MB, nothing is downloaded). It is loaded only when a text is neither clearly English /
Italian by its function words (≥ 30 % of its words) nor in another script (loading takes a few seconds).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

ITALIAN_STOP_WORDS = frozenset(
    """a ad al allo ai agli all alla alle anche ancora avere aveva avevano c che chi ci coi col come con contro
    cui da dal dallo dai dagli dall dalla dalle degli dei del dell della delle dello di dove e ed è era erano
    essere fa fra gli ha hanno ho i il in io l la le lei li lo loro lui ma me mi mia mie miei mio ne negli nei
    nel nell nella nelle nello noi o ogni per perché più poi può qua quale quali qualche quando quanto quella
    quelle quelli quello questa queste questi questo se sei si sia sono su sua sue sugli sui sul sull sulla
    sulle sullo suo suoi te ti tra tu tua tue tuo tuoi tutti tutto tutte tutta un una uno vi voi sì stato
    stata stati state molto molti molte tanto tante così già solo sempre""".split()
)
"""Italian function words (articles, prepositions, pronouns, auxiliaries), after the Snowball Italian list."""


JUDGE_LANGUAGES = frozenset({"en", "it"})
"""Languages the lexical judge reads (ISO 639-1)."""

UNSEGMENTED_SCRIPTS = frozenset({"Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan"})
"""Scripts written without spaces between words: a whitespace tokenizer cannot split them into words."""

LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech", "da": "Danish",
    "de": "German", "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "eu": "Basque",
    "fa": "Persian", "fi": "Finnish", "fr": "French", "ga": "Irish", "gl": "Galician", "he": "Hebrew",
    "hi": "Hindi", "hr": "Croatian", "hu": "Hungarian", "id": "Indonesian", "is": "Icelandic", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "la": "Latin", "lt": "Lithuanian", "lv": "Latvian", "ms": "Malay",
    "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
    "sk": "Slovak", "sl": "Slovenian", "sr": "Serbian", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil",
    "th": "Thai", "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese",
    "zh": "Chinese",
}  # fmt: skip
"""English names of the commonest ISO 639-1 codes (others are shown as the code)."""

_SCRIPT_PREFIXES = (
    ("CJK", "Han"), ("HIRAGANA", "Hiragana"), ("KATAKANA", "Katakana"), ("HANGUL", "Hangul"), ("LATIN", "Latin"),
    ("CYRILLIC", "Cyrillic"), ("GREEK", "Greek"), ("ARABIC", "Arabic"), ("HEBREW", "Hebrew"),
    ("DEVANAGARI", "Devanagari"), ("BENGALI", "Bengali"), ("TAMIL", "Tamil"), ("THAI", "Thai"), ("LAO", "Lao"),
    ("KHMER", "Khmer"), ("MYANMAR", "Myanmar"), ("TIBETAN", "Tibetan"), ("GEORGIAN", "Georgian"),
    ("ARMENIAN", "Armenian"), ("ETHIOPIC", "Ethiopic"), ("GUJARATI", "Gujarati"), ("GURMUKHI", "Gurmukhi"),
    ("TELUGU", "Telugu"), ("KANNADA", "Kannada"), ("MALAYALAM", "Malayalam"), ("SINHALA", "Sinhala"),
)  # fmt: skip
_SCRIPT_LANGUAGE = {"Han": "zh", "Hiragana": "ja", "Katakana": "ja", "Hangul": "ko", "Thai": "th", "Greek": "el"}
_WORD = re.compile(r"[^\W\d_]+")
_MIN_FUNCTION_SHARE = 0.3
"""English or Italian function words must make up this share of a Latin-script text's words to skip langid
(English and Italian prose run at 40–50 %; French or Spanish share a few short words with them)."""
_MIN_CONFIDENCE = 0.9
"""py3langid's normalised probability above which a Latin-script text is taken to be in another language."""
_MIN_WORDS = 4
"""Latin-script texts with fewer words are given the benefit of the doubt (too short to identify)."""
_MIN_ODDS = 10.0
"""How many times as likely as English and as Italian py3langid must find another language to take it for a text
py3langid is not sure of (:func:`_clearly_other`)."""


@dataclass(frozen=True)
class Language:
    """The identified language and dominant script of a text."""

    code: str
    """ISO 639-1 code ("en"), or "und" when undetermined."""
    script: str
    """Dominant script of the letters: "Latin", "Han", "Cyrillic", ...; "" for a text without letters."""

    @property
    def name(self) -> str:
        """Readable name, e.g. "Spanish (es)", "Chinese (zh, Han script)"."""
        if self.code == "und":
            return f"an undetermined language ({self.script or 'no'} script)"
        label = LANGUAGE_NAMES.get(self.code, f"language {self.code}")
        return f"{label} ({self.code})" if self.script == "Latin" else f"{label} ({self.code}, {self.script} script)"


@functools.lru_cache(maxsize=65_536)
def char_script(char: str) -> str | None:
    """The script of one letter from its Unicode name ("LATIN SMALL LETTER A" → "Latin"); None if unknown."""
    name = unicodedata.name(char, "")
    for prefix, script in _SCRIPT_PREFIXES:
        if name.startswith(prefix):
            return script
    return None


def dominant_script(text: str) -> str:
    """The script of most letters of ``text`` ("" when it has no letter of a known script).

    Ties go to the script whose first letter comes first in ``text``.
    """
    if text.isascii():  # ASCII letters are all Latin: the common case, without a look-up per letter
        return "Latin" if any(c.isalpha() for c in text) else ""
    counts: Counter[str] = Counter()
    for char, n in Counter(text).items():  # each distinct character once, in order of first occurrence
        script = char_script(char) if char.isalpha() else None
        if script:
            counts[script] += n
    return counts.most_common(1)[0][0] if counts else ""


def unsegmented_script(text: str) -> str | None:
    """The script of ``text`` when at least a fifth of its letters are in a script written without spaces.

    Returns:
        The script name ("Han", "Thai", ...) or None.

    """
    if text.isascii():  # ASCII letters are all Latin (a script with spaces): the common case, without unicodedata
        return None
    letters = [s for s in map(char_script, (c for c in text if c.isalpha())) if s]
    if not letters:
        return None
    counts = Counter(s for s in letters if s in UNSEGMENTED_SCRIPTS)
    if not counts or sum(counts.values()) < 0.2 * len(letters):
        return None
    return counts.most_common(1)[0][0]


_lock = threading.Lock()


@functools.cache
def _function_words() -> tuple[frozenset[str], frozenset[str]]:
    """(scikit-learn's English stop words, the Italian function words that are not English ones)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # scikit-learn is slow to import: here only

    return frozenset(ENGLISH_STOP_WORDS), ITALIAN_STOP_WORDS - ENGLISH_STOP_WORDS


@functools.cache
def _identifier():  # pragma: no cover - trivial loader
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _langid(text: str) -> tuple[str, float]:
    with _lock:  # the identifier is not documented as thread safe; loading must happen once
        code, confidence = _identifier().classify(text)
    return ("zh" if code == "wuu" else code), confidence  # Wu Chinese: report as Chinese


def _clearly_other(text: str) -> str | None:
    """py3langid's best guess for ``text`` when it is clearly neither English nor Italian, else None.

    Clearly: a language outside :data:`JUDGE_LANGUAGES` with probability ≥ 0.4 and at least :data:`_MIN_ODDS` times
    that of English and of Italian. A short French sentence shares function words with Italian ("la", "le") and gets
    a low absolute confidence ("Je ne sais pas.": French 0.45), yet English and Italian are far less likely still.
    """
    with _lock:
        ranked = dict(_identifier().rank(text))
    code, confidence = max(ranked.items(), key=lambda item: item[1])
    if code in JUDGE_LANGUAGES or confidence < 0.4:
        return None
    if confidence >= _MIN_ODDS * max(ranked.get("en", 0.0), ranked.get("it", 0.0)):
        return "zh" if code == "wuu" else code
    return None


@functools.lru_cache(maxsize=4096)
def identify(text: str) -> Language:
    """Identify the language of ``text``.

    Rules, in order: no letters → "und"; a non-Latin dominant script → py3langid's best guess (or the script's
    usual language when py3langid is unsure); a Latin-script text whose English or Italian function words make up
    ≥ 30 % of its words → "en" or "it" by which has more (for "it", another language that py3langid finds ten times
    as likely as Italian and English wins: French shares "la", "le"); fewer than 4 words → "en" (too short to
    tell); otherwise py3langid, taken when its normalised probability is ≥ 0.9 or when it is ≥ 0.4 and ten times
    that of English and of Italian, else "en".

    Args:
        text: any text (an answer, a chunk, a reference answer).

    Returns:
        :class:`Language`.

    Source: Lui & Baldwin 2012, "langid.py: An Off-the-shelf Language Identification Tool", ACL demo,
    https://aclanthology.org/P12-3005 (py3langid's model).

    """
    script = dominant_script(text)
    if not script:
        return Language("und", "")
    if script != "Latin":
        code, confidence = _langid(text)
        if confidence < 0.5 and script in _SCRIPT_LANGUAGE:
            code = _SCRIPT_LANGUAGE[script]
        return Language(code if code not in JUDGE_LANGUAGES else "und", script)
    words = _WORD.findall(text.lower())
    english_words, italian_words = _function_words()
    english = sum(map(english_words.__contains__, words))
    italian = sum(map(italian_words.__contains__, words))
    if words and (english + italian) / len(words) >= _MIN_FUNCTION_SHARE:
        if italian > english:  # French, Spanish and Portuguese share "la", "le", "con", "per" with Italian
            return Language(_clearly_other(text) or "it", script)
        return Language("en", script)
    if len(words) < _MIN_WORDS:
        return Language("en", script)
    code, confidence = _langid(text)
    if confidence >= _MIN_CONFIDENCE:
        return Language(code, script)
    return Language(_clearly_other(text) or "en", script)


def unreadable(texts: dict[str, str], languages: frozenset[str] = JUDGE_LANGUAGES) -> str | None:
    """A warning when one of ``texts`` is in a language outside ``languages``, else None.

    Args:
        texts: role → text, e.g. ``{"answer": ..., "context": ...}``; checked in order, empty texts skipped.
        languages: the ISO 639-1 codes the reader handles.

    Returns:
        E.g. "answer is in Spanish (es): the lexical judge reads English and Italian; not scored", or None.

    """
    for role, text in texts.items():
        if not text.strip():
            continue
        found = identify(text)
        if found.code not in languages and found.script:
            readable = " and ".join(LANGUAGE_NAMES.get(c, c) for c in sorted(languages))
            return f"{role} is in {found.name}: the lexical judge reads {readable}; not scored"
    return None


def f1_unreadable(answer: str, references: Sequence[str]) -> str | None:
    """A warning when the SQuAD answer-F1 tokenizer cannot read ``answer`` or one of ``references``, else None.

    The tokenizer splits on whitespace, so it reads any language written with spaces between words; a text whose
    letters are at least one fifth in a script without spaces (:data:`UNSEGMENTED_SCRIPTS`) cannot be split
    into words.

    Returns:
        E.g. "answer is in Han script (Chinese/Japanese): answer F1 splits words on spaces; not scored".

    """
    for role, text in (("answer", answer), *(("reference answer", r) for r in references)):
        script = unsegmented_script(text)
        if script is not None:
            return f"{role} is in {script} script: answer F1 splits words on spaces; not scored"
    return None
