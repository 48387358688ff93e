"""validators.views.indexes: lookups built once per state version, rebuilt when the version moves on."""

from __future__ import annotations

from collections.abc import Sequence

from validators.crossobject import backendpolicies, backendrefs
from validators.objects import Obj
from validators.states import MemoryState
from validators.views import attachments

GRANT: Obj = {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
              "metadata": {"name": "g", "namespace": "b"},
              "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "a"}],
                       "to": [{"group": "", "kind": "Service"}]}}
SERVICE: Obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "b"},
                "spec": {"ports": [{"name": "https", "port": 443}]}}


def policy(name: str, created: str, section: str = "") -> Obj:
    target = {"group": "", "kind": "Service", "name": "s", **({"sectionName": section} if section else {})}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": name, "namespace": "b", "creationTimestamp": created},
            "spec": {"targetRefs": [target],
                     "validation": {"hostname": f"{name}.example.com", "wellKnownCACertificates": "System"}}}


class Mutable:
    """A State whose content changes in place, announcing each change with a new version."""

    def __init__(self, objects: Sequence[Obj]) -> None:
        self._n = 0
        self.set(objects)

    def set(self, objects: Sequence[Obj]) -> None:
        self._inner = MemoryState(objects)
        self._n += 1

    @property
    def version(self) -> str:
        return str(self._n)

    def list(self, kind: str) -> Sequence[Obj]:
        return self._inner.list(kind)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._inner.get(kind, namespace, name)


def allows(state: Mutable) -> bool:
    return backendrefs.grant_allows(state, from_kind="HTTPRoute", from_namespace="a", to_kind="Service",
                                   to_namespace="b", to_name="s")


def test_a_new_version_rebuilds_the_grant_index() -> None:
    state = Mutable([])
    assert not allows(state)
    state.set([GRANT])
    assert allows(state)
    state.set([])
    assert not allows(state)


def test_policy_for_keeps_section_over_whole_service_then_oldest() -> None:
    state = Mutable([SERVICE, policy("young", "2024-02-01T00:00:00Z"), policy("old", "2024-01-01T00:00:00Z")])
    got = backendpolicies.policy_for(state, SERVICE, 443)
    assert got is not None and got.policy.name == "old"
    state.set([SERVICE, policy("old", "2024-01-01T00:00:00Z"), policy("named", "2024-03-01T00:00:00Z", "https")])
    got = backendpolicies.policy_for(state, SERVICE, 443)
    assert got is not None and got.policy.name == "named"
    assert backendpolicies.policy_for(state, {**SERVICE, "metadata": {"name": "t", "namespace": "b"}}, 443) is None


def test_a_new_version_rebuilds_the_listeners_a_route_attaches_to() -> None:
    route: Obj = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                  "metadata": {"name": "r", "namespace": "a"}, "spec": {"parentRefs": [{"name": "gw"}]}}
    gateway: Obj = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                    "metadata": {"name": "gw", "namespace": "a"},
                    "spec": {"gatewayClassName": "c", "listeners": [{"name": "h", "protocol": "HTTP", "port": 80}]}}
    state = Mutable([route, gateway])
    assert [a.listener.port for a in attachments.attach(route, state)[0]] == [80]
    gateway["spec"]["listeners"][0]["port"] = 8080
    state.set([route, gateway])
    assert [a.listener.port for a in attachments.attach(route, state)[0]] == [8080]
