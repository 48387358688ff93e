"""Values that pass the apiserver's (and Python's) parsers but not HAProxy's reading of a config line:
an IPv6 zone in an EndpointSlice or a Route CRD address (``ipaddress`` accepts any characters after
``%``), and an ExternalAuth ``http.path`` that does not start with ``/`` (it would become part of the
auth URL's authority)."""

from __future__ import annotations

import copy

import pytest

from haproxy_check import escaping
from tests.render.conftest import Check, assert_valid, fixture, lines, render
from tests.render_l4.conftest import fixture as l4_fixture

ZONES = ["fe80::1%eth0", "fe80::1%eth0 weight 100 backup", "fe80::1%${HOME}", "fe80::1%x#y", "::1%'a'"]


@pytest.mark.parametrize("address", ZONES)
def test_a_zoned_endpoint_address_never_reaches_a_server_line(address: str, haproxy_check: Check) -> None:
    objs = fixture("live.yaml")
    eps = next(o for o in objs if o["kind"] == "EndpointSlice" and o["metadata"]["name"] == "a")
    eps["endpoints"].append({"addresses": [address]})
    result = render(objs)
    servers = [line for line in lines(result) if line.startswith("server ")]
    assert servers and not any("%" in s or "fe80" in s or "::1" in s for s in servers), servers
    assert_valid(haproxy_check(result))


@pytest.mark.parametrize("address", ZONES)
def test_a_zoned_route_crd_address_is_refused(address: str, haproxy_check: Check) -> None:
    objs = l4_fixture("routes-crd.yaml")
    objs[1]["spec"]["backend"]["address"] = address
    result = render(objs)
    assert "backend shop_legacy" not in " ".join(lines(result))
    assert [(f.code, f.about) for f in result.findings] == [("RG0519", "Route shop/legacy")]
    assert_valid(haproxy_check(result))


def test_server_address_keeps_plain_addresses_and_names() -> None:
    assert escaping.server_address("10.0.0.1") == "10.0.0.1"
    assert escaping.server_address("2001:db8::1") == "[2001:db8::1]"
    assert escaping.server_address("svc.ns.svc.cluster.local") == "svc.ns.svc.cluster.local"
    for bad in [*ZONES, "a b", "x$y", "-dash"]:
        with pytest.raises(escaping.Unsafe):
            escaping.server_address(bad)


@pytest.mark.parametrize("auth_path", ["@evil.example/steal", ".evil.example/x", "evil", ":1@evil/"])
def test_an_external_auth_path_must_start_with_a_slash(auth_path: str, haproxy_check: Check) -> None:
    objs = copy.deepcopy(fixture("live-policies.yaml"))
    route = next(o for o in objs if o["kind"] == "HTTPRoute" and any(
        f.get("type") == "ExternalAuth" and f["externalAuth"]["protocol"] == "HTTP"
        for r in o["spec"]["rules"] for f in r.get("filters", [])))
    for rule in route["spec"]["rules"]:
        for flt in rule.get("filters", []):
            if flt.get("type") == "ExternalAuth" and flt["externalAuth"]["protocol"] == "HTTP":
                flt["externalAuth"]["http"]["path"] = auth_path
    result = render(objs)
    denies = [f for f in result.findings if f.severity == "deny"]
    assert denies and all(f.field.endswith("externalAuth.http.path") for f in denies), result.findings
    assert "evil" not in result.files["maps/gw-extauth.map"].decode()
    assert_valid(haproxy_check(result))
