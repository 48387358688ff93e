"""The O(change) figures of the gate, end to end, as ratios to the ``haproxy -c`` floor of the same run.

Run: ``python bench/bench_gate.py [--sizes 100,1000,10000] [--quick] [--tree DIR]``.

For each size it writes a state of N realistic HTTPRoutes (three Gateways with HTTP and HTTPS
listeners, a certificate Secret, one Service and EndpointSlice per two routes, header modifiers,
rewrites, redirects, regex and header matches) and starts ``routegate serve --state DIR`` as a real
subprocess over HTTPS. Printed, each as a ratio to the floor (``haproxy -c`` of a trivial config, run
through the gate's own sandbox runner, median of 15, measured again before each size):

- P1: one-review latency, CREATE / UPDATE / DELETE, median and p99 over ``--reviews`` each (>= 30), as
  ratios to a bare ``haproxy -c`` of the trivial config (no sandbox, measured right after; issue 31's
  target: <= 1.5x median, <= 3x p99 at 10,000 routes), with the sandboxed floor beside it;
- P2: ``routegate check`` of all N objects vs ``haproxy -c`` on the same full rendered config, the median
  ratio of ``--p2-runs`` alternating pairs;
- P3: ``--burst`` concurrent reviews (at ``--burst-size`` routes), one connection each as the apiserver
  opens them: decided (allow or deny), busy (503 past the connection cap), could not decide (503),
  dropped (closed without an answer), client timeouts at 10 s, the slowest answer and p99, the worst
  /healthz and /metrics latency while the burst runs, and the server's peak RSS (issue 31's target:
  ``--burst 1000 --burst-size 10000``: none dropped, >= 90 % decided, all within 10 s, /healthz < 1 s,
  peak RSS <= 400 MiB), and the server's CPU per review of the burst (its own, and its reaped children's:
  ``haproxy -c`` and forked rule workers), which a loaded shared machine moves less than the wall times.
  The server runs in a session of its own (as a deployed webhook has its own cgroup: the kernel shares
  CPU between sessions) and the burst's client is lean (``post_lean``): the apiserver it stands in for
  runs elsewhere, so neither may take the server's share of the two cores;
- P4: RSS of ``serve`` after 100 reviews; time from process start to ready, as a ratio to
  ``json.loads`` of the same objects;
- P5: the traffic diff's share of a review (route CREATE/UPDATE and a Gateway UPDATE adding a listener,
  whose closure holds every route of the Gateway), in this process: the same reviews through a Gate
  with the diff and one without it (``Gate(traffic=False)``, the benchmark-only setting), alternating,
  in one run.

``--tree`` runs another checkout's routegate (e.g. main before a change) with this harness, so
before/after figures come from one generator; ``--versus DIR`` starts that checkout's serve beside this
one's and sends P1's reviews to both, in blocks taking turns (who goes first alternating), so both meet the same load.
The machine is shared: compare ratios, not seconds.
The tree's modules are compiled to bytecode first, as installing routegate does, so that a machine
with PYTHONDONTWRITEBYTECODE set does not charge every CLI run for compiling them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import py_compile
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certs import generation  # noqa: E402
from haproxy_check.check import binaries  # noqa: E402
from haproxy_check.check.sandboxes import SANDBOX_ENV, Runner  # noqa: E402

GW = "gateway.networking.k8s.io"
NAMESPACES = 20
GATEWAYS = ("edge", "public", "internal")
CLIENT_TIMEOUT = 10.0
TRIVIAL_CFG = """global
defaults
    mode http
    timeout client 1s
    timeout server 1s
    timeout connect 1s
frontend f
    bind 127.0.0.1:8080
    default_backend b
backend b
    server s 127.0.0.1:1
"""


# ------------------------------------------------------------------------------------ state


def _meta(name: str, namespace: str, i: int = 0) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
            "creationTimestamp": f"2026-01-{1 + i // 86400 % 28:02d}T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:"
                                 f"{i % 60:02d}Z"}


def listener_secret() -> dict[str, Any]:
    now = datetime.now(UTC)
    ca = generation.new_ca(now=now)
    leaf = generation.new_leaf(ca, now=now, dns_names=["*.example.com"])
    import base64

    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": _meta("wildcard-tls", "gateways"),
            "data": {"tls.crt": base64.b64encode(leaf.cert_pem()).decode(),
                     "tls.key": base64.b64encode(leaf.key_pem()).decode()}}


def gateway(name: str, k: int) -> dict[str, Any]:
    listeners: list[dict[str, Any]] = [
        {"name": "http", "protocol": "HTTP", "port": 80, "hostname": f"*.{name}.example.com",
         "allowedRoutes": {"namespaces": {"from": "All"}}},
        {"name": "https", "protocol": "HTTPS", "port": 443, "hostname": f"*.{name}.example.com",
         "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "wildcard-tls"}]},
         "allowedRoutes": {"namespaces": {"from": "All"}}},
    ]
    return {"apiVersion": f"{GW}/v1", "kind": "Gateway", "metadata": _meta(name, "gateways", k),
            "spec": {"gatewayClassName": "haproxy", "listeners": listeners}}


def service(i: int) -> dict[str, Any]:
    ns = f"team-{i % NAMESPACES:02d}"
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(f"svc-{i}", ns),
            "spec": {"selector": {"app": f"svc-{i}"},
                     "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}}


def endpoint_slice(i: int) -> dict[str, Any]:
    ns = f"team-{i % NAMESPACES:02d}"
    meta = _meta(f"svc-{i}-abcde", ns)
    meta["labels"] = {"kubernetes.io/service-name": f"svc-{i}"}
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta,
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [f"10.{i // 250 % 250}.{i % 250}.{k + 1}"],
                           "conditions": {"ready": True}} for k in range(2)]}


def route(i: int, *, variant: int = 0) -> dict[str, Any]:
    """The i-th HTTPRoute; ``variant`` changes one header value (an UPDATE with new content)."""
    ns = f"team-{i % NAMESPACES:02d}"
    gw = GATEWAYS[i % len(GATEWAYS)]
    j = i // (2 * NAMESPACES) * NAMESPACES + i % NAMESPACES  # two routes per Service, same namespace
    svc, other = f"svc-{j}", f"svc-{j + NAMESPACES}"
    rules: list[dict[str, Any]] = [
        {"matches": [{"path": {"type": "PathPrefix", "value": f"/api/{i}"}}],
         "filters": [{"type": "RequestHeaderModifier",
                      "requestHeaderModifier": {"set": [{"name": "X-Route", "value": f"r{i}-v{variant}"}],
                                                "remove": ["X-Debug"]}}],
         "backendRefs": [{"name": svc, "port": 8080, "weight": 90}, {"name": other, "port": 8080, "weight": 10}]},
        {"matches": [{"path": {"type": "Exact", "value": f"/health/{i}"}, "method": "GET",
                      "headers": [{"name": "X-Probe", "value": "yes"}]}],
         "backendRefs": [{"name": svc, "port": 8080}]},
    ]
    if i % 3 == 0:
        rules.append({"matches": [{"path": {"type": "RegularExpression", "value": f"/v[0-9]+/items/{i}/[a-z]+"}}],
                      "filters": [{"type": "URLRewrite", "urlRewrite": {
                          "path": {"type": "ReplaceFullPath", "replaceFullPath": "/items"}}}],
                      "backendRefs": [{"name": svc, "port": 8080}]})
    if i % 4 == 0:
        rules.append({"matches": [{"path": {"type": "PathPrefix", "value": f"/old/{i}"}}],
                      "filters": [{"type": "RequestRedirect",
                                   "requestRedirect": {"scheme": "https", "statusCode": 301}}]})
    if i % 5 == 0:
        rules.append({"matches": [{"path": {"type": "PathPrefix", "value": f"/m/{i}"},
                                   "headers": [{"name": "User-Agent", "type": "RegularExpression",
                                                "value": "Mobile|Android"}]}],
                      "filters": [{"type": "ResponseHeaderModifier",
                                   "responseHeaderModifier": {"add": [{"name": "X-Mobile", "value": "1"}]}}],
                      "backendRefs": [{"name": other, "port": 8080}]})
    return {"apiVersion": f"{GW}/v1", "kind": "HTTPRoute", "metadata": _meta(f"route-{i}", ns, i),
            "spec": {"parentRefs": [{"name": gw, "namespace": "gateways", "sectionName": "http"},
                                    {"name": gw, "namespace": "gateways", "sectionName": "https"}],
                     "hostnames": [f"app-{i}.{gw}.example.com"], "rules": rules}}


def objects(n: int) -> list[dict[str, Any]]:
    services = n // 2 + 3 * NAMESPACES
    return [listener_secret(), *(gateway(g, k) for k, g in enumerate(GATEWAYS)),
            *(service(i) for i in range(services)), *(endpoint_slice(i) for i in range(services)),
            *(route(i) for i in range(n))]


def write_state(directory: Path, objs: list[dict[str, Any]]) -> None:
    """One JSON List document per kind (JSON is YAML, so every loader reads it)."""
    directory.mkdir(parents=True, exist_ok=True)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objs:
        by_kind.setdefault(obj["kind"], []).append(obj)
    for kind, items in by_kind.items():
        (directory / f"{kind.lower()}s.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                                     "items": items}))


# ------------------------------------------------------------------------------------ reviews


def admission_review(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> bytes:
    subject = obj or old
    assert subject is not None
    meta = subject["metadata"]
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": GW, "version": "v1", "kind": "HTTPRoute"},
        "resource": {"group": GW, "version": "v1", "resource": "httproutes"},
        "name": meta["name"], "namespace": meta["namespace"], "operation": operation,
        "userInfo": {"username": "bench"}, "object": obj, "oldObject": old, "dryRun": False,
    }}).encode()


class Server:
    """``routegate serve --state DIR`` of a checkout, as a subprocess on free loopback ports."""

    def __init__(self, tree: Path, state: Path, work: Path) -> None:
        self.tree, self.state, self.work = tree, state, work
        self.port, self.metrics_port = _free_port(), _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        # A throwaway self-signed pair made by the server itself: nothing to verify, and no system CA
        # store loaded into the context (under OpenSSL 3 that store makes each client handshake cost a
        # third more, which a burst of 1,000 new connections charges to the same two cores as the server).
        self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ssl.check_hostname = False
        self.ssl.verify_mode = ssl.CERT_NONE

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(self.tree)}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "serve", "--state", str(self.state),
             "--listen", f"127.0.0.1:{self.port}", "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
             "--cert-dir", str(self.work / "certs"), "--log-level", "warning"],
            cwd=self.tree, env=env, stdout=subprocess.DEVNULL, stderr=open(self.work / "serve.log", "wb"),  # noqa: SIM115
            # A session of its own, as a deployed webhook has a cgroup of its own: the kernel shares CPU
            # between sessions (autogroup), so in this one's session the server would split one share
            # with the benchmark's client (the apiserver's stand-in, which runs elsewhere in a cluster).
            start_new_session=True,
        )

    async def wait_ready(self, session: aiohttp.ClientSession, within: float) -> float:
        assert self.proc is not None
        deadline = self.started + within
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                log = (self.work / "serve.log").read_text()[-2000:]
                raise RuntimeError(f"serve exited {self.proc.returncode}: {log}")
            with contextlib.suppress(aiohttp.ClientError, OSError, asyncio.TimeoutError):
                async with session.get(f"{self.base}/readyz", ssl=self.ssl,
                                       timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        return time.perf_counter() - self.started
            await asyncio.sleep(0.05)
        raise TimeoutError(f"serve not ready within {within:g}s")

    def rss_mib(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def peak_rss_mib(self) -> float:
        """The process's peak RSS so far (VmHWM)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU seconds of the server process so far, and of its children it has reaped (``haproxy -c``,
        forked rule workers): the burst's work, whatever else the shared machine runs."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def post_review(server: Server, session: aiohttp.ClientSession, body: bytes,
                      timeout: float = CLIENT_TIMEOUT) -> tuple[float, str]:
    """(seconds, outcome): allow, deny, undecided (a 503 "could not decide"), busy (a 503 past the
    connection cap), dropped (the connection closed or reset without an answer) or timeout."""
    started = time.perf_counter()
    try:
        # The apiserver appends the webhook's timeoutSeconds to the URL the same way.
        async with session.post(f"{server.base}/validate?timeout={timeout:g}s", data=body, ssl=server.ssl,
                                headers={"Content-Type": "application/json"},
                                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            status, doc = resp.status, await resp.json()
    except (TimeoutError, aiohttp.ServerTimeoutError):
        return time.perf_counter() - started, "timeout"
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError):
        return time.perf_counter() - started, "dropped"
    return time.perf_counter() - started, outcome_of(status, doc)


def outcome_of(status: int, doc: dict[str, Any]) -> str:
    """allow, deny, undecided or busy: what an answer with HTTP ``status`` and body ``doc`` means."""
    if status == 503:  # a call failure: the apiserver applies failurePolicy
        return "busy" if "routegate is busy" in doc.get("message", "") else "undecided"
    response = doc["response"]
    if response["allowed"]:
        return "allow"
    if "could not decide" in response.get("status", {}).get("message", ""):  # a tree from before the 503
        return "undecided"
    return "deny"


async def post_lean(server: Server, body: bytes, kept: list[asyncio.StreamWriter],
                    timeout: float = CLIENT_TIMEOUT) -> tuple[float, str]:
    """``post_review`` for P3 over a connection of its own, with the least client work: its TLS
    handshake, one request written whole and the answer read by its Content-Length (aiohttp's client
    cost this process about a millisecond a request more, on the two cores the server needs; the
    apiserver it stands in for runs elsewhere). The connection is kept open (``kept``), as the
    apiserver keeps it for its next call."""
    started = time.perf_counter()
    head = (f"POST /validate?timeout={timeout:g}s HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=server.ssl)
            kept.append(writer)
            writer.write(head + body)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            doc = json.loads(await reader.readexactly(length))
    except TimeoutError:
        return time.perf_counter() - started, "timeout"
    except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
        return time.perf_counter() - started, "dropped"
    return time.perf_counter() - started, outcome_of(status, doc)


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


# ------------------------------------------------------------------------------------ measurements


async def floor(binary_path: str, runs: int = 15) -> float:
    runner = Runner(binary_path, timeout=30, concurrency=1)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "haproxy.cfg").write_text(TRIVIAL_CFG)  # noqa: ASYNC240 - before any timing
        times = []
        for _ in range(runs):
            out = await runner.run(Path(tmp))
            assert out.exit_code == 0, out.output
            times.append(out.duration)
    return statistics.median(times)


async def bare_floor(binary_path: str, runs: int = 15) -> float:
    """Median seconds of a bare ``haproxy -c -f`` of the trivial config: no sandbox, no scratch copy
    (issue 31's floor for P1; the sandboxed runner's is ``floor``)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp, "haproxy.cfg")
        cfg.write_text(TRIVIAL_CFG)  # noqa: ASYNC240 - before any timing
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            # the sandbox's environment (no openssl.cnf read, no $VAR), nothing else of it
            proc = await asyncio.create_subprocess_exec(binary_path, "-c", "-f", str(cfg), cwd=tmp,
                                                        env=dict(SANDBOX_ENV), stdout=subprocess.DEVNULL,
                                                        stderr=subprocess.DEVNULL)
            assert await proc.wait() == 0
            times.append(time.perf_counter() - started)
    return statistics.median(times)


P1_WARMUP = 3  # rounds (a CREATE, UPDATE and DELETE each) not counted: the first renders fill caches
P1_BLOCK = 5  # rounds in a row on one server before the next takes its turn


async def p1(server: Server, session: aiohttp.ClientSession, n: int, reviews: int,
             others: Sequence[Server] = ()) -> list[dict[str, list[float]]]:
    """Seconds of each review by operation, per server (``server`` first, then ``others``), in steady
    state: after ``P1_WARMUP`` rounds that are not counted. With ``others``, the servers take turns in
    blocks of ``P1_BLOCK`` rounds, who goes first alternating, so that trees compared in one run meet the
    same load, and each still sees its reviews back to back, as a lone server does (what one review
    leaves running, such as checks started ahead, meets the next)."""
    servers = [server, *others]
    got: list[dict[str, list[float]]] = [{"CREATE": [], "UPDATE": [], "DELETE": []} for _ in servers]
    outcomes: dict[str, set[str]] = {k: set() for k in got[0]}

    def bodies(k: int) -> dict[str, bytes]:
        i = (k * 7919) % n  # spread over namespaces and Gateways
        return {"CREATE": admission_review("CREATE", route(n + 10 + k), None),
                "UPDATE": admission_review("UPDATE", route(i, variant=k + 1), route(i)),
                "DELETE": admission_review("DELETE", None, route(i))}

    for each in servers:
        for k in range(P1_WARMUP):
            for body in bodies(reviews + 1000 + k).values():
                await post_review(each, session, body, timeout=60)
    for block, first in enumerate(range(0, reviews, P1_BLOCK)):
        order = list(range(len(servers)))
        if block % 2:
            order.reverse()
        for s in order:
            for k in range(first, min(first + P1_BLOCK, reviews)):
                for op, body in bodies(k).items():
                    seconds, outcome = await post_review(servers[s], session, body, timeout=60)
                    got[s][op].append(seconds)
                    outcomes[op].add(outcome)
    for op, seen in outcomes.items():
        if seen - {"allow"}:
            print(f"    note: P1 {op} outcomes {sorted(seen)}", flush=True)
    return got


PROBE = """
import http.client, json, ssl, sys, time
port, metrics_port, stop_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
conns = {"healthz": lambda: http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx),
         "metrics": lambda: http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10)}
open_ = {name: make() for name, make in conns.items()}
worst = {name: 0.0 for name in conns}
when = {name: 0.0 for name in conns}
began = time.perf_counter()
import os
while not os.path.exists(stop_file):
    for name, path in (("healthz", "/healthz"), ("metrics", "/metrics")):
        sent = time.perf_counter()
        try:
            open_[name].request("GET", path)
            open_[name].getresponse().read()
            took = time.perf_counter() - sent
        except (OSError, http.client.HTTPException):
            took = 10.0
            open_[name] = conns[name]()
        if took > worst[name]:
            worst[name], when[name] = took, sent - began
    time.sleep(0.05)
print(json.dumps({"worst": worst, "when": when}))
"""


async def p3(server: Server, session: aiohttp.ClientSession, n: int, burst: int) -> dict[str, Any]:
    """The burst from this process; /healthz and /metrics probed from another process, so that this
    one's own event loop (busy with 200 TLS handshakes) does not count as the server's latency."""
    bodies = [admission_review("CREATE", route(n + 100_000 + k), None) if k % 2 == 0
              else admission_review("UPDATE", route(k % n, variant=1000 + k), route(k % n)) for k in range(burst)]
    stop = server.work / "probe.stop"
    stop.unlink(missing_ok=True)
    probe = subprocess.Popen([sys.executable, "-c", PROBE, str(server.port), str(server.metrics_port), str(stop)],  # noqa: ASYNC220
                             stdout=subprocess.PIPE)
    await asyncio.sleep(0.5)  # the probe's connections are open before the burst
    # This process holds the state it wrote (20,000 objects at 10,000 routes): a full collection during
    # the burst rescans them all, and with a burst's allocations there are several, each stalling every
    # client TLS handshake for about half a second (the apiserver it stands in for has no such pauses).
    gc.collect()
    gc.freeze()
    cpu_before = server.cpu_seconds()
    started = time.perf_counter()
    kept: list[asyncio.StreamWriter] = []
    results = await asyncio.gather(*(post_lean(server, b, kept) for b in bodies))
    wall = time.perf_counter() - started
    for writer in kept:
        writer.close()
    gc.unfreeze()
    cpu = [after - before for after, before in zip(server.cpu_seconds(), cpu_before, strict=True)]
    stop.touch()
    out, _ = await asyncio.to_thread(probe.communicate)
    probed = json.loads(out)
    counts = {k: sum(1 for _, o in results if o == k)
              for k in ("allow", "deny", "undecided", "busy", "dropped", "timeout")}
    # "when" counts from the probe's start, which is half a second before the burst.
    when = {k: v - 0.5 for k, v in probed["when"].items()}
    return {"counts": counts, "p99": pct([s for s, _ in results], 0.99), "wall": wall, **probed["worst"],
            "when": when, "slowest": max(s for s, _ in results), "peak_rss": server.peak_rss_mib(), "cpu": cpu}


def run_cli(tree: Path, args: list[str], limit: float) -> float | None:
    """Wall seconds of ``routegate ARGS`` from ``tree``, or None when it ran past ``limit``."""
    started = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "webhook", *args], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - started


async def p2(tree: Path, state: Path, work: Path, binary_path: str, limit: float,
             runs: int) -> tuple[float | None, float, float | None]:
    """The median ``routegate check`` and full-config ``haproxy -c`` seconds over ``runs`` alternating
    pairs, and the median of the pairs' ratios (a pair runs within seconds, so the machine's drift over a
    long run moves both of its halves alike); None for the check when a run went past ``limit``."""
    out = work / "rendered"
    shutil.rmtree(out, ignore_errors=True)
    rendered = run_cli(tree, ["render", "-f", str(state), "--out", str(out)], limit)
    if rendered is None:
        raise RuntimeError("routegate render ran out of time")
    runner = Runner(binary_path, timeout=120, concurrency=1)
    checks: list[float] = []
    fulls: list[float] = []
    for _ in range(runs):
        fulls.append((await runner.run(out)).duration)
        checked = run_cli(tree, ["check", "-f", str(state)], limit)
        if checked is None:
            return None, statistics.median(fulls), None
        checks.append(checked)
    ratios = [c / f for c, f in zip(checks, fulls, strict=True)]
    return statistics.median(checks), statistics.median(fulls), statistics.median(ratios)


def compiled(tree: Path) -> int:
    """Write the bytecode of ``tree``'s packages, as installing routegate does (pip compiles a wheel's
    modules): where PYTHONDONTWRITEBYTECODE is set, as on CI machines, each CLI run would otherwise
    compile all of them again at start (~0.4 s of every ``routegate check``). Returns the modules written."""
    written = 0
    for package in ("webhook", "validators", "haproxy_check", "certs"):
        for source in sorted((tree / package).rglob("*.py")):
            target = Path(importlib.util.cache_from_source(str(source)))
            if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
                py_compile.compile(str(source), cfile=str(target), doraise=True)
                written += 1
    return written


def json_loads_seconds(objs: list[dict[str, Any]]) -> float:
    text = json.dumps(objs)
    started = time.perf_counter()
    json.loads(text)
    return time.perf_counter() - started


@contextlib.asynccontextmanager
async def running(tree: Path, state: Path, work: Path, ready_within: float) -> AsyncIterator[
        tuple[Server, aiohttp.ClientSession, float]]:
    work.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - before the server starts
    server = Server(tree, state, work)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        server.start()
        try:
            ready = await server.wait_ready(session, ready_within)
            yield server, session, ready
        finally:
            server.stop()


async def p5(objs: list[dict[str, Any]], n: int, reviews: int) -> dict[str, Any]:
    """Median review seconds with and without the traffic diff, per operation, and the diff's own time."""
    from validators.changes import Change, Operation
    from validators.states import MemoryState
    from webhook.gate import assembly
    from webhook.gate.gates import Gate

    binary = await binaries.detect(None)
    with_diff = assembly.build_gate(binary, assembly.GateSettings(check_timeout=120.0))
    without = Gate(rules=with_diff.rules, renderer=with_diff.renderer, checker=with_diff.checker, traffic=False)
    state = MemoryState(objs, version=f"p5-{n}")
    gateway_obj = next(o for o in objs if o["kind"] == "Gateway")
    # a listener more, on a port of its own: every frontend of the Gateway renders again, so every host
    # pattern of its thousands of routes is compared (a label change renders the same maps: no diff at all)
    changed_gateway = json.loads(json.dumps(gateway_obj))
    changed_gateway["spec"]["listeners"].append({**changed_gateway["spec"]["listeners"][0], "name": "alt",
                                                 "port": 8080})
    times: dict[str, dict[str, list[float]]] = {}
    diff_times: dict[str, list[float]] = {}
    moved: dict[str, int] = {}
    for k in range(reviews):
        i = (k * 7919) % n
        changes = {
            "route CREATE": Change(Operation.CREATE, route(n + 10 + k)),
            "route UPDATE": Change(Operation.UPDATE, route(i, variant=k + 1), route(i)),
            "Gateway UPDATE": Change(Operation.UPDATE, changed_gateway, gateway_obj),
        }
        for op, change in changes.items():
            for label, gate in (("with", with_diff), ("without", without)) if k % 2 else (
                    ("without", without), ("with", with_diff)):
                started = time.perf_counter()
                verdict = await gate.review(change, state=state)
                times.setdefault(op, {}).setdefault(label, []).append(time.perf_counter() - started)
                if label == "with":
                    diff_times.setdefault(op, []).append(verdict.timings.get("traffic", 0.0))
                    moved[op] = len(verdict.traffic.moves) if verdict.traffic is not None else -1
    return {"times": times, "diff": diff_times, "moved": moved}


def ratio(seconds: float | None, base: float) -> str:
    return "n/a" if seconds is None else f"{seconds / base:6.1f}x ({seconds * 1000:.0f} ms)"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--quick", action="store_true", help="fewer reviews (10 per operation), smaller burst checks")
    parser.add_argument("--reviews", type=int, default=30, help="P1 reviews per operation (default 30)")
    parser.add_argument("--burst", type=int, default=200, help="P3 concurrent reviews (default 200)")
    parser.add_argument("--burst-size", type=int, default=1000, help="routes in the state for P3 (default 1000)")
    parser.add_argument("--only", default="P1,P2,P3,P4,P5", help="comma-separated subset of P1,P2,P3,P4,P5")
    parser.add_argument("--tree", default=str(ROOT), help="checkout whose routegate runs (default: this one)")
    parser.add_argument("--versus", action="append", default=[],
                        help="another checkout whose serve answers P1 too, the trees taking turns in blocks of reviews "
                             "in one run (repeatable; e.g. main before a change)")
    parser.add_argument("--limit", type=float, default=600, help="seconds one CLI run or start-up may take")
    parser.add_argument("--p2-runs", type=int, default=3, help="P2 alternating check / haproxy -c pairs (default 3)")
    args = parser.parse_args()
    tree = Path(args.tree).resolve()  # noqa: ASYNC240 - set-up, nothing runs concurrently yet
    versus = [Path(t).resolve() for t in args.versus]  # noqa: ASYNC240 - set-up, as above
    reviews = 10 if args.quick else max(30, args.reviews)
    only = set(args.only.upper().split(","))
    binary = await binaries.detect(None)
    written = sum(compiled(t) for t in (tree, *versus))
    if written:
        print(f"compiled {written} modules of {tree} (and --versus) first, as installing routegate does", flush=True)
    base = await floor(binary.path)
    load = os.getloadavg()
    print(f"routegate from {tree}; haproxy {binary.version}; floor (haproxy -c, trivial config) "
          f"{base * 1000:.1f} ms; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        work = Path(tmp)
        for n in sorted(set(sizes) | ({args.burst_size} if "P3" in only else set())):
            objs = objects(n)
            state = work / f"state-{n}"
            write_state(state, objs)
            base = await floor(binary.path)  # again per size: the machine's load moves during a long run
            print(f"--- {n} routes ({len(objs)} objects); floor now {base * 1000:.1f} ms; load "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
            if n in sizes and "P2" in only:
                checked, full, paired = await p2(tree, state, work, binary.path, args.limit, args.p2_runs)
                shown = ratio(checked, base) if checked is not None else f"> {args.limit:g} s (killed)"
                print(f"  P2 routegate check of all {len(objs)} objects: {shown}; haproxy -c of the full config "
                      f"{ratio(full, base)}; check / full-config check = "
                      f"{'n/a' if paired is None else f'{paired:.1f}x'} (median of {args.p2_runs} pairs)", flush=True)
            if n in sizes and "P5" in only:
                got5 = await p5(objs, n, reviews)
                for op, pair in got5["times"].items():
                    on, off = statistics.median(pair["with"]), statistics.median(pair["without"])
                    own = statistics.median(got5["diff"][op])
                    print(f"  P5 {op:<14} review with the traffic diff {on * 1000:.0f} ms, without "
                          f"{off * 1000:.0f} ms: the diff is {max(on - off, 0.0) / on:.0%} of the review "
                          f"(its own work {own * 1000:.1f} ms = {own / on:.0%}; {got5['moved'][op]} classes "
                          f"moved; medians of {len(pair['with'])})", flush=True)
            if not only & {"P1", "P3", "P4"}:
                continue
            async with running(tree, state, work, args.limit) as (server, session, ready):
                loads = json_loads_seconds(objs)
                print(f"  P4 ready after {ready:.1f} s = {ready / loads:.0f}x json.loads of the same objects "
                      f"({loads * 1000:.0f} ms)", flush=True)
                if n in sizes and only & {"P1", "P4"}:
                    async with contextlib.AsyncExitStack() as stack:
                        others = [await stack.enter_async_context(running(t, state, work / f"versus-{k}", args.limit))
                                  for k, t in enumerate(versus)]
                        got = await p1(server, session, n, reviews, [o[0] for o in others])
                    bare = await bare_floor(binary.path)  # both floors right after P1: the same load
                    base = await floor(binary.path)
                    print(f"  P1 floors: bare haproxy -c {bare * 1000:.1f} ms, sandboxed {base * 1000:.1f} ms "
                          f"({base / bare:.2f}x); load {os.getloadavg()[0]:.2f}", flush=True)
                    for label, each in zip([str(tree), *map(str, versus)], got, strict=True):
                        if versus:
                            print(f"  P1 routegate from {label} (reviews alternated between the trees):", flush=True)
                        for op, times in each.items():
                            median = statistics.median(times)
                            print(f"  P1 {op:<6} median {ratio(median, bare)} of bare "
                                  f"({median / base:.1f}x sandboxed)  p99 {ratio(pct(times, 0.99), bare)} of bare  "
                                  f"({len(times)} reviews)", flush=True)
                    extra = max(0, 100 - 3 * reviews)
                    for k in range(extra):
                        await post_review(server, session, admission_review("CREATE", route(n + 50_000 + k), None),
                                          timeout=60)
                    print(f"  P4 RSS of serve after {3 * reviews + extra} reviews: {server.rss_mib():.0f} MiB",
                          flush=True)
                if n == args.burst_size and "P3" in only:
                    got3 = await p3(server, session, n, args.burst)
                    c = got3["counts"]
                    decided = c["allow"] + c["deny"]
                    print(f"  P3 {args.burst} concurrent reviews: decided {decided} ({decided / args.burst:.0%}: "
                          f"{c['allow']} allowed, {c['deny']} denied), busy {c['busy']}, could not decide "
                          f"{c['undecided']}, dropped {c['dropped']}, client timeouts (10 s) {c['timeout']}; "
                          f"slowest answer {got3['slowest']:.1f} s, p99 {ratio(got3['p99'], base)}; wall "
                          f"{got3['wall']:.1f} s; worst /healthz {got3['healthz'] * 1000:.0f} ms (sent at "
                          f"+{got3['when']['healthz']:.1f} s), worst /metrics {got3['metrics'] * 1000:.0f} ms "
                          f"(at +{got3['when']['metrics']:.1f} s); peak RSS {got3['peak_rss']:.0f} MiB; server CPU "
                          f"{got3['cpu'][0] * 1000 / args.burst:.1f} ms a review (+ children reaped "
                          f"{got3['cpu'][1] * 1000 / args.burst:.1f} ms); load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
