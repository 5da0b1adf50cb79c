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

MAX_REFUSAL_WORDS = 40
"""An answer longer than this is a refusal only when its opening sentence is one: longer answers carry claims
even when they mention, further on, that something is "not provided in the passages"."""

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "\u201c": '"', "\u201d": '"'})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


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


def _opening(answer: str) -> str:
    """The first sentence (or line) of ``answer`` that is not a lead-in ending with ``:``."""
    for piece in _SENTENCE_END.split(answer.strip()):
        if piece.strip() and not piece.rstrip().endswith(":"):
            return piece
    return ""


def is_refusal(answer: str, refused_flag: bool | None = None, phrases: Iterable[str] = DEFAULT_REFUSAL_PHRASES) -> bool:
    """Whether an answer is a refusal ("I don't have that information").

    Rule: an explicit flag from the pipeline wins when it is not None. Otherwise the answer is a refusal when it
    is empty (or whitespace only), or when one of ``phrases`` occurs as whole words in the answer (answers of
    at most :data:`MAX_REFUSAL_WORDS` words) or in its opening sentence (longer answers; a lead-in line ending
    with ``:`` is skipped). Comparison is case-insensitive after NFKC normalisation, with curly quotes folded to
    straight ones and whitespace collapsed.

    Args:
        answer: The generated answer.
        refused_flag: The pipeline's refusal flag (``Prediction.refused``), or None to detect from the text.
        phrases: Refusal phrases (any case), matched as whole words.

    Returns:
        True for a refusal.

    Source: negative rejection in RGB, Chen, Lin, Han & Sun, "Benchmarking Large Language Models in
        Retrieval-Augmented Generation", AAAI 2024, doi:10.1609/aaai.v38i16.29728 (rejection detected by
        matching "insufficient information"); abstention on SQuAD 2.0 (Rajpurkar, Jia & Liang, ACL 2018,
        doi:10.18653/v1/P18-2124).

    """
    if refused_flag is not None:
        return bool(refused_flag)
    text = _fold(answer)
    if not text:
        return True
    pattern = _pattern(tuple(phrases))
    if len(text.split()) <= MAX_REFUSAL_WORDS:
        return bool(pattern.search(text))
    return bool(pattern.search(_fold(_opening(answer))))


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
