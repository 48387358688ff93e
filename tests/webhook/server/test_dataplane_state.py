"""``serve --dataplane-state``: what reconcile publishes the data plane runs, read from its output
directory or its ``/dataplane`` endpoint, becomes the gate's loaded state; anything unreadable leaves
nothing published (predictions then say "unknown"); a cached verdict is never reused across a change
of it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp.test_utils import TestServer

from haproxy_check.descriptions import Description, MapDesc, ProfileDesc
from haproxy_check.runtime.promotion import Promoter
from haproxy_check.runtime.runtimeplans import Loaded
from validators.changes import Change, Operation
from webhook.gate.loadedindex import LoadedIndex, Published
from webhook.gate.verdictcache import VerdictCache
from webhook.gate.verdicts import Decision, Verdict
from webhook.reconcile import reconciling
from webhook.reconcile.reconcileruntime import PUBLISHED
from webhook.server.dataplanestates import DataplaneState
from webhook.sources import StaticSource

PROFILE = ProfileDesc("haptic-be-aaa", ("mode http", "timeout server 30s"))
RECORD = Published(Loaded.of(Description(profiles=(PROFILE,), maps=(MapDesc("maps/host.map", False, ()),))),
                   "..v000003-abcdef012345", "3.4")


def write(where: Path, body: Any) -> None:
    (where / PUBLISHED).write_text(body if isinstance(body, str) else json.dumps(body))


async def test_the_output_directory_is_followed(tmp_path: Path) -> None:
    index = LoadedIndex()
    follower = DataplaneState(str(tmp_path), index)
    assert await follower.refresh() is None and index.key() == "unpublished"  # not published yet
    write(tmp_path, RECORD.as_dict())
    got = await follower.refresh()
    assert got == RECORD and index.current() == RECORD and index.key() == RECORD.version
    assert got.loaded.profiles[PROFILE.name] == PROFILE and got.loaded.maps == frozenset({"maps/host.map"})
    write(tmp_path, {"version": None})  # reconcile lost track of what runs
    assert await follower.refresh() is None and index.current() is None
    write(tmp_path, RECORD.as_dict())
    assert await follower.refresh() == RECORD
    write(tmp_path, "{not json")
    assert await follower.refresh() is None and index.current() is None and follower.error
    write(tmp_path, {"version": "v", "profiles": [{"lines": []}]})
    assert await follower.refresh() is None and "a profile is not {name, lines}" in follower.error


async def test_reconciles_endpoint_is_followed(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path)
    reconciler = SimpleNamespace(promoter=promoter, last=None)
    server = TestServer(reconciling._health_app(reconciler, StaticSource()), host="127.0.0.1")  # type: ignore[arg-type]
    await server.start_server()
    try:
        index = LoadedIndex()
        follower = DataplaneState(f"http://127.0.0.1:{server.port}/dataplane", index)
        assert await follower.refresh() is None  # nothing published: {"version": null}
        write(tmp_path, RECORD.as_dict())
        assert await follower.refresh() == RECORD and index.current() == RECORD
        follower.source = f"http://127.0.0.1:{server.port}/nowhere"
        assert await follower.refresh() is None and "HTTP 404" in follower.error
    finally:
        await server.close()


async def test_a_cached_verdict_is_not_reused_once_the_loaded_state_changed(haproxy_path: str) -> None:
    from haproxy_check.check import binaries
    from webhook.gate import assembly
    from webhook.server import servers

    gate = assembly.build_gate(await binaries.detect(haproxy_path), assembly.GateSettings())
    app = servers.make_app(gate, StaticSource())
    cache = VerdictCache()
    change = Change(Operation.CREATE, {"kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "default"}})
    judged: list[str] = []

    def judge(note: str) -> Any:
        async def run() -> Verdict:
            judged.append(note)
            return Verdict(Decision.ALLOW, change.ref, notes=(note,))
        return run

    first, _ = await cache.verdict(change, servers._judged_against(app, "v1"), judge("unknown: ..."))
    again, reused = await cache.verdict(change, servers._judged_against(app, "v1"), judge("never"))
    assert reused and again.notes == first.notes == ("unknown: ...",)
    gate.loaded.publish(RECORD)
    later, reused = await cache.verdict(change, servers._judged_against(app, "v1"), judge("applies at runtime"))
    assert not reused and later.notes == ("applies at runtime",) and judged == ["unknown: ...", "applies at runtime"]
