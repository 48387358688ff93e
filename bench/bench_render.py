"""Render time of the full HAProxy config: from scratch, and incrementally after one change.

Two generators:

- ``objects(n)``: every route alike (2 hostnames, an Exact + a PathPrefix + a header-matched rule, a
  header modifier, a 90/10 weighted split, a Service with 2 endpoints);
- ``realistic(n)``: routes spread over 50 namespaces and three Gateways (HTTP and HTTPS listeners, some
  with hostnames), Services with 1-4 endpoints, a mix of Exact/PathPrefix/RegularExpression paths,
  header and method matches, header modifiers, redirects, rewrites, timeouts and a canary split on
  one route in ten.

For each size it prints, measured in one run: the from-scratch render (``Renderer(incremental=False)``),
the first incremental render (which fills the cache), and the incremental render of the state after
one HTTPRoute UPDATE and after one EndpointSlice UPDATE (an Overlay of the change, as the Gate sees
it), with their ratios to the from-scratch render.

Run: ``python bench/bench_render.py [--sizes 100,1000,10000] [--repeat 3] [--generator realistic]``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

from haproxy_check.render.rendering import Renderer
from validators.changes import Change, Operation
from validators.objects import Obj
from validators.states import MemoryState, Overlay, State

GW = "gateway.networking.k8s.io/v1"


def objects(n: int) -> list[Obj]:
    objs: list[Obj] = [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                        "metadata": {"name": "edge", "namespace": "infra"},
                        "spec": {"gatewayClassName": "c", "listeners": [
                            {"name": "http", "protocol": "HTTP", "port": 80,
                             "allowedRoutes": {"namespaces": {"from": "All"}}}]}}]
    for i in range(n):
        ns = f"team{i % 20}"
        for svc in (f"app{i}", f"app{i}-canary"):
            objs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": ns},
                         "spec": {"ports": [{"name": "http", "port": 80}]}})
            objs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                         "metadata": {"name": f"{svc}-x", "namespace": ns,
                                      "labels": {"kubernetes.io/service-name": svc}},
                         "ports": [{"name": "http", "port": 8080}],
                         "endpoints": [{"addresses": [f"10.{i // 250}.{i % 250}.1"]},
                                       {"addresses": [f"10.{i // 250}.{i % 250}.2"]}]})
        refs: list[Any] = [{"name": f"app{i}", "port": 80, "weight": 90},
                           {"name": f"app{i}-canary", "port": 80, "weight": 10}]
        objs.append({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                     "metadata": {"name": f"route{i}", "namespace": ns},
                     "spec": {"parentRefs": [{"name": "edge", "namespace": "infra"}],
                              "hostnames": [f"r{i}.example.com", f"www.r{i}.example.com"],
                              "rules": [
                                  {"matches": [{"path": {"type": "Exact", "value": "/health"}}],
                                   "backendRefs": refs[:1]},
                                  {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                                   "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
                                       "set": [{"name": "X-Team", "value": ns}]}}],
                                   "backendRefs": refs},
                                  {"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                                                "headers": [{"name": "X-Beta", "value": "1"}]}],
                                   "backendRefs": refs[1:]}]}})
    return objs


def _service(name: str, ns: str, i: int, endpoints: int) -> list[Obj]:
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
             "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": f"{name}-abcde", "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
             "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
             "endpoints": [{"addresses": [f"10.{i // 250 % 250}.{i % 250}.{k + 1}"], "conditions": {"ready": True}}
                           for k in range(endpoints)]}]


def _gateways() -> list[Obj]:
    out: list[Obj] = []
    for g, port in (("public", 80), ("internal", 8080), ("partners", 8081)):
        listeners: list[Any] = [{"name": "http", "protocol": "HTTP", "port": port,
                                 "allowedRoutes": {"namespaces": {"from": "All"}}}]
        if g == "public":
            listeners.append({"name": "https", "protocol": "HTTPS", "port": 443,
                              "allowedRoutes": {"namespaces": {"from": "All"}},
                              "tls": {"certificateRefs": [{"name": "public-cert"}]}})
        if g == "partners":
            listeners[0]["hostname"] = "*.partners.example.com"
        out.append({"apiVersion": GW, "kind": "Gateway", "metadata": {"name": g, "namespace": "infra"},
                    "spec": {"gatewayClassName": "haptic", "listeners": listeners}})
    return out


def _rules(i: int, ns: str, svc: str, canary: str | None) -> list[Any]:
    main: list[Any] = [{"name": svc, "port": 80}]
    if canary:
        main = [{"name": svc, "port": 80, "weight": 90}, {"name": canary, "port": 80, "weight": 10}]
    rules: list[Any] = [
        {"matches": [{"path": {"type": "PathPrefix", "value": f"/v{i % 3 + 1}/api"}}],
         "filters": [{"type": "RequestHeaderModifier",
                      "requestHeaderModifier": {"set": [{"name": "X-Team", "value": ns}],
                                                "remove": ["X-Debug"]}}],
         "timeouts": {"backendRequest": f"{5 + i % 20}s"},
         "backendRefs": main},
        {"matches": [{"path": {"type": "Exact", "value": "/healthz"}}],
         "backendRefs": [{"name": svc, "port": 80}]},
    ]
    if i % 4 == 0:
        rules.append({"matches": [{"path": {"type": "RegularExpression", "value": f"/items/[0-9]+/r{i}"},
                                   "method": "GET"}], "backendRefs": [{"name": svc, "port": 80}]})
    if i % 5 == 0:
        rules.append({"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                                   "headers": [{"name": "X-Canary", "value": "always"}]}],
                      "backendRefs": [{"name": canary or svc, "port": 80}]})
    if i % 7 == 0:
        rules.append({"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
                      "filters": [{"type": "RequestRedirect", "requestRedirect": {
                          "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}, "statusCode": 301}}]})
    if i % 9 == 0:
        rules.append({"matches": [{"path": {"type": "PathPrefix", "value": "/legacy"}}],
                      "filters": [{"type": "URLRewrite", "urlRewrite": {
                          "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}],
                      "backendRefs": [{"name": svc, "port": 80}]})
    return rules


def realistic(n: int) -> list[Obj]:
    objs: list[Obj] = _gateways()
    for i in range(n):
        ns = f"team{i % 50}"
        svc = f"svc{i}"
        objs.extend(_service(svc, ns, i, 1 + i % 4))
        canary = f"svc{i}-canary" if i % 10 == 0 else None
        if canary:
            objs.extend(_service(canary, ns, i + 100_000, 1))
        gw = ("public", "internal", "partners")[i % 3]
        host = f"r{i}.partners.example.com" if gw == "partners" else f"r{i}.example.com"
        objs.append({"apiVersion": GW, "kind": "HTTPRoute",
                     "metadata": {"name": f"route{i}", "namespace": ns,
                                  "creationTimestamp": f"2026-01-{1 + i % 28:02d}T00:00:00Z"},
                     "spec": {"parentRefs": [{"name": gw, "namespace": "infra"}],
                              "hostnames": [host, f"www.{host}"] if i % 2 else [host],
                              "rules": _rules(i, ns, svc, canary)}})
    return objs


GENERATORS: dict[str, Callable[[int], list[Obj]]] = {"realistic": realistic, "uniform": objects}


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _scratch() -> Renderer:
    try:
        return Renderer(incremental=False)  # type: ignore[call-arg,unused-ignore]
    except TypeError:  # a Renderer from before incremental rendering: every render is from scratch
        return Renderer()


def _changed(objs: list[Obj], kind: str, k: int, edit: Callable[[Obj], None]) -> State:
    base = MemoryState(objs)
    old = [o for o in objs if o["kind"] == kind][k]
    new = copy.deepcopy(old)
    edit(new)
    return Overlay(base, Change(Operation.UPDATE, new, old))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--generator", choices=sorted(GENERATORS), default="realistic")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        objs = GENERATORS[args.generator](n)
        state = MemoryState(objs)
        repeat = max(1, args.repeat if n < 10_000 else min(args.repeat, 2))
        scratch = _scratch()
        full = _timed(lambda: scratch.render(state), repeat)  # noqa: B023 - called at once
        result = scratch.render(state)
        size = sum(len(b) for b in result.files.values())
        line = (f"{n:6d} routes: from scratch {full * 1000:8.1f} ms "
                f"({len(result.description.backends)} backends, {size / 1024:.0f} KiB of files)")
        if getattr(scratch, "cache", "absent") is None:  # this Renderer can render incrementally
            inc = Renderer()
            first = _timed(lambda: inc.render(state), 1)  # noqa: B023
            route_state = _changed(objs, "HTTPRoute", n // 2, lambda r: r["spec"]["rules"][0]["matches"][0]
                                   ["path"].update(value="/changed"))
            eps_state = _changed(objs, "EndpointSlice", n // 2, lambda e: e["endpoints"][0].update(
                addresses=["10.250.250.250"]))
            inc.render(state)
            one_route = _timed(lambda: (inc.render(route_state), inc.render(state))[0], repeat) / 2  # noqa: B023
            one_eps = _timed(lambda: (inc.render(eps_state), inc.render(state))[0], repeat) / 2  # noqa: B023
            assert inc.render(route_state) == scratch.render(route_state)
            line += (f"\n{'':14}incremental: first {first * 1000:8.1f} ms, after one HTTPRoute change "
                     f"{one_route * 1000:7.1f} ms ({one_route / full:.3f}x from scratch), after one EndpointSlice "
                     f"change {one_eps * 1000:7.1f} ms ({one_eps / full:.3f}x)")
        print(line, flush=True)


if __name__ == "__main__":
    main()
