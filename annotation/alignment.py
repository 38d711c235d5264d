"""Which step a spoken word belongs to.

A step's window runs on the session clock from when it was proposed (or the person began acting)
to the start of the next step. A word belongs to the step whose window holds the word's midpoint,
so a word that straddles a boundary goes where most of it was said. What a person says while the
episode is paused is usually about what should happen next, so it goes to the step that follows.

Pure functions on numbers; the annotation services turn TranscriptWord rows and Step timings into
these arguments and store the answer.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepWindow:
    """A step's window in session-clock seconds; `end` is None while the step is still open."""

    index: int
    start: float
    end: float | None


def align_words(
    word_times: Sequence[tuple[float, float]],
    steps: Sequence[StepWindow],
    paused: Sequence[tuple[float, float]] = (),
) -> list[int | None]:
    """For each word (start, end on the session clock), the index of the step it belongs to.

    - The step whose window [start, end) holds the word's midpoint; an open step (end None)
      reaches to infinity.
    - A word whose midpoint falls in a paused interval [start, end) goes to the first step that
      starts at or after that midpoint; while no such step exists yet, to the step in effect.
      Give a pause that has not ended an end of `math.inf`.
    - A word before the first step goes to the first step; a word in a gap after a closed step
      (or after the last one) goes to the latest step that started before it.
    - None for every word when there are no steps.
    """
    if not steps:
        return [None] * len(word_times)
    ordered = sorted(steps, key=lambda step: (step.start, step.index))
    starts = [step.start for step in ordered]
    pauses = _merged(paused)
    pause_starts = [start for start, _ in pauses]

    aligned: list[int | None] = []
    for word_start, word_end in word_times:
        midpoint = (word_start + word_end) / 2
        if _is_paused(midpoint, pauses, pause_starts):
            following = bisect.bisect_left(starts, midpoint)
            if following < len(ordered):
                aligned.append(ordered[following].index)
                continue
        aligned.append(_step_in_effect(midpoint, ordered, starts).index)
    return aligned


def _step_in_effect(moment: float, ordered: list[StepWindow], starts: list[float]) -> StepWindow:
    """The latest-starting step whose window holds `moment`; else the latest step started by
    then; else (before every step) the first step."""
    latest = bisect.bisect_right(starts, moment) - 1
    if latest < 0:
        return ordered[0]
    for position in range(latest, -1, -1):
        step = ordered[position]
        if step.end is None or moment < step.end:
            return step
    return ordered[latest]


def _merged(paused: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Paused intervals sorted and with overlaps merged, so one bisect finds the one at a moment."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(paused):
        if end < start:
            raise ValueError(f"paused interval ({start}, {end}) ends before it starts")
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _is_paused(moment: float, pauses: list[tuple[float, float]], pause_starts: list[float]) -> bool:
    """Whether `moment` lies in one of the merged, sorted paused intervals [start, end)."""
    position = bisect.bisect_right(pause_starts, moment) - 1
    return position >= 0 and moment < pauses[position][1]
