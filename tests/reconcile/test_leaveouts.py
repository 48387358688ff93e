"""Seed 004's rules for objects stored despite admission: what the reconcile output leaves out."""

from __future__ import annotations

import copy

from tests.reconcile.conftest import DATA
from tests.render_l4.conftest import ca_config_map, fixture
from tests.render_l4.test_tcproutes_render import section
from validators.objects import Obj
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.reconcile import audits, leaveouts

BACKEND = "backend gw_h_default_web_secure-cm_443"


def _servers(cfg: str, backend: str) -> list[str]:
    return [x for x in section(cfg.splitlines(), backend) if x.strip().startswith("server")]


def _with_san(objects: list[Obj], san: list[Obj]) -> list[Obj]:
    out = copy.deepcopy(objects)
    for obj in out:
        if obj.get("kind") == "BackendTLSPolicy" and obj["metadata"]["name"] == "cm":
            obj["spec"]["validation"]["subjectAltNames"] = san
    return out


def test_an_unverifiable_backend_tls_policy_blocks_its_backend(gate: Gate) -> None:
    good = [*fixture("backendtls.yaml"), ca_config_map("backend-ca")]
    assert _servers(gate.renderer.render(MemoryState(good)).config, BACKEND)  # verified, served
    stored = MemoryState(_with_san(good, [{"type": "Hostname", "hostname": "other.example.com"}]))
    found = audits.audit(gate.rules, stored)
    assert [[f.code for f in fs] for r, fs in found if str(r) == "BackendTLSPolicy default/cm"] == [["RG0104"]]
    view, left = leaveouts.apply(stored, found)
    assert [(str(x.ref), x.what) for x in left if x.ref.name == "cm"] == [
        ("BackendTLSPolicy default/cm", "its target backends are blocked (no servers)")]
    render = gate.renderer.render(view)
    assert _servers(render.config, BACKEND) == []  # blocked, never plaintext
    assert _servers(gate.renderer.render(stored).config, BACKEND)  # as stored it would verify only the hostname


def test_an_invalid_session_name_loses_session_persistence_only(gate: Gate) -> None:
    objects = [assembly.with_namespace(o) for o in fixture_objects()]
    stored = MemoryState(objects)
    view, left = leaveouts.apply(stored, audits.audit(gate.rules, stored))
    assert [(str(x.ref), x.what) for x in left] == [
        ("HTTPRoute capture/sticky", "no session persistence on spec.rules[0]")]
    route = view.get("HTTPRoute", "capture", "sticky")
    assert route is not None and "sessionPersistence" not in route["spec"]["rules"][0]
    assert stored.get("HTTPRoute", "capture", "sticky")["spec"]["rules"][0]["sessionPersistence"]  # type: ignore[index]


def fixture_objects() -> list[Obj]:
    from webhook.loading import inputs

    return [i.obj for i in inputs.load([str(DATA / "state"), str(DATA / "inputs" / "bad-session.yaml")])]
