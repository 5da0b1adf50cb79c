"""``report.html``: one self-contained page with the verdict, the metric table, the chart and every case side by side.

The page needs nothing but a browser (no network, no CDN: the CSS and the script are inline, and a
Content-Security-Policy lets only that one script run, by its hash), so it opens from ``file://`` in a downloaded
artifact. The verdict, the reasons, the metric table and the chart are rendered here (Jinja2, autoescaped); the
cases are embedded as JSON in a ``<script type="application/json">`` and drawn by the inline script with
``textContent`` only, a page at a time, with filters (regressed, improved, out-of-domain failures, errors, …) and
search: it stays usable at 10,000 cases (``benchmarks/html_report.py`` measures it).

Untrusted text (questions, answers, chunks, claims, error messages, ids) is never markup: in the JSON every ``<``,
``>`` and ``&`` is a ``\\u`` escape (no ``</script>`` or ``<!--`` can end the block), and the script never assigns
``innerHTML``.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import secrets
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jinja2
import msgspec
import numpy as np
from markupsafe import Markup

from gate.caseview import CaseView
from gate.comparison import CaseEntry, Comparison, clip
from gate.files import atomic_writer, make_dirs
from gate.outputs import cells
from gate.outputs.charts import bars
from gate.sanitize import clean

HTML_FILE = "report.html"
"""The page's name in the output directory, beside ``report.json``."""
HTML_TEXT_LIMIT = 2000
"""Characters kept of each answer and question in the page."""
CHUNK_TEXT_LIMIT = 400
"""Characters kept of a claim's attributed chunk."""
MAX_RETRIEVED = 20
"""Retrieved ids shown per side (ranks beyond are counted)."""
STATUSES = ("regressed", "suspected", "improved", "flaky", "ood", "error")
"""The per-case statuses the page filters on (``ood``: an out-of-domain case head answered)."""
_URL = re.compile(r"https?://[^\s<>\"'`()\[\]\\]+")


def safe_url(url: str | None) -> str | None:
    """``url`` when it is a plain http(s) URL (no quotes, brackets, spaces), else None: only such a link is shown."""
    return url if url and _URL.fullmatch(url) else None


def _text(value: Any, limit: int = HTML_TEXT_LIMIT) -> str | None:
    """Untrusted text for the page: controls and invisible characters dropped, clipped; None stays None."""
    if value is None:
        return None
    if isinstance(value, str) and value.isascii() and value.isprintable():  # nothing to drop (most text)
        return clip(value, limit)
    return clip(clean(value), limit)


def _number(value: Any) -> float | None:
    """A float for JSON: NaN and ±inf as None, rounded to 6 digits."""
    if value is None:
        return None
    value = float(value)
    return round(value, 6) if math.isfinite(value) else None


def _claims(claims: Sequence[Any] | None) -> list[dict[str, Any]]:
    """Every claim of a side's first judged answer: verdict, claim, attributed chunk, similarity, reason."""
    out = []
    for c in claims or ():
        if not isinstance(c, dict):
            continue
        claim: dict[str, Any] = {"v": _text(c.get("verdict", ""), 40), "c": _text(c.get("claim", ""))}
        if c.get("chunk_id") is not None:
            claim["id"] = _text(c["chunk_id"], 200)
            claim["t"] = _text(c.get("chunk_text"), CHUNK_TEXT_LIMIT)
        if isinstance(c.get("similarity"), int | float):
            claim["s"] = _number(c["similarity"])
        if c.get("contradiction_level") not in (None, "NONE"):
            claim["l"] = _text(c["contradiction_level"], 40)
        if c.get("reason"):
            claim["r"] = _text(c["reason"], 300)
        if isinstance(c.get("p_hallucinated"), int | float):
            claim["p"] = _number(c["p_hallucinated"])
        facts = c.get("unsupported_facts")
        if isinstance(facts, list) and facts:
            claim["f"] = [_text(f, 100) for f in facts[:10]]
        out.append(claim)
    return out


def _mean_cell(value: float) -> float | None:
    """A per-case mean for the page, to 6 digits: None for NaN (and ±inf)."""
    return None if math.isnan(value) or math.isinf(value) else float(np.round(value, 6))


def _statuses(comparison: Comparison) -> tuple[dict[str, list[str]], dict[str, CaseEntry], dict[str, Any]]:
    """Case id → the statuses the page filters it by, the case's entry in the lists, and its errors."""
    listed: dict[str, CaseEntry] = {}
    statuses: dict[str, list[str]] = defaultdict(list)
    for status in ("regressed", "suspected", "improved", "flaky"):
        for entry in getattr(comparison, f"{status}_cases"):
            statuses[entry.id].append(status)
            listed.setdefault(entry.id, entry)
    for failure in comparison.ood_failures:
        statuses[failure.id].append("ood")
    errors: dict[str, list[list[Any]]] = defaultdict(list)
    for e in comparison.errors:
        errors[e.id].append([e.side, e.repeat, e.metric, _text(e.message, 500)])
        if "error" not in statuses[e.id]:
            statuses[e.id].append("error")
    return statuses, listed, errors


def case_rows(comparison: Comparison, cases: Iterable[CaseView]) -> Iterator[dict[str, Any]]:
    """Every paired case of the comparison as the page shows it, JSON-ready, one at a time.

    Each row holds the question, both sides' first valid answers and retrieved ids, the expected ids and those
    that fell out of head's top k, both sides' claims with their verdicts and chunks, the per-case mean of every
    metric on each side, the case's statuses (regressed, suspected, improved, flaky, ``ood``: an out-of-domain
    case head answered, ``error``: a failed prediction or judge call) and its errors.

    Args:
        comparison: the comparison (its lists decide the statuses).
        cases: its per-case view (:func:`gate.compare.views.case_views`, in head's golden order), read one at a time.
    """
    labels = {m.name: m.label for m in comparison.metrics}
    statuses, listed, errors = _statuses(comparison)
    ood = {f.id: f for f in comparison.ood_failures}
    for case in cases:
        rb, rh = case.retrieved_base, case.retrieved_head
        row: dict[str, Any] = {
            "id": _text(case.id, 300),
            "q": _text(case.question),
            "line": case.line,
            "st": statuses.get(case.id, []),
            "ab": _text(case.answer_base),
            "ah": _text(case.answer_head),
            "rb": [_text(x, 200) for x in rb[:MAX_RETRIEVED]],
            "rh": [_text(x, 200) for x in rh[:MAX_RETRIEVED]],
            "exp": [_text(x, 200) for x in case.expected_doc_ids],
            # [metric index, base, head]: a case carries only the metrics that apply to it
            "m": [
                [j, b_mean, h_mean]
                for j, (b, h) in enumerate(case.means)
                for b_mean, h_mean in [(_mean_cell(b), _mean_cell(h))]
                if b_mean is not None or h_mean is not None
            ],
        }
        if len(rb) > MAX_RETRIEVED or len(rh) > MAX_RETRIEVED:
            row["more"] = [max(0, len(rb) - MAX_RETRIEVED), max(0, len(rh) - MAX_RETRIEVED)]
        if case.both_answered:
            row["drop"] = [_text(d, 200) for d in case.dropped_docs]
            row["same"] = case.identical_answer
        if case.out_of_domain:
            row["ood"] = True
        if case.id in ood:
            row["oodnew"] = ood[case.id].new
        if case.id in listed:
            entry = listed[case.id]
            row["cause"] = entry.cause
            row["why"] = [cells.case_change(m, labels.get(m.name, m.name)) for m in entry.metrics]
        for key, claims in (("cb", case.claims_base), ("ch", case.claims_head)):
            found = _claims(claims)
            if found:
                row[key] = found
        if case.id in errors:
            row["err"] = errors[case.id]
        yield row


def embed_json(value: Any) -> Markup:
    """``value`` as JSON that is inert inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` (so ``</script>``, ``<!--`` and
    ``<script`` cannot occur), and U+2028/U+2029 are escaped; ``JSON.parse`` reads the same strings back.
    """
    return Markup(_inert(msgspec.json.encode(value).decode("utf-8")))


def _inert(text: str) -> str:
    """JSON text with the characters :func:`embed_json` escapes, escaped.

    Each character is escaped alone, so the pieces of a text escape to the pieces of the escaped whole.
    """
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028")):
        text = text.replace(raw, escaped)
    return text.replace("\u2029", "\\u2029")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gate.outputs", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["clean"] = lambda value: clean(value) if value is not None else "–"
    env.filters["plain"] = _plain_status
    return env


def _plain_status(text: str) -> str:
    """A status cell without its leading icon (the page colours it instead: no emoji font needed)."""
    for icon in cells.GATE_STATUS.values():
        mark = icon.split(" ", 1)[0] + " "
        if text.startswith(mark):
            return text[len(mark) :]
    return text


def _chart(comparison: Comparison) -> list[dict[str, Any]]:
    """The chart's rows: base, head and head's interval per binary or graded metric, in [0, 1]."""
    return [
        {
            "label": bar.label + ("" if bar.gated else " (not gated)"),
            "base": bar.base,
            "head": bar.head,
            "low": bar.low,
            "high": bar.high,
            "worse": bar.worse,
        }
        for bar in bars(comparison)
    ]


def render_html(
    comparison: Comparison,
    cases: Iterable[dict[str, Any]],
    *,
    details_url: str | None = None,
    config: str | None = None,
) -> str:
    """The page: the comparison's verdict, reasons, metric table and chart, and ``cases`` (:func:`case_rows`).

    Args:
        comparison: what to show.
        cases: every case as :func:`case_rows` makes them.
        details_url: the workflow run the page belongs to (linked in its header), None outside Actions.
        config: the config's path, named in the heading.

    Returns:
        The HTML text; the same inputs give the same text.
    """
    return "".join(html_parts(comparison, cases, details_url=details_url, config=config))


def html_parts(
    comparison: Comparison,
    cases: Iterable[dict[str, Any]],
    *,
    details_url: str | None = None,
    config: str | None = None,
) -> Iterator[str]:
    """:func:`render_html`'s text in pieces that join to it: the cases' JSON one case at a time.

    A page of 100,000 cases is then never whole in memory, nor are its cases (``cases`` may be an iterator).
    """
    env = _environment()
    script = env.get_template("report.js.j2").render()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    data = {
        "metrics": [
            {"name": m.name, "label": m.label, "dir": m.direction, "gated": m.gated} for m in comparison.metrics
        ],
        "statuses": list(STATUSES),
        "cases": [],
    }
    marker = f"rag-gate-cases-{secrets.token_hex(16)}"  # where the cases go: text no input can contain
    page = env.get_template("report.html.j2").render(
        report=comparison,
        rows=[(m, cells.metric_cells(m)) for m in comparison.metrics],
        notes=cells.table_notes(comparison),
        chart=_chart(comparison),
        details_url=safe_url(details_url),
        config=config,
        data=Markup(marker),
        script=Markup(script),
        script_hash=f"sha256-{digest}",
        usage=cells.usage_text,
        n_listed={
            "regressed": len(comparison.regressed_cases),
            "ood": len(comparison.ood_failures),
            "errors": len(comparison.errors),
        },
    )
    before, after = page.split(marker)
    head = str(embed_json(data))
    assert head.endswith("[]}"), head[-20:]
    yield before + head[: -len("]}")]
    for n, case in enumerate(cases):
        yield ("," if n else "") + _inert(msgspec.json.encode(case).decode("utf-8"))
    yield "]}" + after


def write_html(
    comparison: Comparison,
    out_dir: Path,
    cases: Iterable[CaseView],
    *,
    details_url: str | None = None,
    config: str | None = None,
) -> Path:
    """Write ``out_dir/report.html`` (atomically) for a comparison and its per-case view.

    Args:
        comparison: what to show.
        out_dir: where the page goes.
        cases: the comparison's per-case view (:func:`gate.compare.views.case_views`), read one at a time.
        details_url: the workflow run (linked in the page's header).
        config: the config's path, named in the heading.

    Returns:
        The page's path.
    """
    make_dirs(out_dir)
    path = out_dir / HTML_FILE
    with atomic_writer(path) as handle:
        for part in html_parts(comparison, case_rows(comparison, cases), details_url=details_url, config=config):
            handle.write(part)
    return path
