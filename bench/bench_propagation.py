"""Propagation: from a state change in the API to the first request served by the new version, per change kind.

Run (one command; it puts itself in a private network namespace):

    python3 bench/bench_propagation.py                      # 100, 2,000 and 10,000 routes, the change kinds
    python3 bench/bench_propagation.py --sizes 10000 --rounds 2 --check-timeout 60   # ~15 min at load 6
    python3 bench/bench_propagation.py --flap 60 --sizes 100  # the minute-long flap (runtime, reload-only)

On a loaded machine, raise ``--check-timeout`` (routegate's ``haproxy -c`` deadline, 5 s by default): at
10,000 routes and load 6 to 8 on 2 cores one ``haproxy -c`` took 9 s of wall time, and every run was
"could not decide".

What runs, as in a cluster: the in-process fake apiserver (``tests/fakekube.py``, speaking the real
list/watch protocol) holds the state of ``bench_gate`` (N HTTPRoutes on three Gateways with HTTP and HTTPS
listeners, a Service and EndpointSlice per two routes); a few Services point at small echo backends on
127.0.0.x that say who answered, with which request header. ``routegate reconcile --kubeconfig`` runs as a
real process with the default settings (``--debounce``, ``--max-wait``, ``--min-reload-interval``,
statuses written back through a Lease), ``--runtime-socket`` and ``--reload-pidfile`` on a real
``haproxy -W`` 3.4 master-worker started on its first promoted version. A steady request loop runs on
another route throughout and samples the master's processes.

Change kinds (header value, path, hostname, hostname on a route whose rules are all map entries, weights, new
route with a new backend, a reload-only change: a new response header; the measured route ``route-0`` also has
regex, redirect and header-match rules, which are frontend lines that name its hostnames, so its hostname
change is a reload by rule 2 of ``runtimeplans``), ``--rounds`` changes each, back and forth, each made when
the reconciler is idle (a reload-only change also when no reload happened within the minimum interval): the
time from the write to the fake apiserver to the first request answered by the new version (median, p95), how
the data plane was updated (``routegate_dataplane_updates_total``), reloads, the reconcile steps' mean seconds
(``routegate_reconcile_step_duration_seconds``), failed requests of the steady loop, the load average, and the
reconcile process's peak RSS (VmHWM of that process: the reconciler alone, not this harness or the fake
apiserver).

``--flap SECONDS``: instead of the kinds, one route flaps every ``--flap-every`` seconds for SECONDS
under the steady loop, once with a runtime change (a header value) and once with a reload-only change
(a response header on/off): flaps, reconcile runs, data plane updates by how, reloads (and the shortest
gap between two reloads signalled, from the reconciler's log), the peak number of HAProxy processes,
failed requests, and whether the data plane ends on the last version. "At most one reload per
--min-reload-interval" holds when the shortest gap is at least the interval.

The machine is shared: the load average is printed with every table; compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import itertools
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.bench_gate import objects  # noqa: E402
from haproxy_check.runtime.promotion import Promoter  # noqa: E402
from tests.cluster.clusterkit import install_gateway_api  # noqa: E402
from tests.fakekube import FakeKube  # noqa: E402

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
PLAIN = "route-plain"  # one PathPrefix rule: map entries only (bench_gate's routes all have frontend rules)
HOST = f"app-{PROBE}.edge.example.com"
GW = "gateway.networking.k8s.io"
NEW = (("Service", "svc-new"), ("EndpointSlice", "svc-new-abcde"), ("HTTPRoute", "route-new"))
Objs = dict[tuple[str, str], dict[str, Any]]  # (kind, name) -> object (names are unique in this state)
Probe = Callable[[], bool]


def _at(objs: Objs, slice_name: str, addresses: tuple[str, ...]) -> None:
    objs["EndpointSlice", slice_name]["endpoints"] = [
        {"addresses": [a], "conditions": {"ready": True}} for a in addresses]


def base_state(n: int) -> Objs:
    objs = {(o["kind"], o["metadata"]["name"]): o for o in objects(n)}
    route = objs["HTTPRoute", f"route-{PROBE}"]
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = 100  # weights: svc-0 takes all, then svc-20
    route["spec"]["rules"][0]["backendRefs"][1]["weight"] = 0
    _at(objs, "svc-0-abcde", ("127.0.0.1", "127.0.0.2"))
    _at(objs, "svc-20-abcde", ("127.0.0.3",))
    _at(objs, f"svc-{STEADY}-abcde", ("127.0.0.5",))
    _at(objs, f"svc-{STEADY + 20}-abcde", ("127.0.0.5",))
    plain = copy.deepcopy(objs["HTTPRoute", f"route-{STEADY}"])  # on Gateway edge (port 80), like route-0
    plain["metadata"] = {**plain["metadata"], "name": PLAIN, "uid": f"uid-{PLAIN}"}
    plain["spec"]["hostnames"] = ["plain.edge.example.com"]
    plain["spec"]["rules"] = [{"matches": [{"path": {"type": "PathPrefix", "value": "/plain"}}],
                               "backendRefs": [{"name": f"svc-{STEADY}", "port": 8080}]}]
    objs["HTTPRoute", PLAIN] = plain
    return objs


def _rule0(objs: Objs) -> dict[str, Any]:
    rule: dict[str, Any] = objs["HTTPRoute", f"route-{PROBE}"]["spec"]["rules"][0]
    return rule


def _new_route(objs: Objs, on: bool) -> None:
    if not on:
        for key in NEW:
            objs.pop(key, None)
        return
    svc = copy.deepcopy(objs["Service", "svc-0"])
    svc["metadata"] = {**svc["metadata"], "name": "svc-new"}
    eps = copy.deepcopy(objs["EndpointSlice", "svc-0-abcde"])
    eps["metadata"] = {**eps["metadata"], "name": "svc-new-abcde", "labels": {"kubernetes.io/service-name": "svc-new"}}
    eps["endpoints"] = [{"addresses": ["127.0.0.4"], "conditions": {"ready": True}}]
    route = copy.deepcopy(objs["HTTPRoute", f"route-{PROBE}"])
    route["metadata"] = {**route["metadata"], "name": "route-new"}
    route["spec"]["hostnames"] = ["new.edge.example.com"]
    route["spec"]["rules"] = [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                               "backendRefs": [{"name": "svc-new", "port": 8080}]}]
    for obj in (svc, eps, route):  # the backend first, then the route, as `kubectl apply -f` of one file
        for field in ("uid", "resourceVersion", "generation", "creationTimestamp"):
            obj["metadata"].pop(field, None)
        objs[obj["kind"], obj["metadata"]["name"]] = obj


def _get(host: str, path: str = "/") -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(f"http://127.0.0.1:80{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, response.read().decode(), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, "", {k.lower(): v for k, v in (exc.headers or {}).items()}


Change = Callable[[Objs, bool], None]


def kinds() -> dict[str, tuple[Change, Callable[[bool], Probe]]]:
    """kind -> (apply the change (on) or its reverse (off) to a state, the probe that says a request
    was served by the state ``on``/``off``)."""

    def header(objs: Objs, on: bool) -> None:
        _rule0(objs)["filters"][0]["requestHeaderModifier"]["set"][0]["value"] = "flip-on" if on else "flip-off"

    def path(objs: Objs, on: bool) -> None:
        _rule0(objs)["matches"][0]["path"]["value"] = f"/moved/{PROBE}" if on else f"/api/{PROBE}"

    def hostname(objs: Objs, on: bool) -> None:
        objs["HTTPRoute", f"route-{PROBE}"]["spec"]["hostnames"] = [HOST, *(["extra.edge.example.com"] if on else [])]

    def plain_hostname(objs: Objs, on: bool) -> None:
        objs["HTTPRoute", PLAIN]["spec"]["hostnames"] = [
            "plain.edge.example.com", *(["extra-plain.edge.example.com"] if on else [])]

    def weights(objs: Objs, on: bool) -> None:
        refs = _rule0(objs)["backendRefs"]
        refs[0]["weight"], refs[1]["weight"] = (0, 100) if on else (100, 0)

    def header_probe(on: bool) -> Probe:
        want = "x-route=flip-on" if on else "x-route=flip-off"
        return lambda: want in _get(HOST, f"/api/{PROBE}")[1]

    def path_probe(on: bool) -> Probe:
        return lambda: (_get(HOST, f"/moved/{PROBE}")[0] == 200) == on

    def hostname_probe(on: bool) -> Probe:
        return lambda: (_get("extra.edge.example.com", f"/api/{PROBE}")[0] == 200) == on

    def plain_hostname_probe(on: bool) -> Probe:
        return lambda: (_get("extra-plain.edge.example.com", "/plain")[0] == 200) == on

    def weights_probe(on: bool) -> Probe:  # one request: svc-20's endpoint, or one of svc-0's two
        return lambda: _get(HOST, f"/api/{PROBE}")[1].startswith(("127.0.0.3",) if on else ("127.0.0.1", "127.0.0.2"))

    def new_route_probe(on: bool) -> Probe:
        return lambda: (_get("new.edge.example.com", "/")[1].startswith("127.0.0.4")) == on

    return {"header value": (header, header_probe), "path": (path, path_probe),
            "hostname": (hostname, hostname_probe), "hostname (map only)": (plain_hostname, plain_hostname_probe),
            "weights": (weights, weights_probe),
            "new route + backend": (_new_route, new_route_probe), "reload-only": (_reload_only, _reload_probe)}


def _reload_only(objs: Objs, on: bool) -> None:
    filters = _rule0(objs)["filters"]
    filters[:] = [f for f in filters if f["type"] != "ResponseHeaderModifier"]
    if on:
        filters.append({"type": "ResponseHeaderModifier",
                        "responseHeaderModifier": {"set": [{"name": "X-Bench", "value": "on"}]}})


def _reload_probe(on: bool) -> Probe:
    return lambda: (_get(HOST, f"/api/{PROBE}")[2].get("x-bench") == "on") == on


class Cluster:
    """The fake apiserver's copy of the state; ``write`` sends what a change altered, as ``kubectl apply``."""

    def __init__(self, kube: FakeKube, objs: Objs) -> None:
        self.kube, self.objs = kube, objs

    def write(self, change: Change, on: bool) -> None:
        touched = [("HTTPRoute", f"route-{PROBE}"), ("HTTPRoute", PLAIN), *NEW]
        before = {k: json.dumps(self.objs[k], sort_keys=True) for k in touched if k in self.objs}
        change(self.objs, on)
        after = {k: json.dumps(self.objs[k], sort_keys=True) for k in touched if k in self.objs}
        for key in touched:  # creates and updates in order (backend first), deletes in reverse (route first)
            if key in after and after[key] != before.get(key):
                self.kube.apply(self.objs[key])
        for key in reversed(touched):
            if key in before and key not in after:
                obj = json.loads(before[key])
                self.kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"])


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


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry))
    return found


class Steady(threading.Thread):
    """A request every ~10 ms on another route; the master's worker processes sampled every ~50 ms."""

    def __init__(self, master: int) -> None:
        super().__init__(daemon=True)
        self.master = master
        self.ok = self.failed = 0
        self.peak = 0  # HAProxy worker processes at once (old ones draining included)
        self.errors: list[str] = []
        self.stop = threading.Event()

    def reset(self) -> None:
        self.ok = self.failed = self.peak = 0

    def run(self) -> None:
        sampled = 0.0
        while not self.stop.is_set():
            if time.monotonic() - sampled > 0.05:
                self.peak = max(self.peak, len(_children(self.master)))
                sampled = time.monotonic()
            try:
                status = _get(f"app-{STEADY}.edge.example.com", f"/api/{STEADY}")[0]
                ok = status == 200
                if not ok:
                    self.errors.append(str(status))
            except OSError as exc:
                ok = False
                self.errors.append(repr(exc))
            self.ok += ok
            self.failed += not ok
            time.sleep(0.01)


def _wait_for(probe: Probe, seconds: float, every: float = 0.003) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if probe():
                return True
        except OSError:
            pass
        time.sleep(every)
    return False


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


class Reconcile:
    """``routegate reconcile --kubeconfig`` of this tree as a real process, and what it says on /metrics."""

    def __init__(self, work: Path, kubeconfig: str, haproxy: str, check_timeout: float) -> None:
        self.out, self.pidfile, self.log = work / "out", work / "haproxy.pid", work / "reconcile.log"
        self.sock = str(work / "admin.sock")
        self.port = _free_port()
        argv = [sys.executable, "-m", "webhook", "reconcile", "--kubeconfig", kubeconfig, "--haproxy", haproxy,
                "--output-dir", str(self.out), "--stats-socket", self.sock, "--runtime-socket", self.sock,
                "--reload-pidfile", str(self.pidfile), "--check-timeout", str(check_timeout),
                "--metrics-listen", f"127.0.0.1:{self.port}", "--log-level", "info"]
        self.proc = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=self.log.open("wb"),
                                     env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(work)})

    def _get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=60) as response:
            text: str = response.read().decode()
            return text

    def metrics(self) -> dict[str, float]:
        """Counters and histogram sums/counts, keyed ``name{label=value}`` (one label at most here)."""
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(self._get("/metrics")):
            for sample in family.samples:
                if sample.name.startswith("routegate_") and not sample.name.endswith("_bucket"):
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    def idle(self) -> bool:
        """The last run reconciled the newest state version the watches hold."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=60) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        except (OSError, ValueError):
            return False
        last = body.get("last") or {}
        return bool(last) and last.get("stateVersion") == (body.get("state") or {}).get("version")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def reloads(self) -> list[tuple[float, str]]:
        """When each reload was signalled (seconds since the epoch) and why, from the reconciler's log."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("event") == "reload signalled":
                    found.append((datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp(),
                                  str(entry.get("reason", ""))))
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _delta(after: dict[str, float], before: dict[str, float], key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def _updates(after: dict[str, float], before: dict[str, float]) -> str:
    how = {k.split("how=")[1].rstrip("}"): _delta(after, before, k) for k in after
           if k.startswith("routegate_dataplane_updates_total{")}
    return " ".join(f"{h} {int(n)}" for h, n in sorted(how.items()) if n) or "-"


def _steps(after: dict[str, float], before: dict[str, float]) -> str:
    """The mean seconds of each reconcile step over the runs between two scrapes (>= 5 ms shown)."""
    prefix = "routegate_reconcile_step_duration_seconds_count{step="
    out = []
    for key in after:
        if key.startswith(prefix):
            step = key[len(prefix):-1]
            runs = _delta(after, before, key)
            seconds = _delta(after, before, f"routegate_reconcile_step_duration_seconds_sum{{step={step}}}")
            if runs and seconds / runs >= 0.005:
                out.append((step, seconds / runs, int(runs)))
    total = next((f"runs {r}" for s, _, r in out if s == "total"), "")
    return " ".join([total, *(f"{s} {m:.3f}" for s, m, _ in out)])


def _haproxy(binary: str, reconcile: Reconcile, work: Path) -> subprocess.Popen[bytes]:
    """``haproxy -W`` on the live version, with the pidfile the reconciler signals."""
    argv = [binary, "-W", "-db", "-p", str(reconcile.pidfile), "-f", str(reconcile.out / "haproxy.cfg")]
    return subprocess.Popen(argv, cwd=work, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=(work / "haproxy.log").open("wb"))


async def _start_size(n: int, kube: FakeKube, work: Path, args: argparse.Namespace
                      ) -> tuple[Cluster, Reconcile, subprocess.Popen[bytes], Steady]:
    install_gateway_api(kube)
    started = time.perf_counter()
    cluster = Cluster(kube, base_state(n))
    stored = kube.preload(cluster.objs.values())
    print(f"  {n} routes: {stored} objects in the fake apiserver in {time.perf_counter() - started:.1f}s",
          flush=True)
    started = time.perf_counter()
    reconcile = Reconcile(work, kube.write_kubeconfig(work / "kubeconfig"), args.haproxy, args.check_timeout)
    promoter = Promoter(reconcile.out, keep=3)
    if not await asyncio.to_thread(_wait_for, lambda: reconcile.proc.poll() is not None
                                   or promoter.last_known_good() is not None, 600, 0.1):
        raise SystemExit("no first promotion within 600 s")
    if reconcile.proc.poll() is not None:
        raise SystemExit(f"routegate reconcile exited: {reconcile.log.read_text()[-2000:]}")
    print(f"  first sync and promotion by routegate reconcile: {time.perf_counter() - started:.1f}s "
          f"(process start included)", flush=True)
    master = await asyncio.to_thread(_haproxy, args.haproxy, reconcile, work)
    if not await asyncio.to_thread(_wait_for, lambda: _get(f"app-{STEADY}.edge.example.com",
                                                           f"/api/{STEADY}")[0] == 200, 60, 0.05):
        raise SystemExit(f"HAProxy did not serve: {(work / 'haproxy.log').read_text()[-1000:]}")
    await asyncio.to_thread(_wait_for, reconcile.idle, 600, 0.2)
    steady = Steady(master.pid)
    steady.start()
    return cluster, reconcile, master, steady


async def _settle(reconcile: Reconcile, seconds: float = 600) -> None:
    if not await asyncio.to_thread(_wait_for, reconcile.idle, seconds, 0.1):
        print("  (the reconciler did not become idle)", flush=True)


async def measure_kinds(cluster: Cluster, reconcile: Reconcile, steady: Steady, args: argparse.Namespace) -> None:
    print(f"  {'kind':<21} {'median':>7} {'p95':>7}  {'data plane updates':<20} {'reloads':>7} {'failed':>6} "
          f"{'load':>5}  reconcile steps (mean s)", flush=True)
    for kind, (change, probe) in kinds().items():
        if args.kinds and kind not in args.kinds:
            continue
        latencies: list[float] = []
        before = await asyncio.to_thread(reconcile.metrics)
        failed_before, reloads_before = steady.failed, len(reconcile.reloads())
        for r in range(args.rounds):
            on = r % 2 == 0
            await _settle(reconcile)
            await asyncio.sleep(MIN_RELOAD_INTERVAL + 0.2 if kind == "reload-only" else 0.3)
            mark = time.monotonic()
            cluster.write(change, on)
            served = await asyncio.to_thread(_wait_for, probe(on), args.timeout)
            latencies.append(time.monotonic() - mark if served else float("inf"))
        await _settle(reconcile)
        after = await asyncio.to_thread(reconcile.metrics)
        reloads = int(_delta(after, before, "routegate_dataplane_updates_total{how=reload}"))
        print(f"  {kind:<21} {statistics.median(latencies):>6.3f}s {_pct(latencies, 0.95):>6.3f}s  "
              f"{_updates(after, before):<20} {reloads:>7} {steady.failed - failed_before:>6} "
              f"{os.getloadavg()[0]:>5.2f}  {_steps(after, before)}", flush=True)
        for why in sorted({why for _, why in reconcile.reloads()[reloads_before:]}):
            print(f"  {'':<21} reload: {why[:150]}", flush=True)


async def measure_flap(cluster: Cluster, reconcile: Reconcile, steady: Steady, args: argparse.Namespace) -> None:
    header = kinds()["header value"]
    for name, (change, probe) in (("runtime (header value)", header),
                                  ("reload-only (response header)", (_reload_only, _reload_probe))):
        await _settle(reconcile)
        await asyncio.sleep(MIN_RELOAD_INTERVAL + 0.2)
        before = await asyncio.to_thread(reconcile.metrics)
        reloads_before = len(reconcile.reloads())
        steady.reset()
        load = os.getloadavg()[0]
        started = time.monotonic()
        flaps, on = 0, False
        while time.monotonic() - started < args.flap:
            on = not on
            cluster.write(change, on)
            flaps += 1
            await asyncio.sleep(args.flap_every)
        flapped = time.monotonic() - started
        served = await asyncio.to_thread(_wait_for, probe(on), args.timeout)  # ends on the last version
        await _settle(reconcile)
        await asyncio.sleep(MIN_RELOAD_INTERVAL + 0.5)  # a deferred reload fires
        after = await asyncio.to_thread(reconcile.metrics)
        times = [when for when, _ in reconcile.reloads()[reloads_before:]]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        holds = all(g >= MIN_RELOAD_INTERVAL - 0.05 for g in gaps)  # log timestamps: microseconds
        allowed = math.floor((time.monotonic() - started) / MIN_RELOAD_INTERVAL) + 1
        runs = int(_delta(after, before, "routegate_reconcile_step_duration_seconds_count{step=total}"))
        print(f"  flap {name}: {flaps} flaps every {args.flap_every:g}s for {flapped:.1f}s; {runs} reconcile runs; "
              f"data plane updates: {_updates(after, before)}; reloads {len(times)} (at most {allowed} allowed), "
              f"shortest gap {min(gaps) if gaps else float('nan'):.2f}s "
              f"(interval {MIN_RELOAD_INTERVAL:g}s: {'holds' if holds else 'BROKEN'}); "
              f"deferred {int(_delta(after, before, 'routegate_reloads_deferred_total'))}; "
              f"peak HAProxy workers {steady.peak}; steady {steady.ok} ok, {steady.failed} failed"
              f"{' ' + str(sorted(set(steady.errors))[:3]) if steady.failed else ''}; "
              f"ends on the last version: {served}; load {load:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)


async def run_size(n: int, work: Path, args: argparse.Namespace) -> None:
    async with FakeKube(page_limit_max=500) as kube:
        cluster, reconcile, master, steady = await _start_size(n, kube, work, args)
        try:
            if args.flap:
                await measure_flap(cluster, reconcile, steady, args)
            else:
                await measure_kinds(cluster, reconcile, steady, args)
            rss = reconcile.peak_rss_mib()
        finally:
            steady.stop.set()
            steady.join(5)
            reconcile.stop()
            os.killpg(master.pid, signal.SIGTERM)
            master.wait(10)
        print(f"  {n} routes: steady loop {steady.ok} ok, {steady.failed} failed; peak HAProxy workers {steady.peak}; "
              f"routegate reconcile peak RSS (VmHWM of its process) {rss:.0f} MiB; load {_load()}", flush=True)
        if steady.failed:
            print(f"  failures: {sorted(set(steady.errors))[:5]}", flush=True)


async def main(args: argparse.Namespace) -> None:
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load {_load()} ({os.cpu_count()} cores); haproxy {args.haproxy}; "
          f"routegate reconcile with its default settings", flush=True)
    with echo_servers():
        for n in args.sizes:
            with tempfile.TemporaryDirectory(prefix="bench-propagation-") as tmp:
                await run_size(n, Path(tmp), args)
    print(f"load after: {_load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=lambda t: [int(x) for x in t.split(",")], default=[100, 2000, 10000],
                        help="numbers of routes, comma-separated (default 100,2000,10000)")
    parser.add_argument("--rounds", type=lambda t: int(t) + int(t) % 2, default=4,
                        help="changes per kind, back and forth (rounded up to even: each kind ends as it started)")
    parser.add_argument("--kinds", type=lambda t: t.split(","), default=[],
                        help="only these change kinds (comma-separated names as printed)")
    parser.add_argument("--flap", type=float, default=0.0, metavar="SECONDS",
                        help="instead of the kinds: flap one route for SECONDS (runtime, then reload-only)")
    parser.add_argument("--flap-every", type=float, default=0.3, metavar="SECONDS")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="how long a change may take to be served before it counts as never (inf)")
    parser.add_argument("--check-timeout", type=float, default=5.0,
                        help="routegate's haproxy -c deadline (default 5, its default; raise it on a loaded machine)")
    parser.add_argument("--haproxy", default=os.environ.get("ROUTEGATE_HAPROXY_34", "/work/h34/haproxy"))
    parsed = parser.parse_args()
    if os.environ.get("BENCH_NETNS") != "1":  # a private network namespace: only our loopback
        os.execvpe("unshare", ["unshare", "--net", "--", sys.executable, *sys.argv],
                   {**os.environ, "BENCH_NETNS": "1"})
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    asyncio.run(main(parsed))
