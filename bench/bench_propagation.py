"""Propagation: from a state change to the first request served by the new version, per change kind.

    python3 bench/bench_propagation.py [--sizes 100,2000] [--rounds 5] [--haproxy /work/h34/haproxy]

Runs itself inside a private network namespace (``unshare --net``; only ``lo``, brought up here). For each
size it builds the benchmark state of ``bench_gate`` (N HTTPRoutes on three Gateways with HTTP and HTTPS
listeners), points a few routes' Services at small echo backends on 127.0.0.x that say who answered and
with which request header, promotes the first version with the real reconcile loop, starts a real
``haproxy -W`` master-worker (3.4: the runtime features) on it, and runs the reconcile loop in this
process exactly as ``routegate reconcile`` does (``following.follow`` with the default debounce,
Reconciler, Promoter, RuntimeApplier over the stats socket, SIGUSR2 reloads, the default
``--min-reload-interval``). The state source is in-process (a change is visible to the loop at once, as a
watch event is). A steady request loop runs on another route throughout.

Per change kind (header value, path, hostname, weights, new route with a new backend, a reload-only
change: a new response header), ``--rounds`` changes (back and forth), each measured from the moment the
source holds the new state to the first request answered by the new version: median and p95, how the
reconciler applied it, the reconcile's own step timings (median), reloads, and failed requests of the
steady loop. A reload-only change waits until no reload happened within the minimum interval. The
process's peak RSS is printed per size. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_gate import objects  # noqa: E402
from haproxy_check.check import binaries  # noqa: E402
from haproxy_check.runtime.promotion import Promoter  # noqa: E402
from validators.states import MemoryState  # noqa: E402
from webhook import assembly  # noqa: E402
from webhook.following import follow  # noqa: E402
from webhook.promotedmemory import PromotedMemory  # noqa: E402
from webhook.reconcile import Reconciler  # noqa: E402
from webhook.reconcileruntime import PidfileReload, RuntimeApplier  # noqa: E402

ECHO = r"""
import http.server, sys
name = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = f"{name} x-route={self.headers.get('x-route', '')} path={self.path}\n".encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((sys.argv[1], 8080), H).serve_forever()
"""
ECHOES = ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
MIN_RELOAD_INTERVAL = 2.0  # the --min-reload-interval default
PROBE = 0  # the route whose changes are measured (Gateway "edge")
STEADY = 3  # the route the steady request loop uses


class Source:
    """The state the loop follows; ``changed`` wakes it at once, as the cluster's watches do."""

    def __init__(self, state: MemoryState) -> None:
        self.ready = True
        self.state = state
        self.changed = asyncio.Event()

    def snapshot(self) -> MemoryState:
        return self.state

    def status(self) -> dict[str, Any]:
        return {}

    def set(self, state: MemoryState) -> None:
        self.state = state
        event, self.changed = self.changed, asyncio.Event()
        event.set()


def _find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def _at(objs: list[dict[str, Any]], slice_name: str, addresses: tuple[str, ...]) -> None:
    _find(objs, "EndpointSlice", slice_name)["endpoints"] = [
        {"addresses": [a], "conditions": {"ready": True}} for a in addresses]


def base_state(n: int) -> list[dict[str, Any]]:
    objs = objects(n)
    route = _find(objs, "HTTPRoute", f"route-{PROBE}")
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = 100  # weights: svc-0 takes all, then svc-20
    route["spec"]["rules"][0]["backendRefs"][1]["weight"] = 0
    _at(objs, "svc-0-abcde", ("127.0.0.1", "127.0.0.2"))
    _at(objs, "svc-20-abcde", ("127.0.0.3",))
    _at(objs, f"svc-{STEADY}-abcde", ("127.0.0.5",))
    _at(objs, f"svc-{STEADY + 20}-abcde", ("127.0.0.5",))
    return objs


def _rule0(objs: list[dict[str, Any]]) -> dict[str, Any]:
    rule: dict[str, Any] = _find(objs, "HTTPRoute", f"route-{PROBE}")["spec"]["rules"][0]
    return rule


def _new_route(objs: list[dict[str, Any]], on: bool) -> None:
    if not on:
        objs[:] = [o for o in objs if o["metadata"]["name"] not in ("route-new", "svc-new", "svc-new-abcde")]
        return
    svc = copy.deepcopy(_find(objs, "Service", "svc-0"))
    svc["metadata"] = {**svc["metadata"], "name": "svc-new", "uid": "uid-svc-new"}
    eps = copy.deepcopy(_find(objs, "EndpointSlice", "svc-0-abcde"))
    eps["metadata"] = {**eps["metadata"], "name": "svc-new-abcde", "uid": "uid-svc-new-eps",
                       "labels": {"kubernetes.io/service-name": "svc-new"}}
    eps["endpoints"] = [{"addresses": ["127.0.0.4"], "conditions": {"ready": True}}]
    route = copy.deepcopy(_find(objs, "HTTPRoute", f"route-{PROBE}"))
    route["metadata"] = {**route["metadata"], "name": "route-new", "uid": "uid-route-new"}
    route["spec"]["hostnames"] = ["new.edge.example.com"]
    route["spec"]["rules"] = [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                               "backendRefs": [{"name": "svc-new", "port": 8080}]}]
    objs += [svc, eps, route]


Probe = Callable[[], bool]


def _get(host: str, path: str = "/") -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(f"http://127.0.0.1:80{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, response.read().decode(), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, "", {k.lower(): v for k, v in (exc.headers or {}).items()}


HOST = f"app-{PROBE}.edge.example.com"


def kinds() -> dict[str, tuple[Callable[[list[dict[str, Any]], bool], None], Callable[[bool], Probe]]]:
    """kind -> (apply the change (on) or its reverse (off) to a state, the probe that says a request
    was served by the state ``on``/``off``)."""

    def header(objs: list[dict[str, Any]], on: bool) -> None:
        _rule0(objs)["filters"][0]["requestHeaderModifier"]["set"][0]["value"] = "flip-on" if on else "flip-off"

    def path(objs: list[dict[str, Any]], on: bool) -> None:
        _rule0(objs)["matches"][0]["path"]["value"] = f"/moved/{PROBE}" if on else f"/api/{PROBE}"

    def hostname(objs: list[dict[str, Any]], on: bool) -> None:
        route = _find(objs, "HTTPRoute", f"route-{PROBE}")
        route["spec"]["hostnames"] = [HOST, *(["extra.edge.example.com"] if on else [])]

    def weights(objs: list[dict[str, Any]], on: bool) -> None:
        refs = _rule0(objs)["backendRefs"]
        refs[0]["weight"], refs[1]["weight"] = (0, 100) if on else (100, 0)

    def reload_only(objs: list[dict[str, Any]], on: bool) -> None:
        filters = _rule0(objs)["filters"]
        filters[:] = [f for f in filters if f["type"] != "ResponseHeaderModifier"]
        if on:
            filters.append({"type": "ResponseHeaderModifier",
                            "responseHeaderModifier": {"set": [{"name": "X-Bench", "value": "on"}]}})

    def header_probe(on: bool) -> Probe:
        want = "x-route=flip-on" if on else "x-route=flip-off"
        return lambda: want in _get(HOST, f"/api/{PROBE}")[1]

    def path_probe(on: bool) -> Probe:
        return lambda: (_get(HOST, f"/moved/{PROBE}")[0] == 200) == on

    def hostname_probe(on: bool) -> Probe:
        return lambda: (_get("extra.edge.example.com", f"/api/{PROBE}")[0] == 200) == on

    def weights_probe(on: bool) -> Probe:  # one request: svc-20's endpoint, or one of svc-0's two
        return lambda: _get(HOST, f"/api/{PROBE}")[1].startswith(("127.0.0.3",) if on else ("127.0.0.1", "127.0.0.2"))

    def new_route_probe(on: bool) -> Probe:
        return lambda: (_get("new.edge.example.com", "/")[1].startswith("127.0.0.4")) == on

    def reload_probe(on: bool) -> Probe:
        return lambda: (_get(HOST, f"/api/{PROBE}")[2].get("x-bench") == "on") == on

    return {"header value": (header, header_probe), "path": (path, path_probe),
            "hostname": (hostname, hostname_probe), "weights": (weights, weights_probe),
            "new route + backend": (_new_route, new_route_probe), "reload-only": (reload_only, reload_probe)}


@contextlib.contextmanager
def echo_servers() -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", ECHO, a], stderr=subprocess.DEVNULL) for a in ECHOES]
    try:
        time.sleep(0.5)
        yield
    finally:
        for p in procs:
            p.terminate()
            p.wait(5)


class Steady(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.ok = self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                ok = _get(f"app-{STEADY}.edge.example.com", f"/api/{STEADY}")[0] == 200
            except OSError:
                ok = False
            self.ok += ok
            self.failed += not ok
            time.sleep(0.01)


def _wait_for(probe: Probe, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if probe():
                return True
        except OSError:
            pass
        time.sleep(0.003)
    return False


def _start(haproxy: str, pidfile: Path, out: Path, work: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([haproxy, "-W", "-db", "-p", str(pidfile), "-f", str(out / "haproxy.cfg")],
                            cwd=work, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=(work / "haproxy.log").open("wb"))


def _reconciled(reconciler: Reconciler, version: str) -> Probe:
    return lambda: reconciler.last is not None and reconciler.last.state_version == version


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


async def run_size(n: int, haproxy: str, rounds: int, work: Path, check_timeout: float,
                   only: list[str]) -> None:
    binary = await binaries.detect(haproxy)
    sock = str(work / "admin.sock")
    gate = assembly.build_gate(binary, assembly.GateSettings(render={"stats_socket": sock},
                                                             check_timeout=check_timeout))
    out, pidfile = work / "out", work / "haproxy.pid"
    promoter, memory = Promoter(out, keep=3), PromotedMemory()
    applier = RuntimeApplier(promoter, sock, dataplane_version=binary.version_tuple,
                             reload=PidfileReload(pidfile), memory=memory, min_reload_interval=MIN_RELOAD_INTERVAL)
    reconciler = Reconciler(gate, promoter, on_promoted=[applier], memory=memory)
    objs = base_state(n)
    source = Source(MemoryState(copy.deepcopy(objs), version="v0"))
    started = time.perf_counter()
    first = await reconciler.reconcile(source.snapshot())
    print(f"  {n} routes: first reconcile {first.result} in {time.perf_counter() - started:.1f}s", flush=True)
    master = await asyncio.to_thread(_start, haproxy, pidfile, out, work)
    steady = Steady()
    loop: asyncio.Task[None] | None = None
    try:
        if not await asyncio.to_thread(_wait_for, lambda: _get(f"app-{STEADY}.edge.example.com",
                                                               f"/api/{STEADY}")[0] == 200, 30):
            raise SystemExit(f"HAProxy did not serve: {(work / 'haproxy.log').read_text()[-1000:]}")
        steady.start()
        loop = asyncio.ensure_future(follow(source, reconciler))  # the defaults: debounce 0.25 s, max-wait 2 s
        version = 0
        print(f"  {'kind':<22} {'median':>8} {'p95':>8}  {'how':<16} {'reloads':>7}  reconcile steps (median s)",
              flush=True)
        for kind, (change, probe) in kinds().items():
            if only and kind not in only:
                continue
            latencies: list[float] = []
            hows: list[str] = []
            steps: dict[str, list[float]] = {}
            reloads = applier.reloads
            for r in range(rounds):
                on = r % 2 == 0
                change(objs, on)
                if kind == "reload-only":  # "when no reload happened within the minimum interval"
                    await asyncio.sleep(MIN_RELOAD_INTERVAL + 0.2)
                else:
                    await asyncio.sleep(0.3)  # apart from the previous change: a lone change each time
                version += 1
                mark = time.monotonic()
                source.set(MemoryState(copy.deepcopy(objs), version=f"v{version}"))
                served = await asyncio.to_thread(_wait_for, probe(on), 30)
                if not served and os.environ.get("BENCH_DEBUG"):
                    from haproxy_check.runtime.runtimeapi import send
                    print(kind, on, _get(HOST, f"/api/{PROBE}"), applier.last,
                          [line for line in (await send(sock, "show map maps/rule-backend.map")).splitlines()
                           if "route-0_" in line],
                          await send(sock, "show servers state gw_h_team-00_route-0_svc-20_8080"), flush=True)
                latencies.append(time.monotonic() - mark if served else float("inf"))
                await asyncio.to_thread(_wait_for, _reconciled(reconciler, f"v{version}"), 30)
                hows.append(applier.last.action if applier.last else "?")
                for k, v in (reconciler.last.timings if reconciler.last else {}).items():
                    steps.setdefault(k, []).append(v)
            shown = "  ".join(f"{k} {statistics.median(v):.3f}" for k, v in steps.items()
                              if statistics.median(v) >= 0.005)
            print(f"  {kind:<22} {statistics.median(latencies):>7.3f}s {_pct(latencies, 0.95):>7.3f}s  "
                  f"{'/'.join(sorted(set(hows))):<16} {applier.reloads - reloads:>7}  {shown}", flush=True)
        await asyncio.sleep(0.5)
    finally:
        if loop is not None:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        await applier.close()
        steady.stop.set()
        steady.join(5)
        os.killpg(master.pid, signal.SIGTERM)
        master.wait(10)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  steady loop: {steady.ok} ok, {steady.failed} failed; reloads {applier.reloads}; "
          f"peak RSS of this process (reconcile + bench) {rss:.0f} MiB", flush=True)


async def main(args: argparse.Namespace) -> None:
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"({os.cpu_count()} cores); haproxy {args.haproxy}", flush=True)
    with echo_servers():
        for n in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                await run_size(n, args.haproxy, args.rounds, Path(tmp), args.check_timeout, args.kinds)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=lambda t: [int(x) for x in t.split(",")], default=[100, 2000])
    parser.add_argument("--rounds", type=lambda t: int(t) + int(t) % 2, default=6,
                        help="changes per kind, back and forth (rounded up to even: each kind ends as it started)")
    parser.add_argument("--kinds", type=lambda t: t.split(","), default=[],
                        help="only these change kinds (comma-separated names as printed)")
    parser.add_argument("--check-timeout", type=float, default=5.0,
                        help="the gate's haproxy -c timeout (default 5, as routegate's; raise it on a loaded machine)")
    parser.add_argument("--haproxy", default=os.environ.get("ROUTEGATE_HAPROXY_34", "/work/h34/haproxy"))
    parsed = parser.parse_args()
    if os.environ.get("BENCH_NETNS") != "1":  # a private network namespace: only our loopback
        os.execvpe("unshare", ["unshare", "--net", "--", sys.executable, *sys.argv],
                   {**os.environ, "BENCH_NETNS": "1"})
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"], check=False)  # 127/8 is lo's already
    asyncio.run(main(parsed))
