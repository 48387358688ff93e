"""Reconcile's memory: the peak and steady RSS of a real ``routegate reconcile --kubeconfig`` process at N routes.

    python3 bench/bench_reconcile_rss.py [--sizes 2000,10000] [--changes K] [--tree DIR] [--no-dataplane]

What runs (as ``bench_propagation.py``, without the echo backends and the request loop): the in-process fake
apiserver (``tests/fakekube.py``) holds ``bench_gate``'s state of N routes; ``routegate reconcile`` of the tree
``--tree`` (default: this one) runs as its own process with its default settings, ``--runtime-socket`` and
``--reload-pidfile`` on a real ``haproxy -W`` master (3.4; ``--no-dataplane``: none, the reload is requested
by file), inside a private network namespace. The harness samples the process's ``/proc/PID/status`` every
20 ms and reports, in MiB:

- ``first peak``: VmHWM once the first sync, promotion and status writes are done and the process is idle;
- ``first steady``: VmRSS then;
- ``change peak``: the highest RSS while K one-route changes (a header value, back and forth, each made
  when the reconciler is idle) are reconciled and their background full checks run (VmHWM reset through
  ``/proc/PID/clear_refs`` before the first change);
- ``steady``: VmRSS once idle after the last change (and its background full check).

The data plane starts after the first promotion (as in ``bench_propagation``), so the first change is also
when the reconciler reads over the socket which version it runs (``running.observe``: every map entry).

Memory targets are ratios in one run: compare ``--tree /work/main`` and this tree in one window, with the
load printed beside. Extra environment for the reconcile process (``MALLOC_ARENA_MAX=2``, ...) passes through;
``BENCH_RSS_PYTHONPATH=bench/rssdiag RSSDIAG_LOG=FILE`` puts a diagnostic ``sitecustomize`` on its path
(``bench/rssdiag/sitecustomize.py``: RSS and each step's own peak per reconcile step, tracemalloc), which is
sent SIGRTMIN+5 before the process is stopped.

Measured (2026-12-04, haproxy 3.4 data plane, the machine shared, load 5-13; MiB: first peak / first steady /
change peak / steady):

- 2,000 routes, 4 changes, main (016aa2f) and the mem28 branch alternated twice: main 330/281/456/322 and
  330/281/455/327; branch 303/268/326/270 and 301/266/325/271.
- 10,000 routes, 3 changes: main 855/855/1,520/1,049; the branch 984/811/1,095/813 (its peaks are the
  first and each change's ``description.json``: +170 and +250 MiB, which the write28 branch removes); both
  branches merged (mem28 + write28 f523ec9) 818/818/945/834. The target (400 MiB) is not met: what stays
  is the render's caches and output (about 480 MiB of the steady state at 10,000 routes: per-route render
  caches, the weighted map's million entry strings and the files' bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import bench_propagation as propagation  # noqa: E402
from haproxy_check.runtime.promotion import Promoter  # noqa: E402
from tests.cluster.clusterkit import install_gateway_api  # noqa: E402
from tests.fakekube import FakeKube  # noqa: E402


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` in KiB (empty once it ended)."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                found[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return found


class Sampler(threading.Thread):
    """The highest VmRSS seen since the last ``reset`` (the process's own VmHWM cannot be read per phase)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def reset(self) -> None:
        self.peak = 0
        with contextlib.suppress(OSError):  # 5: reset the peak resident set size (proc(5)); root only
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, _status(self.pid).get("VmRSS", 0))


class Reconcile(propagation.Reconcile):
    """``routegate reconcile`` of ``tree``, optionally without a data plane."""

    def __init__(self, work: Path, kubeconfig: str, haproxy: str, check_timeout: float, tree: Path,
                 dataplane: bool) -> None:
        self.out, self.pidfile, self.log = work / "out", work / "haproxy.pid", work / "reconcile.log"
        self.sock = str(work / "admin.sock")
        self.port = propagation._free_port()
        argv = [sys.executable, "-m", "webhook", "reconcile", "--kubeconfig", kubeconfig, "--haproxy", haproxy,
                "--output-dir", str(self.out), "--check-timeout", str(check_timeout),
                "--metrics-listen", f"127.0.0.1:{self.port}", "--log-level", "info"]
        if dataplane:
            argv += ["--stats-socket", self.sock, "--runtime-socket", self.sock, "--reload-pidfile", str(self.pidfile)]
        # BENCH_RSS_PYTHONPATH: a diagnostic sitecustomize (bench/rssdiag) after the tree
        path = os.pathsep.join(filter(None, (str(tree), _resolved(os.environ.get("BENCH_RSS_PYTHONPATH")))))
        self.proc = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=self.log.open("wb"),
                                     env={**os.environ, "HOME": str(work), "PYTHONPATH": path})


def _resolved(path: str | None) -> str | None:
    """A path for the reconcile process, which runs in its own work directory."""
    return str(Path(path).resolve()) if path else None


def _background_done(reconcile: Reconcile, delta_checks: float) -> bool:
    """Every delta-checked promotion so far had its background full check."""
    found = reconcile.metrics()
    done = sum(v for k, v in found.items() if k.startswith("routegate_reconcile_full_checks_total"))
    return done >= delta_checks


def _delta_checks(reconcile: Reconcile) -> float:
    return reconcile.metrics().get("routegate_reconcile_checks_total{how=delta}", 0.0)


async def _idle(reconcile: Reconcile) -> None:
    if not await asyncio.to_thread(propagation._wait_for, reconcile.idle, 900, 0.1):
        print("  (the reconciler did not become idle)", flush=True)
    deltas = await asyncio.to_thread(_delta_checks, reconcile)
    await asyncio.to_thread(propagation._wait_for, lambda: _background_done(reconcile, deltas), 900, 0.2)


async def run_size(n: int, work: Path, args: argparse.Namespace) -> None:
    async with FakeKube(page_limit_max=500) as kube:
        install_gateway_api(kube)
        cluster = propagation.Cluster(kube, propagation.base_state(n))
        kube.preload(cluster.objs.values())
        started = time.perf_counter()
        reconcile = Reconcile(work, kube.write_kubeconfig(work / "kubeconfig"), args.haproxy, args.check_timeout,
                              args.tree, args.dataplane)
        sampler = Sampler(reconcile.proc.pid)
        sampler.start()
        master = None
        try:
            promoter = Promoter(reconcile.out, keep=3)
            if not await asyncio.to_thread(propagation._wait_for, lambda: reconcile.proc.poll() is not None
                                           or promoter.last_known_good() is not None, 900, 0.1):
                raise SystemExit("no first promotion within 900 s")
            if reconcile.proc.poll() is not None:
                raise SystemExit(f"routegate reconcile exited: {reconcile.log.read_text()[-2000:]}")
            if args.dataplane:
                master = await asyncio.to_thread(propagation._haproxy, args.haproxy, reconcile, work)
            await _idle(reconcile)
            first = _status(reconcile.proc.pid)
            took = time.perf_counter() - started
            sampler.reset()
            header = propagation.kinds()["header value"][0]
            for k in range(args.changes):
                cluster.write(header, k % 2 == 0)
                await asyncio.sleep(0.5)  # past the debounce
                await _idle(reconcile)
            await asyncio.sleep(1.0)
            last = _status(reconcile.proc.pid)
            peak = max(sampler.peak, last.get("VmHWM", 0))
            steps = propagation._steps(reconcile.metrics(), {})
            if os.environ.get("BENCH_RSS_PYTHONPATH"):  # a diagnostic sitecustomize reports on SIGRTMIN+5
                # (SIGUSR1 stops routegate)
                reconcile.proc.send_signal(signal.SIGRTMIN + 5)
                await asyncio.sleep(float(os.environ.get("BENCH_RSS_DUMP_WAIT", "5")))
        finally:
            sampler.stop.set()
            reconcile.stop()
            if master is not None:
                os.killpg(master.pid, signal.SIGTERM)
                master.wait(10)
        mib = 1024
        print(f"{n:>6} routes  first peak {first.get('VmHWM', 0) / mib:6.0f}  first steady "
              f"{first.get('VmRSS', 0) / mib:6.0f}  change peak {peak / mib:6.0f}  steady "
              f"{last.get('VmRSS', 0) / mib:6.0f} MiB  ({args.changes} changes; first sync {took:.0f}s; "
              f"load {propagation._load()})", flush=True)
        print(f"{'':>6}         reconcile steps (mean s over every run): {steps}", flush=True)


async def main(args: argparse.Namespace) -> None:
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load {propagation._load()} ({os.cpu_count()} cores); "
          f"tree {args.tree}; data plane {args.haproxy if args.dataplane else 'none'}; "
          f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', '-')}", flush=True)
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp:
            await run_size(n, Path(tmp), args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=lambda t: [int(x) for x in t.split(",")], default=[2000, 10000])
    parser.add_argument("--changes", type=int, default=4, help="one-route changes after the first sync (default 4)")
    parser.add_argument("--tree", type=lambda t: Path(t).resolve(), default=ROOT,
                        help="the routegate tree whose reconcile runs (default: this one)")
    parser.add_argument("--no-dataplane", dest="dataplane", action="store_false",
                        help="no haproxy -W master: reloads are requested by file")
    parser.add_argument("--check-timeout", type=float, default=60.0)
    parser.add_argument("--haproxy", default=os.environ.get("ROUTEGATE_HAPROXY_34", "/work/h34/haproxy"))
    parsed = parser.parse_args()
    if parsed.dataplane and os.environ.get("BENCH_NETNS") != "1":  # a private network namespace: only our loopback
        os.execvpe("unshare", ["unshare", "--net", "--", sys.executable, *sys.argv],
                   {**os.environ, "BENCH_NETNS": "1"})
    if parsed.dataplane:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    asyncio.run(main(parsed))
