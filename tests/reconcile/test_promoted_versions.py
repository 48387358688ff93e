"""What a restart reads back of the last promoted versions (webhook.reconcile.promotedversions): only its own
record of the live version, each object checked against its name and against the object stored now."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

from validators.objects import Obj, Ref
from validators.states import MemoryState
from validators.views.scopes import Scope
from webhook.reconcile import promotedversions as pv

GW = "gateway.networking.k8s.io/v1"


def _route(name: str, uid: str, generation: int = 1, path: str = "/") -> Obj:
    return {"apiVersion": GW, "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "t", "uid": uid, "generation": generation},
            "spec": {"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}]}]}}


SECRET: Obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k", "namespace": "t"},
               "data": {"tls.key": "c2VjcmV0"}}
IDENTITY = pv.identity_of(Scope.of(["ours"]), "settings")


def _saved(tmp_path: Path, objects: list[Obj], live: str = "h1") -> pv.PromotedVersions:
    store = pv.PromotedVersions(tmp_path, IDENTITY)
    store.save(MemoryState(objects), live)
    return store


def test_a_record_round_trips_without_secrets_and_writes_only_what_changed(tmp_path: Path) -> None:
    a, b = _route("a", "u1"), _route("b", "u2")
    store = _saved(tmp_path, [a, b, SECRET])
    assert store.load("h1") == {Ref("HTTPRoute", "t", "a"): a, Ref("HTTPRoute", "t", "b"): b}
    files = tmp_path / "judged" / "objects"
    assert b"c2VjcmV0" not in b"".join(p.read_bytes() for p in files.iterdir())
    before = {p.name: p.stat().st_mtime_ns for p in files.iterdir()}
    a2 = _route("a", "u1", 2, "/v2")
    store.save(MemoryState([a2, b]), "h2")
    after = {p.name for p in files.iterdir()}
    assert len(after) == 2 and (after & before.keys()) == {hashlib.sha256(pv.canonical(b)).hexdigest() + ".json"}
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h2") == {Ref("HTTPRoute", "t", "a"): a2,
                                                                  Ref("HTTPRoute", "t", "b"): b}


def test_a_record_of_another_scope_settings_or_live_version_is_ignored(tmp_path: Path) -> None:
    _saved(tmp_path, [_route("a", "u1")])
    assert pv.PromotedVersions(tmp_path, pv.identity_of(Scope.of(["theirs"]), "settings")).load("h1") is None
    assert pv.PromotedVersions(tmp_path, pv.identity_of(Scope.of(["ours"]), "other")).load("h1") is None
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h0") is None  # another version is live now
    assert pv.PromotedVersions(tmp_path, IDENTITY).load(None) is None
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h1") is not None


def test_a_tampered_or_misfiled_object_voids_the_record(tmp_path: Path) -> None:
    _saved(tmp_path, [_route("a", "u1"), _route("b", "u2")])
    objects = sorted((tmp_path / "judged" / "objects").iterdir())
    objects[0].write_bytes(objects[0].read_bytes().replace(b'"/"', b'"/x"'))
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h1") is None

    _saved(tmp_path / "2", [_route("a", "u1"), _route("b", "u2")])
    view = tmp_path / "2" / "judged" / "view.json"
    record = json.loads(view.read_text())
    record["objects"]["HTTPRoute/t/a"], record["objects"]["HTTPRoute/t/b"] = (record["objects"]["HTTPRoute/t/b"],
                                                                            record["objects"]["HTTPRoute/t/a"])
    view.write_text(json.dumps(record))
    assert pv.PromotedVersions(tmp_path / "2", IDENTITY).load("h1") is None
    view.write_text("{not json")
    assert pv.PromotedVersions(tmp_path / "2", IDENTITY).load("h1") is None


def test_only_earlier_versions_of_the_objects_stored_now_are_kept() -> None:
    recorded = {Ref("HTTPRoute", "t", n): _route(n, u, g) for n, u, g in
                [("same", "u1", 1), ("recreated", "u2", 1), ("later", "u3", 5), ("gone", "u4", 1)]}
    now = MemoryState([_route("same", "u1", 3), _route("recreated", "u9", 1), _route("later", "u3", 2)])
    assert pv.same_objects(recorded, now) == {Ref("HTTPRoute", "t", "same"): recorded[Ref("HTTPRoute", "t", "same")]}


def test_the_view_to_judge_again_has_the_recorded_versions_and_hides_new_objects() -> None:
    old = _route("a", "u1", 1, "/old")
    now = MemoryState([_route("a", "u1", 2, "/new"), _route("new", "u5")])
    view = pv.view_with(now, {Ref("HTTPRoute", "t", "a"): copy.deepcopy(old)})
    assert [o["metadata"]["name"] for o in view.list("HTTPRoute")] == ["a"]
    assert view.get("HTTPRoute", "t", "a") == old


def test_a_file_a_crash_cut_short_is_written_again_by_the_next_process(tmp_path: Path) -> None:
    """Object files are not fsynced one by one: one cut short voids the record, is removed, and the next
    promotion (of a new process, which reuses only files of the right size) writes it again."""
    a, b = _route("a", "u1"), _route("b", "u2")
    _saved(tmp_path, [a, b])
    victim = tmp_path / "judged" / "objects" / (hashlib.sha256(pv.canonical(a)).hexdigest() + ".json")
    victim.write_bytes(victim.read_bytes()[:10])
    again = pv.PromotedVersions(tmp_path, IDENTITY)
    again.save(MemoryState([a, b]), "h1")  # a size that does not match: written again
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h1") == {Ref("HTTPRoute", "t", "a"): a,
                                                                  Ref("HTTPRoute", "t", "b"): b}
    victim.write_bytes(b"x" * victim.stat().st_size)  # the right size, wrong bytes: found on reading
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h1") is None and not victim.exists()
    pv.PromotedVersions(tmp_path, IDENTITY).save(MemoryState([a, b]), "h1")
    assert pv.PromotedVersions(tmp_path, IDENTITY).load("h1") is not None
