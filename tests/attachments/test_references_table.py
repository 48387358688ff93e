"""Backend reference resolution and ReferenceGrant (validators.crossobject.backendrefs), plus endpoints.servers_for."""

from __future__ import annotations

from typing import Any

import pytest

from haproxy_check.render import endpoints
from tests.attachments.gwbuilders import endpoint_slice, grant, parent, route, service
from validators.crossobject import backendrefs
from validators.objects import Obj
from validators.states import MemoryState


def refs(kind: str, backend: dict[str, Any], *objs: Obj, ns: str = "app") -> list[tuple[Any, ...]]:
    r = route(kind, "r", parent("gw"), ns=ns, rules=[{"backendRefs": [backend]}])
    return [(b.reason, b.kind, b.namespace, b.name, b.port, b.weight, b.resolved)
            for b in backendrefs.backend_refs(r, MemoryState([*objs, r]))]


@pytest.mark.parametrize(("kind", "backend", "objs", "want"), [
    pytest.param("HTTPRoute", {"name": "s", "port": 80}, [service("s", "app")],
                 ("ResolvedRefs", "Service", "app", "s", 80, 1, True), id="defaults: Service, weight 1, own ns"),
    pytest.param("HTTPRoute", {"name": "s", "port": 80, "weight": 0}, [service("s", "app")],
                 ("ResolvedRefs", "Service", "app", "s", 80, 0, True), id="weight 0 kept"),
    pytest.param("HTTPRoute", {"name": "s", "port": 80}, [],
                 ("BackendNotFound", "Service", "app", "s", 80, 1, False), id="missing Service"),
    pytest.param("HTTPRoute", {"name": "s", "kind": "Bucket", "group": "x.io"}, [],
                 ("InvalidKind", "Bucket", "app", "s", None, 1, False), id="other kind"),
    pytest.param("GRPCRoute", {"name": "s", "namespace": "other", "port": 80}, [service("s", "other")],
                 ("RefNotPermitted", "Service", "other", "s", 80, 1, False), id="cross ns without grant"),
    pytest.param("GRPCRoute", {"name": "s", "namespace": "other", "port": 80},
                 [service("s", "other"), grant("other", "GRPCRoute", "app")],
                 ("ResolvedRefs", "Service", "other", "s", 80, 1, True), id="cross ns with grant"),
    pytest.param("GRPCRoute", {"name": "s", "namespace": "other", "port": 80},
                 [service("s", "other"), grant("other", "HTTPRoute", "app")],
                 ("RefNotPermitted", "Service", "other", "s", 80, 1, False), id="grant for another kind"),
    pytest.param("TCPRoute", {"name": "s", "namespace": "other", "port": 80},
                 [service("s", "other"), grant("other", "TCPRoute", "app", to_name="t")],
                 ("RefNotPermitted", "Service", "other", "s", 80, 1, False), id="grant for another name"),
    pytest.param("TLSRoute", {"name": "s"}, [service("s", "app")],
                 ("ResolvedRefs", "Service", "app", "s", 443, 1, True), id="TLSRoute port defaults to 443"),
])
def test_backend_refs(kind: str, backend: dict[str, Any], objs: list[Obj], want: tuple[Any, ...]) -> None:
    assert refs(kind, backend, *objs) == [want]


def test_grant_allows_gateway_secret() -> None:
    state = MemoryState([grant("certs", "Gateway", "infra", to_kind="Secret", to_name="wild")])
    kw = {"from_kind": "Gateway", "from_namespace": "infra", "to_kind": "Secret", "to_namespace": "certs"}
    assert backendrefs.grant_allows(state, **kw, to_name="wild")
    assert not backendrefs.grant_allows(state, **kw, to_name="other")
    assert not backendrefs.grant_allows(state, **{**kw, "from_namespace": "x"}, to_name="wild")
    assert backendrefs.grant_allows(state, **{**kw, "to_namespace": "infra"}, to_name="any")


def test_servers_for_ready_endpoints_by_port_name() -> None:
    svc = service("s", "app", ("http", 80), ("admin", 9000))
    slices = [
        endpoint_slice("s-1", "s", "app", [("http", 8080), ("admin", 9001)],
                       [("10.0.0.9", True), ("10.0.0.2", None), ("10.0.0.3", False), ("bad;addr", True)]),
        endpoint_slice("s-2", "s", "app", [("http", 8080)], [("10.0.0.10", True)]),
        endpoint_slice("x-1", "x", "app", [("http", 8080)], [("10.9.9.9", True)]),
        endpoint_slice("s-3", "s", "other", [("http", 8080)], [("10.8.8.8", True)]),
    ]
    state = MemoryState([svc, *slices])
    got = [(s.name, s.address, s.port, s.weight) for s in endpoints.servers_for(state, svc, 80, weight=3)]
    assert got == [("s1", "10.0.0.2", 8080, 3), ("s2", "10.0.0.9", 8080, 3), ("s3", "10.0.0.10", 8080, 3)]
    assert [(s.address, s.port) for s in endpoints.servers_for(state, svc, 9000)] == [
        ("10.0.0.2", 9001), ("10.0.0.9", 9001)]
    assert endpoints.servers_for(state, svc, 1234) == []
    assert endpoints.servers_for(MemoryState([svc]), svc, 80) == []


def test_address_change_keeps_server_names() -> None:
    svc = service("s", "app", ("http", 80))
    before = MemoryState([svc, endpoint_slice("e", "s", "app", [("http", 80)], [("10.0.0.1", True),
                                                                                 ("10.0.0.5", True)])])
    after = MemoryState([svc, endpoint_slice("e", "s", "app", [("http", 80)], [("10.0.0.1", True),
                                                                                ("10.0.0.7", True)])])
    def names(st: MemoryState) -> list[str]:
        return [s.name for s in endpoints.servers_for(st, svc, 80)]

    assert names(before) == names(after) == ["s1", "s2"]
