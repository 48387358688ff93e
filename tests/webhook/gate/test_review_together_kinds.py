"""ReferenceGrants and BackendTLSPolicies judged together equal the same reviews judged one by one
(``webhook.gate.batchkinds``, docs/DELTA-CHECK.md rule 9): random clusters of tenants whose routes cross
into a namespace of their own, bursts of grant or policy CREATEs, UPDATEs and DELETEs (for several
tenants, twice for one, grants and policies of the shared namespaces that reach many routes, unusable
CAs, new routes among them), on every haproxy binary: each verdict judged together equals the verdict
judged alone (decision, findings, alerts, warnings with the traffic moves, status), and the shared
checks settle at least two of the kind."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import strategies as st

from tests.webhook import deltastates as ds
from tests.webhook.gate.test_review_together import (
    _differential_of,
    _judged,
    _together_and_alone,
    _without_reload_notes,
)
from validators.changes import Change, Operation
from validators.objects import Obj, ref_of
from validators.schema.crds import SchemaSet
from validators.states import MemoryState
from webhook.gate import batchkinds
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision

pytestmark = pytest.mark.haproxy
GW = ds.GW


def _meta(name: str, ns: str) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "creationTimestamp": ds.TIMES[0]}


def _plain_gateway() -> Obj:
    return {"apiVersion": GW, "kind": "Gateway", "metadata": _meta("plain", "a"),
            "spec": {"gatewayClassName": "haproxy",
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                                    "allowedRoutes": {"namespaces": {"from": "All"}}}]}}


def _secure_gateway(i: int) -> Obj:
    """An HTTPS Gateway of namespace a whose certificate is in ``t<i>``: only a grant there lets it bind."""
    return {"apiVersion": GW, "kind": "Gateway", "metadata": _meta(f"secure{i}", "a"),
            "spec": {"gatewayClassName": "haproxy",
                     "listeners": [{"name": "https", "port": 8443 + i, "protocol": "HTTPS",
                                    "tls": {"mode": "Terminate", "certificateRefs": [
                                        {"kind": "Secret", "name": "good", "namespace": f"t{i}"}]},
                                    "allowedRoutes": {"namespaces": {"from": "All"}}}]}}


def _tenant(i: int, parents: tuple[str, ...] = ("plain",)) -> list[Obj]:
    """Namespace ``t<i>`` serves Service web; namespace ``u<i>`` routes a host of its own to it (across),
    through the Gateways ``parents`` of namespace a."""
    ns = f"t{i}"
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "good", "namespace": ns},
         "type": "kubernetes.io/tls", "data": dict(ds.GOOD_PAIR)},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
         "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "web-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
         "endpoints": [{"addresses": [f"10.2.0.{i + 1}"], "conditions": {"ready": True}}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": ns},
         "data": {"ca.crt": base64.b64decode(ds.GOOD_PAIR["tls.crt"]).decode()}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca-junk", "namespace": ns},
         "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}},
        {"apiVersion": GW, "kind": "HTTPRoute", "metadata": _meta("r", f"u{i}"),
         "spec": {"parentRefs": [{"name": p, "namespace": "a"} for p in parents], "hostnames": [f"t{i}.example.com"],
                  "rules": [{"backendRefs": [{"name": "web", "namespace": ns, "port": 8080}]}]}},
    ]


def _listener_sets(draw: st.DrawFn, gateways: int, most: int) -> list[Obj]:
    """Up to ``most`` ListenerSets, each of one of the first ``gateways`` own Gateways, on ports of their own."""
    sets: list[Obj] = []
    for i in range(draw(st.integers(0, most))):
        parent = draw(st.integers(0, gateways - 1))
        sets.append({"apiVersion": GW, "kind": "ListenerSet", "metadata": _meta(f"ls{i}", "b"),
                     "spec": {"parentRef": {"name": f"own{parent}", "namespace": "a"},
                              "listeners": [draw(own_listener("x0", 9500 + 10 * i))]}})
    return sets


@st.composite
def grant(draw: st.DrawFn, i: int, name: str, source: str | None = None) -> Obj:
    """A grant in ``t<i>`` for its tenant's routes (now and then for another namespace's, or for Gateways)."""
    source = source or draw(st.sampled_from((f"u{i}", f"u{i}", "a", "b")))
    gateways = source == "a" and draw(st.integers(0, 2)) > 0  # the secure Gateways' certificates
    kind = "Gateway" if gateways else draw(st.sampled_from(("HTTPRoute", "HTTPRoute", "Gateway")))
    to = "Secret" if gateways else draw(st.sampled_from(("Service", "Service", "Secret")))
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": _meta(name, f"t{i}"),
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": kind, "namespace": source}],
                     "to": [{"group": "", "kind": to}]}}


@st.composite
def policy(draw: st.DrawFn, i: int, name: str) -> Obj:
    """A BackendTLSPolicy on ``t<i>``'s Service web: a usable CA or not, a valid hostname or not."""
    return {"apiVersion": GW, "kind": "BackendTLSPolicy", "metadata": _meta(name, f"t{i}"),
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                     "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap",
                                                           "name": draw(st.sampled_from(("ca", "ca", "ca-junk")))}],
                                    "hostname": draw(st.sampled_from(("web.example.com", "web.example.com",
                                                                      "bad host")))}}}


@st.composite
def cluster_and_references(draw: st.DrawFn, kind: str) -> tuple[list[Obj], list[Change]]:
    """A random cluster (the delta-check pools in namespaces a and b, tenants t<i>/u<i>) with stored
    grants and policies, and a burst of changes of ``kind`` (several tenants, one tenant twice, the shared
    namespaces' grants and policies, which reach many routes) with now and then a new route."""
    make = grant if kind == batchkinds.GRANT else policy
    gateways = [_plain_gateway(), *(draw(ds.gateway(f"gw{i}")) for i in range(draw(st.integers(0, 1))))]
    objects: list[Obj] = [*gateways, *ds.secrets(), *ds.endpoint_slices()]
    tenants = draw(st.integers(2, 5))
    # Gateways whose certificate is in a tenant's namespace (a grant there reaches them), which other
    # tenants' routes attach to: a grant then alters a Gateway another grant's closure renders.
    secure = [i for i in range(tenants) if draw(st.booleans())]
    objects += [_secure_gateway(i) for i in secure]
    for i in range(tenants):
        extra = [draw(st.sampled_from(secure))] if secure and draw(st.integers(0, 2)) > 0 else []
        objects += _tenant(i, ("plain", *(f"secure{j}" for j in extra)))
    for i in range(draw(st.integers(0, 3))):
        kind_of = draw(st.sampled_from(("HTTPRoute", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute")))
        objects.append(draw(ds.route(kind_of, f"r{i}", draw(st.sampled_from(ds.NAMESPACES)), gateways)))
    stored: list[Obj] = []
    for i in range(tenants):
        if draw(st.booleans()):
            stored.append(draw(make(i, "stored")))
    if draw(st.booleans()):
        stored.append(draw(ds.reference_grant("shared") if kind == batchkinds.GRANT
                           else ds.backend_tls_policy("shared")))
    objects += stored
    changes: list[Change] = []
    for k in range(draw(st.integers(2, 6))):
        what = draw(st.sampled_from(("create", "create", "update", "delete", "shared", "route", "secure", "secure")))
        if what == "secure" and secure and kind == batchkinds.GRANT:
            # a grant letting a secure Gateway bind: it alters what routes of other tenants render there
            changes.append(Change(Operation.CREATE, draw(grant(draw(st.sampled_from(secure)), f"new{k}", "a"))))
        elif what == "route":
            obj = draw(ds.route("HTTPRoute", f"new{k}", draw(st.sampled_from(ds.NAMESPACES)), gateways))
            obj["spec"]["hostnames"] = [f"new{k}.example.com"]
            changes.append(Change(Operation.CREATE, obj))
        elif what == "shared":
            new = draw(ds.reference_grant(f"new{k}") if kind == batchkinds.GRANT else ds.backend_tls_policy(f"new{k}"))
            changes.append(Change(Operation.CREATE, new))
        elif what in ("update", "delete") and stored:
            old = draw(st.sampled_from(stored))
            if what == "delete":
                changes.append(Change(Operation.DELETE, None, old))
                continue
            ns = old["metadata"]["namespace"]
            drawn = (draw(make(int(ns[1:]), old["metadata"]["name"])) if ns.startswith("t")
                     else draw(ds.reference_grant(old["metadata"]["name"]) if kind == batchkinds.GRANT
                               else ds.backend_tls_policy(old["metadata"]["name"])))
            updated: dict[str, Any] = {**copy.deepcopy(drawn), "metadata": copy.deepcopy(old["metadata"])}
            assert ref_of(updated) == ref_of(old)
            changes.append(Change(Operation.UPDATE, updated, old))
        else:
            changes.append(Change(Operation.CREATE, draw(make(draw(st.integers(0, tenants - 1)), f"new{k}"))))
    return objects, changes


def test_grants_judged_together_equal_grants_judged_alone(haproxy_paths: list[str],
                                                         schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_references(batchkinds.GRANT), lambda c: c.ref.kind == batchkinds.GRANT,
                     "ReferenceGrants", haproxy_paths, schemas)


def test_policies_judged_together_equal_policies_judged_alone(haproxy_paths: list[str],
                                                             schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_references(batchkinds.POLICY), lambda c: c.ref.kind == batchkinds.POLICY,
                     "BackendTLSPolicies", haproxy_paths, schemas)


def _cluster(tenants: int, *extra: Obj) -> MemoryState:
    objects = [_plain_gateway(), *ds.secrets(), *ds.endpoint_slices(), *extra]
    for i in range(tenants):
        objects += _tenant(i)
    return MemoryState(objects, version=f"kinds-{tenants}-{len(extra)}")


async def test_grants_of_several_tenants_share_one_check_and_one_tenant_twice_does_not(gate: Gate) -> None:
    state = _cluster(4)

    def for_tenant(i: int, name: str) -> Obj:
        return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                "metadata": _meta(name, f"t{i}"),
                "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": f"u{i}"}],
                         "to": [{"group": "", "kind": "Service"}]}}

    changes = [Change(Operation.CREATE, for_tenant(i, "g")) for i in range(4)]
    changes.append(Change(Operation.CREATE, for_tenant(0, "again")))  # reaches tenant 0's route too
    claims = [batchkinds.claim_of(c, state) for c in changes]
    assert batchkinds.groups(claims) == [[0, 1, 2, 3], [4]]
    together, alone, renders = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 5
    assert all(any("checked together with 3 other" in n for n in v.notes) for v in together[:4])
    # each grant lets its tenant's route reach Service web: the move is its own, not its neighbours'
    for i, verdict in enumerate(together[:4]):
        assert verdict.traffic is not None and verdict.traffic.moves
        assert {m.after.rule.partition(" rule ")[0] for m in verdict.traffic.moves} == {f"HTTPRoute u{i}/r"}
    # the united closures with the grants and without them; the fifth grant's own render without it
    assert renders == 3, renders


async def test_policies_on_one_service_or_reaching_one_route_are_not_judged_together(gate: Gate) -> None:
    state = _cluster(3)

    def on(i: int, name: str, ca: str = "ca") -> Obj:
        return {"apiVersion": GW, "kind": "BackendTLSPolicy", "metadata": _meta(name, f"t{i}"),
                "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                         "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}],
                                        "hostname": "web.example.com"}}}

    changes = [Change(Operation.CREATE, on(0, "p")), Change(Operation.CREATE, on(1, "p")),
               Change(Operation.CREATE, on(0, "rival")), Change(Operation.CREATE, on(2, "p", "ca-junk"))]
    claims = [batchkinds.claim_of(c, state) for c in changes]
    assert batchkinds.groups(claims) == [[0, 1, 3], [2]], "two policies of one Service: apart"
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [f.code for f in together[3].findings] == ["RG0515"], "an unusable CA: the policy's backends blocked"
    assert together[0].status and together[0].status == alone[0].status


async def test_a_grant_letting_a_gateway_bind_is_not_judged_with_a_grant_of_a_route_there(gate: Gate) -> None:
    def granting(i: int, source: str, kind: str, to: str, name: str) -> Obj:
        return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                "metadata": _meta(name, f"t{i}"),
                "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": kind, "namespace": source}],
                         "to": [{"group": "", "kind": to}]}}

    stored = granting(1, "u1", "HTTPRoute", "Service", "stored")
    # tenant 1's route is served by secure0 too, whose certificate only a grant in t0 lets it use
    state = MemoryState([_plain_gateway(), _secure_gateway(0), *ds.secrets(), *ds.endpoint_slices(), *_tenant(0),
                         *_tenant(1, ("plain", "secure0")), stored], version="kinds-secure")
    changes = [Change(Operation.DELETE, None, stored),
               Change(Operation.CREATE, granting(0, "a", "Gateway", "Secret", "g"))]
    claims = [batchkinds.claim_of(c, state) for c in changes]
    assert batchkinds.groups(claims) == [[0], [1]], "the Gateway the second grant reaches is in the first's closure"
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))


@st.composite
def own_listener(draw: st.DrawFn, name: str, port: int) -> dict[str, Any]:
    """An HTTP or HTTPS listener (a usable certificate, a broken one, a missing one), a hostname or none."""
    out: dict[str, Any] = {"name": name, "port": port, "protocol": draw(st.sampled_from(("HTTP", "HTTP", "HTTPS"))),
                           "allowedRoutes": {"namespaces": {"from": "All"}}}
    if out["protocol"] == "HTTPS":
        cert = draw(st.sampled_from(("good", "good", "junk", "missing")))
        out["tls"] = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": cert}]}
    host = draw(st.sampled_from((None, None, f"{name}.example.com", "*.example.com")))
    if host:
        out["hostname"] = host
    return out


@st.composite
def own_gateway(draw: st.DrawFn, name: str, port: int) -> Obj:
    """A Gateway of namespace a on a port of its own (now and then a second listener, on port 80: shared)."""
    listeners = [draw(own_listener("l0", port))]
    if draw(st.integers(0, 4)) == 0:
        listeners.append(draw(own_listener("l1", draw(st.sampled_from((port + 1, 80))))))
    return {"apiVersion": GW, "kind": "Gateway", "metadata": {**_meta(name, "a"), "creationTimestamp":
                                                              draw(st.sampled_from(ds.TIMES))},
            "spec": {"gatewayClassName": "haproxy", "listeners": listeners,
                     "allowedListeners": {"namespaces": {"from": "All"}}}}


def _own_route(name: str, parents: list[str], host: str) -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": _meta(name, "b"),
            "spec": {"parentRefs": [{"name": p, "namespace": "a"} for p in parents], "hostnames": [host],
                     "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}}


@st.composite
def cluster_and_sources(draw: st.DrawFn) -> tuple[list[Obj], list[Change]]:
    """Gateways on ports of their own with routes (one now and then attached to two of them), ListenerSets
    of them, and a burst of Gateway and ListenerSet CREATEs and UPDATEs: new hostnames, protocols and
    certificates, a port of their own, a port another change takes, port 80 (shared with the plain
    Gateway), with now and then a new route."""
    count = draw(st.integers(2, 4))
    gateways = [draw(own_gateway(f"own{i}", 9100 + 10 * i)) for i in range(count)]
    objects: list[Obj] = [_plain_gateway(), *gateways, *ds.secrets(), *ds.endpoint_slices()]
    for i in range(count):
        parents = [f"own{i}", *([f"own{(i + 1) % count}"] if draw(st.integers(0, 3)) == 0 else [])]
        objects.append(_own_route(f"r{i}", parents, f"r{i}.example.com"))
    sets = _listener_sets(draw, count, 2)
    objects += sets
    changes: list[Change] = []
    for k in range(draw(st.integers(2, 5))):
        what = draw(st.sampled_from(("update", "update", "update", "create", "listenerset", "route")))
        if what == "update":
            i = draw(st.integers(0, count - 1))
            old = gateways[i]
            port = draw(st.sampled_from((9100 + 10 * i, 9100 + 10 * i, 9105 + 10 * i, 9700, 80)))
            new = {**draw(own_gateway(f"own{i}", port)), "metadata": copy.deepcopy(old["metadata"])}
            changes.append(Change(Operation.UPDATE, new, old))
        elif what == "create":
            port = draw(st.sampled_from((9800 + 10 * k, 9800 + 10 * k, 9700, 80)))
            changes.append(Change(Operation.CREATE, draw(own_gateway(f"new{k}", port))))
        elif what == "listenerset":
            parent = draw(st.integers(0, count - 1))
            old_set = draw(st.sampled_from(sets)) if sets and draw(st.booleans()) else None
            name = old_set["metadata"]["name"] if old_set is not None else f"newls{k}"
            obj = {"apiVersion": GW, "kind": "ListenerSet", "metadata": _meta(name, "b"),
                   "spec": {"parentRef": {"name": f"own{parent}", "namespace": "a"},
                            "listeners": [draw(own_listener("x0", draw(st.sampled_from((9600 + 10 * k, 9700)))))]}}
            changes.append(Change(Operation.UPDATE, obj, old_set) if old_set is not None
                           else Change(Operation.CREATE, obj))
        else:
            parents = [f"own{draw(st.integers(0, count - 1))}"]
            changes.append(Change(Operation.CREATE, _own_route(f"new{k}", parents, f"new{k}.example.com")))
    return objects, changes


def test_gateways_judged_together_equal_gateways_judged_alone(haproxy_paths: list[str],
                                                             schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_sources(), lambda c: c.ref.kind in batchkinds.SOURCES,
                     "Gateways and ListenerSets", haproxy_paths, schemas)


async def test_gateways_on_ports_of_their_own_share_one_check_and_a_shared_port_does_not(gate: Gate) -> None:
    def on(name: str, port: int) -> Obj:
        return {"apiVersion": GW, "kind": "Gateway", "metadata": _meta(name, "a"),
                "spec": {"gatewayClassName": "haproxy", "listeners": [
                    {"name": "l0", "port": port, "protocol": "HTTP",
                     "allowedRoutes": {"namespaces": {"from": "All"}}}]}}

    routes = [_own_route(f"r{i}", [f"n{i}"], f"r{i}.example.com") for i in range(5)]
    state = MemoryState([_plain_gateway(), *ds.secrets(), *ds.endpoint_slices(), *routes], version="kinds-gateways")
    # n0..n2 on ports of their own; n3 on the port n2 takes (apart); n4 on port 80, the plain Gateway's
    # (a pod port for n4: the pool every isolated Gateway draws from changes, so it goes alone)
    changes = [Change(Operation.CREATE, on(f"n{i}", port)) for i, port in enumerate((9100, 9110, 9120, 9120, 80))]
    claims = [batchkinds.claim_of(c, state) for c in changes]
    assert batchkinds.groups(claims) == [[0, 1, 2], [3], [4]]
    assert claims[4].sort == "alone"
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 5
    assert all(any("checked together with 2 other" in n for n in v.notes) for v in together[:3])
    for i, verdict in enumerate(together[:3]):  # each Gateway's new entry point serves its own route only
        assert verdict.traffic is not None and verdict.traffic.moves
        assert {m.after.rule.partition(" rule ")[0] for m in verdict.traffic.moves} == {f"HTTPRoute b/r{i}"}


@st.composite
def cluster_and_source_deletes(draw: st.DrawFn) -> tuple[list[Obj], list[Change]]:
    """Gateways on ports of their own with routes (one now and then attached to two of them, or to a
    ListenerSet), ListenerSets of them, a Gateway sharing port 80 with the plain one, and a burst deleting
    several Gateways and ListenerSets (their routes left unattached), with Gateway updates and new routes
    among the deletes."""
    count = draw(st.integers(3, 5))
    gateways = [draw(own_gateway(f"own{i}", 9100 + 10 * i)) for i in range(count)]
    sets = _listener_sets(draw, count, 3)
    sharing = _own_gateway_on("shares80", 80)
    objects: list[Obj] = [_plain_gateway(), sharing, *gateways, *sets, *ds.secrets(), *ds.endpoint_slices()]
    objects.append(_own_route("r80", ["shares80"], "r80.example.com"))
    for i in range(count):
        parents = [f"own{i}", *([f"own{(i + 1) % count}"] if draw(st.integers(0, 3)) == 0 else [])]
        objects.append(_own_route(f"r{i}", parents, f"r{i}.example.com"))
    for i, listener_set in enumerate(sets):
        route = _own_route(f"s{i}", [], f"s{i}.example.com")
        route["spec"]["parentRefs"] = [{"kind": "ListenerSet", "name": listener_set["metadata"]["name"],
                                        "namespace": "b"}]
        objects.append(route)
    deletable = [*gateways, *sets, *([sharing] if draw(st.integers(0, 3)) == 0 else [])]
    deleted = draw(st.lists(st.sampled_from(deletable), min_size=2, max_size=len(deletable),
                            unique_by=lambda o: str(ref_of(o))))
    changes = [Change(Operation.DELETE, None, old) for old in deleted]
    for k in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            i = draw(st.integers(0, count - 1))
            old = gateways[i]
            new = {**draw(own_gateway(f"own{i}", 9100 + 10 * i)), "metadata": copy.deepcopy(old["metadata"])}
            change = Change(Operation.UPDATE, new, old)
        else:
            change = Change(Operation.CREATE, _own_route(f"new{k}", [f"own{draw(st.integers(0, count - 1))}"],
                                                         f"new{k}.example.com"))
        changes.insert(draw(st.integers(0, len(changes))), change)
    return objects, changes


def _own_gateway_on(name: str, port: int) -> Obj:
    return {"apiVersion": GW, "kind": "Gateway", "metadata": _meta(name, "a"),
            "spec": {"gatewayClassName": "haproxy", "listeners": [
                {"name": "l0", "port": port, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}],
                     "allowedListeners": {"namespaces": {"from": "All"}}}}


def test_gateway_and_listenerset_deletes_judged_together_equal_them_judged_alone(
        haproxy_paths: list[str], schemas: SchemaSet | None) -> None:
    _differential_of(cluster_and_source_deletes(),
                     lambda c: c.ref.kind in batchkinds.SOURCES and c.operation is Operation.DELETE,
                     "Gateway and ListenerSet deletes", haproxy_paths, schemas)


async def test_gateway_deletes_on_ports_of_their_own_share_one_check_and_a_shared_one_does_not(
        gate: Gate) -> None:
    gateways = [_own_gateway_on(f"n{i}", 9100 + 10 * i) for i in range(4)]
    shares = _own_gateway_on("n4", 80)  # port 80 with the plain Gateway: alone
    routes = [_own_route(f"r{i}", [f"n{i}"], f"r{i}.example.com") for i in (0, 2, 3, 4)]
    routes.append(_own_route("r1", ["n1", "n0"], "r1.example.com"))  # n0 stays: n1's closure binds without it
    routes.append(_own_route("both", ["n2", "n3"], "both.example.com"))  # n2 and n3: apart
    listener_set = {"apiVersion": GW, "kind": "ListenerSet", "metadata": _meta("ls", "b"),
                    "spec": {"parentRef": {"name": "n1", "namespace": "a"},
                             "listeners": [{"name": "x0", "port": 9500, "protocol": "HTTP"}]}}
    on_set = _own_route("on-set", [], "on-set.example.com")
    on_set["spec"]["parentRefs"] = [{"kind": "ListenerSet", "name": "ls", "namespace": "b"}]
    state = MemoryState([_plain_gateway(), *gateways, shares, listener_set, on_set, *routes, *ds.secrets(),
                         *ds.endpoint_slices()], version="kinds-gateway-deletes")
    changes = [Change(Operation.DELETE, None, o) for o in (gateways[1], gateways[2], gateways[3], shares)]
    changes.append(Change(Operation.DELETE, None, listener_set))  # of n1, deleted too: apart from n1
    claims = [batchkinds.claim_of(c, state) for c in changes]
    assert batchkinds.groups(claims) == [[0, 1], [2, 4], [3]]
    assert claims[3].sort == "alone"
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert [v.decision for v in together] == [Decision.ALLOW] * 5
    assert all(any("checked together with 1 other" in n for n in together[i].notes) for i in (0, 1, 2, 4))
    # Each delete's moves are those of its own routes: n1's (r1 leaves port 9110, still served by n0 on
    # 9100; the ListenerSet's route leaves 9500: its listeners are n1's frontends), n2's (r2, and the
    # route it shares with n3), the ListenerSet's (its route only)
    owned = {0: {"HTTPRoute b/r1", "HTTPRoute b/on-set"}, 1: {"HTTPRoute b/r2", "HTTPRoute b/both"},
             2: {"HTTPRoute b/r3", "HTTPRoute b/both"}, 4: {"HTTPRoute b/on-set"}}
    for i, routes_of in owned.items():
        traffic = together[i].traffic
        assert traffic is not None and traffic.moves
        assert {m.before.rule.partition(" rule ")[0] for m in traffic.moves} <= routes_of, i


async def test_a_gateway_delete_leaving_only_an_orphaned_listenerset_goes_alone(gate: Gate) -> None:
    """Its closure lists its ListenerSet as what binds, but without its Gateway the ListenerSet renders
    nothing: the lone review's closure binds nothing and the whole state decides it."""
    gateway = _own_gateway_on("n1", 9110)
    listener_set = {"apiVersion": GW, "kind": "ListenerSet", "metadata": _meta("ls", "b"),
                    "spec": {"parentRef": {"name": "n1", "namespace": "a"},
                             "listeners": [{"name": "x0", "port": 9500, "protocol": "HTTP"}]}}
    other = _own_gateway_on("n2", 9120)
    on_set = _own_route("on-set", [], "on-set.example.com")
    on_set["spec"]["parentRefs"] = [{"kind": "ListenerSet", "name": "ls", "namespace": "b"}]
    # a stored route HAProxy rejects, outside both closures: only a review of the whole state meets it
    broken = _own_route("broken", ["plain"], "broken.example.com")
    broken["spec"]["rules"] = [{"matches": [{"path": {"type": "RegularExpression", "value": "/a{2,1}"}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]
    # n0 stays: the closure of n2's delete binds by it (its first Gateway), n1's by its ListenerSet only
    state = MemoryState([_plain_gateway(), _own_gateway_on("n0", 9100), gateway, listener_set, other, on_set, broken,
                         _own_route("r0", ["n0"], "r0.example.com"), _own_route("r1", ["n1"], "r1.example.com"),
                         _own_route("r2", ["n2"], "r2.example.com"), *ds.secrets(), *ds.endpoint_slices()],
                        version="kinds-orphan")
    changes = [Change(Operation.DELETE, None, gateway), Change(Operation.DELETE, None, other)]
    claims = [batchkinds.claim_of(c, state) for c in changes]
    assert [c.sort for c in claims] == ["alone", "source"]
    assert batchkinds.groups(claims) == [[0], [1]]
    together, alone, _ = await _together_and_alone(gate, changes, state)
    assert _judged(_without_reload_notes(together)) == _judged(_without_reload_notes(alone))
    assert any("HTTPRoute b/broken" in n for n in alone[0].notes), "the whole state decided n1's delete"
