"""Per-case answer metrics: SQuAD answer normalisation, token F1 and exact match."""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from gate.language import f1_unreadable

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Normalise an answer as SQuAD does: lowercase, drop ASCII punctuation and articles, squash whitespace.

    The steps run in the official script's order: lower → remove punctuation → remove articles → whitespace.

    Args:
        text: Any answer or reference string.

    Returns:
        The normalised string (possibly empty).

    Source: official SQuAD v2.0 evaluation script ``evaluate-v2.0.py``, ``normalize_answer`` (Rajpurkar, Jia &
        Liang, ACL 2018, doi:10.18653/v1/P18-2124).

    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _token_f1(reference: str, answer: str) -> float:
    gold = normalize_answer(reference).split()
    pred = normalize_answer(answer).split()
    if not gold or not pred:
        return float(gold == pred)
    same = sum((Counter(gold) & Counter(pred)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _usable_references(references: Iterable[str]) -> list[str]:
    """Keep the references whose normalised form is non-empty (the official script drops the others)."""
    return [r for r in references if normalize_answer(r)]


def answer_f1(answer: str, references: Sequence[str]) -> float:
    """SQuAD token F1 of an answer, the maximum over the reference answers.

    Formula: over normalised whitespace tokens, with ``c = |tokens(answer) ∩ tokens(reference)|`` as a
    multiset, ``P = c / |tokens(answer)|``, ``R = c / |tokens(reference)|``, ``F1 = 2PR / (P + R)`` (0 when
    ``c = 0``; an empty answer scores 0 against a non-empty reference); the case score is the max over
    references.

    Args:
        answer: The generated answer.
        references: Acceptable reference answers, any order; ones that normalise to "" are ignored.

    Returns:
        A value in [0, 1]; NaN when no usable reference answer is given, or when the answer or a reference is
        written in a script without spaces between words (Chinese, Japanese, Thai, ...: whitespace tokens are not
        words there, see :func:`gate.language.f1_unreadable`): the metric does not apply.

    Source: official SQuAD v2.0 evaluation script ``evaluate-v2.0.py``, ``compute_f1`` and ``get_raw_scores``
        (Rajpurkar, Jia & Liang, ACL 2018, doi:10.18653/v1/P18-2124).

    """
    usable = _usable_references(references)
    if not usable or f1_unreadable(answer, usable) is not None:
        return math.nan
    return max(_token_f1(ref, answer) for ref in usable)


def exact_match(answer: str, references: Sequence[str]) -> float:
    """SQuAD exact match: 1 when the normalised answer equals a normalised reference, else 0.

    Args:
        answer: The generated answer.
        references: Acceptable reference answers; ones that normalise to "" are ignored.

    Returns:
        0.0 or 1.0; NaN when no usable reference answer is given.

    Source: official SQuAD v2.0 evaluation script ``evaluate-v2.0.py``, ``compute_exact`` (Rajpurkar, Jia &
        Liang, ACL 2018, doi:10.18653/v1/P18-2124).

    """
    usable = _usable_references(references)
    if not usable:
        return math.nan
    normalized = normalize_answer(answer)
    return float(any(normalize_answer(ref) == normalized for ref in usable))
