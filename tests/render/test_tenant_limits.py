"""What one tenant's objects can add to everyone's check (issue 16, item 2): servers per backend
(EndpointSlices: capped with a warning, never a denial), matches x hostnames per rule and lines per
route (routes: denied on the field)."""

from __future__ import annotations

from typing import Any

import pytest

from haproxy_check.render.rendering import Renderer, RenderSettings
from tests.render.conftest import Check, assert_valid
from validators import codes
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.enforcement import Enforcement
from validators.findings import Severity
from validators.limits import Limits
from validators.objects import Obj, Ref
from validators.states import MemoryState

GATEWAY: Obj = {
    "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
    "metadata": {"name": "edge", "namespace": "platform"},
    "spec": {"gatewayClassName": "haptic", "listeners": [
        {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}},
        {"name": "tcp", "protocol": "TCP", "port": 5432, "allowedRoutes": {"namespaces": {"from": "All"}}}]},
}


def service(ns: str, name: str, port: int = 80) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": "p", "port": port, "targetPort": 8080}]}}


def slices(ns: str, svc: str, count: int, per_slice: int) -> list[Obj]:
    return [{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": f"{svc}-{s}", "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
             "addressType": "IPv4", "ports": [{"name": "p", "port": 8080}],
             "endpoints": [{"addresses": [f"10.{s // 256}.{s % 256}.{e % 250 + 1}" if e < 250 else
                                          f"10.{100 + s}.{e // 250}.{e % 250 + 1}"]}
                           for e in range(per_slice)]}
            for s in range(count)]


def route(ns: str, name: str, svc: str, *, hostnames: int = 1, matches: int = 1, rules: int = 1) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "edge", "namespace": "platform", "sectionName": "http"}],
                     "hostnames": [f"h{i}.{ns}.example.com" for i in range(hostnames)],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/r{r}/m{m}"}}
                                            for m in range(matches)],
                                "backendRefs": [{"name": svc, "port": 80}]} for r in range(rules)]}}


def _render(objects: list[Obj], subject: Ref | None = None, **limits: Any) -> Any:
    settings = RenderSettings(limits=Limits(**limits)) if limits else RenderSettings()
    return Renderer(settings=settings).render(MemoryState(objects), subject=subject)


def _servers(result: Any, backend_part: str) -> list[str]:
    cfg = result.files["haproxy.cfg"].decode()
    section = cfg.split(f"\nbackend {backend_part}", 1)[1].split("\nbackend ", 1)[0]
    return [line for line in section.splitlines() if line.strip().startswith("server ")]


TENANT = Ref("HTTPRoute", "tenant", "noisy")


def test_the_default_caps_a_tenants_endpoint_slices_at_500_servers_per_backend() -> None:
    objects = [GATEWAY, service("tenant", "svc"), *slices("tenant", "svc", 2, 400), route("tenant", "noisy", "svc")]
    result = _render(objects, subject=TENANT)
    assert len(_servers(result, "gw_h_tenant_noisy")) == 500  # 800 ready endpoints
    [capped] = [f for f in result.findings if f.code == codes.RENDER_SERVERS_CAPPED]
    assert capped.severity is Severity.WARN and capped.about == str(TENANT)
    assert capped.path == ("spec", "rules", 0, "backendRefs", 0)
    assert "more than 500 ready endpoints" in capped.message and "only 500 are rendered" in capped.message


def test_a_capped_backend_still_passes_haproxy_and_is_never_a_denial(haproxy_check: Check) -> None:
    objects = [GATEWAY, service("tenant", "svc"), *slices("tenant", "svc", 3, 10), route("tenant", "noisy", "svc")]
    result = _render(objects, subject=TENANT, servers_per_backend=12)
    assert len(_servers(result, "gw_h_tenant_noisy")) == 12
    assert {f.severity for f in result.findings if f.code == codes.RENDER_SERVERS_CAPPED} == {Severity.WARN}
    assert_valid(haproxy_check(result))


def test_the_cap_keeps_the_first_slices_endpoints_and_names_them_in_address_order() -> None:
    objects = [GATEWAY, service("tenant", "svc"), *slices("tenant", "svc", 3, 10), route("tenant", "noisy", "svc")]
    servers = _servers(_render(objects, subject=TENANT, servers_per_backend=12), "gw_h_tenant_noisy")
    addresses = [line.split()[2].rsplit(":", 1)[0] for line in servers]
    assert addresses[:10] == [f"10.0.0.{e}" for e in range(1, 11)]  # all of slice svc-0 (first by name)
    assert addresses[10:] == ["10.0.1.1", "10.0.1.2"]  # then the first endpoints of svc-1
    assert [line.split()[1] for line in servers] == [f"s{i}" for i in range(1, 13)]


def test_a_backend_at_the_limit_gets_no_warning() -> None:
    objects = [GATEWAY, service("tenant", "svc"), *slices("tenant", "svc", 1, 12), route("tenant", "noisy", "svc")]
    result = _render(objects, subject=TENANT, servers_per_backend=12)
    assert len(_servers(result, "gw_h_tenant_noisy")) == 12
    assert codes.RENDER_SERVERS_CAPPED not in {f.code for f in result.findings}


def test_tcproute_backends_are_capped_too() -> None:
    tcp = {"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TCPRoute",
           "metadata": {"name": "db", "namespace": "tenant", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"parentRefs": [{"name": "edge", "namespace": "platform", "sectionName": "tcp"}],
                    "rules": [{"backendRefs": [{"name": "pg", "port": 5432}]}]}}
    objects = [GATEWAY, service("tenant", "pg", 5432), *slices("tenant", "pg", 1, 30), tcp]
    result = _render(objects, subject=Ref("TCPRoute", "tenant", "db"), servers_per_backend=7)
    assert len(_servers(result, "gtw_tcp_tenant_db_0")) == 7
    [capped] = [f for f in result.findings if f.code == codes.RENDER_SERVERS_CAPPED]
    assert capped.about == "TCPRoute tenant/db" and capped.severity is Severity.WARN


def test_a_route_over_the_lines_limit_is_denied_on_the_rule_that_makes_the_lines() -> None:
    big = route("tenant", "noisy", "svc", hostnames=4, matches=10, rules=2)
    result = _render([GATEWAY, service("tenant", "svc"), big], subject=TENANT, lines_per_route=30)
    [finding] = [f for f in result.findings if f.code == codes.RENDER_ROUTE_TOO_LARGE]
    assert finding.severity is Severity.DENY and finding.subject and finding.about == str(TENANT)
    assert finding.path[:2] == ("spec", "rules") and len(finding.path) == 3
    assert "limits.linesPerRoute" in finding.message
    small = _render([GATEWAY, service("tenant", "svc"), route("tenant", "noisy", "svc")], subject=TENANT,
                    lines_per_route=30)
    assert codes.RENDER_ROUTE_TOO_LARGE not in {f.code for f in small.findings}


def test_lines_of_other_routes_are_reported_about_them_not_the_subject() -> None:
    big = route("tenant", "noisy", "svc", hostnames=4, matches=10)
    result = _render([GATEWAY, service("tenant", "svc"), big, route("other", "quiet", "svc")],
                     subject=Ref("HTTPRoute", "other", "quiet"), lines_per_route=30)
    [finding] = [f for f in result.findings if f.code == codes.RENDER_ROUTE_TOO_LARGE]
    assert not finding.subject and finding.about == str(TENANT)


def _checks(**limits: int) -> Checks:
    return Checks(schemas=None, enforcement=Enforcement(limits=Limits(**limits)))


def test_matches_times_hostnames_per_rule_is_denied_on_the_matches_field() -> None:
    found = _checks().check(Change(Operation.CREATE, route("tenant", "r", "svc", hostnames=16, matches=40)),
                            MemoryState())
    [finding] = [f for f in found if f.code == codes.RULE_MATCH_HOSTNAMES]
    assert finding.severity is Severity.DENY and finding.path == ("spec", "rules", 0, "matches")
    assert "40 matches x 16 hostnames = 640" in finding.message and "512" in finding.message
    fine = _checks().check(Change(Operation.CREATE, route("tenant", "r", "svc", hostnames=16, matches=32)),
                           MemoryState())
    assert codes.RULE_MATCH_HOSTNAMES not in {f.code for f in fine}


def test_limits_come_from_the_config_and_typos_are_refused() -> None:
    enforcement = Enforcement.from_mapping({"limits": {"matchesTimesHostnamesPerRule": 4, "serversPerBackend": 9}})
    assert enforcement.limits == Limits(servers_per_backend=9, matches_hostnames_per_rule=4)
    found = Checks(schemas=None, enforcement=enforcement).check(
        Change(Operation.CREATE, route("tenant", "r", "svc", hostnames=2, matches=3)), MemoryState())
    assert codes.RULE_MATCH_HOSTNAMES in {f.code for f in found}
    with pytest.raises(ValueError, match=r"limits\.serverPerBackend: unknown limit"):
        Enforcement.from_mapping({"limits": {"serverPerBackend": 3}})
    with pytest.raises(ValueError, match=r"limits\.linesPerRoute: 0 is not a positive integer"):
        Enforcement.from_mapping({"limits": {"linesPerRoute": 0}})


@pytest.mark.haproxy
async def test_through_the_gate_the_cap_is_a_warning_on_the_tenants_route_and_nothing_for_others(
        haproxy_path: str) -> None:
    from haproxy_check.check import binaries
    from webhook.gate import assembly

    gate = assembly.build_gate(await binaries.detect(haproxy_path),
                               assembly.GateSettings(render={"limits": Limits(servers_per_backend=20)}))
    objects = [GATEWAY, service("tenant", "svc"), *slices("tenant", "svc", 2, 30), service("other", "web"),
               route("tenant", "noisy", "svc")]
    state = MemoryState(objects)
    own = await gate.review(Change(Operation.UPDATE, route("tenant", "noisy", "svc"),
                                   route("tenant", "noisy", "svc")), state=state, reload_note=False)
    assert own.allowed, own.message
    assert any(w.startswith("spec.rules[0].backendRefs[0]: Service tenant/svc port 80 has more than 20 ready "
               "endpoints") and w.endswith("[RG0407]") for w in own.warnings), own.warnings
    other = await gate.review(Change(Operation.CREATE, route("other", "quiet", "web")), state=state,
                              reload_note=False)
    assert other.allowed, other.message
    assert not any("ready endpoints" in w for w in other.warnings), other.warnings
