"""Small statistics shared by the apps (core is the layer every app may import)."""
from __future__ import annotations

from collections import Counter

__all__ = ["cohen_kappa"]


def cohen_kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters' labels over ``pairs``; None when undefined (no pairs, or both raters always
    gave one and the same label, so chance agreement is 1)."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[label] * second[label] for label in set(first) | set(second)) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)
