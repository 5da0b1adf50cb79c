"""Claim extraction for the lexical and NLI judges: sentences, then clauses and list items; refusals give no claims.

Refusals are detected by :func:`gate.metrics.refusal.is_refusal` (the rule scoring uses) with its default phrases.
Citation markers (:func:`gate.metrics.generation.citation_markers`) are removed before the answer is split. Each
claim keeps where it stands in the answer as written (:class:`Claim`): the judge checks its normalised text, a
reviewer reads the span of the answer it comes from.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from gate.judges.lexicon import antonyms
from gate.judges.text import Facts, Lang, facts, fold, fold_offsets
from gate.metrics.generation import citation_markers
from gate.metrics.refusal import is_refusal

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr st jr sr prof gov sen rep gen col lt sgt capt inc ltd co corp vs etc e.g eg i.e ie no nos
    approx dept est fig jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m mt ft ave blvd""".split()
)
_LIST_MARKER = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")
MAX_LIST_WORDS = 20_000
"""Words the list items of one clause may make with their shared head (head words × items). A list of normal size is
far below (30 words × 10 items); past it (a runaway generation: a long clause, then thousands of ", x"), each item is
a claim alone, so the claims of an answer stay about as long as the answer."""
_SEGMENT = re.compile(
    r"(\s*;\s*|,\s*(?:and|or|but|as well as|e|o|ma)\s+|,\s+(?!\d{4}\b)|\s+(?:and|or|but|as well as|e|o|ma)\s+)",
    re.IGNORECASE,
)


_ADJECTIVE_SUFFIX = re.compile(
    r"(?:[a-z]{2}(?:al|ic|ive|ous|ful|less|able|ible|ary|ian|ese|ish))$|^(?:"
    r"big|small|large|old|new|young|long|short|high|low|great|good|bad|little|major|minor|early|late|rich|poor|"
    r"strong|weak|wide|narrow|deep|hot|cold|warm|main|local|common|rare|distinct|"
    r"modern|ancient|northern|southern|eastern|western|foreign|domestic|urban|rural|religious|civil|military)$",
    re.IGNORECASE,
)
"""An English word that is an adjective by its ending (cultural, ethnic, religious, Norwegian) or one of a short
list of common ones (large, old, distinct): both sides of a bare "and"/"or" being such a word marks coordinated
adjectives inside one noun phrase ("the distinct cultural and ethnic identity"), which are no two claims."""
_NOUN_ENDINGS = frozenset(
    """metal capital animal hospital festival journal signal ritual rival trial proposal arrival approval terminal
    crystal canal portal pedal total general official principal individual material editorial tutorial manual
    music public republic clinic logic magic topic traffic panic mechanic fabric critic graphic
    archive detective objective executive representative native relative motive incentive
    library dictionary secretary salary summary anniversary boundary diary january february military dignitary
    musician politician historian physician christian guardian librarian comedian technician
    cheese radish polish""".split()
)
"""Words with an adjective's ending that are mostly nouns ("death metal and progressive metal"): no adjective here."""
_COORDINATOR = re.compile(r"\s+(?:and|or)\s+", re.IGNORECASE)


def _joins_adjectives(sentence: str, match: re.Match[str], lang: Lang) -> bool:
    """Whether the separator ``match`` is a bare "and"/"or" between two adjectives of one noun phrase.

    "the distinct cultural and ethnic identity": the word before is an adjective, the word after is one too and a
    word follows it (the noun they share). "The city is large and the river is wide" still splits (``the``).
    """
    if lang != "en" or not _COORDINATOR.fullmatch(match.group()):
        return False
    before = sentence[: match.start()].split()
    after = sentence[match.end() :].split()
    if not before or len(after) < 2:
        return False
    words = [word.strip("\"'()").casefold() for word in (before[-1], after[0])]
    return all(_ADJECTIVE_SUFFIX.search(w) and w not in _NOUN_ENDINGS for w in words)


@dataclass(frozen=True)
class Claim:
    """One atomic claim of an answer: the text a judge checks, and where it stands in the answer as written."""

    text: str
    """What the judge checks: NFKC-normalised, quotes straightened, one space between words, citation markers
    removed; a list item carries its clause's head ("It serves pasta" from "It serves pizza, pasta and salad")."""
    start: int
    """Offset in the answer as written of the first character shown, ≥ 0."""
    end: int
    """Offset one past the last character shown (``start < end ≤ len(answer)``)."""
    shown: str
    """``answer[start:end]``, what a reviewer reads: the sentence or clause as written (markers inside it kept),
    and for a list item the item alone ("pasta")."""


def _sentence_pieces(text: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """The sentences of ``text`` (as :func:`split_sentences` gives them), each with the ranges of ``text`` it spans.

    The ranges are ``[start, end)`` offsets, in order: two or more when a sentence break after an abbreviation was
    undone (the sentence is then the ranges joined by one space, folded).
    """
    out: list[tuple[str, list[tuple[int, int]]]] = []
    for line in re.finditer(r"[^\n]+", text):
        body, base = line.group(), line.start()
        marker = _LIST_MARKER.match(body)
        if marker:
            body, base = body[marker.end() :], base + marker.end()
        ranges, pos = [], 0
        for sep in _SENTENCE_END.finditer(body):
            ranges.append((pos, sep.start()))
            pos = sep.end()
        ranges.append((pos, len(body)))
        merged: list[tuple[str, list[tuple[int, int]]]] = []
        for a, b in ranges:
            piece = body[a:b]
            if merged and _ends_with_abbreviation(merged[-1][0]):
                merged[-1] = (f"{merged[-1][0]} {piece}", [*merged[-1][1], (base + a, base + b)])
            else:
                merged.append((piece, [(base + a, base + b)]))
        out.extend((s, spans) for s, spans in ((fold(p), spans) for p, spans in merged) if s)
    return out


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences: one per line or list item, then on ``. ! ?`` before a capital or digit.

    Abbreviations ("Dr.", "U.S.", "Feb."), initials ("J. Smith") and decimals ("3.5") do not end a sentence.
    List markers ("1.", "-", "*") are removed. Empty pieces are dropped. Sentences are folded
    (:func:`gate.judges.text.fold`).
    """
    return [sentence for sentence, _ in _sentence_pieces(text)]


def _ends_with_abbreviation(sentence: str) -> bool:
    last = sentence.rstrip().rsplit(" ", 1)[-1].lower().rstrip(".").lstrip("(\"'")
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())


def _units(text: str, lang: Lang) -> int:
    found = facts(text, lang)
    return len(found.terms) + len(found.numbers) + len(found.months)


def split_clauses(sentence: str, lang: Lang = "en") -> list[str]:
    """Split one sentence into atomic claims on conjunctions, semicolons and lists.

    "X and Y" gives two claims when both sides are clauses (3 words or more, 2 content words or more).
    A list "It serves pizza, pasta and salad" gives one claim per item with the shared head:
    "It serves pizza", "It serves pasta", "It serves salad". A capitalised short piece after a comma is an
    apposition and stays with its clause ("Houston, Texas"); a short piece before any clause stays attached
    to what follows ("Danielle and Adam welcomed ..."). A bare "and"/"or" between two adjectives of one noun
    phrase joins them, it splits nothing ("the distinct cultural and ethnic identity of the Normans").
    """
    return [claim for claim, _, _ in _clause_pieces(sentence, lang)]


def _clause_pieces(sentence: str, lang: Lang) -> list[tuple[str, int, int]]:
    """:func:`split_clauses` with, per claim, the ``[start, end)`` of ``sentence`` it comes from.

    The range is the clause's (with an apposition or a short piece attached to it), or for a list item the item's.
    """
    parts: list[tuple[int, int]] = []  # the pieces between separators, as ranges of the sentence
    separators: list[str] = []
    pos = 0
    for match in _SEGMENT.finditer(sentence):
        if _joins_adjectives(sentence, match, lang):
            continue  # one noun phrase: "the distinct cultural and ethnic identity of ..."
        parts.append((pos, match.start()))
        separators.append(match.group())
        pos = match.end()
    parts.append((pos, len(sentence)))
    groups: list[tuple[str, int, int, list[tuple[str, int, int]]]] = []  # (clause, start, end, its list items)
    pending: tuple[str, int, int] | None = None  # a short piece waiting for what follows, and its range
    for k, (a, b) in enumerate(parts):
        raw = sentence[a:b]
        segment = raw.strip(" ,;")
        if not segment:
            continue
        start = a + len(raw) - len(raw.lstrip(" ,;"))
        end = b - (len(raw) - len(raw.rstrip(" ,;")))
        if pending:
            segment, start, pending = f"{pending[0]}{separators[k - 1]}{segment}", pending[1], None
        words = segment.split()
        if len(words) >= 3 and _units(segment, lang) >= 2:
            groups.append((segment, start, end, []))
        elif groups and len(words) <= 2 and segment[0].isupper() and not groups[-1][3]:
            clause, clause_start, _, _ = groups[-1]
            groups[-1] = (f"{clause}, {segment}", clause_start, end, [])
        elif groups:
            groups[-1][3].append((segment, start, end))
        else:
            pending = (segment, start, end)
    if pending:  # no clause in the sentence (a clause would have taken it)
        groups.append((*pending, []))
    claims: list[tuple[str, int, int]] = []
    for clause, start, end, items in groups:
        claims.append((clause, start, end))
        if items:
            prefix = _list_head(clause, max(len(item.split()) for item, _, _ in items), lang)
            if len(prefix.split()) * len(items) > MAX_LIST_WORDS:  # a runaway list: its items alone (bounded work)
                prefix = ""
            claims.extend((f"{prefix} {item}".strip(), a, b) for item, a, b in items)
    return claims


def _list_head(clause: str, item_words: int, lang: Lang) -> str:
    """The words of ``clause`` before its own list item.

    The item is the clause's trailing content words when there are few (≤ max(2, item length)), else as many
    trailing words as the longest other item.
    """
    words = clause.split()
    tail = 0
    while tail < len(words) - 1 and facts(words[-1 - tail], lang).terms:
        tail += 1
    drop = tail if 0 < tail <= max(2, item_words) else item_words
    return " ".join(words[: max(1, len(words) - drop)])


def extract_claims(answer: str, lang: Lang = "en") -> list[str]:
    """The atomic claims of ``answer`` as the judge checks them (:attr:`Claim.text` of :func:`claim_spans`)."""
    return [claim.text for claim in claim_spans(answer, lang)]


def claim_spans(answer: str, lang: Lang = "en", retrieved_ids: Iterable[str] = ()) -> list[Claim]:
    """The atomic claims of ``answer``: sentences, then clauses and list items; citation markers and filler dropped.

    Dropped: citation markers (:func:`gate.metrics.generation.citation_markers`, ``[d1]``, ``[1]``,
    ``(source: …)``, ``【…】``; never a word of the sentence), refusals and empty answers (no claims at all),
    lead-in lines ending with ":" ("Here is a summary:"), and pieces with no content word, number or date.

    Args:
        answer: the generated answer as written, any length (plain text or markdown lists).
        lang: "en" or "it".
        retrieved_ids: ids of the chunks retrieved for the answer: a bracketed id among them is a marker even
            without a digit (``[Paris]``).

    Returns:
        Claims in answer order, each with the text to judge and its span of ``answer``; ``[]`` for a refusal or an
        empty answer.

    Source: claim decomposition as in FActScore (Min et al. 2023, arXiv:2305.14251) and RAGAS faithfulness
    (Es et al. 2024, arXiv:2309.15217), here with rules instead of an LLM.

    """
    text, starts, ends = _without_markers(answer, retrieved_ids)
    if is_refusal(text):
        return []
    claims: list[Claim] = []
    for sentence, ranges in _sentence_pieces(text):
        if sentence.endswith(":"):
            continue
        raw = " ".join(text[a:b] for a, b in ranges)  # what the sentence was folded from
        raw_starts: list[int] = []  # per character of raw: the [start, end) of text it stands for
        raw_ends: list[int] = []
        for n, (a, b) in enumerate(ranges):
            if n:  # the space that joins two pieces stands for the break between them
                raw_starts.append(ranges[n - 1][1])
                raw_ends.append(a)
            raw_starts.extend(range(a, b))
            raw_ends.extend(range(a + 1, b + 1))
        aligned = fold_offsets(raw)
        for claim, a, b in _clause_pieces(sentence, lang):
            if _units(claim, lang) == 0:
                continue
            if aligned is None or aligned[0] != sentence:  # whole sentence: its first and last characters
                first, last = _trimmed(text, ranges[0][0], ranges[-1][1])
            else:
                first, last = raw_starts[aligned[1][a]], raw_ends[aligned[2][b - 1] - 1] - 1
            start, end = starts[first], ends[last]
            claims.append(Claim(claim, start, end, answer[start:end]))
    return claims


def _trimmed(text: str, a: int, b: int) -> tuple[int, int]:
    """The first and last non-space characters of ``text[a:b]`` (which holds some)."""
    while text[a].isspace():
        a += 1
    while text[b - 1].isspace():
        b -= 1
    return a, b - 1


def _without_markers(answer: str, retrieved_ids: Iterable[str]) -> tuple[str, list[int], list[int]]:
    """The answer without its citation markers, with the ``[start, end)`` of ``answer`` each character comes from.

    The text is :func:`gate.metrics.generation.strip_citations`'s; a space it leaves between two words comes from
    the marker.
    """
    spans = citation_markers(answer, retrieved_ids)
    if not spans:
        return answer, list(range(len(answer))), list(range(1, len(answer) + 1))
    chars: list[str] = []
    starts: list[int] = []
    last = 0
    glue: dict[int, tuple[int, int]] = {}
    for start, end in [*spans, (len(answer), len(answer))]:
        chars.append(answer[last:start])
        starts.extend(range(last, start))
        if 0 < start and end < len(answer) and answer[start - 1].isalnum() and answer[end].isalnum():
            glue[len(starts)] = (start, end)
            chars.append(" ")
            starts.append(start)
        last = end
    ends = [s + 1 for s in starts]
    for k, (_, end) in glue.items():
        ends[k] = end
    return "".join(chars), starts, ends


_C = TypeVar("_C", str, Claim)


def distinct_claims(claims: Sequence[_C], lang: Lang = "en", overlap: float = 0.8) -> tuple[list[_C], int]:
    """Drop claims that repeat an earlier one: padding with copies does not change a score.

    Two claims are the same when the Jaccard overlap of their checkable content (content stems, numbers,
    months) is at least ``overlap`` *and* they state the same facts: a claim that differs from its near-twin by
    negation ("is not open" / "is open"), a number, a month, a name (a capitalised word of either claim) or a
    listed antonym ("open" / "closed") is kept, so a contradiction placed next to the true sentence is judged,
    not dropped. A claim without content is kept.

    Args:
        claims: claims in answer order, texts or :class:`Claim` (compared by their ``text``).
        lang: "en" or "it".
        overlap: Jaccard threshold in (0, 1].

    Returns:
        (the first claim of each group, in order; the number dropped).

    Each claim is compared only with the earlier kept claims that share a word of its *prefix* (its
    ``|key| − ⌊overlap·|key|⌋ + 1`` rarest words): two sets with Jaccard ≥ t share one of them (prefix
    filtering), so the result is that of comparing every pair, in about linear time instead of quadratic.

    Source: Jaccard 1912, "The distribution of the flora in the alpine zone", doi:10.1111/j.1469-8137.1912.tb05611.x;
    prefix filtering: Chaudhuri, Ganti & Kaushik 2006, "A primitive operator for similarity joins in data
    cleaning", doi:10.1109/ICDE.2006.9; Bayardo, Ma & Srikant 2007, doi:10.1145/1242572.1242591.

    """
    found_all = [facts(claim if isinstance(claim, str) else claim.text, lang) for claim in claims]
    keys = [f.content | {f"#{q.value:g}" for q in f.numbers} | {f"@{m}" for m in f.months} for f in found_all]
    rarity = Counter(x for key in keys for x in key)  # the prefixes hold each claim's rarest words: few candidates
    kept: list[_C] = []
    found_kept: list[tuple[frozenset[str], Facts]] = []
    holders: dict[str, list[int]] = {}  # word → the kept claims whose prefix holds it
    for claim, found, key in zip(claims, found_all, keys, strict=True):
        prefix = sorted(key, key=lambda x: (rarity[x], x))[: len(key) - math.floor(overlap * len(key)) + 1]
        candidates = sorted({i for x in prefix for i in holders.get(x, ())})
        if key and any(
            len(key & k) / len(key | k) >= overlap and _same_facts(found, key, other, k, lang)
            for k, other in (found_kept[i] for i in candidates)
        ):
            continue
        for x in prefix:
            holders.setdefault(x, []).append(len(found_kept))
        kept.append(claim)
        found_kept.append((key, found))
    return kept, len(claims) - len(kept)


def _same_facts(a: Facts, key_a: frozenset[str], b: Facts, key_b: frozenset[str], lang: Lang) -> bool:
    """True when two near-identical claims agree on negation, numbers, months, names and listed antonyms."""
    differing = key_a ^ key_b
    if any(k[0] in "#@" for k in differing):  # a number or a month on one side only
        return False
    if differing & (a.entities | b.entities):  # a name on one side only
        return False
    if a.negated != b.negated:  # negated on one side only
        return False
    opposite = antonyms() if lang == "en" else {}
    return not any(opposite.get(w, frozenset()) & differing for w in differing)
