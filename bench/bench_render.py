"""Render time of the full HAProxy config for 10 / 100 / 1000 HTTPRoutes (median of N renders).

Each route: 2 hostnames, an Exact + a PathPrefix + a header-matched rule, a header modifier, a 90/10
weighted split, a Service with 2 endpoints. Run: ``python bench/bench_render.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from haproxy_check.rendering import Renderer
from validators.objects import Obj
from validators.states import MemoryState


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    renderer = Renderer()
    for n in (int(s) for s in args.sizes.split(",")):
        state = MemoryState(objects(n))
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = renderer.render(state)
            times.append(time.perf_counter() - start)
        size = sum(len(b) for b in result.files.values())
        print(f"{n:5d} routes: median {statistics.median(times) * 1000:8.1f} ms  "
              f"({len(result.description.backends)} backends, {size / 1024:.0f} KiB of files)")


if __name__ == "__main__":
    main()
