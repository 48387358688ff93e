"""``check`` finds a cluster that is down before it imports the gate: the same server the full
kubeconfig loader would use, judged by one TCP connection, in kubectl's words."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.clirun import closed_port, env
from webhook.cluster import kubeconfigfiles, kubeconfigs
from webhook.cluster.kubeconfigfiles import Endpoint, Source


def _write(path: Path, current: str | None, contexts: dict[str, str], clusters: dict[str, dict[str, Any]]) -> str:
    cfg: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": c, "user": "u"}} for n, c in contexts.items()],
    }
    if current:
        cfg["current-context"] = current
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture
def merged(tmp_path: Path) -> Source:
    """kubectl's merge: the first file to set current-context or to define a name wins; a missing file of
    the list is skipped."""
    first = _write(tmp_path / "a", "one", {"one": "shared"}, {"shared": {"server": "https://10.0.0.1:6443"}})
    second = _write(tmp_path / "b", "two", {"two": "own", "one": "own"},
                    {"own": {"server": "https://api.example.com"}, "shared": {"server": "https://10.9.9.9"}})
    return kubeconfigfiles.default_source({"KUBECONFIG": f"{tmp_path / 'missing'}:{first}:{second}"})


@pytest.mark.parametrize(("context", "server"), [
    (None, "https://10.0.0.1:6443"), ("one", "https://10.0.0.1:6443"), ("two", "https://api.example.com")])
async def test_the_endpoint_is_the_full_loaders_server(merged: Source, context: str | None, server: str) -> None:
    assert kubeconfigfiles.endpoint(merged, context) == Endpoint(server, context or "one")
    conn = await kubeconfigs.load(merged, context)  # differential: the server the full path connects to
    try:
        assert conn.server == server and conn.context == (context or "one")
    finally:
        await conn.api.close()


def test_what_plain_files_do_not_say_is_left_to_the_full_loader(tmp_path: Path) -> None:
    proxied = _write(tmp_path / "p", "c", {"c": "c"}, {"c": {"server": "https://k:6443", "proxy-url": "http://p:3128"}})
    no_server = _write(tmp_path / "n", "c", {"c": "c"}, {"c": {"insecure-skip-tls-verify": True}})
    (tmp_path / "bad").write_text("clusters: [\n  - name: a\n   bad: indent\n")
    for path, context in ((proxied, None), (no_server, None), (proxied, "unknown"), (str(tmp_path / "bad"), None),
                          (str(tmp_path / "absent"), None)):
        assert kubeconfigfiles.endpoint(kubeconfigfiles.flag_source(path), context) is None, path


def test_in_cluster_is_the_service_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert kubeconfigfiles.endpoint(kubeconfigfiles.IN_CLUSTER) == Endpoint("https://[fd00::1]:443", None)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert kubeconfigfiles.endpoint(kubeconfigfiles.IN_CLUSTER) is None


def test_a_closed_port_is_refused_and_a_listening_one_is_left_to_the_probe() -> None:
    assert kubeconfigfiles.unreachable(f"https://127.0.0.1:{closed_port()}") == "connection refused"
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        assert kubeconfigfiles.unreachable(f"http://127.0.0.1:{listening.getsockname()[1]}") is None
    assert kubeconfigfiles.unreachable("not a url") is None


def test_a_silent_address_gives_up_at_the_deadline() -> None:
    """A listening socket whose backlog is full: the kernel drops the handshake, as a black hole would."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(full.getsockname())
            fillers.append(filler)
        try:
            cause = kubeconfigfiles.unreachable(f"https://127.0.0.1:{full.getsockname()[1]}", seconds=0.5)
        finally:
            for filler in fillers:
                filler.close()
    assert cause == "no answer within 0.5s"


def test_check_fails_on_a_closed_port_before_importing_the_gate(tmp_path: Path) -> None:
    """The gate and kubernetes-asyncio are more than a second of imports on a busy runner: a cluster
    that is down must not wait for them."""
    kubeconfig = _write(tmp_path / "kc", "c", {"c": "c"}, {"c": {"server": f"https://127.0.0.1:{closed_port()}"}})
    script = ("import sys; from webhook.cli.routegate import main; "
              "code = main(['check', '-f', 'x.yaml', '--kubeconfig', "
              f"{kubeconfig!r}]); print(code, sorted(m for m in ('webhook.gate.gates', 'kubernetes_asyncio', "
              "'webhook.cli.checking', 'asyncio') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env(), timeout=60,
                          check=False)
    assert done.stdout.split("\n")[0] == "2 []", done.stdout + done.stderr
    assert "cannot reach the cluster at https://127.0.0.1:" in done.stderr and "connection refused" in done.stderr


def test_the_cluster_package_imports_kubernetes_asyncio_only_when_asked() -> None:
    script = ("import sys; import webhook.cluster.kubeconfigfiles; print('kubernetes_asyncio' in sys.modules); "
              "from webhook.cluster import ClusterState; "
              "print('kubernetes_asyncio' in sys.modules, ClusterState.__name__)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env(), timeout=60,
                          check=False)
    assert done.stdout.split() == ["False", "True", "ClusterState"], done.stdout + done.stderr
