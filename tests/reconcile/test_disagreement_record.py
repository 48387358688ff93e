"""After the background full check refuses a delta-checked promotion, the promoted versions recorded on
disk (``webhook.reconcile.promotedversions``) are rolled back to the last fully checked view at once: a restart
before the next run holds the culprit back at its fully checked version, not at the refused one."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from haproxy_check.runtime.promotion import Promoter
from tests.reconcile.test_reconcile_delta_checks import _count, _setup, _with_broken_regex
from validators.objects import ref_of
from validators.states import MemoryState
from webhook import metrics
from webhook.reconcile import promotedversions
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Reconciler, Result

pytestmark = pytest.mark.haproxy


def test_a_disagreement_rolls_the_recorded_versions_back_so_a_restart_holds_back_there(
        haproxy_path: str, tmp_path: Path) -> None:
    async def run() -> None:
        reconciler, recording, objs = await _setup(haproxy_path, tmp_path)
        broken, route = _with_broken_regex(objs)
        good = next(o for o in objs if o["kind"] == "HTTPRoute" and o["metadata"]["name"] == route["metadata"]["name"])
        disagreements = _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS)
        recording.lie = True  # the delta check passes the broken route
        lied = await reconciler.reconcile(MemoryState(broken, version="b"))
        assert lied.result is Result.PROMOTED and lied.promoted is not None, lied.rejection
        versions = reconciler._versions
        assert versions is not None
        on_disk = promotedversions.PromotedVersions(tmp_path, versions.identity)
        assert on_disk.load(lied.promoted.content_hash)[ref_of(route)] == route  # type: ignore[index]
        await reconciler.full_checks.idle()
        assert _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS) == disagreements + 1

        # before any further run: the record names the route's fully checked version, under the live hash
        recorded = promotedversions.PromotedVersions(tmp_path, versions.identity).load(lied.promoted.content_hash)
        assert recorded is not None and recorded[ref_of(route)] == good

        # a restart (a new process on the same directory) holds the broken route back there
        restarted = Reconciler(reconciler.gate, Promoter(tmp_path))
        after = await restarted.reconcile(MemoryState(copy.deepcopy(broken), version="c"))
        assert after.result is Result.PROMOTED, after.rejection
        held = {item.ref.name: item.treatment for item in after.left_out}
        assert held.get(route["metadata"]["name"]) is Treatment.HELD_BACK, after.left_out
        await restarted.full_checks.idle()

    asyncio.run(run())
