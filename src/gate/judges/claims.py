"""Claim extraction for the lexical and NLI judges: sentences, then clauses and list items; refusals give no claims.

Refusals are detected by :func:`gate.metrics.refusal.is_refusal` (the rule scoring uses) with its default phrases.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from gate.judges.lexicon import antonyms
from gate.judges.text import Facts, Lang, facts, fold
from gate.metrics.refusal import is_refusal

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr st jr sr prof gov sen rep gen col lt sgt capt inc ltd co corp vs etc e.g eg i.e ie no nos
    approx dept est fig jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m mt ft ave blvd""".split()
)
MAX_LIST_WORDS = 20_000
"""Words the list items of one clause may make with their shared head (head words × items). A list of normal size is
far below (30 words × 10 items); past it (a runaway generation: a long clause, then thousands of ", x"), each item is
a claim alone, so the claims of an answer stay about as long as the answer."""
_LIST_MARKER = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")
_SEGMENT = re.compile(
    r"(\s*;\s*|,\s*(?:and|or|but|as well as|e|o|ma)\s+|,\s+(?!\d{4}\b)|\s+(?:and|or|but|as well as|e|o|ma)\s+)",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences: one per line or list item, then on ``. ! ?`` before a capital or digit.

    Abbreviations ("Dr.", "U.S.", "Feb."), initials ("J. Smith") and decimals ("3.5") do not end a sentence.
    List markers ("1.", "-", "*") are removed. Empty pieces are dropped.
    """
    out: list[str] = []
    for line in re.split(r"\n+", text):
        line = _LIST_MARKER.sub("", line)
        pieces = _SENTENCE_END.split(line)
        merged: list[str] = []
        for piece in pieces:
            if merged and _ends_with_abbreviation(merged[-1]):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        out.extend(s for s in (fold(p) for p in merged) if s)
    return out


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
    to what follows ("Danielle and Adam welcomed ...").
    """
    parts = _SEGMENT.split(sentence)
    groups: list[tuple[str, list[str]]] = []  # (clause, list items that share its head)
    pending = ""
    for k in range(0, len(parts), 2):
        segment = parts[k].strip(" ,;")
        if not segment:
            continue
        if pending:
            segment, pending = f"{pending}{parts[k - 1]}{segment}", ""
        words = segment.split()
        if len(words) >= 3 and _units(segment, lang) >= 2:
            groups.append((segment, []))
        elif groups and len(words) <= 2 and segment[0].isupper() and not groups[-1][1]:
            groups[-1] = (f"{groups[-1][0]}, {segment}", [])
        elif groups:
            groups[-1][1].append(segment)
        else:
            pending = segment
    if pending:
        groups.append((f"{groups.pop()[0]} and {pending}", []) if groups else (pending, []))
    claims: list[str] = []
    for clause, items in groups:
        claims.append(clause)
        if items:
            prefix = _list_head(clause, max(len(item.split()) for item in items), lang)
            if len(prefix.split()) * len(items) > MAX_LIST_WORDS:  # a runaway list: its items alone (bounded work)
                prefix = ""
            claims.extend(f"{prefix} {item}".strip() for item in items)
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
    """The atomic claims of ``answer``: sentences, then clauses and list items; filler dropped.

    Dropped: refusals and empty answers (no claims at all), lead-in lines ending with ":" ("Here is a
    summary:"), and pieces with no content word, number or date.

    Args:
        answer: the generated answer, any length (plain text or markdown lists).
        lang: "en" or "it".

    Returns:
        Claims in answer order; ``[]`` for a refusal or an empty answer.

    Source: claim decomposition as in FActScore (Min et al. 2023, arXiv:2305.14251) and RAGAS faithfulness
    (Es et al. 2024, arXiv:2309.15217), here with rules instead of an LLM.

    """
    if is_refusal(answer):
        return []
    claims: list[str] = []
    for sentence in split_sentences(answer):
        if sentence.endswith(":"):
            continue
        for claim in split_clauses(sentence, lang):
            if _units(claim, lang) > 0:
                claims.append(claim)
    return claims


def distinct_claims(claims: list[str], lang: Lang = "en", overlap: float = 0.8) -> tuple[list[str], int]:
    """Drop claims that repeat an earlier one: padding with copies does not change a score.

    Two claims are the same when the Jaccard overlap of their checkable content (content stems, numbers,
    months) is at least ``overlap`` *and* they state the same facts: a claim that differs from its near-twin by
    negation ("is not open" / "is open"), a number, a month, a name (a capitalised word of either claim) or a
    listed antonym ("open" / "closed") is kept, so a contradiction placed next to the true sentence is judged,
    not dropped. A claim without content is kept.

    Args:
        claims: claims in answer order.
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
    found_all = [facts(claim, lang) for claim in claims]
    keys = [f.content | {f"#{q.value:g}" for q in f.numbers} | {f"@{m}" for m in f.months} for f in found_all]
    rarity = Counter(x for key in keys for x in key)  # the prefixes hold each claim's rarest words: few candidates
    kept: list[str] = []
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
