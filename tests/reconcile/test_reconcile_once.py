"""``routegate reconcile --once --kubeconfig`` (the CLI's ``main``) against the fake API server: it waits
for the first complete sync and promotes the cluster's routes; a kind it cannot list is "could not sync"
(exit 2, nothing written); a second run whose list came back short is held by the shrink guard (exit 1,
last-known-good stays), and ``--allow-mass-delete`` promotes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from haproxy_check.runtime.promotion import Promoter
from tests.fakekube import FakeKube
from tests.reconcile.test_shrink_guard import ROUTES, drop_silently, populate
from tests.webhook.clirun import in_process

pytestmark = pytest.mark.haproxy


async def once(kube: FakeKube, tmp_path: Path, *extra: str) -> tuple[int, str]:
    """``routegate reconcile --once`` against the fake cluster: the CLI's ``main`` in process, on a thread
    of its own beside the fake API server's loop (the reconcile process is test_reconcile_command's)."""
    done = await asyncio.to_thread(
        in_process, "reconcile", "--once", "--kubeconfig", kube.write_kubeconfig(tmp_path / "kc"),
        "--output-dir", str(tmp_path / "out"), "--stats-socket", "", "--sync-timeout", "20", *extra,
        timeout=120, HOME=str(tmp_path))
    return done.returncode, done.stderr


def live_text(promoter: Promoter) -> str:
    out = promoter.output
    return (out / "haproxy.cfg").read_text() + "".join(p.read_text() for p in sorted((out / "maps").iterdir()))


async def test_once_promotes_the_clusters_routes_and_holds_a_short_list(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path / "out")
    async with FakeKube() as kube:
        populate(kube)
        code, err = await once(kube, tmp_path)
        assert code == 0, err
        first = promoter.last_known_good()
        assert first is not None
        text = live_text(promoter)
        assert "frontend" in text
        assert all(f"h{i}.example.com" in text for i in range(ROUTES))

        drop_silently(kube, [f"r{i}" for i in range(20)])  # the next process lists a short list
        code, err = await once(kube, tmp_path)
        assert code == 1 and "routegate: held" in err and "mass drop not promoted" in err
        assert promoter.last_known_good() == first

        code, err = await once(kube, tmp_path, "--allow-mass-delete")
        assert code == 0, err
        assert promoter.last_known_good() != first and "h3.example.com" not in live_text(promoter)


async def test_once_that_cannot_list_a_kind_says_could_not_sync(tmp_path: Path) -> None:
    async with FakeKube() as kube:
        populate(kube)
        kube.forbid("httproutes")
        code, err = await once(kube, tmp_path)
        assert code == 2
        assert err.strip().splitlines()[-1].startswith("routegate: could not sync: HTTPRoute: forbidden (")
        assert Promoter(tmp_path / "out").last_known_good() is None
