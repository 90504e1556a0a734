"""The pass cursor both loaders hold: the iteration rule, on its own (no torch, no loader).

The loaders' iteration tests (tests/built/test_iteration_*.py) run the rule through real
passes; these pin each rule of the cursor directly, with the message a bad epoch gets.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaderkit.runtime.passes.cursor import PassCursor


def test_passes_without_set_epoch_read_the_epochs_in_turn_from_batch_0():
    cursor = PassCursor()
    assert cursor.next_pass == (0, 0)
    starts = []
    for _ in range(3):
        start = cursor.start()
        starts.append((start.epoch, start.start))
        cursor.deliver()
    assert starts == [(0, 0), (1, 0), (2, 0)]
    assert cursor.position == (2, 1)


@given(st.integers(0, 10**6), st.integers(0, 50))
def test_set_epoch_keeps_a_loaded_resume_of_its_own_epoch_only(epoch, delivered):
    cursor = PassCursor()
    cursor.load(epoch, delivered, ended=False)
    generation = cursor.generation
    assert cursor.set_epoch(epoch) is False  # the trainer's habit: the resume stands
    assert (cursor.next_pass, cursor.generation) == ((epoch, delivered), generation)
    assert cursor.set_epoch(epoch + 1) is True  # another epoch replaces it
    assert cursor.next_pass == (epoch + 1, 0)
    assert cursor.generation > generation


def test_a_state_taken_after_the_loop_resumes_with_the_next_epoch_whole():
    cursor = PassCursor()
    cursor.load(4, 10, ended=True)
    assert (cursor.position, cursor.ended, cursor.next_pass) == ((4, 10), True, (5, 0))
    cursor.load(4, 10, ended=False)
    assert (cursor.ended, cursor.next_pass) == (False, (4, 10))


def test_what_a_pass_reports_counts_only_while_the_position_is_its_own():
    cursor = PassCursor()
    start = cursor.start()
    cursor.deliver()
    cursor.interrupted(start.moves)  # a loader error: the next pass resumes this one
    assert cursor.next_pass == (0, 1)
    cursor.went_on(start.moves)  # the caller went on: it is no longer to resume
    assert cursor.next_pass == (1, 0)
    cursor.set_epoch(7)
    cursor.interrupted(start.moves)  # moved since: the move stands
    cursor.end(start.moves)
    assert (cursor.next_pass, cursor.ended) == ((7, 0), False)


def test_a_superseded_pass_raises_and_close_moves_nothing():
    cursor = PassCursor()
    start = cursor.start()
    cursor.supersede()  # close(): the position stays, the open iterator is done
    assert cursor.position == (0, 0)
    assert not cursor.current(start.generation)
    with pytest.raises(RuntimeError, match="this iterator was superseded"):
        cursor.superseded(start.generation)


def test_check_puts_the_position_and_the_pending_pass_back():
    cursor = PassCursor()
    cursor.load(3, 2, ended=False)
    kept = cursor.snapshot()
    start = cursor.start()
    cursor.deliver()
    cursor.restore(kept)
    assert (cursor.position, cursor.next_pass) == ((3, 2), (3, 2))
    assert not cursor.current(start.generation)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_a_bad_epoch_is_refused_saying_what_it_got(bad):
    cursor = PassCursor()
    with pytest.raises(ValueError, match=r"set_epoch: epoch must be an int >= 0 \(got"):
        cursor.set_epoch(bad)
    assert (cursor.next_pass, cursor.moves) == ((0, 0), 0)
