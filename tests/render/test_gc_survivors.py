"""What a paused stretch kept leaves the young generations unscanned when collection resumes
(``gcpause``): into the oldest generation, or into the frozen set a process keeps already."""

from __future__ import annotations

import gc

from haproxy_check.render import gcpause


class _Kept:
    """A tracked object, found by identity among a generation's objects."""


def _generation_of(obj: object) -> int | None:
    for generation in range(3):
        if any(o is obj for o in gc.get_objects(generation=generation)):
            return generation
    return None


def test_survivors_move_to_the_oldest_generation_unscanned() -> None:
    assert gc.get_freeze_count() == 0
    with gcpause.paused():
        kept = _Kept()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert _generation_of(kept) == 2


def test_survivors_join_a_frozen_set_the_process_keeps() -> None:
    gcpause.keep_lifelong()
    try:
        before = gc.get_freeze_count()
        with gcpause.paused():
            kept = _Kept()
        assert gc.get_freeze_count() > before and _generation_of(kept) is None
    finally:
        gcpause.release_lifelong()
    assert _generation_of(kept) == 2
    with gcpause.paused():  # released: what a pause keeps goes to the oldest generation again
        later = _Kept()
    assert gc.get_freeze_count() == 0 and _generation_of(later) == 2


def test_a_cycle_kept_by_a_pause_is_still_collected() -> None:
    with gcpause.paused():
        cycle: list[object] = []
        cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1
