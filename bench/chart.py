"""A dependency-free SVG line chart, for the reports of the soak run and the load benchmark."""
from __future__ import annotations

import math
from html import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]


def ticks(lo: float, hi: float, count: int = 5, integers: bool = False) -> tuple[list[float], list[str]]:
    """About ``count`` round steps (1, 2, 2.5 or 5 times a power of ten) from at or below ``lo`` to at or above
    ``hi``, and their labels with as many decimals as the step needs: 0.2, 0.4 ... for a rate, 0, 1, 2 for cycles
    (``integers``: a step of 1 at least)."""
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    if integers and step < 1:
        step = 1
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    values = [i * step for i in range(first, max(last, first + 1) + 1)]
    decimals = next(d for d in range(7) if abs(round(step, d) - step) <= step * 1e-6)
    return values, [f"{value:.{decimals}f}" for value in values]


def line_chart_svg(series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str, y_label: str,
                   width: int = 860, height: int = 420, bands: dict[str, float] | None = None) -> str:
    """One line per series of (x, y) points; `bands` draws dashed horizontal lines (e.g. a stated bound)."""
    left, right, top, bottom = 70, 190, 40, 50
    points = [p for values in series.values() for p in values]
    xs = [x for x, _ in points] or [0.0, 1.0]
    ys = [y for _, y in points] + list((bands or {}).values()) + [0.0]
    x_ticks = ticks(min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1,
                    integers=all(float(x).is_integer() for x in xs))
    y_ticks = ticks(0.0, max(ys) if max(ys) > 0 else 1.0)
    x0, x1 = x_ticks[0][0], x_ticks[0][-1]
    y0, y1 = y_ticks[0][0], y_ticks[0][-1]

    def sx(x):
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def sy(y):
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for y, label in zip(*y_ticks):
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{label}</text>')
    for x, label in zip(*x_ticks):
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 18}" text-anchor="middle">{label}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 10}" text-anchor="middle">{escape(x_label)}</text>'
               f'<text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" text-anchor="middle">'
               f'{escape(y_label)}</text>')
    legend_y = top
    for n, (name, values) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        if values:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{path}"/>')
            if len(values) <= 30:  # a few points (cycles): each marked, so a lone one or one on another line shows
                out.extend(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"/>' for x, y in values)
        out.append(f'<rect x="{width - right + 12}" y="{legend_y - 9}" width="12" height="4" fill="{colour}"/>'
                   f'<text x="{width - right + 30}" y="{legend_y - 4}">{escape(name)}</text>')
        legend_y += 18
    for name, value in (bands or {}).items():
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(value):.1f}" y2="{sy(value):.1f}" '
                   f'stroke="#555" stroke-dasharray="5,4"/><text x="{width - right + 12}" y="{sy(value) + 4:.1f}">'
                   f'{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
