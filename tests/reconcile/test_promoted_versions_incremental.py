"""Recording the promoted versions is O(change) (``webhook.reconcile.promotedversions.PromotedVersions.save``): only
objects the state did not hand on as the same dict are serialized and hashed, and after any sequence of
changes the record on disk is byte for byte what a from-scratch save of the same view writes."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from validators.objects import Obj
from validators.states import MemoryState
from validators.views.scopes import Scope
from webhook.reconcile import promotedversions as pv

GW = "gateway.networking.k8s.io/v1"
IDENTITY = pv.identity_of(Scope.of(["ours"]), "settings")


def _obj(kind: str, name: str, n: int) -> Obj:
    api = "v1" if kind == "Service" else GW
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": f"t{n % 3}", "uid": f"u-{name}-{n}"}, "spec": {"n": n}}


def _disk(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("seed", [1, 28, 2028])
def test_incremental_saves_write_what_a_from_scratch_save_writes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    objs = [_obj(kind, f"{kind.lower()}-{i}", i) for kind in ("HTTPRoute", "Service", "Gateway", "GRPCRoute")
            for i in range(12)]
    store = pv.PromotedVersions(tmp_path / "live", IDENTITY)
    secret: Obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "t0"}}
    for step in range(40):
        view = MemoryState([*objs, secret], version=f"v{step}")
        store.save(view, f"h{step // 2}")  # every other save records the same hash: unchanged runs too
        fresh = tmp_path / f"fresh{step}"
        pv.PromotedVersions(fresh, IDENTITY).save(MemoryState(copy.deepcopy([*objs, secret])), f"h{step // 2}")
        assert _disk(tmp_path / "live" / pv.DIR) == _disk(fresh / pv.DIR), step
        text = (fresh / pv.DIR / pv.VIEW).read_text()
        assert text == json.dumps(json.loads(text), sort_keys=True) + "\n"  # the record as json writes it
        if step:
            assert store.hashed <= 3, (step, store.hashed)  # only what the step changed
        # the next view: unchanged objects are the very same dicts (as the watch stores hand them on)
        objs = list(objs)
        for _ in range(rng.randrange(0, 3)):
            what = rng.choice(["update", "delete", "create", "again", "replace"])
            i = rng.randrange(len(objs))
            if what == "update":
                objs[i] = {**objs[i], "spec": {"n": rng.randrange(1000)}}
            elif what == "replace":  # one deleted and another created where it sorted: the same list length
                meta = objs[i]["metadata"]
                objs[i] = {**objs[i], "metadata": {**meta, "name": f"{meta['name']}-r{step}", "uid": f"r{step}"}}
            elif what == "delete" and len(objs) > 4:
                del objs[i]
            elif what == "create":
                objs.insert(i, _obj(rng.choice(["HTTPRoute", "Service"]), f"new-{step}", step))
            else:  # deleted and created again under the same name: another uid, in another place
                old = objs.pop(i)
                again = {**old, "metadata": {**old["metadata"], "uid": f"again-{step}"}}
                objs.insert(rng.randrange(len(objs) + 1), again)
    assert store.load(f"h{39 // 2}") is not None
