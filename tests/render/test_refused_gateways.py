"""Gateways the Gateway API says to reject (validators.objectrules.gatewayrefusals): an
``infrastructure.parametersRef`` (InvalidParameters) or an address type routegate cannot bind
(UnsupportedAddress). They are not served: their ports are not bound, their ListenerSets and the routes
attached only to them are not rendered, while every other Gateway renders as before (incrementally and
from scratch alike, and haproxy -c passes). Their statuses say Accepted=False with the spec's reason, as
the conformance suite's GatewayInvalidParametersRef and GatewayStaticAddresses assert."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from haproxy_check.render.rendering import Renderer, RenderSettings
from tests.render.conftest import Check, assert_valid, render
from validators.contexts import Context
from validators.crossobject import statuses
from validators.objectrules import gatewayrefusals
from validators.objects import Obj, Ref
from validators.rules import run
from validators.states import MemoryState

GW = "gateway.networking.k8s.io/v1"
PARAMETERS = {"infrastructure": {"parametersRef": {"group": "", "kind": "ConfigMap", "name": "does-not-exist"}}}
UNSUPPORTED = {"addresses": [{"type": "test/fake-invalid-type", "value": "fake address"}]}


def gateway(name: str, port: int, **spec: Any) -> Obj:
    return {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"gatewayClassName": "c", **spec,
                     "listeners": [{"name": "http", "protocol": "HTTP", "port": port,
                                    "allowedRoutes": {"namespaces": {"from": "All"}}}]}}


def listener_set(name: str, parent: str, port: int) -> Obj:
    return {"apiVersion": GW, "kind": "ListenerSet", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"parentRef": {"name": parent}, "listeners": [{"name": "extra", "protocol": "HTTP", "port": port}]}}


def route(name: str, *parents: str) -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"parentRefs": [{"name": p} for p in parents], "hostnames": [f"{name}.example.com"],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}}


SERVICE: Obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"},
                "spec": {"ports": [{"port": 80}]}}


def state(refused: dict[str, Any]) -> list[Obj]:
    edge = gateway("edge", 8080)
    edge["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    other = gateway("other", 8081, **refused)
    other["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    return [edge, other, listener_set("more", "other", 8082), route("kept", "edge"), route("gone", "other"),
            route("both", "edge", "other"), SERVICE]


@pytest.mark.parametrize("refused", [PARAMETERS, UNSUPPORTED], ids=["parametersRef", "address type"])
def test_a_refused_gateway_is_not_served_and_the_others_are(refused: dict[str, Any], haproxy_check: Check) -> None:
    result = render(state(refused))
    cfg = result.files["haproxy.cfg"].decode()
    served = result.files["haproxy.cfg"] + b"".join(v for k, v in result.files.items() if k.startswith("maps/"))
    assert "bind :8080" in cfg and "bind :8081" not in cfg and "bind :8082" not in cfg
    assert b"kept.example.com" in served and b"both.example.com" in served and b"gone.example.com" not in served
    assert_valid(haproxy_check(result))
    # the same as a render without the refused Gateway, incrementally and from scratch
    without = [o for o in state(refused) if o["metadata"]["name"] != "other"]
    assert result.files == render(without).files
    incremental = Renderer(settings=RenderSettings())
    incremental.render(MemoryState(state({})))  # its cache holds "other" as a served Gateway
    assert incremental.render(MemoryState(state(refused))).files == Renderer(
        settings=RenderSettings(), incremental=False).render(MemoryState(state(refused))).files == result.files


@pytest.mark.parametrize(("refused", "reason", "field"), [
    (PARAMETERS, "InvalidParameters", "spec.infrastructure.parametersRef"),
    (UNSUPPORTED, "UnsupportedAddress", "spec.addresses[0].type")], ids=["parametersRef", "address type"])
def test_statuses_and_the_rule_say_why(refused: dict[str, Any], reason: str, field: str) -> None:
    objects = MemoryState(state(refused))
    found = statuses.all_statuses(objects)
    other = found["Gateway ns/other"]
    accepted, programmed = other["conditions"]
    assert (accepted["type"], accepted["status"], accepted["reason"]) == ("Accepted", "False", reason)
    assert (programmed["type"], programmed["status"]) == ("Programmed", "False")
    assert [c["status"] for x in other["listeners"] for c in x["conditions"] if c["type"] == "Programmed"] == ["False"]
    assert found["Gateway ns/edge"]["conditions"][0]["status"] == "True"
    more = found["ListenerSet ns/more"]["conditions"][0]
    assert (more["status"], more["reason"]) == ("False", "ParentNotAccepted")
    gone = found["HTTPRoute ns/gone"]["parents"][0]["conditions"][0]
    assert (gone["status"], gone["reason"]) == ("False", "NoMatchingParent") and "ns/other" in gone["message"]
    both = [p["conditions"][0]["status"] for p in found["HTTPRoute ns/both"]["parents"]]
    assert both == ["True", "False"]
    [finding] = [f for f in run(objects.get("Gateway", "ns", "other") or {}, _context()) if f.code == "RG0130"]
    assert (finding.field, str(finding.severity)) == (field, "warn")
    assert not [f for f in run(objects.get("Gateway", "ns", "edge") or {}, _context()) if f.code == "RG0130"]


def test_supported_addresses_keep_the_gateway_accepted() -> None:
    """GatewayStaticAddresses: once the unsupported address is removed, the Gateway is accepted again."""
    fixed = copy.deepcopy(UNSUPPORTED)
    fixed["addresses"] = [{"type": "IPAddress", "value": "192.0.2.1"}, {"value": "192.0.2.2"},
                          {"type": "Hostname", "value": "gw.example.com"}]
    found = statuses.all_statuses(MemoryState(state(fixed)))
    assert found["Gateway ns/other"]["conditions"][0]["status"] == "True"
    assert b"bind :8081" in render(state(fixed)).files["haproxy.cfg"]


def _context() -> Context:
    return Context()


def test_the_refused_gateway_is_named_by_ref() -> None:
    assert set(gatewayrefusals.refused(MemoryState(state(PARAMETERS)))) == {Ref("Gateway", "ns", "other")}
