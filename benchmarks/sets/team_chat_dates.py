"""Dates said relative to the day of a turn, as ``team_chat``'s "when" turns say them.

"next <weekday>" is the first such day after the turn's day, "last <weekday>" the latest before it
(so "next Friday" said on a Thursday is the day after).
"""

from __future__ import annotations

from datetime import date, timedelta

from benchmarks.sets import team_chat_vocab as v

PAST = ("this morning", "yesterday", "the day before yesterday", *(f"last {d}" for d in v.WEEKDAYS[:5]))
FUTURE = (
    "later today",
    "tomorrow",
    "in three days",
    "two weeks from today",
    *(f"next {d}" for d in v.WEEKDAYS[:5]),
)


def relative_day(phrase: str, day: date) -> date:
    """The day a relative phrase said on ``day`` means (see the module docstring)."""
    fixed = {"this morning": 0, "later today": 0, "yesterday": -1, "the day before yesterday": -2}
    fixed |= {"tomorrow": 1, "in three days": 3, "two weeks from today": 14}
    if phrase in fixed:
        return day + timedelta(days=fixed[phrase])
    step, name = phrase.split()
    target = v.WEEKDAYS.index(name)
    if step == "next":
        return day + timedelta(days=(target - day.weekday() - 1) % 7 + 1)
    return day - timedelta(days=(day.weekday() - target - 1) % 7 + 1)
