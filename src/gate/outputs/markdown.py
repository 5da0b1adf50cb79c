"""Markdown renderers (Jinja2): the PR comment and the job summary, safely and within GitHub's size limits.

Every value a template prints is escaped by default (Jinja ``finalize``): markdown and HTML metacharacters,
table pipes, backticks and ``@mentions`` in questions, answers and chunks cannot break the layout or ping anyone.
Trusted markup built here is wrapped in :class:`markupsafe.Markup` and printed as is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from gate.comparison import Comparison
from gate.outputs import cells
from gate.outputs.charts import mermaid_metrics
from gate.outputs.escape import code_block, escape_markdown
from gate.outputs.trend import trend_markdown
from gate.sanitize import strip_controls
from gate.stats import numbers

CONFIG_LINE = "<!-- rag-gate config:"
"""How the second line of a config's sticky marker starts (see :func:`sticky_marker`)."""
MARKER = "<!-- rag-gate -->"
"""Hidden marker that identifies the sticky comment (of a run without a named config; see :func:`sticky_marker`)."""
GITHUB_COMMENT_LIMIT = 65_536
"""GitHub's maximum comment body length, in characters."""
SUMMARY_LIMIT = 1_000_000
"""The job summary of one step is limited to 1 MiB; stay a little below it (characters)."""
DEFAULT_MAX_CHARS = 60_000
"""Default cap: below GitHub's limit, with room for the marker and a footer."""
CASE_LISTS = (
    "must_pass_failures",
    "regressed_cases",
    "suspected_cases",
    "ood_failures",
    "improved_cases",
    "flaky_cases",
    "errors",
)
"""The per-case lists of a :class:`~gate.comparison.Comparison` that are shortened when a comment is too long."""
MAX_FILES = 30
"""Changed files listed in the comment (the rest are counted)."""
_VERDICT_ICON = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "error": "🛑"}
_URL = re.compile(r"https?://[^\s<>\"'`()\[\]\\]+")
"""A link the comment prints as is (the workflow run's URL): http(s), nothing that could end the markdown link."""


LINE_LIMIT = 1000
"""Characters of a whole-line value (the judge-labels line) before it is cut: a table cell's limit is too short."""


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return escape_markdown(value)


def fmt(value: Any, digits: int = numbers.DIGITS, signed: bool = False) -> Markup:
    """A number in the one format of :mod:`gate.stats.numbers` (``–`` for None/NaN)."""
    return Markup(numbers.number(value, signed=signed, digits=digits))


def fmt_p(value: Any) -> Markup:
    """A p-value: three decimals, ``<0.001`` below (:func:`gate.stats.numbers.p_value`)."""
    return Markup(numbers.p_value(value))


def cause_counts(cases: Any) -> str:
    """``"15 retrieval, 4 generation"``: regressed cases counted by cause, most frequent first."""
    counts = Counter(case.cause or "unknown" for case in cases)
    return ", ".join(f"{n} {cause}" for cause, n in counts.most_common())


POLICY_ITEM_LIMIT = 1_000
"""Characters kept of one policy change (``key old → new``) in the comment: a gate list or margins map in full."""
POLICY_INLINE = 300
"""Up to this many characters (and 3 changes), the policy changes are one line; longer, a list."""
MAX_POLICY_ITEMS = 40
"""Policy changes listed in the comment (the rest are counted; all are in ``report.json``)."""


def policy_change_lines(comparison: Comparison) -> list[Markup]:
    """Each policy change as escaped markdown, ``key old → new`` in full (up to :data:`POLICY_ITEM_LIMIT`)."""
    items = [f"{c.key} {c.base} → {c.head}" for c in comparison.policy_changes]
    shown = [Markup(escape_markdown(item, limit=POLICY_ITEM_LIMIT)) for item in items[:MAX_POLICY_ITEMS]]
    if len(items) > MAX_POLICY_ITEMS:
        shown.append(Markup(f"… and {len(items) - MAX_POLICY_ITEMS} more (all in `report.json`)"))
    return shown


def _environment(template_dir: Path | None) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = [jinja2.PackageLoader("gate.outputs", "templates")]
    if template_dir is not None:
        loaders.insert(0, jinja2.FileSystemLoader(str(template_dir)))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=False,
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=fmt, p=fmt_p, level=numbers.level, raw=Markup, long=lambda value: Markup(escape_markdown(value, LINE_LIMIT))
    )
    env.globals.update(causes=cause_counts, trend_section=trend_markdown)
    env.globals.update(
        cells=cells.metric_cells,
        case_change=cells.case_change,
        table_notes=cells.table_notes,
        collapsed_repeats=cells.collapsed_repeats,
        ood_counts=cells.ood_counts,
        warmup=cells.warmup_text,
        usage=cells.usage_text,
        pairwise_line=cells.pairwise_text,
        margin=cells.margin_cell,
        policy_changes=policy_change_lines,
        mde=cells.mde_cell,
        method=cells.method_name,
        no_mde=cells.no_mde_text,
        method_legend=cells.method_legend,
        files_total=cells.files_total,
        file_change=cells.file_change,
        code_block=code_block,
        metrics_chart=mermaid_metrics,
        max_files=MAX_FILES,
        policy_inline=POLICY_INLINE,
    )
    env.tests["finite"] = lambda x: isinstance(x, int | float) and math.isfinite(x)
    env.globals.update(verdict_icon=_VERDICT_ICON, status_icon=cells.GATE_STATUS)
    return env


def sticky_marker(config: str | None) -> str:
    """The hidden marker of the sticky comment of one config: each config keeps its own comment on a PR.

    Args:
        config: the config's path as the workflow names it (e.g. ``rag-gate.yml``); None: :data:`MARKER` alone.

    Returns:
        :data:`MARKER`, a newline and ``<!-- rag-gate config: rag-gate.yml -->``: every rag-gate comment starts with
        the same first line, and the second tells the configs apart. Characters other than letters, digits and
        ``._/-`` become ``_`` (nothing can close the HTML comment early).
    """
    if not config:
        return MARKER
    return f"{MARKER}\n{CONFIG_LINE} {re.sub(r'[^A-Za-z0-9._/-]|-(?=-)', '_', config)} -->"


def render_error_comment(exit_code: int, kind: str, message: str, *, marker: str, config: str | None) -> str:
    """The sticky comment of a run that reached no verdict (exit 2 or 3): it replaces a previous verdict.

    Args:
        exit_code: 2 (bad input or usage) or 3 (the evaluation could not run).
        kind: what the exit code means, e.g. "bad input or usage".
        message: the error (untrusted: escaped).
        marker: the config's sticky marker.
        config: the config's path, named in the heading.
    """
    named = f" · config {escape_markdown(config)}" if config else ""
    return (
        f"{marker}\n## {_VERDICT_ICON['error']} rag-gate: **error** (exit {exit_code}: {kind}){named}\n\n"
        f"No verdict was reached for this push: {escape_markdown(message, limit=2000)}\n\n"
        "Exit code 1 is reserved for a regression; fix the cause above and push again. The previous verdict on "
        "this pull request no longer applies.\n"
    )


_MIN_ITEM_CHARS = 100
"""A lower bound on the characters a listed case takes (id, status and a metric line: the shortest of a
5,000-case comparison of tests/perfdata.py took 130). Lists are cut to at most max_chars / this many items
before the first render; a list of shorter items would still end with its "more not shown" line."""


def render_comment(
    comparison: Comparison,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    template_dir: Path | None = None,
    details_url: str | None = None,
    marker: str = MARKER,
    config: str | None = None,
    max_items: int | None = None,
) -> str:
    """Render the markdown comment of a comparison, at most ``max_chars`` characters.

    When the full comment is too long, the per-case lists are cut (fewer and fewer items, in proportion to the
    excess, down to none) and each cut list ends with a line saying how many cases were left out and where the
    full list is.

    Args:
        comparison: what to render.
        max_chars: hard cap on the result (GitHub allows 65,536 in a comment, 1 MiB in a job summary).
        template_dir: a directory with a ``comment.md.j2`` overriding the shipped template.
        details_url: the workflow run whose artifacts hold ``report.html`` (linked under the verdict and in
            truncation notes); anything but a plain http(s) URL is left out.
        marker: the hidden marker the comment starts with (:func:`sticky_marker`).
        config: the config's path, named in the heading (several configs can gate one PR).
        max_items: list at most this many cases per list (None: as many as fit ``max_chars``).

    Raises:
        ValueError: when even the comment without case lists exceeds ``max_chars``.

    """
    details_url = details_url if details_url and _URL.fullmatch(details_url) else None  # printed as a raw link
    template = _environment(template_dir).get_template("comment.md.j2")
    labels = {m.name: m.label for m in comparison.metrics}
    # A listed case takes well over 100 characters: more than max_chars / 100 per list never fits, and rendering
    # thousands of cases only to cut them is most of the work on a large golden set.
    limit = min(max_items if max_items is not None else max_chars, max_chars // _MIN_ITEM_CHARS)
    while True:
        text = template.render(
            report=comparison, limit=limit, details_url=details_url, marker=Markup(marker), config=config, labels=labels
        )
        text = strip_controls(text)  # behind escape_markdown: a custom template's raw value holds no control either
        if len(text) <= max_chars:
            return text
        if limit == 0:
            raise ValueError(f"the comment is {len(text)} characters even without case lists (cap {max_chars})")
        longest = max(len(getattr(comparison, key)) for key in CASE_LISTS)
        limit = min(longest, limit)
        # scale the lists to the room left (5 % slack), and shrink by a tenth at least
        limit = max(0, min(limit - max(1, limit // 10), int(limit * 0.95 * max_chars / len(text))))


def cap_text(text: str, limit: int, where: str) -> str:
    """Cut ``text`` to at most ``limit`` characters at a line boundary, saying what was left out.

    A guard behind the renderers' own truncation of per-case lists: it only fires when a template grew
    past the limit.

    Args:
        text: markdown.
        limit: maximum length in characters (> 200).
        where: where the full text is, e.g. "report.json and the job summary".

    Returns:
        ``text`` itself when it fits, else a prefix ending with a note; ``len(result) <= limit``.
    """
    if len(text) <= limit:
        return text

    def note(left: int) -> str:
        return f"\n\n_… {left:,} more characters were left out; the full report is in {where}._\n"

    keep = limit - len(note(len(text)))
    cut = text.rfind("\n", 0, keep)
    cut = cut if cut > 0 else keep
    return text[:cut] + note(len(text) - cut)
