"""``haproxy -c`` sends no DNS query, in its network namespace and with the init-addr fallback forced.

Each case runs in a throw-away mount + network namespace (``unshare -m -n``, root only) whose
/etc/resolv.conf is bind-mounted to point at a UDP listener on 127.0.0.1:53 that counts queries; the
check's config has a server addressed by a DNS name. A control run of plain ``haproxy -dr -c`` in the
same setup must be counted, so the listener provably sees what a leaking check would send.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from haproxy_check.check import sandboxes

pytestmark = pytest.mark.haproxy

REPO = Path(__file__).resolve().parents[2]
CONFIG = ("global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n"
          "frontend f\n  bind 127.0.0.1:18080\n  default_backend b\n"
          "backend b\n  server s1 exfil-secret.routegate.test:80\n"
          "  server s2 other.routegate.test:8080 check init-addr last,libc,none\n")
INNER = r'''
import asyncio, json, socket, sys, threading
from pathlib import Path
from haproxy_check.check import sandboxes
from haproxy_check.check.checker import Checker
from haproxy_check.results import HAProxyBinary, RenderResult

binary, mode, config, work = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
listener.bind(("127.0.0.1", 53))
names = []
def count():
    while True:
        data, _ = listener.recvfrom(4096)
        names.append(data[12:60].decode("latin-1"))
threading.Thread(target=count, daemon=True).start()

async def main():
    if mode == "control":  # plain haproxy -dr -c: what the sandbox must prevent
        runner = sandboxes.Runner(binary, isolation=sandboxes.NO_INIT_ADDR)
        (work / "haproxy.cfg").write_text(config)
        out = await runner.run(work)
        return {"isolation": "none", "exit": out.exit_code}
    checker = Checker(HAProxyBinary(binary, "x"), isolation=mode, scratch_base=work)
    result = await checker.check(RenderResult(files={"haproxy.cfg": config.encode()}))
    return {"isolation": checker.isolation, "ok": result.ok, "decided": result.decided, "error": result.error}

out = asyncio.run(main())
import time; time.sleep(0.3)
out["queries"] = len(names)
out["names"] = names
print(json.dumps(out))
'''


def run_isolated(binary: str, mode: str, tmp_path: Path, config: str = CONFIG) -> dict[str, object]:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip to build a namespace with its own resolv.conf")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    work = tmp_path / "work"
    work.mkdir()
    script = (f"ip link set lo up && mount --bind {resolv} /etc/resolv.conf && "
              f'exec {sys.executable} -c "$0" "$@"')
    proc = subprocess.run(["unshare", "-m", "-n", "sh", "-c", script, INNER, binary, mode, config, str(work)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_the_control_check_does_query_the_counting_resolver(haproxy_path: str, tmp_path: Path) -> None:
    assert int(run_isolated(haproxy_path, "control", tmp_path)["queries"]) > 0  # type: ignore[call-overload]


@pytest.mark.parametrize("mode", [sandboxes.NETWORK_NAMESPACE, sandboxes.NO_INIT_ADDR])
def test_a_check_sends_no_dns_query(haproxy_paths: list[str], tmp_path: Path, mode: str) -> None:
    for n, binary in enumerate(haproxy_paths):
        where = tmp_path / str(n)
        where.mkdir()
        out = run_isolated(binary, mode, where)
        assert out["isolation"] == mode
        assert out["queries"] == 0, out
        assert out["decided"] and out["ok"], out  # the DNS-named servers do not fail the check


def test_the_fallback_only_rewrites_the_checked_copy_server_lines() -> None:
    config = b"backend b\n    server s1 a.example:80 check\n    server s2 10.0.0.1:80 init-addr last,libc\n" \
             b"    default-server proto h2\n"
    assert sandboxes.without_address_lookups(config) == (
        b"backend b\n    server s1 a.example:80 check init-addr none\n"
        b"    server s2 10.0.0.1:80 init-addr last,libc init-addr none\n    default-server proto h2\n")


def test_isolation_is_reported_and_can_be_forced() -> None:
    assert sandboxes.Runner("haproxy", isolation=sandboxes.NO_INIT_ADDR).isolation == sandboxes.NO_INIT_ADDR
    assert sandboxes.Runner("haproxy").isolation in sandboxes.ISOLATIONS
    with pytest.raises(ValueError, match="unknown isolation"):
        sandboxes.Runner("haproxy", isolation="none")
