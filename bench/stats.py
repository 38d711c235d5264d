"""Small figures the benchmarks share."""
from __future__ import annotations


def percentile(values, q):
    """The q-quantile (0..1, nearest rank) of durations in seconds, in milliseconds to 2 places; None if empty."""
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2) if values else None
