"""A collection's CPU time is not charged to the check whose allocation happened to trigger it."""

from __future__ import annotations

import gc
import time

from validators import cputime


def test_a_full_collection_is_left_out_of_the_threads_cpu_time() -> None:
    heap = [[i] for i in range(1_500_000)]  # containers a full collection must scan
    before_cpu, before = time.thread_time(), cputime.now()
    gc.collect()
    collected = time.thread_time() - before_cpu
    charged = cputime.now() - before
    del heap
    assert collected > 0.01, "the collection took measurable CPU time"
    assert charged < collected / 4, (charged, collected)


def test_work_outside_collections_is_still_counted() -> None:
    before = cputime.now()
    total = 0
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:
        total += sum(range(1000))
    assert cputime.now() - before >= 0.04
