"""One number format for everything a reader sees: the verdict's reasons, the comment's table, the terminal.

Metric values, differences and intervals have three decimals (``0.870``, ``-0.190``); ratios are written
``×1.047``; relative margins ``10 %``; p-values three decimals, ``<0.001`` below (a p-value read to more digits
claims a precision the test does not have); significance levels in the ``g`` format (``0.05``, ``0.045``).
Undefined numbers (None, NaN) print as ``–``.
"""

from __future__ import annotations

import math

DIGITS = 3
"""Decimals of metric values, differences, ratios and p-values."""
P_FLOOR = 0.001
"""p-values below this print as ``<0.001``."""
MISSING = "–"
"""How an undefined number (None, NaN) prints."""


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float | None, *, signed: bool = False, digits: int = DIGITS) -> str:
    """A metric value or difference: ``0.870``, ``-0.190`` (``+0.024`` when ``signed``), ``–`` when undefined."""
    if _missing(value):
        return MISSING
    assert value is not None
    if math.isinf(value):
        return ("+" if signed and value > 0 else "-" if value < 0 else "") + "∞"
    if round(value, digits) == 0:
        value = 0.0  # no "-0.000"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def ratio(value: float | None) -> str:
    """A ratio head/base: ``×1.047``; ``–`` when undefined."""
    return MISSING if _missing(value) else f"×{number(value)}"


def percent(value: float | None) -> str:
    """A relative margin or share: ``10 %``, ``2.5 %`` (at most one decimal); ``–`` when undefined."""
    if _missing(value):
        return MISSING
    assert value is not None
    return f"{100 * value:.1f}".rstrip("0").rstrip(".") + " %"


def p_value(value: float | None) -> str:
    """A p-value for a table cell: ``0.016``, ``<0.001``; ``–`` when undefined."""
    if _missing(value):
        return MISSING
    assert value is not None
    return f"<{P_FLOOR:g}" if value < P_FLOOR else f"{value:.{DIGITS}f}"


def level(value: float | None) -> str:
    """A significance level as the reasons print it (``α = 0.05``, ``p ≤ 0.045``); ``–`` when undefined.

    Python's ``g`` format: its 6 significant digits hide the float noise of a split level (0.9 × 0.05 prints
    ``0.045``, not ``0.045000000000000005``).
    """
    return MISSING if _missing(value) else f"{value:g}"


def p_clause(label: str, value: float | None) -> str:
    """A p-value in a sentence: ``p (Holm-adjusted) < 0.001``, ``p = 0.016``."""
    text = p_value(value)
    return f"{label} < {text[1:]}" if text.startswith("<") else f"{label} = {text}"
