"""The request handler tells a source's shape (explains why it is not ready, reads references on
demand) with attribute look-ups instead of isinstance against runtime_checkable Protocols: it must
answer exactly what that isinstance answered, for every source the server runs with and odd ones."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import pytest

from validators.objects import Obj
from webhook.cluster.clusterstate import ClusterState
from webhook.reconcile.filesources import FileSource
from webhook.server import servers
from webhook.sources import StaticSource


@runtime_checkable
class Explaining(Protocol):  # servers.ExplainingSource, checkable at run time
    def why_not_ready(self) -> str: ...

    def reference_problems(self, obj: Obj) -> list[str]: ...


@runtime_checkable
class Reading(Protocol):  # servers.ReadingSource, checkable at run time
    async def read_references(self, obj: Obj, *, deadline: float) -> None: ...


class ExplainsOnly:
    def why_not_ready(self) -> str:
        return "x"


class BothButNone:
    why_not_ready = None
    reference_problems = None
    read_references = None


class Dynamic:
    def __getattr__(self, name: str) -> Any:
        if name == "read_references":
            return lambda obj, *, deadline: None
        raise AttributeError(name)


def with_instance_attributes() -> object:
    source = StaticSource()
    source.why_not_ready = lambda: "y"  # type: ignore[attr-defined]
    source.reference_problems = lambda obj: []  # type: ignore[attr-defined]
    return source


SOURCES = [
    pytest.param(object.__new__(ClusterState), id="ClusterState"),
    pytest.param(object.__new__(FileSource), id="FileSource"),
    pytest.param(StaticSource(), id="StaticSource"),
    pytest.param(ExplainsOnly(), id="explains only"),
    pytest.param(BothButNone(), id="members set to None"),
    pytest.param(Dynamic(), id="members from __getattr__"),
    pytest.param(with_instance_attributes(), id="members on the instance"),
]


@pytest.mark.parametrize("source", SOURCES)
def test_the_shapes_are_what_isinstance_against_the_protocols_said(source: object) -> None:
    assert (servers._explaining(source) is source) == isinstance(source, Explaining)
    assert (servers._explaining(source) is None) == (not isinstance(source, Explaining))
    assert (servers._reading(source) is source) == isinstance(source, Reading)
    assert (servers._reading(source) is None) == (not isinstance(source, Reading))


def test_the_production_source_has_both_shapes() -> None:
    cluster = object.__new__(ClusterState)
    assert servers._explaining(cluster) is cluster and servers._reading(cluster) is cluster
