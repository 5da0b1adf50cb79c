"""Per-case answer metrics: SQuAD token F1 and exact match, and the generation dimensions' model-free parts.

The model-free parts: correctness (reference token recall), completeness (required points made) and form (the
deterministic form rules).
"""

from __future__ import annotations

import functools
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from gate.language import f1_unreadable
from gate.metrics.context import ScoreContext

_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)  # the same deletion, in C: linear at any length
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
    text = text.lower().translate(_DROP_PUNCTUATION)  # ASCII punctuation deleted, as the script does
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


def _recall(reference: str, answer: str) -> float:
    """Share of the reference's normalised tokens found in the answer (multiset), NaN for an empty reference."""
    gold = normalize_answer(reference).split()
    if not gold:
        return math.nan
    same = sum((Counter(gold) & Counter(normalize_answer(answer).split())).values())
    return same / len(gold)


def token_recall(answer: str, references: Sequence[str]) -> float:
    """Reference-answer token recall: the share of a reference's tokens that the answer contains, best reference.

    Formula: over SQuAD-normalised whitespace tokens (:func:`normalize_answer`), with ``c`` the multiset
    intersection of answer and reference tokens, ``recall = c / |tokens(reference)|``; the case score is the max
    over references. Unlike F1 it does not penalise a long answer that also explains, which is why it tracks human
    correctness judgments of verbose, instruction-following answers better than F1 or exact match.

    Args:
        answer: The generated answer.
        references: Acceptable reference answers; ones that normalise to "" are ignored.

    Returns:
        A value in [0, 1]; NaN when no usable reference answer is given.

    Source: Adlakha et al., "Evaluating Correctness and Faithfulness of Instruction-Following Models for Question
        Answering", TACL 12 (2024), doi:10.1162/tacl_a_00667, §4 (token-level recall).

    """
    usable = _usable_references(references)
    if not usable:
        return math.nan
    return max(_recall(ref, answer) for ref in usable)


def points_covered(answer: str, points: Sequence[str]) -> float:
    """Share of the required points an answer makes: the mean over points of each point's token recall.

    Formula: ``(1 / P) Σ_p c_p / |tokens(p)|`` over the P points that normalise to a non-empty string, where
    ``c_p`` is the multiset intersection of the point's and the answer's SQuAD-normalised tokens: a soft match
    of each point (nugget) by term overlap.

    Args:
        answer: The generated answer.
        points: The points a complete answer makes, one short statement each, any order.

    Returns:
        A value in [0, 1]; NaN when no usable point is given.

    Source: nugget recall with automatic term-overlap matching, POURPRE (Lin & Demner-Fushman, "Methods for
        automatically evaluating answers to complex questions", Information Retrieval 9 (2006),
        doi:10.1007/s10791-006-9003-7).

    """
    recalls = [r for r in (_recall(point, answer) for point in points) if not math.isnan(r)]
    return sum(recalls) / len(recalls) if recalls else math.nan


def word_count(answer: str) -> int:
    """Words of an answer: whitespace-separated tokens (a CJK sentence without spaces counts as one word)."""
    return len(answer.split())


def cites_retrieved(answer: str, retrieved_ids: Iterable[str]) -> bool:
    """Whether the answer names one of its retrieved chunk ids as a whole token, e.g. ``[doc-7]`` or ``(doc-7)``.

    An id matches only where it is not part of a longer word or id (``doc-7`` is not cited by ``doc-70``), case
    as written; an id that was not retrieved does not count (a fabricated citation).
    """
    for doc_id in retrieved_ids:
        # the substring test first: a pattern compiled per id (most ids never cited) would thrash re's cache
        if doc_id and doc_id in answer and re.search(rf"(?<![\w-]){re.escape(doc_id)}(?![\w-])", answer):
            return True
    return False


def form_rules_met(answer: str, retrieved_ids: Sequence[str], max_words: int | None, cite: bool) -> float:
    """Share of the deterministic form rules an answer meets: the length limit and the citation requirement.

    Formula: ``(1/K) Σ_k 1[rule k holds]`` over the K rules that are set: ``max_words`` (``word_count(answer) ≤
    max_words``) and ``cite`` (:func:`cites_retrieved`).

    Args:
        answer: The generated answer.
        retrieved_ids: Ids of the chunks retrieved for it, rank order.
        max_words: Word limit ≥ 1, or None (no limit).
        cite: Whether the answer must cite a retrieved chunk id.

    Returns:
        0, 0.5 or 1 (two rules), 0 or 1 (one rule); NaN when no rule is set.

    Source: rule-based format checks as verifiable instructions (Zhou et al., "Instruction-Following Evaluation
        for Large Language Models", arXiv:2311.07911, 2023: length constraints); citation presence as in ALCE
        (Gao et al., "Enabling Large Language Models to Generate Text with Citations", EMNLP 2023,
        doi:10.18653/v1/2023.emnlp-main.398).

    """
    checks = []
    if max_words is not None:
        checks.append(word_count(answer) <= max_words)
    if cite:
        checks.append(cites_retrieved(answer, retrieved_ids))
    return sum(checks) / len(checks) if checks else math.nan


_MARKER = re.compile(r"[ \t]*(?:\[([^\[\]\n]{1,200})\]|\(([^()\n]{1,200})\)|【[^【】\n]{0,200}】)")
_SOURCE_WORD = re.compile(
    r"(?:sources?|src|refs?|references?|citations?|cited|see|cf|docs?|documents?|chunks?|passages?)\b\.?\s*(:)?\s*",
    re.IGNORECASE,
)
_REFERENCE = re.compile(r"\^?[\w./:#–-]*\d[\w./:#–-]*")
"""A reference token: it holds a digit ("1", "^1", "d1", "doc-7", "4:0", "1–3")."""
_LIST_SEPARATOR = re.compile(r"\s*(?:[,;&]|\band\b)\s*", re.IGNORECASE)


def _references(text: str, ids: frozenset[str], bare: bool) -> bool:
    """Whether ``text`` is a non-empty list of references: retrieved ids, or (``bare``) reference tokens."""
    pieces = [p for p in _LIST_SEPARATOR.split(text.strip()) if p]
    return bool(pieces) and all(p in ids or (bare and all(_REFERENCE.fullmatch(t) for t in p.split())) for p in pieces)


def citation_markers(answer: str, retrieved_ids: Iterable[str]) -> list[tuple[int, int]]:
    """Where the citation markers of an answer are: ``[d1]``, ``[1]``, ``[1, 2]``, ``[^1]``, ``(source: …)``, ``【…】``.

    A marker is one of:

    - square brackets holding a list (``,``, ``;``, ``&``, "and") of retrieved ids or of reference tokens (a token
      with a digit: ``[1]``, ``[1-3]``, ``[^2]``, ``[d1, d2]``, ``[doc-7]``, also an id that was not retrieved),
      optionally after a source word (``[source 2]``, ``[see d1]``); or anything after a source word and a colon
      (``[source: annual report]``);
    - parentheses holding a source word and a colon, then anything (``(source: d1)``, ``(sources: d1, d2)``,
      ``(see: the manual)``); a source word and references (``(see d1)``, ``(doc 7)``); or only retrieved ids that
      contain a digit (``(doc-7)``). A parenthesis without them is prose: ``(1889)``, ``(COVID-19)``, ``(Paris)``;
    - lenticular brackets, whatever they hold (``【4:0†source】``, the OpenAI file-search form).

    Source words: source(s), src, ref(s), reference(s), citation(s), cited, see, cf, doc(s), document(s),
    chunk(s), passage(s), any case. A bare id in running text is a word of the sentence, never a marker.

    Args:
        answer: The generated answer.
        retrieved_ids: Ids of the chunks retrieved for it (any order).

    Returns:
        ``(start, end)`` character offsets of each marker in ``answer``, in order, not overlapping; a marker's span
        includes the spaces or tabs before it.

    """
    ids = frozenset(i.strip() for i in retrieved_ids if i and i.strip())
    found = []
    for match in _MARKER.finditer(answer):
        square, round_ = match.group(1), match.group(2)
        inside = square if square is not None else round_
        if inside is None:  # 【…】
            found.append(match.span())
            continue
        inside = inside.strip()
        word = _SOURCE_WORD.match(inside)
        rest = inside[word.end() :] if word else inside
        if word and word.group(1) and (rest or square is not None):
            found.append(match.span())
        elif square is not None and _references(rest, ids, bare=True):
            found.append(match.span())
        elif round_ is not None and word and _references(rest, ids, bare=True):
            found.append(match.span())
        elif round_ is not None and _references(
            inside, frozenset(i for i in ids if any(c.isdigit() for c in i)), False
        ):
            found.append(match.span())
    return found


def strip_citations(answer: str, retrieved_ids: Iterable[str]) -> str:
    """The answer without its citation markers (:func:`citation_markers`), words of the sentence untouched.

    A claim-level judge reads the remaining text: a citation is not a claim, and an id such as ``d1`` would read
    as the number 1. A marker goes with the spaces before it ("tall [d1]." → "tall."); one between two letters or
    digits leaves a space ("Paris[1]is" → "Paris is"). A bare id in running text stays ("Paris is the capital"
    with a chunk id "Paris").

    Args:
        answer: The generated answer.
        retrieved_ids: Ids of the chunks retrieved for it.

    Returns:
        The answer without those markers (unchanged when it has none).

    """
    spans = citation_markers(answer, retrieved_ids)
    if not spans:
        return answer
    out, last = [], 0
    for start, end in spans:
        out.append(answer[last:start])
        if start and end < len(answer) and answer[start - 1].isalnum() and answer[end].isalnum():
            out.append(" ")
        last = end
    out.append(answer[last:])
    return "".join(out)


# ------------------------------------------------------------------------------------- per case (the registry's fn)


def answer_per_case(fn: Callable[[str, tuple[str, ...]], float]) -> Callable[[ScoreContext], float]:
    """Adapt a pure answer metric to a :class:`ScoreContext`: NaN on out-of-domain cases, 0 for an in-domain refusal.

    The answer is read without its citation markers (:func:`strip_citations`): "[d1]" is no word of the answer.
    """

    @functools.wraps(fn)
    def per_case(ctx: ScoreContext) -> float:
        if ctx.case.out_of_domain:
            return math.nan
        answer = strip_citations(ctx.prediction.answer, ctx.prediction.retrieved_ids)
        value = fn(answer, ctx.case.reference_answers)
        return 0.0 if ctx.refused and not math.isnan(value) else value

    return per_case


def correctness(ctx: ScoreContext) -> float:
    """Score correctness without a model: reference-answer token recall (:func:`token_recall`).

    The case score is the best reference's recall. An LLM judge that grades correctness replaces it with its
    1–3 grade against the references or the case's ``criteria`` (mapped to 0, 0.5, 1).

    Returns:
        A value in [0, 1]; 0 for a refusal of an answerable case that has reference answers or criteria; NaN
        on out-of-domain cases and when the case has no reference answer (with ``criteria`` only, a judge is
        needed).

    Source: Adlakha et al., TACL 12 (2024), doi:10.1162/tacl_a_00667, §4 (token-level recall of the reference
        answer tracks human correctness judgments of verbose answers better than F1 or exact match).

    """
    case = ctx.case
    if case.out_of_domain or not (case.reference_answers or case.criteria):
        return math.nan
    if ctx.refused:
        return 0.0
    return token_recall(ctx.prediction.answer, case.reference_answers)


def grounded_answer(ctx: ScoreContext) -> float:
    """The part of ``grounded_answer_rate`` known without a judge: 0 for a refused answerable case, else NaN.

    The judge decides the rest (:attr:`gate.judges.base.Judgment.grounded_answer_rate`): whether the answer makes a
    checkable claim and none is hallucinated. A refusal of an answerable case grounds nothing.

    Returns:
        0.0 for a refusal of an in-domain case; NaN otherwise (out-of-domain cases, and answers the judge grades).

    Source: attribution to identified sources, AIS (Rashkin et al. 2023, Computational Linguistics 49(4),
        doi:10.1162/coli_a_00486).

    """
    return 0.0 if ctx.refused and not ctx.case.out_of_domain else math.nan


def completeness(ctx: ScoreContext) -> float:
    """Score completeness without a model: the share of the case's ``required_points`` made (:func:`points_covered`).

    An LLM judge that grades completeness replaces it with its 1–3 grade against the required points, else the
    reference answers or the ``criteria``.

    Returns:
        A value in [0, 1]; 0 for a refusal of an answerable case that has required points, reference answers or
        criteria; NaN on out-of-domain cases and without required points (a judge can still grade against the
        references or criteria).

    Source: nugget recall with term-overlap matching, POURPRE (Lin & Demner-Fushman, Information Retrieval 9
        (2006), doi:10.1007/s10791-006-9003-7).

    """
    case = ctx.case
    if case.out_of_domain or not (case.required_points or case.reference_answers or case.criteria):
        return math.nan
    if ctx.refused:
        return 0.0
    return points_covered(ctx.prediction.answer, case.required_points)


def form_score(ctx: ScoreContext) -> float:
    """Score the deterministic form rules: the share met of the word limit and the citation requirement.

    See :func:`form_rules_met`; the rules are the config's ``form:`` overridden by the case's ``form``. An LLM
    judge that grades form also reads the free-text ``rules`` (language, tone); the metric is then the lower of its
    grade and this share.

    Returns:
        0, 0.5 or 1; NaN on out-of-domain cases, for refusals, and when no deterministic rule is set.

    Source: verifiable format instructions (Zhou et al. 2023, arXiv:2311.07911); citation presence as in ALCE
        (Gao et al., EMNLP 2023, doi:10.18653/v1/2023.emnlp-main.398).

    """
    if ctx.case.out_of_domain or ctx.refused:
        return math.nan
    rules = ctx.form
    return form_rules_met(ctx.prediction.answer, ctx.prediction.retrieved_ids, rules.max_words, bool(rules.cite))
