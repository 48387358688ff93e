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


class _Versioned:
    """A State of another implementation (weakly referenced, no index_memo of its own)."""

    def __init__(self) -> None:
        self.version = "v1"

    def list(self, kind: str) -> list[object]:
        return []

    def get(self, kind: str, namespace: str, name: str) -> None:
        return None


def test_a_cheap_build_is_kept_per_version_as_a_locked_one_is() -> None:
    """``cheap`` builds skip the lock, not the cache: the first value stored serves every later call
    of the same version, a new version builds anew, and a state of its own kind (kept in the weak
    table) and one of validators.states (its own index_memo) behave alike."""
    for state in (MemoryState([], version="v1"), _Versioned()):
        builds: list[object] = []

        def build(_: object, builds: list[object] = builds) -> object:
            builds.append(object())
            return builds[-1]

        first = indexes.index(state, "memo", build, cheap=True)  # type: ignore[arg-type]
        assert indexes.index(state, "memo", build, cheap=True) is first  # type: ignore[arg-type]
        assert indexes.index(state, "memo", build) is first  # type: ignore[arg-type]
        assert indexes.peek(state, "memo") is first  # type: ignore[arg-type]
        if isinstance(state, _Versioned):
            state.version = "v2"
        else:
            state._version = "v2"
        second = indexes.index(state, "memo", build, cheap=True)  # type: ignore[arg-type]
        assert second is not first and builds == [first, second]
        assert indexes.index(state, "memo", build, cheap=True) is second  # type: ignore[arg-type]
