"""OSWorld's ``rule_relativeTime`` getter: a rule whose expected dates are written relative to today ("next Monday",
"tomorrow"), made absolute when the check runs. ``{DoW}``, ``{DayD}``, ``{Month}`` and ``{Year}`` in the expected
texts become the day's weekday, day of the month, month name and year."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

__all__ = ["RELATIVE_DAYS", "relative_day", "relative_rules"]

RELATIVE_DAYS = {"today": 0, "tomorrow": 1, "yesterday": -1, "next week": 7, "a week later": 7, "in a week": 7,
                 "two weeks later": 14, "next month": 30}
SPECIAL = ("next Monday", "next Friday", "this Saturday", "this Sunday", "this month", "5th next month",
           "10th next month", "11th next month", "first monday four months later")


def _next_month(now: datetime, day: int) -> datetime:
    return datetime(now.year + (now.month == 12), now.month % 12 + 1, day)


def relative_day(name: str, now: datetime, *, after: str = "") -> datetime:
    """The day ``name`` means, seen from ``now``; ``after``: the range's start, for a "to" that depends on it."""
    if name in RELATIVE_DAYS:
        return now + timedelta(days=RELATIVE_DAYS[name])
    if name == "next Monday":
        return now + timedelta(days=7 - now.weekday())
    if name == "next Friday":  # the Friday after next Monday when the range starts then
        if now.weekday() < 4 and after == "next Monday":
            return now + timedelta(days=4 - now.weekday() + 7)
        return now + timedelta(days=4 - now.weekday() if now.weekday() < 4 else 11 - now.weekday())
    if name == "this Saturday":
        return now + timedelta(days=5 - now.weekday())
    if name == "this Sunday":
        return now + timedelta(days=6 - now.weekday())
    if name == "this month":
        return now
    if name in ("5th next month", "10th next month", "11th next month"):
        return _next_month(now, int(name.split("th")[0]))
    if name == "first monday four months later":
        first = datetime(now.year + (now.month > 8), (now.month + 3) % 12 + 1, 1)
        return first + timedelta(days=(7 - first.weekday()) % 7)
    raise ValueError(f"unknown relative time {name!r}; known: {', '.join([*RELATIVE_DAYS, *SPECIAL])}")


def _format(text: str, day: datetime) -> str:
    return (text.replace("{DoW}", day.strftime("%A"), 1).replace("{Month}", day.strftime("%B"), 1)
            .replace("{DayD}", str(day.day), 1).replace("{Year}", str(day.year), 1))


def relative_rules(rules: dict, now: datetime | None = None) -> Any:
    """``rules`` with ``expected.time`` (or ``expected.from`` / ``.to``) written out for the days
    ``relativeTime.from`` (and ``.to``) name."""
    now = now or datetime.now()
    out = copy.deepcopy(rules)
    when = rules["relativeTime"]
    if "to" not in when:
        out["expected"]["time"] = _format(rules["expected"]["time"], relative_day(when["from"], now))
    else:
        out["expected"]["from"] = _format(rules["expected"]["from"], relative_day(when["from"], now))
        out["expected"]["to"] = _format(rules["expected"]["to"], relative_day(when["to"], now, after=when["from"]))
    return out
