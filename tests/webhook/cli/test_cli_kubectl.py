"""``routegate check`` and ``kubectl routegate check`` find the cluster as kubectl does: ``--kubeconfig``,
``$KUBECONFIG`` (a merged list), ``~/.kube/config`` (the plugin), ``--context``, ``-n``, ``-A``; go live
only when asked; and an unreachable or misconfigured cluster fails at once, in one line. Each command runs
the CLI's ``main`` in process (on a thread of its own: the fake apiserver serves on this test's event
loop), as ``routegate`` or as the plugin (``kubectl_plugin``); the plugin's console entry point itself
is started as a process in test_cli_outputs."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.clusterkit import install_gateway_api
from tests.fakekube import FakeKube
from tests.webhook.clirun import closed_port, in_process
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects
from webhook.cluster import ClusterConfigError, kubeconfigs

pytestmark = pytest.mark.haproxy

async def _run(*args: str, home: Path, plugin: bool = False, **extra: str) -> tuple[int, str, str, float]:
    """``routegate check ARGS`` (or ``kubectl-routegate check ARGS``) with HOME and only ``extra`` of the
    kubeconfig variables set."""
    started = time.monotonic()
    result = await asyncio.to_thread(in_process, "check", *args, plugin=plugin, timeout=180,
                                     unset=("KUBECONFIG", "KUBERNETES_SERVICE_HOST"), HOME=str(home), **extra)
    return result.returncode, result.stdout, result.stderr, time.monotonic() - started


def _attached(out: str) -> bool:
    """Whether the one judged route attached to the cluster's Gateway (so the cluster was read)."""
    [result] = json.loads(out)["results"]
    return [c["status"] for c in result["status"]["parents"][0]["conditions"]] == ["True", "True"]


def _kubeconfig(path: Path, *, current: str | None, contexts: dict[str, tuple[str, str | None]],
                clusters: dict[str, str], token: str = "") -> str:
    """A kubeconfig with ``contexts`` (name -> (cluster, namespace)) and ``clusters`` (name -> server)."""
    cfg: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in clusters.items()],
        "users": [{"name": f"user-{path.name}", "user": {"token": token}}],
        "contexts": [{"name": n, "context": {"cluster": c, "user": f"user-{path.name}",
                                             **({"namespace": ns} if ns else {})}}
                     for n, (c, ns) in contexts.items()],
    }
    if current:
        cfg["current-context"] = current
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture
async def kube(tmp_path: Path) -> Any:
    async with FakeKube() as fake:
        install_gateway_api(fake)
        for obj in load_objects(STATE_DIR):
            fake.create(obj)
        yield fake


async def test_the_plugin_with_only_KUBECONFIG_reads_the_live_cluster(kube: FakeKube, tmp_path: Path) -> None:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kc")
    good = str(INPUTS / "good.yaml")
    code, out, err, _ = await _run("-f", good, "-o", "json", home=tmp_path, plugin=True, KUBECONFIG=kubeconfig)
    assert code == 0 and _attached(out), out + err
    # routegate itself too: $KUBECONFIG set is "live"
    code, out, err, _ = await _run("-f", good, "-o", "json", home=tmp_path, KUBECONFIG=kubeconfig)
    assert code == 0 and _attached(out), out + err
    # --offline wins over $KUBECONFIG: judged against no state, so the route's Gateway is not there
    code, out, err, _ = await _run("-f", good, "-o", "json", "--offline", home=tmp_path, KUBECONFIG=kubeconfig)
    assert not _attached(out), out + err
    code, _, err, _ = await _run("-f", good, "--offline", "--kubeconfig", kubeconfig, home=tmp_path)
    assert code == 2 and "--offline and --kubeconfig contradict" in err and len(err.splitlines()) == 1


async def test_home_kubeconfig_is_followed_by_the_plugin_only(kube: FakeKube, tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    kube.write_kubeconfig(tmp_path / ".kube" / "config")
    good = str(INPUTS / "good.yaml")
    code, out, err, _ = await _run("-f", good, "-o", "json", home=tmp_path, plugin=True)
    assert code == 0 and _attached(out), out + err
    # routegate check without any flag or $KUBECONFIG stays offline (a CI runner's ~/.kube/config is not
    # a request to go live), and so does a pod's service account without --in-cluster
    code, out, err, _ = await _run("-f", good, "-o", "json", home=tmp_path, KUBERNETES_SERVICE_HOST="127.0.0.1")
    assert not _attached(out), out + err
    # any kubectl-like flag goes live from ~/.kube/config: -n here
    code, out, err, _ = await _run("-f", good, "-o", "json", "-n", "capture", home=tmp_path)
    assert code == 0 and _attached(out), out + err


async def test_KUBECONFIG_list_merged_as_kubectl_does_and_context_without_kubeconfig(
        kube: FakeKube, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    # The first file to set current-context wins (the dead cluster); its "shared" cluster entry wins
    # over the second file's; a missing file in the list is skipped, as kubectl skips it.
    first = _kubeconfig(tmp_path / "a", current="dead", contexts={"dead": ("shared", None)},
                        clusters={"shared": dead})
    second = _kubeconfig(tmp_path / "b", current="live", token=kube.token,
                         contexts={"live": ("fake", "capture"), "also-dead": ("shared", None)},
                         clusters={"fake": kube.url, "shared": kube.url})
    listed = f"{tmp_path / 'missing'}:{first}:{second}"
    code, _, err, _ = await _run("-f", str(INPUTS / "good.yaml"), home=tmp_path, KUBECONFIG=listed)
    assert code == 2 and dead in err and "context dead" in err and "connection refused" in err, err
    code, _, err, _ = await _run("-f", str(INPUTS / "good.yaml"), "--context", "also-dead", home=tmp_path,
                                 KUBECONFIG=listed)
    assert code == 2 and dead in err, err
    # --context picks the live one; its namespace (capture) is where an input without one lands
    shop = yaml.safe_load((INPUTS / "good.yaml").read_text())
    del shop["metadata"]["namespace"]
    unplaced = tmp_path / "shop.yaml"
    unplaced.write_text(yaml.safe_dump(shop))
    code, out, err, _ = await _run("-f", str(unplaced), "-o", "json", "--context", "live", home=tmp_path,
                                   KUBECONFIG=listed)
    assert code == 0 and _attached(out), out + err
    assert json.loads(out)["results"][0]["namespace"] == "capture"


async def test_namespace_flags(kube: FakeKube, tmp_path: Path) -> None:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kc")
    broken = next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == "broken")
    kube.create(broken)  # a denied route stored in namespace capture
    # -A: an audit of every namespace (implies --all)
    code, out, err, _ = await _run("-A", home=tmp_path, KUBECONFIG=kubeconfig)
    assert code == 1 and "<cluster>: HTTPRoute capture/broken: denied" in out, out + err
    # -n with --all: that namespace only
    code, out, err, _ = await _run("--all", "-n", "default", home=tmp_path, KUBECONFIG=kubeconfig)
    assert "capture/broken" not in out, out + err
    # -n and an input in another namespace: refused, as kubectl apply -n refuses it
    code, out, err, _ = await _run("-f", str(INPUTS / "good.yaml"), "-n", "default", home=tmp_path,
                                   KUBECONFIG=kubeconfig)
    assert code == 2 and "does not match the namespace 'default' of -n" in out + err, out + err
    code, _, err, _ = await _run("-A", "-n", "x", home=tmp_path, KUBECONFIG=kubeconfig)
    assert code == 2 and "-A" in err and "-n" in err and len(err.splitlines()) == 1


async def test_a_closed_port_fails_at_once_in_one_line(tmp_path: Path) -> None:
    port = closed_port()
    kubeconfig = _kubeconfig(tmp_path / "kc", current="c", contexts={"c": ("c", None)},
                             clusters={"c": f"https://127.0.0.1:{port}"})
    code, out, err, _ = await _run("-f", str(INPUTS / "good.yaml"), home=tmp_path, plugin=True,
                                   KUBECONFIG=kubeconfig)
    assert code == 2 and out == ""
    assert err.splitlines() == [f"kubectl routegate: cannot reach the cluster at https://127.0.0.1:{port} "
                                f"($KUBECONFIG ({kubeconfig}), context c): connection refused"]
    # The connection step alone (the process's start-up, imports, is the machine's): no retry, no backoff.
    # The bound is the promise (kubectl answers in a fraction of a second; it takes milliseconds here).
    conn = await kubeconfigs.load(kubeconfigs.default_source({"KUBECONFIG": kubeconfig}))
    started = time.monotonic()
    with pytest.raises(kubeconfigs.Unreachable, match="connection refused"):
        await kubeconfigs.probe(conn)
    assert time.monotonic() - started < 5
    await conn.api.close()


async def test_a_server_that_never_answers_fails_within_the_connect_deadline(tmp_path: Path) -> None:
    """Accepts the connection and says nothing (a hung apiserver, a TLS port of something else)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        kubeconfig = _kubeconfig(tmp_path / "kc", current="c", contexts={"c": ("c", None)},
                                 clusters={"c": f"https://127.0.0.1:{silent.getsockname()[1]}"})
        conn = await kubeconfigs.load(kubeconfigs.flag_source(kubeconfig))
        started = time.monotonic()
        with pytest.raises(kubeconfigs.Unreachable, match=r"no answer within 1s"):
            await kubeconfigs.probe(conn, seconds=1)
        assert time.monotonic() - started < 2
        await conn.api.close()
    finally:
        silent.close()


@pytest.mark.parametrize(("text", "problem"), [
    ("clusters: [\n  - name: a\n   bad: indent\n", r"kc:2:\d+: not valid YAML: expected the node content"),
    ("- a list\n", "not a kubeconfig"),
    ("apiVersion: v1\ncontexts: []\nclusters: []\nusers: []\n", "no current-context; give --context NAME"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: nope}}]\nclusters: []\n",
     "context 'x': cluster 'nope' not found"),
])
async def test_a_malformed_kubeconfig_is_one_line_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "kc"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=problem) as caught:
        await kubeconfigs.load(kubeconfigs.flag_source(str(path)))
    assert str(caught.value).startswith(f"--kubeconfig {path}") and "\n" not in str(caught.value)
    assert str(caught.value).count(str(path)) == 1
    code, _, err, _ = await _run("-f", str(INPUTS / "good.yaml"), "--kubeconfig", str(path), home=tmp_path)
    assert code == 2 and err.splitlines() == [f"routegate: {caught.value}"], err


async def test_unknown_context_names_the_known_ones(kube: FakeKube, tmp_path: Path) -> None:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kc")
    with pytest.raises(ClusterConfigError, match=r"context 'nope' not found \(known: fake\)"):
        await kubeconfigs.load(kubeconfigs.default_source({"KUBECONFIG": kubeconfig}), "nope")
