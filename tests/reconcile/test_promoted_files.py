"""Reconcile writes only the files that changed: the promoted version directory after a run is byte for
byte what a from-scratch promotion of the same render writes (every file, the same set, the same modes,
the same content hash), over seeded random change sequences, while most files are hard links into the
version before (``haproxy_check.runtime.promotion``) and description.json's unchanged maps and backends
are not serialized again (``webhook.reconcile.reconciler.DescriptionJson``)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import stat
from pathlib import Path
from typing import Any

import pytest

from bench.bench_gate import objects
from haproxy_check.descriptions import MapDesc
from haproxy_check.runtime import descriptionfiles
from haproxy_check.runtime.promotion import DATA, Promoter, content_hash
from tests.reconcile.test_description_json import _mutate
from validators.states import MemoryState
from webhook.cli import plans
from webhook.gate.gates import Gate
from webhook.reconcile.reconciler import Reconciler, Result, _json_bytes

pytestmark = pytest.mark.haproxy

SKIP = {"statuses.json"}  # written beside the version after the promotion, not part of it


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in SKIP}


def _dirs(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}


@pytest.mark.parametrize("seed", [28, 2028])
def test_the_promoted_directory_is_a_from_scratch_promotion_of_the_same_render(
        gate: Gate, tmp_path: Path, seed: int) -> None:
    async def run() -> None:
        rng = random.Random(seed)
        objs: list[dict[str, Any]] = objects(30)
        out = tmp_path / "out"
        promoter = Promoter(out, keep=2)  # pruned versions whose files the live one links stay readable
        reconciler = Reconciler(gate, promoter)
        serialized: list[str] = []
        original = MapDesc.as_dict

        def counting(self: MapDesc) -> dict[str, Any]:
            serialized.append(self.path)
            return original(self)

        written = linked = promoted = patched = 0
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(MapDesc, "as_dict", counting)
            for n in range(24):
                serialized.clear()
                outcome = await reconciler.reconcile(MemoryState(copy.deepcopy(objs), version=f"v{n}"))
                assert outcome.result in (Result.PROMOTED, Result.UNCHANGED), (n, outcome.rejection)
                by_the_run = list(serialized)
                render = reconciler._passed_render
                assert render is not None and outcome.promoted is not None
                files = {**render.files,
                         descriptionfiles.FILE: descriptionfiles.from_scratch(render.description, render.files)}
                live = promoter.live()
                assert live is not None and live.name == outcome.promoted.version
                # the from-scratch promotion of the very render the run promoted, in a directory of its own
                scratch = Promoter(tmp_path / f"scratch{n}").promote(files, state_version=f"v{n}")
                fresh = tmp_path / f"scratch{n}" / scratch.version
                assert _tree(live) == _tree(fresh), n
                assert _dirs(live) == _dirs(fresh), n
                assert outcome.promoted.content_hash == scratch.content_hash == content_hash(files), n
                # statuses.json beside it: each object's status text reused, the same bytes as serialized whole
                kept = reconciler.memory.get(live.name)
                assert kept is not None
                assert (live / "statuses.json").read_bytes() == _json_bytes(kept.statuses, sort_keys=True), n
                # read back after a restart: the whole description, its map entries from the map files
                assert descriptionfiles.read(live).as_dict() == render.description.as_dict(), n
                if outcome.result is Result.PROMOTED and n:
                    promoted += 1
                    written += promoter.written
                    linked += len(files) - promoter.written
                    if reconciler._patcher.closure is not None:  # patched: the unchanged maps' text is reused
                        patched += 1
                        assert len(by_the_run) < len(render.description.maps), (n, by_the_run)
                _mutate(objs, rng, n)
        await reconciler.full_checks.idle()
        assert promoted >= 12 and patched >= 6, (promoted, patched)  # promotions, most of them patched
        # most files of a promotion are links into the version before, not written again
        assert linked > 2 * written, (linked, written)

    asyncio.run(run())


def _files(n: int, *, cert: int = 0) -> dict[str, bytes]:
    return {"haproxy.cfg": f"# version {n}\n".encode(), "maps/host.map": f"h{n} v{n}\n".encode(),
            "maps/static.map": b"a b\n", "certs/gw.pem": f"cert {cert}\n-----BEGIN PRIVATE KEY-----\n".encode()}


def test_only_changed_files_are_written_and_the_rest_are_links_to_the_live_version(tmp_path: Path) -> None:
    out = tmp_path / "out"
    promoter = Promoter(out, keep=1)
    first = promoter.promote(_files(1), state_version="v1")
    assert promoter.written == 4
    second = promoter.promote(_files(2), state_version="v2")
    assert promoter.written == 2  # haproxy.cfg and host.map; static.map and the key are links
    assert not (out / first.version).exists()  # pruned: the links are the live version's own names
    live = out / second.version
    assert (live / "maps" / "static.map").read_bytes() == b"a b\n"
    assert stat.S_IMODE((live / "certs" / "gw.pem").stat().st_mode) == 0o600
    assert _tree(live) == _tree(tmp_path / "fresh" / Promoter(tmp_path / "fresh").promote(
        _files(2), state_version="v2").version)
    third = promoter.promote(_files(2, cert=1), state_version="v3")
    assert promoter.written == 1
    assert os.stat(out / third.version / "maps" / "host.map").st_nlink == 1  # the version it linked is pruned
    assert (out / DATA / "certs" / "gw.pem").read_bytes().startswith(b"cert 1\n")


def test_a_live_file_changed_by_hand_or_another_promoter_is_written_not_linked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    promoter = Promoter(out, keep=3)
    first = promoter.promote(_files(1), state_version="v1")
    static = out / first.version / "maps" / "static.map"
    static.unlink()  # pruned by hand
    second = promoter.promote(_files(1, cert=2), state_version="v2")
    assert (out / second.version / "maps" / "static.map").read_bytes() == b"a b\n"
    # another process promoted into the same directory: nothing of ours is live, nothing is linked
    other = Promoter(out, keep=3).promote(_files(5), state_version="v5")
    promoter.promote(_files(5), state_version="v6")
    assert promoter.written == 4
    assert other.content_hash == content_hash(_files(5))


def test_plan_reads_a_promoted_version_whose_maps_name_their_files(gate: Gate, tmp_path: Path) -> None:
    render = gate.renderer.render(MemoryState(objects(6), version="a"), subject=None)
    files = {**render.files, descriptionfiles.FILE: descriptionfiles.from_scratch(render.description, render.files)}
    version = Promoter(tmp_path).promote(files, state_version="a").version
    assert plans.load_description(str(tmp_path / version)).as_dict() == render.description.as_dict()
    # a reference that leaves the directory, or names a file that is not there: a clear error, no crash
    data = json.loads(files[descriptionfiles.FILE])
    named = next(m for m in data["maps"] if descriptionfiles.ENTRIES_FILE in m)
    for where, says in (("../../etc/passwd", "description.json"), ("maps/gone.map", "a map file it names")):
        named[descriptionfiles.ENTRIES_FILE] = where
        bad = tmp_path / "bad"
        bad.mkdir(exist_ok=True)
        (bad / descriptionfiles.FILE).write_text(json.dumps(data))
        with pytest.raises(plans.PlanInputError, match=says):
            plans.load_description(str(bad))
