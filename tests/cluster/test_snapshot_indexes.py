"""A cluster snapshot's lookups patched from the previous snapshot's (validators.views.indexes) equal the ones
scanned from scratch, over random sequences of watch events, relists and reviews between them."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.objects import Obj, Ref
from validators.views import indexes
from webhook.cluster.clusterstate import ClusterState

KINDS = ("HTTPRoute", "GRPCRoute")
HOSTS = ("a.example.com", "b.example.com", "*.example.com")


def _keys(route: Obj) -> list[tuple[str, ...]]:
    hosts = route["spec"].get("hostnames") or []
    return [("any",)] if not hosts or any(h.startswith("*") for h in hosts) else [("host", h) for h in hosts]


def _route(kind: str, namespace: str, name: str, hosts: list[str]) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"hostnames": hosts}}


event = st.tuples(st.sampled_from(("put", "put", "delete", "relist", "review", "review")), st.sampled_from(KINDS),
                  st.sampled_from(("n1", "n2")), st.sampled_from(("r1", "r2", "r3", "r4")),
                  st.lists(st.sampled_from(HOSTS), max_size=2, unique=True))


@settings(max_examples=80, deadline=None)
@given(st.lists(event, max_size=40))
def test_patched_lookups_equal_a_rescan(events: list[tuple[str, str, str, str, list[str]]]) -> None:
    cluster = ClusterState(cast(Any, None), kinds=list(KINDS))
    stores = cluster._stores
    universe = [("any",), *(("host", h) for h in HOSTS)]
    for op, kind, namespace, name, hosts in events:
        store = stores[kind]
        if op == "put":
            store.put((namespace, name), _route(kind, namespace, name, hosts))
        elif op == "delete":
            store.delete((namespace, name))
        elif op == "relist":  # a whole-store replace: what changed is unknown, the lookup is rescanned
            store.replace({(namespace, name): _route(kind, namespace, name, hosts)})
        else:
            snapshot = cluster.snapshot()
            got = indexes.refs_by_key(snapshot, "test-hosts", KINDS, _keys)
            scanned = indexes._scan(snapshot, KINDS, _keys)
            assert {k: list(got.get(k)) for k in universe} == {k: list(scanned.get(k)) for k in universe}


def test_a_route_put_between_two_reviews_takes_its_place_in_order() -> None:
    cluster = ClusterState(cast(Any, None), kinds=list(KINDS))
    routes = cluster._stores["HTTPRoute"]
    routes.put(("n1", "r2"), _route("HTTPRoute", "n1", "r2", ["a.example.com"]))
    first = cluster.snapshot()
    indexes.refs_by_key(first, "test-order", KINDS, _keys)
    routes.put(("n1", "r1"), _route("HTTPRoute", "n1", "r1", ["a.example.com"]))
    second = cluster.snapshot()
    assert second.prior() == (first, frozenset({Ref("HTTPRoute", "n1", "r1")}))
    got = indexes.refs_by_key(second, "test-order", KINDS, _keys).get(("host", "a.example.com"))
    assert [r.name for r in got] == ["r1", "r2"]
