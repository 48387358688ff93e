"""The closure index of a cluster snapshot, patched from the previous snapshot's (validators.views.closures),
and of a review's Overlay, derived from its base's, equal the index scanned from scratch, over random
sequences of watch events and reviews of every kind the index reads."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.changes import Change, Operation
from validators.objects import Obj, Ref
from validators.states import Overlay
from validators.views import closures, indexes
from webhook.cluster.clusterstate import ClusterState

GW = "gateway.networking.k8s.io/v1"
KINDS = ("Namespace", "Gateway", "ListenerSet", "HTTPRoute", "TLSRoute", "EndpointSlice", "BackendTLSPolicy",
         "ReferenceGrant")
# routes and Gateways most often, so that routes attach and listener changes move them
WEIGHTED = (*KINDS, "Gateway", "HTTPRoute", "HTTPRoute", "HTTPRoute", "TLSRoute")
SPACES = ("n1", "n2")
NAMES = ("a", "b")
HOSTS = ("a.example.com", "*.example.com")


def _meta(namespace: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "creationTimestamp": f"2026-01-01T00:00:0{len(name)}Z", **extra}


def _allowed(allowed: str) -> dict[str, Any]:
    return {"from": allowed, **({"selector": {"matchLabels": {"team": "x"}}} if allowed == "Selector" else {})}


def _listener(port: int, protocol: str, host: str | None, allowed: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"l{port}{protocol.lower()}", "port": port, "protocol": protocol,
                           "allowedRoutes": {}}
    out["allowedRoutes"]["namespaces"] = _allowed(allowed)
    if host is not None:
        out["hostname"] = host
    if protocol in ("HTTPS", "TLS"):
        out["tls"] = ({"mode": "Passthrough"} if protocol == "TLS" else
                      {"certificateRefs": [{"name": "cert", "namespace": "n2"}]})
    return out


listeners = st.lists(st.builds(_listener, st.sampled_from((80, 443, 8443)), st.sampled_from(("HTTP", "HTTPS", "TLS")),
                               st.sampled_from((None, *HOSTS)), st.sampled_from(("Same", "All", "Selector"))),
                     min_size=1, max_size=2)


@st.composite
def objects(draw: st.DrawFn) -> Obj:
    kind = draw(st.sampled_from(WEIGHTED))
    namespace, name = draw(st.sampled_from(SPACES)), draw(st.sampled_from(NAMES))
    parent: dict[str, Any] = {"name": draw(st.sampled_from(NAMES))}
    if draw(st.integers(0, 3)) == 0:
        parent["namespace"] = draw(st.sampled_from(SPACES))
    if kind == "Namespace":
        labels = draw(st.sampled_from(({}, {"team": "x"})))
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": namespace, "labels": labels}}
    if kind == "Gateway":
        return {"apiVersion": GW, "kind": kind, "metadata": _meta(namespace, name),
                "spec": {"gatewayClassName": "haproxy", "listeners": draw(listeners),
                         "allowedListeners": {"namespaces": _allowed(draw(st.sampled_from(("All", "Same",
                                                                                             "Selector"))))}}}
    if kind == "ListenerSet":
        return {"apiVersion": GW, "kind": kind, "metadata": _meta(namespace, name),
                "spec": {"parentRef": {**parent, "kind": "Gateway", "group": "gateway.networking.k8s.io"},
                         "listeners": draw(listeners)}}
    if kind in ("HTTPRoute", "TLSRoute"):
        parents = [{**parent, "kind": draw(st.sampled_from(("Gateway", "ListenerSet")))}
                   for _ in range(draw(st.integers(0, 2)))]
        backends = [{"name": draw(st.sampled_from(NAMES)), "port": 80,
                     **({"namespace": draw(st.sampled_from(SPACES))} if draw(st.booleans()) else {})}
                    for _ in range(draw(st.integers(0, 2)))]
        return {"apiVersion": GW, "kind": kind, "metadata": _meta(namespace, name),
                "spec": {"parentRefs": parents, "hostnames": draw(st.lists(st.sampled_from(HOSTS), max_size=2)),
                         "rules": [{"backendRefs": backends}]}}
    if kind == "EndpointSlice":
        return {"apiVersion": "discovery.k8s.io/v1", "kind": kind,
                "metadata": _meta(namespace, name, labels={"kubernetes.io/service-name": draw(st.sampled_from(NAMES))})}
    if kind == "BackendTLSPolicy":
        return {"apiVersion": "gateway.networking.k8s.io/v1alpha3", "kind": kind, "metadata": _meta(namespace, name),
                "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": draw(st.sampled_from(NAMES))}]}}
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": kind, "metadata": _meta(namespace, name),
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                               "namespace": draw(st.sampled_from(SPACES))}], "to": [{"group": "", "kind": "Service"}]}}


def _key(obj: Obj) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


event = st.one_of(st.tuples(st.sampled_from(("put", "delete", "review", "review-delete")), objects()),
                  st.tuples(st.just("snapshot"), st.none()))


@settings(max_examples=60, deadline=None)
@given(st.lists(objects(), max_size=16), st.lists(event, max_size=30))
def test_patched_closure_index_equals_a_scan(initial: list[Obj], events: list[tuple[str, Obj | None]]) -> None:
    cluster = ClusterState(cast(Any, None), kinds=list(KINDS))
    stores = cluster._stores
    for first in initial:
        stores[first["kind"]].put(_key(first), first)
    snapshot = cluster.snapshot()
    index = closures.scan_index(snapshot)
    for op, obj in [*events, ("snapshot", None)]:
        if op == "put":
            assert obj is not None
            stores[obj["kind"]].put(_key(obj), obj)
            continue
        if op == "delete":
            assert obj is not None
            stores[obj["kind"]].delete(_key(obj))
            continue
        current = cluster.snapshot()
        if current is not snapshot:
            link = current.prior()
            assert link is not None and link[0] is snapshot
            index = closures.patch_index(index, snapshot, current, link[1])
            assert index == closures.scan_index(current)
            snapshot = current
        if op.startswith("review"):  # an Overlay of one change on the snapshot: the index derived from its base's
            assert obj is not None
            old = snapshot.get(obj["kind"], *_key(obj))
            if op == "review-delete":
                change = Change(Operation.DELETE, None, obj)
            else:
                change = Change(Operation.CREATE if old is None else Operation.UPDATE, obj, old)
            proposed = Overlay(snapshot, change)
            derived = closures.patch_index(index, snapshot, proposed, [change.ref], layered=True)
            assert derived == closures.scan_index(proposed)
            assert index == closures.scan_index(snapshot)  # the base's tables are left as they were


def _route(name: str, host: str) -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": _meta("n1", name),
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [host], "rules": [{"backendRefs": [{"name": "s"}]}]}}


def test_a_new_snapshot_patches_the_cached_index_instead_of_scanning(monkeypatch: Any) -> None:
    cluster = ClusterState(cast(Any, None), kinds=list(KINDS))
    stores = cluster._stores
    stores["Gateway"].put(("n1", "gw"), {"apiVersion": GW, "kind": "Gateway", "metadata": _meta("n1", "gw"),
                                          "spec": {"listeners": [_listener(80, "HTTP", None, "Same")]}})
    stores["HTTPRoute"].put(("n1", "r1"), _route("r1", "a.example.com"))
    first = closures.index_of(cluster.snapshot())
    stores["HTTPRoute"].put(("n1", "r2"), _route("r2", "a.example.com"))
    scans: list[object] = []
    monkeypatch.setattr(closures, "scan_index", lambda state: scans.append(state))
    second = closures.index_of(cluster.snapshot())
    assert not scans
    assert second.claimants[("http", 80, "a.example.com")] == {Ref("HTTPRoute", "n1", "r1"),
                                                              Ref("HTTPRoute", "n1", "r2")}
    assert first.claimants[("http", 80, "a.example.com")] == {Ref("HTTPRoute", "n1", "r1")}  # left as it was
    assert indexes.peek(cluster.snapshot(), "closure") is second
    proposed = Overlay(cluster.snapshot(), Change(Operation.DELETE, None, _route("r1", "a.example.com")))
    third = closures.index_of(proposed)
    assert not scans
    assert third.claimants[("http", 80, "a.example.com")] == {Ref("HTTPRoute", "n1", "r2")}


def test_a_namespace_label_change_moves_the_routes_of_selector_listeners() -> None:
    cluster = ClusterState(cast(Any, None), kinds=list(KINDS))
    stores = cluster._stores
    stores["Gateway"].put(("n1", "gw"), {"apiVersion": GW, "kind": "Gateway", "metadata": _meta("n1", "gw"),
                                          "spec": {"listeners": [_listener(80, "HTTP", None, "Selector")]}})
    route = _route("r1", "a.example.com")
    route["metadata"]["namespace"] = "n2"
    route["spec"]["parentRefs"] = [{"name": "gw", "namespace": "n1"}]
    stores["HTTPRoute"].put(("n2", "r1"), route)
    stores["Namespace"].put(("", "n2"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n2"}})
    before = cluster.snapshot()
    index = closures.scan_index(before)
    assert index.keys[Ref("HTTPRoute", "n2", "r1")] == set()
    for labels in ({"team": "x"}, {}):
        stores["Namespace"].put(("", "n2"), {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": "n2", "labels": labels}})
        after = cluster.snapshot()
        link = after.prior()
        assert link is not None
        index = closures.patch_index(index, before, after, link[1])
        assert index == closures.scan_index(after)
        assert bool(index.keys[Ref("HTTPRoute", "n2", "r1")]) == bool(labels)
        before = after
