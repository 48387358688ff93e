"""serve with files moves what it built at start-up out of the collector's sight; with a cluster it does not."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from haproxy_check.render import gcpause
from validators.states import MemoryState, State
from webhook.server.serving import freeze_lifelong
from webhook.sources import StaticSource


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gcpause.release_lifelong()
    yield
    gcpause.release_lifelong()


class ChangingSource:
    """A source whose state changes (as a cluster's does)."""

    ready = True

    def snapshot(self) -> State:
        return MemoryState()

    def status(self) -> dict[str, str]:
        return {}


def test_a_state_from_files_is_frozen(unfrozen: None) -> None:
    assert freeze_lifelong(StaticSource(MemoryState([{"kind": "Service", "metadata": {"name": "a"}}])))
    assert gc.get_freeze_count() > 0


def test_a_changing_state_is_not(unfrozen: None) -> None:
    assert not freeze_lifelong(ChangingSource())
    assert gc.get_freeze_count() == 0
