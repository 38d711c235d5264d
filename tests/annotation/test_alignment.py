"""align_words against hand-worked session timelines."""

import math

import pytest

from annotation.alignment import StepWindow, align_words

# Step 0 proposed at 10 s, step 1 at 14 s, step 2 at 20 s and still open.
STEPS = [StepWindow(index=0, start=10.0, end=14.0), StepWindow(index=1, start=14.0, end=20.0),
         StepWindow(index=2, start=20.0, end=None)]


def test_word_inside_a_window_goes_to_that_step():
    assert align_words([(11.0, 11.5), (15.0, 15.4), (21.0, 21.3)], STEPS) == [0, 1, 2]


def test_word_straddling_a_boundary_goes_where_its_midpoint_is():
    # (13.5 + 14.3) / 2 = 13.9 is still step 0; (13.8 + 14.4) / 2 = 14.1 is already step 1.
    assert align_words([(13.5, 14.3), (13.8, 14.4)], STEPS) == [0, 1]


def test_midpoint_exactly_on_a_step_start_belongs_to_the_new_step():
    assert align_words([(13.9, 14.1), (19.5, 20.5)], STEPS) == [1, 2]


def test_open_last_step_takes_every_later_word():
    assert align_words([(500.0, 500.2), (1e6, 1e6 + 0.3)], STEPS) == [2, 2]


def test_words_before_the_first_step_go_to_the_first_step():
    assert align_words([(0.0, 0.4), (9.0, 9.9)], STEPS) == [0, 0]


def test_no_steps_gives_none_for_every_word():
    assert align_words([(1.0, 1.2), (3.0, 3.5)], []) == [None, None]


def test_no_words_gives_an_empty_list():
    assert align_words([], STEPS) == []


def test_word_spoken_while_paused_goes_to_the_step_after_the_pause():
    # Paused from 15 s to 19 s, inside step 1: what was said then is about step 2.
    words = [(14.5, 14.9), (15.5, 16.0), (18.6, 18.9), (19.2, 19.6)]
    assert align_words(words, STEPS, paused=[(15.0, 19.0)]) == [1, 2, 2, 1]


def test_pause_boundaries_are_half_open():
    # Midpoint 15.0 is the pause's first moment (paused); 19.0 is its end (not paused).
    words = [(14.9, 15.1), (18.9, 19.1)]
    assert align_words(words, STEPS, paused=[(15.0, 19.0)]) == [2, 1]


def test_word_paused_with_no_later_step_stays_on_the_step_in_effect():
    # Paused during the open last step, and not yet resumed.
    assert align_words([(30.0, 30.5)], STEPS, paused=[(25.0, math.inf)]) == [2]


def test_word_paused_before_the_first_step_goes_to_the_first_step():
    assert align_words([(3.0, 3.4)], STEPS, paused=[(0.0, 8.0)]) == [0]


def test_overlapping_and_unsorted_pauses_are_merged():
    paused = [(17.0, 19.0), (11.0, 12.0), (15.0, 17.5)]
    words = [(11.2, 11.6), (12.5, 12.9), (15.2, 15.4), (18.8, 18.9), (19.5, 19.7)]
    assert align_words(words, STEPS, paused=paused) == [1, 0, 2, 2, 1]


def test_gap_after_a_closed_step_goes_to_the_step_that_started_before_it():
    steps = [StepWindow(index=0, start=0.0, end=5.0), StepWindow(index=1, start=8.0, end=9.0)]
    # 6 s is after step 0 ended and before step 1; 12 s is after the last step closed.
    assert align_words([(5.8, 6.2), (11.9, 12.1)], steps) == [0, 1]


def test_unsorted_steps_are_answered_by_their_own_index():
    steps = [StepWindow(index=7, start=30.0, end=None), StepWindow(index=5, start=10.0, end=20.0),
             StepWindow(index=6, start=20.0, end=30.0)]
    assert align_words([(12.0, 12.2), (25.0, 25.2), (31.0, 31.2)], steps) == [5, 6, 7]


def test_nested_window_falls_back_to_the_step_that_still_holds_the_word():
    # A malformed timeline where step 1 closed inside step 0's window: 7 s is held only by step 0.
    steps = [StepWindow(index=0, start=0.0, end=10.0), StepWindow(index=1, start=4.0, end=6.0)]
    assert align_words([(4.5, 4.7), (6.9, 7.1)], steps) == [1, 0]


def test_pause_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="ends before it starts"):
        align_words([(1.0, 1.2)], STEPS, paused=[(5.0, 4.0)])
