"""Number formatting shared by the renderers."""

from __future__ import annotations


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def us(ns: float) -> str:
    return f"{ns / 1e3:,.1f}"
