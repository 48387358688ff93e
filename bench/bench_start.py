"""Start-up: ``routegate --help`` / ``--version``, ``check`` against a cluster that is down (a closed port:
kubectl answers "connection refused" at once; the first-hour promise is under 5 s), and
``routegate serve --state`` with 10,000 routes until it listens, as ratios to floors measured in the
same run (``python -c pass``; ``json.loads`` of the same objects).

    python bench/bench_start.py [--routes 10000] [--tree PATH]   # --tree: measure another checkout

The state is bench_render's generator (per route: 2 Services, 2 EndpointSlices, the HTTPRoute) written
once as YAML and once as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_render


def median_run(argv: list[str], env: dict[str, str], cwd: str, runs: int = 5, expect: int = 0) -> float | None:
    """Median wall time, or None when the command does not exit ``expect`` (an older checkout without the
    flag)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        if subprocess.run(argv, env=env, cwd=cwd, capture_output=True).returncode != expect:
            return None
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def until_listening(argv: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "listening on https://" in line:
                return time.perf_counter() - started
        raise RuntimeError(f"serve exited with {proc.wait()}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def closed_port_kubeconfig(folder: Path) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again on return: nothing listens there
    path = folder / "down.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "down",
        "clusters": [{"name": "down", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "down", "context": {"cluster": "down", "user": "u"}}]}))
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--routes", type=int, default=10_000)
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": args.tree}
    py = sys.executable
    floor = median_run([py, "-c", "pass"], env, args.tree) or 1.0
    print(f"floor: python -c pass {floor * 1000:.0f} ms")
    for flags in (["--help"], ["--version"], ["check", "--help"]):
        seconds = median_run([py, "-m", "webhook", *flags], env, args.tree)
        if seconds is None:
            print(f"routegate {' '.join(flags):12} not supported by this checkout")
            continue
        print(f"routegate {' '.join(flags):12} {seconds * 1000:6.0f} ms = {seconds / floor:.1f}x the floor")

    with tempfile.TemporaryDirectory() as tmp:
        down = closed_port_kubeconfig(Path(tmp))
        seconds = median_run([py, "-m", "webhook", "check", "-f", str(Path(args.tree, "examples")), "--kubeconfig",
                              down], env, args.tree, expect=2)
        print(f"routegate check, cluster down: {seconds * 1000:6.0f} ms = {seconds / floor:.1f}x the floor"
              if seconds is not None else "routegate check, cluster down: did not exit 2")

    objects = bench_render.objects(args.routes)
    with tempfile.TemporaryDirectory() as tmp:
        dumper = type("NoAliases", (getattr(yaml, "CSafeDumper", yaml.SafeDumper),),
                      {"ignore_aliases": lambda self, data: True})
        yaml_dir, json_dir = Path(tmp, "yaml"), Path(tmp, "json")
        yaml_dir.mkdir()
        json_dir.mkdir()
        (yaml_dir / "state.yaml").write_text(yaml.dump_all(objects, Dumper=dumper, default_flow_style=None))
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        (json_dir / "state.json").write_text(text)
        started = time.perf_counter()
        json.loads(text)
        json_floor = time.perf_counter() - started
        print(f"floor: json.loads of {len(objects)} objects ({len(text) / 2**20:.1f} MiB) {json_floor:.2f} s")
        for name, folder in (("JSON", json_dir), ("YAML", yaml_dir)):
            seconds = until_listening([py, "-m", "webhook", "serve", "--state", str(folder), "--cert-dir",
                                       str(Path(tmp, "certs")), "--listen", "127.0.0.1:18643",
                                       "--metrics-listen", "127.0.0.1:18690"], env, args.tree)
            print(f"serve --state ({name}, {args.routes} routes) listening after {seconds:.1f} s = "
                  f"{seconds / json_floor:.1f}x json.loads")


if __name__ == "__main__":
    main()
