"""Warnings about other objects than the subject name them, and a delete lists every object it
breaks (capped, with a count): what a DELETE showed through a real apiserver."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.gate.verdicts import MAX_AFFECTED
from webhook.server import reviews

pytestmark = pytest.mark.haproxy

GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": "shop"},
           "spec": {"gatewayClassName": "haproxy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}
GRANT = {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
         "metadata": {"name": "from-shop", "namespace": "backends"},
         "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "shop"}],
                  "to": [{"group": "", "kind": "Service"}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "backends"},
           "spec": {"ports": [{"port": 8080}]}}


# Keeps a listener in the configuration once edge is deleted (a config without one does not start).
OTHER = {**GATEWAY, "metadata": {"name": "other", "namespace": "shop"},
         "spec": {"gatewayClassName": "haproxy", "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}}


def _route(name: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"{name}.example.com"],
                     "rules": [{"backendRefs": [{"name": "web", "namespace": "backends", "port": 8080}]}]}}


def _delete(gate: Gate, obj: dict[str, Any], routes: int) -> list[str]:
    state = MemoryState([GATEWAY, OTHER, GRANT, SERVICE, *(_route(f"r{i:02d}") for i in range(routes))], version="1")
    verdict = asyncio.run(gate.review(Change(Operation.DELETE, None, obj), state=state))
    assert verdict.allowed
    return reviews.respond("uid", verdict)["response"].get("warnings", [])


def test_deleting_a_grant_names_the_route_it_breaks(gate: Gate) -> None:
    warnings = _delete(gate, GRANT, routes=1)
    assert any(w.startswith("HTTPRoute shop/r00: spec.rules[0].backendRefs[0]: RefNotPermitted") for w in warnings), \
        warnings


def test_deleting_a_gateway_lists_every_route_it_breaks(gate: Gate) -> None:
    warnings = _delete(gate, GATEWAY, routes=4)
    for i in range(4):
        assert any(w.startswith(f"HTTPRoute shop/r{i:02d}: spec.parentRefs[0]") for w in warnings), warnings
    assert "4 other objects are affected: HTTPRoute shop/r00, HTTPRoute shop/r01" in warnings[0]


def test_a_delete_breaking_many_objects_counts_those_not_listed(gate: Gate) -> None:
    warnings = _delete(gate, GATEWAY, routes=MAX_AFFECTED + 3)
    assert warnings[0].endswith(" and 3 more"), warnings[0]
    named = [w for w in warnings if w.startswith("HTTPRoute shop/")]
    assert len(named) == MAX_AFFECTED
