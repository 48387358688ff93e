"""An index of one state version is built once, even when several threads ask for it at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from validators.states import MemoryState
from validators.views import indexes


def test_threads_asking_at_once_share_one_build() -> None:
    state = MemoryState([], version="v")
    builds: list[int] = []
    started = threading.Event()

    def build(_: object) -> object:
        builds.append(threading.get_ident())
        started.set()
        time.sleep(0.2)  # long enough for the others to ask while it runs
        return object()

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(indexes.index, state, "slow", build)
        started.wait(5)
        others = [pool.submit(indexes.index, state, "slow", build) for _ in range(3)]
        got = {id(f.result()) for f in [first, *others]}
    assert len(builds) == 1
    assert len(got) == 1
