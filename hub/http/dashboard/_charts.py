"""The health page's charts: a series over a chosen window as an SVG with axes, units and times.

Server-side, no script: the y axis from 0 to a round maximum (1, 2 or 5 times a power of ten)
labelled with the unit, the x axis with the window's times (UTC), a line for a level (runs in
progress, latency) and bars for counts per span (runs, failures, tokens). Only numbers and
escaped labels reach the markup, so the result is safe to inline.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from markupsafe import escape

__all__ = ["WINDOWS", "BUCKETS", "chart", "nice_max", "amount"]

WINDOWS: dict[str, float] = {"15m": 900.0, "1h": 3600.0, "6h": 21600.0, "24h": 86400.0}
"""The windows a chart can show, by the name the page's links use."""
BUCKETS = 60
"""Spans a window is cut into: one point (or bar) each."""


def nice_max(value: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for m in (1, 2, 5, 10):
        if m * power >= value * (1 - 1e-9):
            return float(m * power)
    return float(10 * power)


def amount(value: float, unit: str = "") -> str:
    """A number as an axis or a total shows it: 1.2k, 3.4M, 0.5, 12."""
    a = abs(value)
    if a >= 1e6:
        text = f"{value / 1e6:.1f}M"
    elif a >= 1e4:
        text = f"{value / 1e3:.0f}k"
    elif a >= 1e3:
        text = f"{value / 1e3:.1f}k"
    elif a == int(a):
        text = f"{int(value)}"
    elif a >= 10:
        text = f"{value:.0f}"
    else:
        text = f"{value:.2g}"
    return f"{text} {unit}".strip() if unit else text


def _clock(ts: float, span: float) -> str:
    return time.strftime("%m-%d %H:%M" if span > 86400 else "%H:%M", time.gmtime(ts))


def chart(
    values: Sequence[float | None],
    *,
    start: float,
    step: float,
    unit: str,
    label: str,
    bars: bool = False,
    width: int = 320,
    height: int = 130,
) -> str:
    """``values[i]`` is the span from ``start + i * step``; None: no sample there (a gap)."""
    left, right, top, bottom = 40, 8, 8, 20
    w, h = width - left - right, height - top - bottom
    n = max(1, len(values))
    top_value = nice_max(max((v for v in values if v is not None), default=0.0))
    parts: list[str] = []
    # the y axis: 0, half and the top, with the unit; grid lines across
    for frac in (0.0, 0.5, 1.0):
        y = top + h - frac * h
        parts.append(f'<line class="grid" x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}"/>')
        text = escape(amount(top_value * frac, unit))
        parts.append(f'<text class="y" x="{left - 4}" y="{y + 3.5:.1f}" text-anchor="end">{text}</text>')
    # the x axis: the window's start, middle and end (now), UTC
    span = step * n
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        x = left + frac * w
        text = escape(_clock(start + frac * span, span))
        parts.append(f'<text class="x" x="{x:.1f}" y="{height - 5}" text-anchor="{anchor}">{text}</text>')
    dx = w / n
    if bars:
        for i, v in enumerate(values):
            if v:
                bh = v / top_value * h
                parts.append(
                    f'<rect x="{left + i * dx + dx * 0.1:.1f}" y="{top + h - bh:.1f}" '
                    f'width="{max(dx * 0.8, 0.8):.1f}" height="{bh:.1f}" fill="currentColor"/>'
                )
    else:
        run: list[str] = []
        lines: list[list[str]] = []
        for i, v in enumerate(values):
            if v is None:
                if run:
                    lines.append(run)
                run = []
                continue
            run.append(f"{left + (i + 0.5) * dx:.1f},{top + h - v / top_value * h:.1f}")
        if run:
            lines.append(run)
        for pts in lines:
            if len(pts) == 1:
                cx, cy = pts[0].split(",")
                parts.append(f'<circle r="2" cx="{cx}" cy="{cy}" fill="currentColor"/>')
            else:
                parts.append(
                    f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{" ".join(pts)}"/>'
                )
        if not lines:
            parts.append(
                f'<text class="none" x="{left + w / 2:.1f}" y="{top + h / 2:.1f}" text-anchor="middle">'
                "no samples in this window</text>"
            )
    parts.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + h}"/>')
    parts.append(f'<line class="axis" x1="{left}" x2="{left + w}" y1="{top + h}" y2="{top + h}"/>')
    return (
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>{"".join(parts)}</svg>'
    )
