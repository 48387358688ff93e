"""The decisions of reconcile's isolation, without rendering: which members of a group fail on their own
(``webhook.gate.bisection``), whether a culprit is held back or left out and when neither is allowed
(``webhook.reconcile.isolating``: traffic ownership), and the scoped incremental audit against the full one."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from pathlib import Path

from haproxy_check.results import HAProxyBinary
from haproxy_check.runtime.promotion import Promoter
from tests.reconcile.test_audits import GATEWAY, SERVICE, _route
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState, State
from validators.views.scopes import Scope
from webhook.gate import assembly, bisection
from webhook.gate.gates import Gate
from webhook.reconcile import audits, isolating
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.reconciler import Reconciler, Result


def _failing(culprits: set[int], together: bool = False):  # type: ignore[no-untyped-def]
    calls: list[frozenset[int]] = []

    async def passes_with(members: Sequence[int]) -> bool | None:
        calls.append(frozenset(members))
        present = culprits & set(members)
        return not (present == culprits if together else present)

    return passes_with, calls


def test_bisection_finds_each_member_failing_on_its_own() -> None:
    passes_with, calls = _failing({5, 40})
    assert asyncio.run(bisection.failing_alone(list(range(64)), passes_with, fails=True)) == [5, 40]
    assert len(calls) <= 2 * 2 * 6  # O(k log n) checks, not one per member


def test_bisection_gives_up_on_members_failing_only_together() -> None:
    passes_with, _ = _failing({3, 7}, together=True)
    assert asyncio.run(bisection.failing_alone(list(range(10)), passes_with, fails=True)) is None


def test_bisection_gives_up_when_a_check_cannot_decide() -> None:
    async def undecided(members: Sequence[int]) -> bool | None:
        return None

    assert asyncio.run(bisection.failing_alone([1, 2, 3], undecided)) is None


def _isolation(base: list[Obj], last_good: list[Obj] | None) -> isolating._Isolation:
    async def never(view: State) -> isolating.Attempt:
        raise AssertionError("no render here")

    good = MemoryState(last_good, version="good") if last_good is not None else None
    return isolating._Isolation(MemoryState(base, version="now"), never, good, lambda ref, alert: None)  # type: ignore[arg-type, return-value]


def _changed(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"]["generation"] = 2
    out["spec"]["hostnames"] = ["changed.example.com"]
    return out


def test_an_update_is_held_back_then_a_route_left_out() -> None:
    route = _route("r", "r.example.com")
    isolation = _isolation([GATEWAY, SERVICE, _changed(route)], [GATEWAY, SERVICE, route])
    ref = ref_of(route)
    assert isolation.set_aside(ref, [])
    assert isolation.held == {ref: route} and not isolation.gone
    # its promoted version fails too: a route is left out
    assert isolation.set_aside(ref, [])
    assert not isolation.held and isolation.gone == {ref}
    [item] = isolation.left_out()
    assert item.treatment is Treatment.LEFT_OUT


def test_a_promoted_gateway_is_never_left_out() -> None:
    gateway = copy.deepcopy(GATEWAY)
    gateway["metadata"]["generation"] = 4
    changed = copy.deepcopy(gateway)
    changed["metadata"]["generation"] = 5
    changed["spec"]["listeners"][0]["port"] = 70000
    edge = ref_of(GATEWAY)
    isolation = _isolation([changed, SERVICE], [gateway, SERVICE])
    assert isolation.set_aside(edge, [])  # held back at its promoted version ...
    [item] = isolation.left_out()
    assert (item.treatment, item.kept_generation) == (Treatment.HELD_BACK, 4)
    assert item.what == "held back at its last promoted version (generation 4)"
    assert not isolation.set_aside(edge, [])  # ... and when that fails too, nothing is isolated
    # unchanged since its promotion: holding back changes nothing, and leaving it out would free its ports
    assert not _isolation([gateway, SERVICE], [gateway, SERVICE]).set_aside(edge, [])
    # nothing known of what the data plane runs (the first run of the process): it may be live
    assert not _isolation([changed, SERVICE], None).set_aside(edge, [])


def test_a_new_gateway_is_left_out() -> None:
    new = copy.deepcopy(GATEWAY)
    new["metadata"]["name"] = "edge2"
    isolation = _isolation([GATEWAY, new, SERVICE], [GATEWAY, SERVICE])
    assert isolation.set_aside(ref_of(new), [])
    assert isolation.gone == {ref_of(new)}
    view = isolation.view()
    assert view.get("Gateway", new["metadata"]["namespace"], "edge2") is None
    assert [ref_of(g) for g in view.list("Gateway")] == [ref_of(GATEWAY)]


def test_scoped_incremental_audit_equals_the_full_one(gate: Gate) -> None:
    """A Gateway moving to another class takes its routes out of scope and back; the cache follows."""
    scope = Scope.of(["haproxy"])
    sticky = _route("r", "r.example.com", sessionPersistence={"sessionName": "a b"})
    cache = audits.AuditCache(gate.rules, scope)
    foreign = copy.deepcopy(GATEWAY)
    foreign["spec"]["gatewayClassName"] = "other"
    for version, gateway in enumerate([GATEWAY, foreign, GATEWAY]):
        state = scope.view(MemoryState([gateway, SERVICE, sticky], version=str(version)))
        found = cache.audit(state)
        assert found == audits.audit(gate.rules, state, scope)
        ours = gateway["spec"]["gatewayClassName"] == "haproxy"
        assert (Ref("HTTPRoute", sticky["metadata"]["namespace"], "r") in dict(found)) is ours, found


async def test_a_refused_render_naming_no_object_is_bisected(binary: HAProxyBinary, tmp_path: Path) -> None:
    """A user template that refuses to render one route (no origin names it): the objects changed since
    the last promotion are bisected, the route is left out with the renderer's message, the rest promoted."""
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "990-refuse.cfg.j2").write_text(
        '{% for r in resources("HTTPRoute") %}{% if dig(r, "metadata", "annotations", "example.com/refuse") %}'
        "{{ r.no_such_field.any }}{% endif %}{% endfor %}\n")
    gate = assembly.build_gate(binary, assembly.GateSettings(templates=(str(templates),)))
    reconciler = Reconciler(gate, Promoter(tmp_path / "out"))
    routes = [_route(f"r{i}", f"r{i}.example.com") for i in range(5)]
    first = await reconciler.reconcile(MemoryState([GATEWAY, SERVICE, *routes], version="1"))
    assert first.result is Result.PROMOTED
    refusing = _route("refusing", "x.example.com")
    refusing["metadata"]["annotations"] = {"example.com/refuse": "yes"}
    changed = copy.deepcopy(routes[2])
    changed["spec"]["hostnames"] = ["r2-new.example.com"]
    outcome = await reconciler.reconcile(
        MemoryState([GATEWAY, SERVICE, *routes[:2], changed, *routes[3:], refusing], version="2"))
    assert outcome.result is Result.PROMOTED, outcome.rejection
    [left] = outcome.left_out
    assert (left.ref.name, left.treatment) == ("refusing", Treatment.LEFT_OUT)
    [finding] = left.findings
    assert finding.code == "RG0801" and "990-refuse.cfg.j2" in finding.message, finding
    cfg = (tmp_path / "out" / "haproxy.cfg").read_text() + "".join(
        p.read_text() for p in (tmp_path / "out" / "maps").iterdir())
    assert "r2-new.example.com" in cfg and "x.example.com" not in cfg
