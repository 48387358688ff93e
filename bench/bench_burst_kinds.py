"""Concurrent reviews of the kinds batched besides route CREATE/UPDATE (route DELETEs, custom Route
CREATEs and DELETEs, ReferenceGrant and BackendTLSPolicy CREATEs: one per tenant, each reaching the route
that crosses into its tenant's namespace; Gateway CREATEs, each on a port of its own; Gateway DELETEs, each
of a stored Gateway on a port of its own with one route attached), judged together
(``Gate.review_together``, as the webhook does under a burst) and one by one, at ``--routes`` routes in
the state, in one run.

Prints per kind the wall time of both, their ratio, how many verdicts the shared checks settled, and the
machine's 1-minute load. Verdict decisions must agree (the differential tests prove the whole verdicts).
Run: ``python bench/bench_burst_kinds.py [--routes 10000] [--burst 100] [--haproxy PATH] [--only DELETE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time
from typing import Any

from haproxy_check.check import binaries
from tests.webhook.conftest import STATE_DIR, load_objects
from tests.webhook.deltastates import GOOD_PAIR
from tests.webhook.gate.test_gates import many_shops
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gate import assembly

GW = "gateway.networking.k8s.io"
CA = base64.b64decode(GOOD_PAIR["tls.crt"]).decode()


def custom_route(i: int) -> dict[str, Any]:
    return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route",
            "metadata": {"name": f"custom-{i}", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"hostnames": [f"custom-{i}.example.com"], "backend": {"address": "10.0.0.1", "port": 8080}}}


def tenant(i: int) -> list[dict[str, Any]]:
    """Namespace ``t<i>`` serves Service web (with a CA); route ``tenant-<i>`` of the Gateway's namespace
    crosses into it, so a grant or a policy there reaches that one route."""
    ns = f"t{i}"
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
         "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "web-1", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
         "endpoints": [{"addresses": [f"10.3.{i // 250}.{i % 250 + 1}"], "conditions": {"ready": True}}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": ns},
         "data": {"ca.crt": CA}},
        {"apiVersion": f"{GW}/v1", "kind": "HTTPRoute",
         "metadata": {"name": f"tenant-{i}", "namespace": "capture", "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"tenant-{i}.example.com"],
                  "rules": [{"backendRefs": [{"name": "web", "namespace": ns, "port": 8080}]}]}},
    ]


def grant(i: int) -> dict[str, Any]:
    return {"apiVersion": f"{GW}/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "routes", "namespace": f"t{i}", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"from": [{"group": GW, "kind": "HTTPRoute", "namespace": "capture"}],
                     "to": [{"group": "", "kind": "Service"}]}}


def gateway(i: int) -> dict[str, Any]:
    """A new Gateway of the routes' namespace on a port of its own (so it may share a check: rule 10)."""
    return {"apiVersion": f"{GW}/v1", "kind": "Gateway",
            "metadata": {"name": f"edge-{i}", "namespace": "capture", "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"gatewayClassName": "haproxy",
                     "listeners": [{"name": "http", "port": 10_000 + i, "protocol": "HTTP"}]}}


def gateway_route(i: int) -> dict[str, Any]:
    """The one route attached to Gateway ``edge-<i>``: its delete leaves it unattached."""
    return {"apiVersion": f"{GW}/v1", "kind": "HTTPRoute",
            "metadata": {"name": f"on-edge-{i}", "namespace": "capture", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": f"edge-{i}"}], "hostnames": [f"on-edge-{i}.example.com"],
                     "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}}


def policy(i: int) -> dict[str, Any]:
    return {"apiVersion": f"{GW}/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": "web-tls", "namespace": f"t{i}", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                     "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                                    "hostname": "web.example.com"}}}


async def main(routes: int, burst: int, haproxy: str | None, only: str = "") -> None:
    gate = assembly.build_gate(await binaries.detect(haproxy), assembly.GateSettings())
    shops = many_shops(routes)
    tenants = [obj for i in range(burst) for obj in tenant(i)]
    # stored custom Routes and Gateways (ports of their own, a route each) for the deletes
    stored_custom = [custom_route(burst + i) for i in range(burst)]
    stored_gateways = [gateway(burst + i) for i in range(burst)]
    on_gateways = [gateway_route(burst + i) for i in range(burst)]
    state = MemoryState([*load_objects(STATE_DIR), *shops, *tenants, *stored_custom, *stored_gateways, *on_gateways],
                        version="bench-burst-kinds")
    await gate.review(Change(Operation.DELETE, None, shops[0]), state=state)  # the per-version indexes
    kinds = {"route DELETE": [Change(Operation.DELETE, None, s) for s in shops[1:burst + 1]],
             "custom Route CREATE": [Change(Operation.CREATE, custom_route(i)) for i in range(burst)],
             "ReferenceGrant CREATE": [Change(Operation.CREATE, grant(i)) for i in range(burst)],
             "BackendTLSPolicy CREATE": [Change(Operation.CREATE, policy(i)) for i in range(burst)],
             "Gateway CREATE": [Change(Operation.CREATE, gateway(i)) for i in range(burst)],
             "custom Route DELETE": [Change(Operation.DELETE, None, o) for o in stored_custom],
             "Gateway DELETE": [Change(Operation.DELETE, None, o) for o in stored_gateways]}
    print(f"haproxy {gate.binary.version}, {routes} routes, bursts of {burst}")
    for kind, changes in kinds.items():
        if only and only not in kind:
            continue
        mark = time.perf_counter()
        together = await gate.review_together(changes, state=state, notes_for=0.0)
        seconds_together = time.perf_counter() - mark
        mark = time.perf_counter()
        alone = [await gate.review(c, state=state, reload_note=False) for c in changes]
        seconds_alone = time.perf_counter() - mark
        undecided = next((v for v in (*together, *alone) if v.error), None)
        if undecided is not None:
            raise SystemExit(f"{kind}: a review was not decided: {undecided.error}")
        if [v.decision for v in together] != [v.decision for v in alone]:
            raise SystemExit(f"{kind}: decisions together differ from one by one")
        shared = sum(any("checked together" in n for n in v.notes) for v in together)
        print(f"{kind:23} together {seconds_together:6.2f} s ({shared}/{burst} by shared checks)  one by one "
              f"{seconds_alone:6.2f} s  ratio {seconds_alone / seconds_together:5.1f}x  load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=10_000)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--haproxy", default=None)
    parser.add_argument("--only", default="", help="only the kinds whose name holds this, e.g. DELETE")
    args = parser.parse_args()
    asyncio.run(main(args.routes, args.burst, args.haproxy, args.only))
