"""A dependency-free SVG line chart, for the reports of the soak run and the load benchmark."""
from __future__ import annotations

from html import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]


def line_chart_svg(series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str, y_label: str,
                   width: int = 860, height: int = 420, bands: dict[str, float] | None = None) -> str:
    """One line per series of (x, y) points; `bands` draws dashed horizontal lines (e.g. a stated bound)."""
    left, right, top, bottom = 70, 190, 40, 50
    points = [p for values in series.values() for p in values]
    xs = [x for x, _ in points] or [0.0, 1.0]
    ys = [y for _, y in points] + list((bands or {}).values()) + [0.0]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = 0.0, max(ys) * 1.1 if max(ys) > 0 else 1.0

    def sx(x):
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def sy(y):
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for i in range(6):
        y = y0 + (y1 - y0) * i / 5
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0f}</text>')
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 18}" text-anchor="middle">{x:.0f}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 10}" text-anchor="middle">{escape(x_label)}</text>'
               f'<text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" text-anchor="middle">'
               f'{escape(y_label)}</text>')
    legend_y = top
    for n, (name, values) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        if values:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{path}"/>')
        out.append(f'<rect x="{width - right + 12}" y="{legend_y - 9}" width="12" height="4" fill="{colour}"/>'
                   f'<text x="{width - right + 30}" y="{legend_y - 4}">{escape(name)}</text>')
        legend_y += 18
    for name, value in (bands or {}).items():
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(value):.1f}" y2="{sy(value):.1f}" '
                   f'stroke="#555" stroke-dasharray="5,4"/><text x="{width - right + 12}" y="{sy(value) + 4:.1f}">'
                   f'{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
