"""Refusal detection: the one rule that scoring, comparison and the judges share (DESIGN §3, ``refusal``).

A refusal ("I don't have that information") answers nothing: the refusal metrics count it (:func:`refusal` on
out-of-domain cases, :func:`false_refusal` on answerable ones), and the judges find no claims in it (its
faithfulness is NaN, never 0 or 1).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable

from gate.metrics.context import ScoreContext

DEFAULT_REFUSAL_PHRASES: tuple[str, ...] = (
    "i don't have that information",
    "i don't have enough information",
    "i don't have any information",
    "i don't know",
    "i do not know",
    "i cannot answer",
    "i can't answer",
    "cannot answer",
    "can't answer",
    "can not answer",
    "unable to answer",
    "unable to provide",
    "unable to determine",
    "cannot provide",
    "cannot determine",
    "not enough information",
    "no information",
    "no relevant information",
    "insufficient information",
    "not mentioned in the",
    "not provided in the",
    "the context does not",
    "the passages do not",
    "the passage does not",
    "the documents do not",
    "the document does not",
    "non lo so",
    "non ho informazioni",
    "non ho abbastanza informazioni",
    "non ci sono informazioni",
    "non è possibile rispondere",
    "non posso rispondere",
)
"""Phrases that mark an answer as a refusal (English and Italian, lower case). A configuration may replace them
(``refusal: {phrases: [...]}``)."""

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "\u201c": '"', "\u201d": '"'})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

_SUBJECT = r"(?:^|\b(?:i|we)(?:'m|'re|\s+am|\s+are)?\s+|\bi'm\s+|\bwe're\s+)"
_HELP_VERB = (
    r"(?:help|assist|answer|respond|reply|provide|offer|give|share|comply|fulfil|fulfill|support|say|tell|"
    r"determine|locate|disclose|elaborate|comment|address|handle|identify|confirm|verify|discuss|"
    r"find\s+(?:\w+\s+)?(?:information|answer|details|data)|do\s+(?:that|this|so|it))"
)
_INABILITY = re.compile(
    rf"""{_SUBJECT}(?:\w+ly\s+)?
        (?:can't|cannot|can\s+not|couldn't|could\s+not|won't\s+be\s+able\s+to|will\s+not\s+be\s+able\s+to|
           wouldn't\s+be\s+able\s+to|would\s+not\s+be\s+able\s+to|(?:am|are|'m|'re)?\s*not\s+able\s+to|
           (?:am|are|'m|'re)?\s*unable\s+to|(?:am|are|'m|'re)?\s*not\s+in\s+a\s+position\s+to)
        (?:\s+\w+){{0,2}}?\s+{_HELP_VERB}\w*\b
      | \b(?:it|this|that)(?:'s|\s+is|\s+was)\s+(?:not\s+possible|impossible)\s+(?:for\s+(?:me|us)\s+)?to\s+
        (?:\w+\s+){{0,2}}?{_HELP_VERB}\w*\b
      | \b(?:outside|beyond)\s+(?:of\s+)?(?:what\s+(?:i|we)\s+(?:can|am\s+able\s+to|are\s+able\s+to)\b
           |(?:the\s+)?scope\b|my\s+(?:knowledge|abilities|capabilities|scope)\b)
      | \bnot\s+something\s+(?:i|we)\s+can\s+{_HELP_VERB}
      | \bnon\s+(?:posso|possiamo|riesco\s+a|sono\s+in\s+grado\s+di|siamo\s+in\s+grado\s+di)\s+(?:\w+\s+){{0,2}}?
        (?:aiutar|assister|risponder|fornir|dar)\w*""",
    re.VERBOSE,
)
"""The inability rule: first-person inability with a verb of helping or answering ("I'm afraid I can't help",
"I am unable to assist", "we are not able to answer"), the impersonal form ("it is not possible to answer"), or
"outside what I can answer" / "beyond my knowledge" / "not something I can help with" (and the Italian "non posso
aiutarti", "non sono in grado di rispondere"). Matched on the folded, lower-cased sentence."""

_SOURCE = (
    r"(?:(?:the|these|this|those|your|my|any\s+of\s+the)\s+)(?:(?:provided|given|retrieved|available|supplied|above|"
    r"following|attached|relevant)\s+)?(?:context|passages?|documents?|sources?|texts?|excerpts?|snippets?|"
    r"materials?|information\s+(?:provided|given|available)|knowledge(?:\s+base)?)"
)
"""What an answer is drawn from, as a refusal names it: "the provided context", "these passages", "my knowledge"."""
_NOT = r"(?:n't|\s+not)"
_ABSENCE = re.compile(
    rf"""{_SOURCE}\s+(?:does|do|did){_NOT}\s+(?:\w+\s+)?
        (?:contain|include|mention|provide|specify|say|state|cover|address|discuss|answer|extend|give|offer|have|hold)\b
      | \b(?:the\s+)?(?:answer|information|answer\s+to\s+(?:this|that|the|your)\s+question)\s+(?:is|was){_NOT}\s+
        (?:\w+\s+)?(?:in|found\s+in|included\s+in|mentioned\s+in|given\s+in|provided\s+in|available\s+in)\s+
        {_SOURCE}
      | \b(?:(?:this|that|the|your)\s+question|it|this|that)\s+(?:cannot|can\s+not|can't|could\s+not|couldn't)\s+
        be\s+answered\b
      | \b(?:cannot|can\s+not|can't|could\s+not|couldn't)\s+be\s+(?:determined|found|answered|inferred|confirmed)\s+
        (?:from|with|based\s+on|using|given|in)\s+{_SOURCE}
      | \b(?:this|that|the|your)\s+question\s+(?:is|was)\s+(?:not\s+answerable|unanswerable)\b
      | \b(?:i|we)(?:\s+have|\s+had|'ve)(?:\s+got)?\s+no\s+(?:idea|clue)\b
      | \bmy\s+knowledge\s+(?:does|did){_NOT}\s+(?:cover|include|extend|reach)\b""",
    re.VERBOSE,
)
"""The absence rule: the sources (or the model's own knowledge) say they lack the answer ("the provided context does
not contain information about this", "the answer is not in the documents", "my knowledge doesn't cover that topic"),
the question is said to be unanswerable ("this question cannot be answered from the context", "... cannot be
determined from the passages"), or "I have no idea". Matched on the folded, lower-cased sentence, like
:data:`_INABILITY`; a part after "but" that says something still makes the sentence an answer."""

_CONTRAST = re.compile(r"\s*;\s*|,?\s+\b(?:but|however|although|though|whereas|ma|però|tuttavia)\b,?\s*")
"""Where a sentence turns to something else ("..., but the treaty was signed in Paris")."""
_COURTESY_WORDS = frozenset(
    """sorry unfortunately please thanks thank you apologies apologize apologise afraid i i'm am we we're are
    regret but however so well ok okay oh hello hi dear""".split()
)
_COURTESY = re.compile(
    r"^(?:thanks?\b|thank\s+you|hello|hi\b|hey\b|dear\b|greetings|sorry|apologies|(?:i|we)\s+apologi[sz]e|"
    r"(?:i'm|i\s+am|we're|we\s+are)\s+sorry|unfortunately|good\s+(?:morning|afternoon|evening)|"
    r"(?:please\s+)?(?:let\s+me\s+know|feel\s+free)|is\s+there\s+anything\s+else)"
)
"""A sentence of courtesy (greeting, thanks, apology, offer of more help): neither an answer nor a refusal."""


def _fold(text: str) -> str:
    """NFKC, curly quotes folded to straight ones, case-folded, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return " ".join(text.split())


@functools.lru_cache(maxsize=64)
def _pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any phrase as whole words (``non so`` does not match inside ``non sono``)."""
    alternatives = sorted({_fold(p) for p in phrases if _fold(p)}, key=len, reverse=True)
    if not alternatives:
        return re.compile(r"(?!x)x")  # matches nothing
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in alternatives) + r")(?!\w)")


def _sentences(answer: str) -> list[str]:
    """The folded sentences (or lines) of ``answer``, lead-ins ending with ``:`` left out."""
    pieces = (_fold(piece) for piece in _SENTENCE_END.split(answer.strip()))
    return [p for p in pieces if p and not p.endswith(":")]


def _says_something(part: str) -> bool:
    """Whether a piece of a sentence has two words or more other than courtesy words ("Sorry" has none)."""
    words = re.findall(r"[^\W_]+(?:'[^\W_]+)?", part)
    return sum(w not in _COURTESY_WORDS for w in words) >= 2


def _declines(sentence: str, pattern: re.Pattern[str]) -> bool:
    """Whether a folded sentence declines to answer.

    It does when a part of it (split at "but", "however", ";") holds a refusal phrase or meets the inability or the
    absence rule, and no other part says something without one.
    """
    parts = _CONTRAST.split(sentence)
    declining = [bool(pattern.search(p) or _INABILITY.search(p) or _ABSENCE.search(p)) for p in parts]
    return any(declining) and not any(
        _says_something(p) for p, declines in zip(parts, declining, strict=True) if not declines
    )


def is_refusal(answer: str, refused_flag: bool | None = None, phrases: Iterable[str] = DEFAULT_REFUSAL_PHRASES) -> bool:
    """Whether an answer is a refusal or a non-answer ("I don't have that information", "I can't help with that").

    Rule: an explicit flag from the pipeline wins when it is not None. Otherwise the answer is a refusal when it
    is empty (or whitespace only), when its opening sentence declines, or when every sentence declines or is a
    courtesy (a greeting, thanks, an apology, an offer of more help, a question) and one declines. A sentence
    declines when one of ``phrases`` occurs in it as whole words, or when it states an inability to help or answer
    (:data:`_INABILITY`: "I'm afraid I can't help with this request", "I am unable to assist with that", "that is
    outside what I can answer"; first person or impersonal, with a verb of helping, answering or providing), or
    says the sources lack the answer (:data:`_ABSENCE`: "the provided context does not contain information about
    this", "the answer is not in the documents", "this question cannot be answered from the context", "my
    knowledge doesn't cover that topic", "I have no idea") — and
    no other part of it, after "but", "however" or ";", says something ("The documents do not specify the year,
    but the treaty was signed in Paris." answers; so does a next sentence that opens with "However," and says
    something). Sentences end at ``. ! ?`` before a space and at line breaks; a
    lead-in line ending with ``:`` is skipped. Comparison is case-insensitive after NFKC normalisation, with curly
    quotes folded to straight ones and whitespace collapsed. ``phrases`` replace the built-in phrases; the
    inability and absence rules always apply.

    Args:
        answer: The generated answer.
        refused_flag: The pipeline's refusal flag (``Prediction.refused``), or None to detect from the text.
        phrases: Refusal phrases (any case), matched as whole words.

    Returns:
        True for a refusal.

    Source: negative rejection in RGB, Chen, Lin, Han & Sun, "Benchmarking Large Language Models in
        Retrieval-Augmented Generation", AAAI 2024, doi:10.1609/aaai.v38i16.29728 (rejection detected by
        matching "insufficient information"); abstention on SQuAD 2.0 (Rajpurkar, Jia & Liang, ACL 2018,
        doi:10.18653/v1/P18-2124); refusal wordings ("I'm sorry, but I cannot assist") after XSTest's
        full-refusal class (Röttger et al., NAACL 2024, doi:10.18653/v1/2024.naacl-long.301).

    """
    if refused_flag is not None:
        return bool(refused_flag)
    if not answer.strip():
        return True
    sentences = _sentences(answer)
    if not sentences:
        return False
    pattern = _pattern(tuple(phrases))
    declined = [_declines(s, pattern) for s in sentences]
    for k in range(len(sentences) - 1):  # "The passage does not say. However, it mentions that ..." answers
        turn = _CONTRAST.match(" " + sentences[k + 1])
        if declined[k] and turn and not declined[k + 1] and _says_something(sentences[k + 1][turn.end() - 1 :]):
            declined[k] = False
    if declined[0]:
        return True
    return any(declined) and all(
        d or s.endswith("?") or _COURTESY.match(s) for s, d in zip(sentences, declined, strict=True)
    )


def refusal(ctx: ScoreContext) -> float:
    """Score refusal on an out-of-domain case: 1 when the system refused (the correct behaviour), else 0.

    Returns:
        0.0 or 1.0; NaN on in-domain cases.

    Source: negative rejection rate in RGB (Chen et al., AAAI 2024, doi:10.1609/aaai.v38i16.29728); SQuAD 2.0
        abstention on unanswerable questions (Rajpurkar, Jia & Liang, ACL 2018, doi:10.18653/v1/P18-2124).

    """
    return float(ctx.refused) if ctx.case.out_of_domain else math.nan


def false_refusal(ctx: ScoreContext) -> float:
    """Score a false refusal on an in-domain case: 1 when the system refused an answerable question (bad).

    Returns:
        0.0 or 1.0; NaN on out-of-domain cases.

    Source: over-refusal / false refusal rate (Röttger et al., "XSTest", NAACL 2024,
        doi:10.18653/v1/2024.naacl-long.301); SQuAD 2.0 answerable questions (Rajpurkar, Jia & Liang,
        ACL 2018).

    """
    return math.nan if ctx.case.out_of_domain else float(ctx.refused)
