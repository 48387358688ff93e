"""The baseline rule compares failures, not the proxy that happened to report them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision

pytestmark = pytest.mark.haproxy


def named(name: str, where: Any = INPUTS) -> dict[str, Any]:
    return copy.deepcopy(next(o for o in load_objects(where) if o["metadata"]["name"] == name))  # type: ignore[index]


@pytest.mark.parametrize("delta", [False, True])
async def test_a_new_frontend_that_reports_an_old_broken_map_entry_does_not_deny(gate: Gate, delta: bool) -> None:
    """The broken route's bad regex sits in a map every HTTP frontend loads; HAProxy names the first
    frontend that loads it. A Gateway change adding port 79 (gw-http-79 sorts before gw-http-80) changes
    that name, not the failure: the change is admitted with the baseline warning."""
    judge = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=delta)
    edge = named("edge", STATE_DIR)
    changed = copy.deepcopy(edge)
    changed["spec"]["listeners"].append({"name": "alt", "protocol": "HTTP", "port": 79,
                                         "allowedRoutes": {"namespaces": {"from": "Same"}}})
    state = MemoryState([*load_objects(STATE_DIR), named("broken")], version="v1")
    verdict = await judge.review(Change(Operation.UPDATE, changed, edge), state=state, reload_note=False)
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert any("already fails haproxy -c because of HTTPRoute capture/broken" in n
               for n in verdict.notes), verdict.notes


def junk_ca_policy() -> list[dict[str, Any]]:
    """A BackendTLSPolicy for Service capture/web-canary whose CA is no certificate, and a route using
    it: its server line fails to load the ca-file."""
    junk = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "junk-ca", "namespace": "capture"},
             "data": {"ca.crt": junk}},
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
             "metadata": {"name": "web-tls", "namespace": "capture"},
             "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web-canary"}],
                      "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "junk-ca"}],
                                     "hostname": "web.example.com"}}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "web-canary-1", "namespace": "capture",
                          "labels": {"kubernetes.io/service-name": "web-canary"}},
             "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
             "endpoints": [{"addresses": ["10.1.0.21"], "conditions": {"ready": True}}]},
            {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "user", "namespace": "capture"},
             "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["user.example.com"],
                      "rules": [{"backendRefs": [{"name": "web-canary", "port": 8080}]}]}}]


@pytest.mark.parametrize("delta", [False, True])
async def test_an_old_error_uncovered_by_hiding_a_culprit_is_not_the_changes(gate: Gate, delta: bool) -> None:
    """The broken route's bad regex hides another route's unloadable CA. Isolating a new, healthy route
    from the broken one uncovers that CA error: it is old (the state without the broken route has it
    too), so it must not deny the new route."""
    judge = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=delta)
    canary = named("shop")
    canary["metadata"]["name"] = "canary"
    canary["spec"]["hostnames"] = ["broken.example.com"]  # shares the broken route's host: in its closure
    canary["spec"]["rules"] = [{"matches": [{"path": {"type": "PathPrefix", "value": "/canary"}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]
    state = MemoryState([*load_objects(STATE_DIR), *junk_ca_policy(), named("broken")], version="v1")
    verdict = await judge.review(Change(Operation.CREATE, canary), state=state, reload_note=False)
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert any("already fails" in n for n in verdict.notes), verdict.notes
