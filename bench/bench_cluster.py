"""Memory of 1k and 10k HTTPRoutes in the ClusterState store, and the time to (re-)list 10k.

Run: ``python bench/bench_cluster.py [counts...]``. Everything runs in one process: the fake API
server (tests/fakekube.py) serves realistic HTTPRoutes (the captured admission fixture, with its
managedFields and last-applied annotation) to the real kubernetes-asyncio client.

Reported per count:
- store: memory held after the first sync (tracemalloc, after gc), i.e. the slimmed objects;
- raw: what the same objects take as parsed API JSON, unslimmed (what a naive store would keep);
- sync / relist: wall time of the first list and of a 410-triggered re-list, through HTTP, including
  the fake server's own JSON encoding on the same core (pages of 500);
- client relist: the client's share alone (json parse + slim + atomic replace of pre-encoded pages);
- snapshot: snapshot() plus the first sorted list() after a change (what a review pays after an event).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import SHARED  # noqa: E402
from tests.fakekube import FakeKube, crd  # noqa: E402
from webhook.cluster import ClusterState, load_api_client  # noqa: E402
from webhook.cluster.reflectors import PAGE_SIZE, Collection  # noqa: E402
from webhook.cluster.slimming import slim  # noqa: E402
from webhook.cluster.stores import Store, key_of  # noqa: E402

GW = "gateway.networking.k8s.io"
FIXTURE = (SHARED or Path("/work/shared")) / "fixtures" / "admission-reviews" / "03-httproute-create.json"


def routes(n: int) -> list[dict[str, Any]]:
    template = json.loads(FIXTURE.read_text())["request"]["object"]
    out = []
    for i in range(n):
        obj = copy.deepcopy(template)
        obj["metadata"].update(name=f"route-{i:05d}", namespace=f"team-{i % 50:02d}", uid=f"uid-{i:08d}")
        obj["spec"]["hostnames"] = [f"app-{i}.example.com"]
        obj["spec"]["rules"][0]["matches"][0]["path"]["value"] = f"/api/{i}"
        out.append(obj)
    return out


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


async def wait(predicate: Any, within: float = 300.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        await asyncio.sleep(0.005)


def raw_size(objs: list[dict[str, Any]]) -> int:
    encoded = json.dumps({"items": objs})
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    parsed = json.loads(encoded)
    size = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del parsed
    return size


def client_relist(objs: list[dict[str, Any]]) -> float:
    pages = [
        json.dumps({"metadata": {"resourceVersion": "1"}, "items": objs[i : i + PAGE_SIZE]}).encode()
        for i in range(0, len(objs), PAGE_SIZE)
    ]
    store = Store("HTTPRoute")
    coll = Collection("HTTPRoute", f"{GW}/v1", "/x")
    start = time.perf_counter()
    items = {}
    for page in pages:
        for raw in json.loads(page)["items"]:
            obj = slim(raw, kind=coll.kind, api_version=coll.api_version)
            items[key_of(obj)] = obj
    store.replace(items)
    return time.perf_counter() - start


async def measure(n: int) -> dict[str, str]:
    objs = routes(n)
    result = {"routes": str(n), "raw": mib(raw_size(objs))}
    async with FakeKube(page_limit_max=PAGE_SIZE) as kube:
        kube.create(crd(GW, "HTTPRoute", "httproutes", ("v1",)))
        for obj in objs:
            kube.create(obj)
        kube.compact()  # the fake's own event history is not what we measure
        with tempfile.TemporaryDirectory() as tmp:
            api = await load_api_client(kube.write_kubeconfig(Path(tmp) / "kubeconfig"))
        assert api is not None
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        state = ClusterState(api, kinds=["HTTPRoute"], resync_backoff_cap=0.05)
        start = time.perf_counter()
        task = asyncio.create_task(state.run())
        await wait(lambda: state.ready)
        sync = time.perf_counter() - start
        await wait(lambda: kube.watch_count("httproutes") == 1)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result |= {
            "store": mib(current - base),
            "peak during sync": mib(peak - base),
            "sync (under tracemalloc)": f"{sync:.2f} s",
        }
        assert len(state.snapshot().list("HTTPRoute")) == n

        kube.create({**objs[0], "metadata": {**objs[0]["metadata"], "name": "extra", "uid": "x"}})
        kube.compact()
        kube.expire_watches()
        start = time.perf_counter()
        await wait(lambda: state.status()["kinds"]["HTTPRoute"]["relists"] == 2)
        result["relist"] = f"{time.perf_counter() - start:.2f} s"
        assert len(state.snapshot().list("HTTPRoute")) == n + 1

        kube.delete(f"{GW}/v1", "HTTPRoute", "extra", objs[0]["metadata"]["namespace"])
        await wait(
            lambda: (
                len(state.snapshot().get("HTTPRoute", objs[0]["metadata"]["namespace"], "extra") or ()) == 0
            )
        )
        start = time.perf_counter()
        state.snapshot().list("HTTPRoute")
        result["snapshot+sort"] = f"{(time.perf_counter() - start) * 1000:.1f} ms"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    result["client relist"] = f"{client_relist(objs):.2f} s"
    return result


async def main(counts: list[int]) -> None:
    for n in counts:
        row = await measure(n)
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [1000, 10000]))
