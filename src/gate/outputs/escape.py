"""Untrusted text (questions, answers, chunks, error messages) made inert for GitHub markdown.

Shared by every markdown renderer: nothing a pipeline or a golden set writes can break the layout, run HTML,
ping anyone or cross-link an issue.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gate.comparison import clip
from gate.sanitize import clean

CELL_LIMIT = 300
"""Characters of untrusted text kept in one table cell or list item."""

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]|~])")
WORD_JOINER = "\u2060"
"""Invisible, zero-width, and not a word character: put inside a mention or reference, it breaks the link."""
_REFERENCES = re.compile(
    r"""
      @(?=[\w-]*[^\W\d])            # @user, x@user, @org/team, owner/repo@sha: mentions and commit links
    | (?<!\w)@(?=[\w-])             # @5 at the start of a word (only rate@5, ndcg@10 stay as typed)
    | \#(?=\d)                      # #12, owner/repo#12: issue and pull request references
    | \bGH(?=-\d)                   # GH-12: GitHub's own issue shorthand
    | (?<=\bhttp):(?=//)             # http(s)://github.com/o/r/issues/12, and every other link
    | (?<=\bhttps):(?=//)
    | \bwww(?=\.)                    # www.github.com/...: the other autolink form
    """,
    re.VERBOSE | re.IGNORECASE,
)


def escape_markdown(text: Any, limit: int = CELL_LIMIT) -> str:
    """Make untrusted text inert in a GitHub markdown table cell or list item.

    Collapses whitespace (newlines would end a table row), truncates to ``limit`` characters, HTML-escapes
    ``& < >`` (no tags, no comments), backslash-escapes markdown metacharacters (including ``|`` and backticks),
    drops control and invisible characters and replaces lone surrogates (:func:`gate.sanitize.clean`: C0/C1
    controls, the format category, bidirectional, zero-width and tag characters, fillers), and neutralises
    mentions and references (:func:`neutralize_references`).
    """
    text = clip(" ".join(clean(text).split()), limit) or ""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return neutralize_references(text)


def neutralize_references(text: str) -> str:
    """Make mentions, references and links in untrusted text inert: nobody is pinged, nothing is cross-linked.

    A word joiner (U+2060, invisible) goes after every ``@`` that precedes a name (``@user``, also ``x@user``
    and ``owner/repo@sha``; a number right after a word, as in ``hit_rate@5``, is no name and stays as typed,
    so metric names can be copied from the comment), after every ``#`` before a digit (``#12``,
    ``owner/repo#12``), after ``GH`` in ``GH-12``, after the colon of ``http:``/``https:``
    (``https://github.com/o/r/issues/12`` would be autolinked and cross-referenced) and after the ``www`` of
    ``www.``. The text reads the same.

    Args:
        text: untrusted text (already HTML- and markdown-escaped, or plain).

    Returns:
        ``text`` with word joiners inserted; nothing else changes.

    Source: GitHub Docs, "Autolinked references and URLs" and "Basic writing and formatting syntax"
    (mentioning people and teams); GitHub Flavored Markdown spec, extension "Autolinks".
    """
    return _REFERENCES.sub(lambda m: m.group(0) + WORD_JOINER, text)


CODE_LINE_LIMIT = 200
"""Characters kept per line of a code block of untrusted text."""


def code_block(lines: Iterable[str], lang: str = "", limit: int = 80) -> str:
    """Untrusted lines as a fenced code block that nothing inside can close or escape.

    The fence is one backtick longer than the longest run of backticks in the text (CommonMark: a fence closes
    only on a run at least as long); lines are
    cut to :data:`CODE_LINE_LIMIT` characters and the block to ``limit`` lines (a last line says how many were
    left out). Control and invisible characters are dropped as in :func:`escape_markdown`, and a line break inside
    an item becomes a space. Inside a code block GitHub renders no HTML, links or mentions.

    Args:
        lines: the text, one line per item (no newlines inside).
        lang: the info string (``diff``, ``yaml``), trusted.
        limit: most lines kept.

    Returns:
        The block, ending with a newline.

    Source: CommonMark spec 0.31, section 4.5 "Fenced code blocks".
    """
    kept = [clip(clean(line).replace("\n", " "), CODE_LINE_LIMIT) or "" for line in lines]
    if len(kept) > limit:
        kept = kept[:limit] + [f"… {len(kept) - limit} more line(s)"]
    longest = max((len(run) for line in kept for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + lang, *kept, fence]) + "\n"
