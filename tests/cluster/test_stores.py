"""Stores, slimming and reference discovery: the pure parts of the cluster package."""

from __future__ import annotations

from typing import Any

import pytest

from validators.views import indexes
from webhook.cluster import referencewatches, slimming
from webhook.cluster.stores import ClusterSnapshot, Store


def obj(name: str, ns: str = "n", **spec: Any) -> dict[str, Any]:
    return {"kind": "HTTPRoute", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_a_view_never_changes_after_it_was_handed_out() -> None:
    changes: list[str] = []
    store = Store("HTTPRoute", changes.append)
    store.put(("n", "b"), obj("b"))
    view = store.view()
    store.put(("n", "a"), obj("a"))
    store.delete(("n", "b"))
    assert [o["metadata"]["name"] for o in view.sorted()] == ["b"]
    assert [o["metadata"]["name"] for o in store.view().sorted()] == ["a"]
    assert changes == ["HTTPRoute"] * 3


def test_equal_writes_are_not_changes() -> None:
    changes: list[str] = []
    store = Store("HTTPRoute", changes.append)
    assert store.put(("n", "a"), obj("a", x=1))
    assert not store.put(("n", "a"), obj("a", x=1))
    assert not store.replace({("n", "a"): obj("a", x=1)})
    assert not store.delete(("n", "zz"))
    assert store.replace({("n", "b"): obj("b")})
    assert changes == ["HTTPRoute"] * 2


def test_a_scoped_replace_only_touches_its_own_key() -> None:
    store = Store("Secret")
    store.put(("n", "a"), obj("a"))
    store.put(("n", "b"), obj("b"))
    assert store.replace({}, lambda key: key == ("n", "a"))
    assert [o["metadata"]["name"] for o in store.view().sorted()] == ["b"]


def test_views_share_their_sorted_list_until_a_change() -> None:
    store = Store("HTTPRoute")
    store.put(("n", "a"), obj("a"))
    first = ClusterSnapshot({"HTTPRoute": store.view()}, 1)
    second = ClusterSnapshot({"HTTPRoute": store.view()}, 1)
    assert first.list("HTTPRoute") is second.list("HTTPRoute")
    assert first.list("Gateway") == ()
    assert first.get("HTTPRoute", "n", "a") is not None and first.get("HTTPRoute", "x", "a") is None


def test_slim_keeps_what_rendering_reads() -> None:
    raw = {
        "metadata": {
            "name": "a",
            "namespace": "n",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 3,
            "labels": {"app": "x"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl"}],
            "ownerReferences": [{"name": "o"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "routegate.io/x": "1"},
        },
        "spec": {"hostnames": ["h"]},
        "status": {"parents": []},
    }
    slim = slimming.slim(raw, kind="HTTPRoute", api_version="gateway.networking.k8s.io/v1")
    assert slim == {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {
            "name": "a",
            "namespace": "n",
            "uid": "u",
            "generation": 3,
            "labels": {"app": "x"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"routegate.io/x": "1"},
        },
        "spec": {"hostnames": ["h"]},
    }
    ns = slimming.slim(
        {
            "metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        },
        kind="Namespace",
        api_version="v1",
    )
    assert ns == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {"a": "b"}}}


GATEWAY_SPEC = {
    "listeners": [
        {
            "name": "a",
            "tls": {
                "certificateRefs": [
                    {"name": "s1"},
                    {"name": "s2", "namespace": "other"},
                    {"group": "example.com", "kind": "Vault", "name": "v"},
                ]
            },
        },
        {"name": "b"},
    ],
    "tls": {
        "frontend": {
            "default": {"validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "client-ca"}]}}
        },
        "backend": {"clientCertificateRef": {"name": "client-cert"}},
    },
}


@pytest.mark.parametrize(
    ("kind", "spec", "expected"),
    [
        pytest.param(
            "Gateway",
            GATEWAY_SPEC,
            {
                ("Secret", "n", "s1"),
                ("Secret", "other", "s2"),
                ("ConfigMap", "n", "client-ca"),
                ("Secret", "n", "client-cert"),
            },
            id="gateway listeners, frontend CA and backend client certificate",
        ),
        pytest.param(
            "BackendTLSPolicy",
            {
                "validation": {
                    "caCertificateRefs": [
                        {"group": "", "kind": "ConfigMap", "name": "ca"},
                        {"group": "", "kind": "Secret", "name": "ca2"},
                    ]
                }
            },
            {("ConfigMap", "n", "ca"), ("Secret", "n", "ca2")},
            id="backend TLS policy CA references",
        ),
        pytest.param("Gateway", {"listeners": "garbage"}, set(), id="malformed specs reference nothing"),
        pytest.param(
            "Gateway",
            {"listeners": [{"tls": {"certificateRefs": [{"name": ""}, "x", None]}}]},
            set(),
            id="references without a name are ignored",
        ),
    ],
)
def test_referenced_secrets_and_configmaps(kind: str, spec: Any, expected: set[tuple[str, str, str]]) -> None:
    referrer = {"kind": kind, "metadata": {"name": "g", "namespace": "n"}, "spec": spec}
    assert referencewatches.referenced([referrer]) == expected


def test_a_snapshot_keeps_its_lookup_indexes() -> None:
    """A render looks an index up once per backend; over a live snapshot it must be built once."""
    store = Store("HTTPRoute")
    store.put(("n", "a"), obj("a"))
    snapshot = ClusterSnapshot({"HTTPRoute": store.view()}, 1)
    builds: list[str] = []

    def build(state: Any) -> int:
        builds.append(state.version)
        return len(state.list("HTTPRoute"))

    assert [indexes.index(snapshot, "routes", build) for _ in range(3)] == [1, 1, 1]
    assert builds == ["1"]
    store.put(("n", "b"), obj("b"))
    newer = ClusterSnapshot({"HTTPRoute": store.view()}, 2)
    assert indexes.index(newer, "routes", build) == 2
    assert builds == ["1", "2"]
