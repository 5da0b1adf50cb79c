"""Renderers: every output of a comparison is a pure function of the :class:`~gate.comparison.Comparison`.

Callers pick the outputs they need (:class:`Output`); each is rendered once by :func:`render`, and :func:`write`
writes every output of a comparison (the files, the chart, ``report.html`` from the per-case view of
:mod:`gate.compare.views`, JUnit XML). Nothing here decides anything: the verdict, the lists and every
figure come from the comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from gate.caseview import CaseView
from gate.comparison import Comparison
from gate.files import make_dirs
from gate.jsonl import write_text_atomic
from gate.outputs.annotations import render_annotations
from gate.outputs.charts import CHART_FILE, plot_metrics
from gate.outputs.html import HTML_FILE, write_html
from gate.outputs.junit import render_junit
from gate.outputs.markdown import DEFAULT_MAX_CHARS, MARKER, SUMMARY_LIMIT, render_comment
from gate.outputs.text import render_text


class Output(StrEnum):
    """The outputs of a comparison."""

    JSON = "json"
    """``report.json``: the comparison itself (schema ``gate/schemas/report.schema.json``)."""
    COMMENT = "comment"
    """``comment.md``: the PR comment (markdown, capped below GitHub's comment limit)."""
    SUMMARY = "summary"
    """The job summary: the comment's layout with every list in full (GitHub allows 1 MiB)."""
    ANNOTATIONS = "annotations"
    """``::error`` / ``::warning`` workflow commands for failing cases."""
    TEXT = "text"
    """The comparison as plain text for a terminal (no markdown, no escapes)."""
    JUNIT = "junit"
    """JUnit XML (a test case per gated metric, regressed case and new out-of-domain failure), for other CIs."""


@dataclass(frozen=True)
class RenderOptions:
    """Settings shared by the renderers."""

    max_chars: int = DEFAULT_MAX_CHARS
    """Cap of the comment, in characters."""
    template_dir: Path | None = None
    """A directory whose ``comment.md.j2`` overrides the shipped template."""
    details_url: str | None = None
    """Where the full report is (the workflow run), named when the comment's lists are cut."""
    golden_file: str | None = None
    """The golden set's path relative to the repository root (annotations point at its lines)."""
    marker: str = MARKER
    """Hidden marker the comment starts with (:func:`gate.outputs.markdown.sticky_marker` of the config)."""
    config: str | None = None
    """The config's path, named in the comment's heading (several configs can gate one PR)."""


@dataclass(frozen=True)
class Renderer:
    """How one output is made, and the file it is written to (None: not a file)."""

    render: Callable[[Comparison, RenderOptions], str]
    """Pure function of the comparison."""
    filename: str | None
    """File name in the output directory."""


RENDERERS: dict[Output, Renderer] = {
    Output.JSON: Renderer(lambda c, o: c.to_json(), "report.json"),
    Output.COMMENT: Renderer(
        lambda c, o: render_comment(
            c,
            max_chars=o.max_chars,
            template_dir=o.template_dir,
            details_url=o.details_url,
            marker=o.marker,
            config=o.config,
        ),
        "comment.md",
    ),
    Output.SUMMARY: Renderer(
        lambda c, o: render_comment(
            c, max_chars=SUMMARY_LIMIT - 10_000, template_dir=o.template_dir, marker=o.marker, config=o.config
        ),
        None,
    ),
    Output.ANNOTATIONS: Renderer(lambda c, o: render_annotations(c, o.golden_file), None),
    Output.TEXT: Renderer(lambda c, o: render_text(c), None),
    Output.JUNIT: Renderer(lambda c, o: render_junit(c, o.golden_file), None),
}
"""Every :class:`Output` and its renderer."""


def path(out_dir: Path, output: Output) -> Path:
    """Where :func:`write` puts ``output`` in ``out_dir``.

    Raises:
        ValueError: the output is not a file.
    """
    name = RENDERERS[output].filename
    if name is None:
        raise ValueError(f"{output} is not written to a file")
    return out_dir / name


def render(comparison: Comparison, output: Output, options: RenderOptions | None = None) -> str:
    """Render one output of ``comparison``.

    Raises:
        ValueError: the comment cannot fit ``options.max_chars`` even without case lists.
    """
    return RENDERERS[output].render(comparison, options or RenderOptions())


def write_chart(comparison: Comparison, out_dir: Path) -> Path | None:
    """Draw the base-vs-head chart to ``out_dir/metrics.png`` when matplotlib is installed (the ``plot`` extra).

    Returns:
        The PNG's path, or None when matplotlib is missing or no metric can be drawn.
    """
    try:
        drawn = plot_metrics(comparison, out_dir / CHART_FILE)
    except ImportError:
        return None
    return out_dir / CHART_FILE if drawn else None


REPORT_FILES = (Output.JSON, Output.COMMENT)
"""The text outputs a comparison writes into its output directory (``report.json``, ``comment.md``)."""


def write(
    comparison: Comparison,
    out_dir: Path,
    outputs: Iterable[Output] = REPORT_FILES,
    options: RenderOptions | None = None,
    *,
    cases: Iterable[CaseView] | None = None,
    junit: Path | None = None,
) -> dict[Output, str]:
    """Write every output of a comparison (atomically), for ``rag-gate compare`` and ``rag-gate pr`` alike.

    Into ``out_dir``: the chosen ``outputs`` that are files, each rendered once (``report.json``, ``comment.md``),
    the chart (``metrics.png``, with the ``plot`` extra), and ``report.html`` when the comparison's per-case view
    is given; JUnit XML to ``junit`` when given.

    Args:
        comparison: what to write.
        out_dir: the output directory (made when missing).
        outputs: the outputs to render (those that are files are written).
        options: settings of the renderers (the page takes its run link and config name from them).
        cases: the comparison's per-case view (:meth:`gate.sides.Compared.cases`): writes ``report.html``.
        junit: where JUnit XML goes (None: not written).

    Returns:
        Output → rendered text, for the caller to print or post.
    """
    options = options or RenderOptions()
    make_dirs(out_dir)
    texts = {}
    for output in outputs:
        texts[output] = text = render(comparison, output, options)
        if RENDERERS[output].filename is not None:
            write_text_atomic(path(out_dir, output), text)
    write_chart(comparison, out_dir)
    if cases is not None:  # every case side by side
        write_html(comparison, out_dir, cases, details_url=options.details_url, config=options.config)
    if junit is not None:
        texts[Output.JUNIT] = text = render(comparison, Output.JUNIT, options)
        write_text_atomic(junit, text)
    return texts


__all__ = [
    "HTML_FILE",
    "RENDERERS",
    "REPORT_FILES",
    "Output",
    "RenderOptions",
    "Renderer",
    "path",
    "render",
    "write",
    "write_chart",
    "write_html",
]
