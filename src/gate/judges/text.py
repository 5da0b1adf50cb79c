"""Lexical normalisation for the lexical judge: tokens, stop words, stems, numbers, dates, negation, entities.

Everything here is a pure function of its input text. The only shared state is ``functools.lru_cache`` (thread
safe), values that a :class:`Facts` computes once from its own fields (``functools.cached_property``) and one
Snowball stemmer per thread, so the functions are safe to call from several threads.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.language import ITALIAN_STOP_WORDS


def _english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, read from its ``_stop_words.py`` without importing scikit-learn.

    Importing ``sklearn.feature_extraction`` takes about a second (it loads scipy and pandas); the list is a plain
    frozenset in a module of its own, so it is executed alone. Falls back to the regular import.
    """
    spec = importlib.util.find_spec("sklearn")
    origin = Path(spec.origin).parent / "feature_extraction" / "_stop_words.py" if spec and spec.origin else None
    if origin is not None and origin.is_file():
        source = importlib.util.spec_from_file_location("gate.judges._sklearn_stop_words", origin)
        if source is not None and source.loader is not None:
            module = importlib.util.module_from_spec(source)
            source.loader.exec_module(module)
            return frozenset(module.ENGLISH_STOP_WORDS)
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # pragma: no cover - another layout

    return frozenset(ENGLISH_STOP_WORDS)


ENGLISH_STOP_WORDS = _english_stop_words()
"""scikit-learn's English stop-word list (the Glasgow IR group's)."""

Lang = str
"""Language code: "en" or "it"."""

NEGATION_CUES = frozenset(
    {
        "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot", "non",
        "mai", "nessun", "nessuno", "nessuna", "niente", "nulla", "senza", "né",
    }
)  # fmt: skip
"""Words that negate the content words that follow them (English and Italian)."""

DISCOURSE_WORDS = frozenset(
    """according accordance article articles based context contexts document documents information mention
    mentioned mentions note noted notes overall passage passages provide provided provides report reported
    reports said say says state stated states summary summarize summarized text texts overview also various
    several including include includes included offer offers offered offering feature features featured
    located location known sure mentioned describe describes described highlight highlights highlighted
    additionally furthermore moreover however""".split()
)
"""Words of an answer's framing ("according to the passage", "it offers") that carry no checkable fact."""

STOP_WORDS = (frozenset(ENGLISH_STOP_WORDS) | ITALIAN_STOP_WORDS | DISCOURSE_WORDS) - NEGATION_CUES
_ONLY_ITALIAN = ITALIAN_STOP_WORDS - ENGLISH_STOP_WORDS
_ONLY_ENGLISH = ENGLISH_STOP_WORDS - ITALIAN_STOP_WORDS

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
    "gennaio": 1, "febbraio": 2, "marzo": 3, "aprile": 4, "maggio": 5, "giugno": 6, "luglio": 7, "agosto": 8,
    "settembre": 9, "ottobre": 10, "novembre": 11, "dicembre": 12,
}  # fmt: skip
_AMBIGUOUS_MONTHS = frozenset({"may", "mar", "jun", "dec", "sep", "aug"})  # also ordinary words
_UNITS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "dozen": 12,
}  # fmt: skip
"""English number words ("one" is left out: too often not a quantity)."""
_ITALIAN_UNITS = {
    "due": 2, "tre": 3, "quattro": 4, "cinque": 5, "sette": 7, "otto": 8, "nove": 9, "dieci": 10,
    "venti": 20, "trenta": 30, "cento": 100, "mille": 1000,
}  # fmt: skip
"""Italian number words ("uno"/"sei" are left out: too often not a quantity), read in Italian text only: in English
"due to" is no number two."""
_SCALES = {
    "hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "k": 1e3, "m": 1e6,
    "mn": 1e6, "bn": 1e9, "mila": 1e3, "milione": 1e6, "milioni": 1e6, "miliardo": 1e9, "miliardi": 1e9,
}  # fmt: skip

IRREGULAR = {
    "rose": "rise", "risen": "rise", "fell": "fall", "fallen": "fall", "won": "win", "lost": "lose",
    "bought": "buy", "sold": "sell", "began": "begin", "begun": "begin", "forgot": "forget",
    "forgotten": "forget", "froze": "freeze", "frozen": "freeze", "hid": "hide", "hidden": "hide", "sank": "sink",
    "sunk": "sink", "shrank": "shrink", "shrunk": "shrink", "lent": "lend", "led": "lead", "slept": "sleep",
    "woke": "wake", "woken": "wake", "fed": "feed", "forbade": "forbid", "forbidden": "forbid", "broke": "break",
    "broken": "break", "men": "man", "women": "woman", "wives": "wife", "children": "child", "taught": "teach",
}  # fmt: skip
"""English irregular forms whose Snowball stem is not their lemma's ("rose" → "rise"), for the verbs and nouns
of the antonym list (:mod:`gate.judges.lexicon`)."""

_TOKEN = re.compile(
    r"(?P<time>\b\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)(?![a-z])|\b\d{1,2}:\d{2}\b)"
    r"|(?P<num>\d[\d,.]*\d|\d)"
    r"|(?P<compound>(?<!-)[^\W\d_]{1,2}-[^\W\d_]+(?![^\W\d_]|-))"
    r"|(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)?)",
    re.IGNORECASE,
)
_PERCENT_AFTER = re.compile(r"\s*(%|percent\b|per\s+cent\b|per\s+cento\b)", re.IGNORECASE)
_OUT_OF = re.compile(r"\bout of\s*$|\bsu\s*$", re.IGNORECASE)
_TIME = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*([ap])?", re.IGNORECASE)
_DASHES = re.compile(r"[‐‑‒–—]")
_FOLD_CHARS = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-"})
"""What :func:`fold` does to one character after NFKC: quotes straightened, dashes to "-"."""
_SCOPE_END = re.compile(r"[.,;:!?()]")
"""Punctuation that ends a negation's scope."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number found in a text, normalised to a float."""

    value: float
    """The value, with thousands separators, scale words and number words resolved ("1.3 million" → 1.3e6)."""
    kind: str
    """"year" (1800–2100 written as four digits), "percent", "time" (minutes after midnight) or "num"."""
    step: float = 1.0
    """Rounding step of the written form ("1.3 million" → 1e5): a source value that rounds to ``value`` at
    this step is the same number."""
    four_digits: bool = False
    """Written as four bare digits ("1111", not "1,111" or "1111 million"): it may stand where a year does."""

    def matches(self, other: Quantity) -> bool:
        """True when ``other`` (from a source) is this number, allowing for rounding at this number's step."""
        if self.kind == "time" or other.kind == "time":
            return self.kind == other.kind and abs(self.value - other.value) < 1e-6
        if abs(self.value - other.value) <= 1e-9 * max(1.0, abs(self.value)):
            return True
        return self.step > 1 and abs(self.value - other.value) < self.step / 2


@dataclass(frozen=True)
class Facts:
    """The checkable content of a text span, after normalisation."""

    terms: tuple[str, ...]
    """Stems of the content words, in order (stop words, discourse words and numbers removed)."""
    numbers: tuple[Quantity, ...]
    """Numbers, years, percentages and clock times."""
    months: frozenset[int]
    """Months named in the text (1–12)."""
    entities: frozenset[str]
    """Stems of capitalised content words that are not the first word of a sentence (names, places)."""
    negated: frozenset[str]
    """Stems of content words within the scope of a negation cue ("not available" → {"avail"})."""
    positive: frozenset[str]
    """Stems of content words outside any negation scope."""
    surfaces: tuple[str, ...] = ()
    """The lower-cased word of each term, same order as ``terms``."""
    passive: tuple[bool | None, ...] = ()
    """Per term: True for a passive verb with its agent ("was defeated by"), None for one without ("was
    fired"), False otherwise; same order as ``terms``."""

    @functools.cached_property
    def content(self) -> frozenset[str]:
        """The set of content stems."""
        return frozenset(self.terms)

    @functools.cached_property
    def roles(self) -> tuple[dict[str, tuple[frozenset[str], frozenset[str]]], ...]:
        """(``relations()``, ``relations(near=2)``), computed once per instance (the lexical judge's role check)."""
        found = self.relations()
        return found, (self.relations(near=2) if found else {})

    def relations(self, near: int | None = None) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
        """Directed relations: verb stem → (content stems before it, content stems after it), agent first.

        A verb here is a past-tense form ("defeated", "won", "bought") that is not symmetric ("met",
        "married"), with content words on both sides. A passive verb with its agent ("the English were defeated
        by the Normans") has its sides swapped, so both voices give ``{"defeat": ({"norman"}, {"english"})}``;
        a passive without its agent ("was fired"), and a verb that occurs twice, are left out.

        Args:
            near: keep only this many content words on each side, nearest first (None: all).

        """
        out: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        seen: set[str] = set()
        for k, (term, word) in enumerate(zip(self.terms, self.surfaces, strict=True)):
            if term in seen:
                out.pop(term, None)
                continue
            seen.add(term)
            if not _is_past(word) or word in SYMMETRIC_VERBS or term in self.entities or self.passive[k] is None:
                continue
            before = [t for t in self.terms[:k] if t != term]
            after = [t for t in self.terms[k + 1 :] if t != term]
            if near is not None:
                before, after = before[-near:], after[:near]
            left, right = frozenset(before), frozenset(after)
            if left and right:
                out[term] = (right, left) if self.passive[k] else (left, right)
        return out


SYMMETRIC_VERBS = frozenset(
    """met married played merged partnered tied collided competed fought faced joined drew talked spoke shared
    exchanged traded connected linked compared related matched combined mixed agreed disagreed cooperated
    worked collaborated negotiated discussed debated dated divorced hugged kissed embraced""".split()
)
"""Past forms whose relation holds both ways ("A met B" = "B met A"): never a role swap."""
_IRREGULAR_PAST = frozenset(
    """won lost beat bought sold led took gave made built wrote sent hit caught left brought sought taught
    fought struck overtook overthrew defeated sank shot bit stole""".split()
)
_BE = frozenset({"is", "are", "was", "were", "be", "been", "being", "è", "sono", "era", "erano", "stato", "stata"})
_AGENT = frozenset({"by", "da", "dal", "dalla", "dai", "dagli"})
"""Words that introduce the agent of a passive verb ("was defeated by")."""


def _is_past(word: str) -> bool:
    return (len(word) > 4 and word.endswith("ed")) or word in _IRREGULAR_PAST


_local = threading.local()


def _stemmer(lang: Lang) -> Any:
    cache = getattr(_local, "stemmers", None)
    if cache is None:
        cache = _local.stemmers = {}
    if lang not in cache:
        import snowballstemmer  # its every language's stemmer (not at startup) when the judge first stems a word

        cache[lang] = snowballstemmer.stemmer("italian" if lang == "it" else "english")
    return cache[lang]


@functools.lru_cache(maxsize=200_000)
def stem(word: str, lang: Lang = "en") -> str:
    """The Snowball stem of a lower-cased word ("availability" → "avail", "negozi" → "negoz", "rose" → "rise").

    Args:
        word: one lower-case word.
        lang: "en" (Porter2) or "it" (Snowball Italian).

    Returns:
        The stem; English irregular forms (:data:`IRREGULAR`) are first mapped to their lemma; words of three
        letters or fewer are returned unchanged.

    Source: M. F. Porter, "Snowball: A language for stemming algorithms" (2001), snowballstem.org.

    """
    if lang == "en":
        word = IRREGULAR.get(word, word)
    if len(word) <= 3:
        return word
    return _stemmer(lang).stemWord(word)


def fold(text: str) -> str:
    """NFKC-normalise, unify quotes and dashes, collapse whitespace."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = _DASHES.sub("-", text)
    return " ".join(text.split())  # whitespace runs to one space (str.split and \s agree on what is a space)


def fold_offsets(text: str) -> tuple[str, list[int], list[int]] | None:
    """:func:`fold` of ``text`` with, per character of the result, the ``[start, end)`` of ``text`` it comes from.

    Each run of characters that starts with a non-combining one is NFKC-normalised on its own (a character that
    expands, "…" → "...", maps each of its pieces to itself); the one space that replaces a run of whitespace maps
    to the run.

    Returns:
        ``(folded, starts, ends)``, three sequences of the same length, ``folded == fold(text)``; None in the rare
        case where normalising run by run does not give :func:`fold`'s text (the caller then keeps whole spans).

    """
    starts: list[int] = []
    ends: list[int] = []
    if unicodedata.is_normalized("NFKC", text):
        normal, starts, ends = text, list(range(len(text))), list(range(1, len(text) + 1))
    else:
        pieces: list[str] = []
        k = 0
        while k < len(text):
            end = k + 1
            while end < len(text) and unicodedata.combining(text[end]):
                end += 1
            piece = unicodedata.normalize("NFKC", text[k:end])
            pieces.append(piece)
            same = len(piece) == end - k
            starts.extend(range(k, end) if same else [k] * len(piece))
            ends.extend(range(k + 1, end + 1) if same else [end] * len(piece))
            k = end
        normal = "".join(pieces)
    normal = normal.translate(_FOLD_CHARS)
    folded: list[str] = []
    out_starts: list[int] = []
    out_ends: list[int] = []
    previous = -1  # index in normal of the last character of the previous word
    for word in re.finditer(r"\S+", normal):
        a, b = word.span()
        if previous >= 0:  # the space between two words stands for the whitespace between them
            folded.append(" ")
            out_starts.append(ends[previous])
            out_ends.append(starts[a])
        folded.append(word.group())
        out_starts.extend(starts[a:b])
        out_ends.extend(ends[a:b])
        previous = b - 1
    result = "".join(folded)
    return (result, out_starts, out_ends) if result == fold(text) else None


def detect_language(text: str) -> Lang:
    """Guess the language: "it" when Italian function words outnumber English ones in ``text``, else "en"."""
    words = re.findall(r"[^\W\d_]+", text.lower())
    italian = sum(map(_ONLY_ITALIAN.__contains__, words))
    english = sum(map(_ONLY_ENGLISH.__contains__, words))
    return "it" if italian > english else "en"


def _parse_number(raw: str, lang: Lang) -> tuple[float, float, bool] | None:
    """(value, step, has_separators) of a digit string such as "1,000", "3.5", "1.000.000" (Italian)."""
    raw = raw.strip(".,")
    if not raw:
        return None
    thousands, decimal = (".", ",") if lang == "it" else (",", ".")
    if lang == "en" and re.fullmatch(r"\d{1,3}(\.\d{3}){2,}", raw):
        thousands, decimal = ".", ","
    if re.fullmatch(rf"\d{{1,3}}(\{thousands}\d{{3}})+(\{decimal}\d+)?", raw):
        raw_int, _, frac = raw.replace(thousands, "").partition(decimal)
        separated = True
    elif re.fullmatch(rf"\d+(\{decimal}\d+)?", raw):
        raw_int, _, frac = raw.partition(decimal)
        separated = False
    else:
        return None
    value = float(f"{raw_int}.{frac}" if frac else raw_int)
    step = 10.0 ** -len(frac) if frac else 1.0
    return value, step, separated


def _time_minutes(raw: str) -> float | None:
    match = _TIME.match(raw.strip())
    if not match:
        return None
    hours, minutes, half = int(match.group(1)), int(match.group(2) or 0), (match.group(3) or "").lower()
    if half == "p" and hours < 12:
        hours += 12
    if half == "a" and hours == 12:
        hours = 0
    if hours > 24 or minutes > 59:
        return None
    return float(hours * 60 + minutes)


@dataclass(slots=True)
class _Token:
    kind: str  # word | num | time
    text: str
    start: int
    end: int


def _tokens(text: str) -> list[_Token]:
    """The words, numbers and clock times of ``text``.

    A hyphenated word with a first part of one or two letters is one word, written without its hyphen ("Wi-Fi" →
    "WiFi", "e-mail" → "email", "re-open" → "reopen"), so that it matches its spelling without a hyphen.
    """
    return [
        _Token("word", m.group().replace("-", ""), m.start(), m.end())
        if m.lastgroup == "compound"
        else _Token(m.lastgroup or "word", m.group(), m.start(), m.end())
        for m in _TOKEN.finditer(text)
    ]


def _quantities(text: str, tokens: list[_Token], lang: Lang) -> tuple[list[Quantity], set[int]]:
    """Numbers in ``tokens``; returns them and the indexes of the tokens they consumed."""
    out: list[Quantity] = []
    used: set[int] = set()
    units = {**_UNITS, **_ITALIAN_UNITS} if lang == "it" else _UNITS
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        low = tok.text.lower()
        if tok.kind == "time":
            minutes = _time_minutes(low)
            if minutes is not None:
                out.append(Quantity(minutes, "time"))
                used.add(i)
            i += 1
            continue
        value: float | None = None
        step, separated, j = 1.0, False, i + 1
        if tok.kind == "num":
            parsed = _parse_number(tok.text, lang)
            if parsed is None:  # e.g. "2021-02-07" pieces or "4-5": take the digit runs
                for piece in re.findall(r"\d+", tok.text):
                    out.append(_plain(float(piece), piece))
                used.add(i)
                i += 1
                continue
            value, step, separated = parsed
        elif low in units:
            value = float(units[low])
            while j < len(tokens) and tokens[j].text.lower() in units and units[tokens[j].text.lower()] < 10:
                value += units[tokens[j].text.lower()]  # "twenty five"
                j += 1
        elif low in ("a", "one", "un", "uno", "una") and j < len(tokens) and tokens[j].text.lower() in _SCALES:
            if tokens[j].text.lower() not in ("k", "m"):
                value = 1.0
        if value is None:
            i += 1
            continue
        # scale words: "1.3 million", "two hundred", "5k"
        while j < len(tokens) and tokens[j].kind == "word" and tokens[j].text.lower() in _SCALES:
            gap = text[tokens[j - 1].end : tokens[j].start]
            if gap.strip(" -") or (tokens[j].text.lower() in ("k", "m", "mn", "bn") and gap.strip()):
                break
            scale = _SCALES[tokens[j].text.lower()]
            value, step = value * scale, step * scale
            j += 1
        if _OUT_OF.search(text[max(0, tok.start - 12) : tok.start]):  # "4.5 out of 5": the 5 is a scale, not a fact
            used.update(range(i, j))
            i = j
            continue
        percent = _PERCENT_AFTER.match(text, tokens[j - 1].end)  # not a copy of the rest: linear in the text
        if percent:
            out.append(Quantity(value, "percent", step))
            if percent.group(1) != "%":
                j += len(percent.group(1).split())
        elif tok.kind == "num" and not separated and step == 1.0 and 1800 <= value <= 2100 and len(tok.text) == 4:
            out.append(Quantity(value, "year"))
        else:
            bare = tok.kind == "num" and j == i + 1 and len(tok.text) == 4 and tok.text.isdigit()
            out.append(Quantity(value, "num", step, four_digits=bare))
        used.update(range(i, j))
        i = j
    return out, used


def _plain(value: float, raw: str) -> Quantity:
    if len(raw) == 4 and 1800 <= value <= 2100:
        return Quantity(value, "year")
    return Quantity(value, "num", four_digits=len(raw) == 4)


def _sentence_starts(text: str) -> set[int]:
    """Character offsets where a sentence or list item starts (their first word is not an entity)."""
    starts = {0}
    for m in re.finditer(r"(?:[.!?:;]\s+|\n\s*(?:[-*•]|\d+[.)])?\s*|^\s*(?:[-*•]|\d+[.)])\s*)[\"'(]?", text):
        starts.add(m.end())
    return starts


@functools.lru_cache(maxsize=50_000)
def facts(text: str, lang: Lang = "en") -> Facts:
    """Extract the checkable content of ``text``.

    Args:
        text: a claim, a sentence or a chunk, any length.
        lang: "en" or "it" (stems, thousands separators).

    Returns:
        :class:`Facts`: content stems (stop words of English and Italian removed, Snowball stems), numbers
        ("1,000" = "1000" = "one thousand"; "$2 million" = 2e6; "50%" = "50 percent"; "9 pm" = "21:00"),
        months, entities, and which stems are inside a negation scope (a cue such as "not", "no", "never",
        "without", "rather than", "non", "senza", then the next content word, unless punctuation or "but" comes
        first).

    Source: negation cues and scope after NegEx (Chapman et al. 2001, doi:10.1006/jbin.2001.1029).

    """
    text = fold(text)
    tokens = _tokens(text)
    numbers, used = _quantities(text, tokens, lang)
    starts = _sentence_starts(text)
    terms: list[str] = []
    surfaces: list[str] = []
    passive: list[bool | None] = []
    months: set[int] = set()
    entities: set[str] = set()
    negated: set[str] = set()
    positive: set[str] = set()
    scope = 0
    lows = [t.text.lower() for t in tokens]
    for i, tok in enumerate(tokens):
        if tok.kind != "word" or i in used:
            continue
        if scope and i and _SCOPE_END.search(text, tokens[i - 1].end, tok.start):
            scope = 0
        low = lows[i]
        nxt = lows[i + 1] if i + 1 < len(tokens) else ""
        if low.endswith("n't") or low in NEGATION_CUES or (low, nxt) in (("rather", "than"), ("instead", "of")):
            scope = 0 if nxt in ("only", "just", "solo", "soltanto") else 1
            continue
        if low in ("but", "ma", "however", "although", "though", "while"):
            scope = 0
        month = _MONTHS.get(low.rstrip("."))
        if month and (low not in _AMBIGUOUS_MONTHS or tok.text[0].isupper()):
            months.add(month)
            continue
        if low.endswith("'s"):
            low = low[:-2]
        if low in STOP_WORDS or len(low) < 2:
            continue
        term = stem(low, lang)
        terms.append(term)
        surfaces.append(low)
        if _is_past(low) and not _BE.isdisjoint(lows[max(0, i - 2) : i]):
            passive.append(None if _AGENT.isdisjoint(lows[i + 1 : i + 4]) else True)
        else:
            passive.append(False)
        if scope:
            negated.add(term)
            scope -= 1
        else:
            positive.add(term)
        if tok.start not in starts and (tok.text[0].isupper() or tok.text.isupper()) and not low.startswith("i'"):
            entities.add(term)  # a capitalised word in mid-sentence; "I'm", "I've" are no names
    return Facts(
        terms=tuple(terms),
        numbers=tuple(numbers),
        months=frozenset(months),
        entities=frozenset(entities),
        negated=frozenset(negated),
        positive=frozenset(positive),
        surfaces=tuple(surfaces),
        passive=tuple(passive),
    )


def analyzer(text: str, lang: Lang = "en") -> list[str]:
    """The TF-IDF features of ``text``: content stems, plus "#<value>" for each number and "@<n>" per month.

    This is the ``analyzer`` given to scikit-learn's ``TfidfVectorizer`` by the lexical judge.
    """
    found = facts(text, lang)
    return [
        *found.terms,
        *(f"#{q.value:g}" for q in found.numbers),
        *(f"@{m}" for m in sorted(found.months)),
    ]
