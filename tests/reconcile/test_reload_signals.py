"""How ``RuntimeApplier`` falls back to a reload, and how each reload signal behaves: the trigger file a
wrapper watches, a reload command, and what the applier does when a reload cannot be signalled."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from haproxy_check.render.rendering import Renderer
from haproxy_check.runtime.promotion import Promoted, Promoter
from tests.haproxy_check.test_runtime_live import state
from webhook.reconcile import reconcileruntime as rr
from webhook.reconcile.reconciler import _description


def _promote(promoter: Promoter, env: str) -> Promoted:
    render = Renderer().render(state(8080, 9000, env=env))
    return promoter.promote({**render.files, "description.json": _description(render)}, state_version=env)


def _count(how: str) -> float:
    return REGISTRY.get_sample_value("routegate_dataplane_updates_total", {"how": how}) or 0.0


async def test_an_unreachable_socket_falls_back_to_the_trigger_file(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path / "out")
    first = _promote(promoter, "one")
    applier = rr.RuntimeApplier(promoter, str(tmp_path / "nobody.sock"), dataplane_version=(2, 8),
                                reload=rr.TriggerReload(promoter.output))
    second = _promote(promoter, "two")
    before = _count("reload")
    await applier(first, second)
    assert applier.last is not None and applier.last.action == "reload" and not applier.last.error
    assert "runtime command failed" in applier.last.reason and "nobody.sock" in applier.last.reason
    written = json.loads((tmp_path / "out" / "reload" / "requested").read_text())
    assert written["version"] == second.version and written["contentHash"] == second.content_hash
    assert _count("reload") == before + 1


async def test_the_same_description_needs_nothing(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path / "out")
    first = _promote(promoter, "one")
    applier = rr.RuntimeApplier(promoter, str(tmp_path / "nobody.sock"), dataplane_version=(2, 8),
                                reload=rr.TriggerReload(promoter.output))
    await applier(first, _promote(promoter, "one"))
    assert applier.last is not None and applier.last.action == "none"
    assert not (tmp_path / "out" / "reload").exists()


async def test_a_reload_command_gets_the_version_and_a_failed_one_makes_the_next_a_reload(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path / "out")
    first = _promote(promoter, "one")
    seen = tmp_path / "seen"
    ok = rr.CommandReload.parse(f"{sys.executable} -c \"import os,sys; open(sys.argv[1],'a').write("
                                f"os.environ['ROUTEGATE_VERSION'] + chr(10))\" {seen}")
    applier = rr.RuntimeApplier(promoter, str(tmp_path / "nobody.sock"), dataplane_version=(2, 8), reload=ok)
    second = _promote(promoter, "two")
    await applier(first, second)
    assert seen.read_text().split() == [second.version]

    failing = rr.CommandReload.parse(f"{sys.executable} -c \"import sys; print('no master'); sys.exit(3)\"")
    applier.reload = failing
    third = _promote(promoter, "three")
    before = _count("reload_failed")
    await applier(second, third)
    assert applier.last is not None and applier.last.error == f"{sys.executable} exited with 3: no master"
    assert _count("reload_failed") == before + 1

    # what runs is unknown now: even a version equal to the last one is a reload (rule 1), not "none"
    applier.reload = ok
    await applier(third, _promote(promoter, "three"))
    assert applier.last is not None and applier.last.action == "reload"
    assert "rule 1" in applier.last.reason


async def test_a_pidfile_without_a_process_is_a_reload_error(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    pidfile.write_text("")
    promoter = Promoter(tmp_path / "out")
    got = await rr.PidfileReload(pidfile).reload(_promote(promoter, "one"), "test")
    assert got == f"{pidfile}: no pid in it"


def test_an_empty_reload_command_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        rr.CommandReload.parse("  ")
