"""Reconcile's delta-checked outcome equals its full-checked outcome, after every step of random change
sequences.

When a run's render was patched from the render last promoted, the hot path runs ``haproxy -c`` on the
changed objects' closure only (``webhook.reconcile.reconcilechecks``, the gate's delta check). Here the same seeded
sequences of changes (valid ones, ones admission refuses, ones only ``haproxy -c`` refuses; routes,
Services, Gateways; created, updated, deleted) go through two reconcilers: one as shipped, one whose every
check is of the whole configuration. After every step both must give the same outcome: the same result,
the same promoted files, the same objects held back or left out (and why), the same findings and rejection.
The delta reconciler's background full checks are awaited after each step (so a disagreement, which must
not happen, would show in the next step too) and must all agree.

Real haproxy: 2.8, and 3.x when ``.haproxy3`` is there, one seeded sequence each (the same on every run;
about 5 s each on an idle machine: a run at 12 routes is one or two `haproxy -c`).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench import bench_gate
from haproxy_check.check import binaries
from haproxy_check.runtime.promotion import Promoter
from validators.objects import Obj
from validators.states import MemoryState, State
from webhook import metrics
from webhook.gate import assembly
from webhook.reconcile import isolating
from webhook.reconcile.reconciler import Outcome, Reconciler

pytestmark = pytest.mark.haproxy

SEEDS = (4, 3)  # each: 3 or more delta-checked runs, and a broken regex the closure check catches
ROUTES = 12
BROKEN = ("a{2,1}", "x{2,1}", "X Bad Name")  # what the invalid changes write


@functools.cache
def _objects() -> tuple[Obj, ...]:
    """The starting cluster (its listener certificate is made once: objects are never changed in place)."""
    return tuple(bench_gate.objects(ROUTES))


class FullChecked(Reconciler):
    """The reconciler with the delta check off: every run's render is checked whole (patched renders
    still: only the check differs)."""

    async def _attempt(self, view: State, previous: Any, timings: dict[str, float] | None = None, *,
                       delta: bool = False) -> isolating.Attempt:
        return await super()._attempt(view, previous, timings, delta=False)


def _routes(objs: list[Obj]) -> list[int]:
    return [i for i, o in enumerate(objs) if o["kind"] == "HTTPRoute"]


KINDS = ("header", "hostname", "weights", "create", "delete", "service-port", "gateway-hostname",  # valid
         "bad-regex", "bad-header-name", "create-bad")  # refused by haproxy -c, by admission, by haproxy -c


def _plan(rng: random.Random) -> list[str]:
    """A sequence's changes: every kind once, in a random order, a broken route often put right just after
    (so that later changes are also judged with nothing held back)."""
    kinds = list(KINDS)
    rng.shuffle(kinds)
    plan: list[str] = []
    for kind in kinds:
        plan.append(kind)
        if (kind.startswith("bad") and rng.random() < 0.6) or kind == "create-bad":
            plan.append("revert")
    return plan


def _change(rng: random.Random, objs: list[Obj], step: int, what: str) -> list[Obj]:
    """``objs`` with one random change of the kind ``what`` (a new list; objects not changed are shared)."""
    out = list(objs)
    routes = _routes(out)
    if what == "revert":  # a route back to as bench_gate builds it: a broken one first (each costs isolation)
        broken = [i for i in routes if any(bad in json.dumps(out[i]) for bad in BROKEN)]
        at = rng.choice(broken or routes)
        out[at] = bench_gate.route(int(out[at]["metadata"]["name"].rsplit("-", 1)[1]))
        return out
    if what in ("create", "create-bad"):
        new = bench_gate.route(100 + step)
        if what == "create-bad":
            new["spec"]["rules"][0]["matches"][0]["path"] = {"type": "RegularExpression", "value": "/x{2,1}"}
        out.append(new)
        return out
    if what == "delete" and len(routes) > 4:
        del out[rng.choice(routes)]
        return out
    if what == "service-port":
        named = {(o["metadata"]["namespace"], ref["name"]) for o in (out[i] for i in routes)
                 for rule in o["spec"]["rules"] for ref in rule.get("backendRefs", ())}
        services = [i for i, o in enumerate(out) if o["kind"] == "Service"
                    and (o["metadata"]["namespace"], o["metadata"]["name"]) in named]
        at = rng.choice(services)
        service = copy.deepcopy(out[at])
        ports = service["spec"]["ports"][0]
        ports["port"] = 9090 if ports["port"] == 8080 else 8080  # routes name 8080: a port the Service lacks
        out[at] = service
        return out
    if what == "gateway-hostname":
        gateways = [i for i, o in enumerate(out) if o["kind"] == "Gateway"]
        at = rng.choice(gateways)
        gateway = copy.deepcopy(out[at])
        name = gateway["metadata"]["name"]
        gateway["spec"]["listeners"][0]["hostname"] = rng.choice((f"*.{name}.example.com", f"only.{name}.example.com"))
        out[at] = gateway
        return out
    if what == "bad-regex":  # a route with a path regex (every third), its regex broken at the same length
        routes = [i for i in routes if "[a-z]+" in json.dumps(out[i])] or routes
    at = rng.choice(routes)
    route = copy.deepcopy(out[at])
    rules = route["spec"]["rules"]
    if what == "header":
        rules[1]["matches"][0]["headers"][0]["value"] = f"v{step}{rng.randrange(100)}"
    elif what == "hostname":
        host = route["spec"]["hostnames"][0]
        route["spec"]["hostnames"] = [f"moved{step}." + host.split(".", 1)[1]]
    elif what == "weights":
        refs = rules[0]["backendRefs"]
        refs[0]["weight"], refs[1]["weight"] = rng.randrange(1, 100), rng.randrange(0, 100)
    elif what == "bad-regex":  # passes admission, refused by haproxy -c: held back, or isolated
        # the same length, so the same precedence: patched in place and delta-checked, where it can be
        path = next((r["matches"][0]["path"] for r in rules if "[a-z]+" in r["matches"][0]["path"]["value"]),
                    rules[0]["matches"][0]["path"])
        path["type"], path["value"] = "RegularExpression", path["value"].replace("[a-z]+", "a{2,1}")
        if "a{2,1}" not in path["value"]:
            path["value"] += "a{2,1}"
    else:  # bad-header-name: refused by admission's rules (schema): left out or held back by the audit
        rules[0]["filters"][0]["requestHeaderModifier"]["set"][0]["name"] = "X Bad Name"
    out[at] = route
    return out


def _promoted(out: Path, outcome: Outcome) -> dict[str, bytes]:
    if outcome.promoted is None:
        return {}
    base = out / outcome.promoted.version
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()
            and p.name not in ("description.json", "statuses.json")}


def _said(out: Path, outcome: Outcome) -> tuple[Any, ...]:
    """What an outcome says, without the names of versions or timings (which differ between reconcilers)."""
    return (outcome.result,
            tuple((f.ref, f.findings) for f in outcome.faults),
            tuple((x.ref, x.what, x.findings, x.treatment, x.kept_generation) for x in outcome.left_out),
            outcome.rejection,
            _promoted(out, outcome))


def _count(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


async def _sequence(haproxy: str, out: Path, seed: int, *, stop_at_first: bool = False) -> list[str]:
    """The steps of one seeded sequence at which the two reconcilers' outcomes differ."""
    binary = await binaries.detect(haproxy)
    settings = assembly.GateSettings(render={"stats_socket": "/var/run/haproxy.sock"})
    delta = Reconciler(assembly.build_gate(binary, settings), Promoter(out / "delta"))
    full = FullChecked(assembly.build_gate(binary, settings), Promoter(out / "full"))
    rng = random.Random(seed)
    objs: list[Obj] = list(_objects())
    found: list[str] = []
    for step, what in enumerate(["first", *_plan(rng)]):
        if step:
            objs = _change(rng, objs, step, what)
        # each its own state over the same objects (states are read-only; memos are per state)
        got = await delta.reconcile(MemoryState(objs, version=f"{seed}-{step}"))
        await delta.full_checks.idle()  # as if the next change came after the background check
        want = await full.reconcile(MemoryState(copy.deepcopy(objs), version=f"{seed}-{step}"))
        if _said(out / "delta", got) != _said(out / "full", want):
            found.append(f"seed {seed} step {step} ({what}): delta {got.result} {got.left_out} {got.rejection} "
                         f"!= full {want.result} {want.left_out} {want.rejection}")
            if stop_at_first:
                break
    return found


def _run(haproxy: str, out: Path, seeds: tuple[int, ...], *, stop_at_first: bool = False
         ) -> tuple[list[str], float, float]:
    """Every mismatch over the seeds, and how many runs were delta-checked and full checks disagreed."""
    delta = _count(metrics.RECONCILE_CHECKS, "delta")
    disagreed = _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS)
    found: list[str] = []
    for seed in seeds:
        found += asyncio.run(_sequence(haproxy, out / str(seed), seed, stop_at_first=stop_at_first))
    return (found, _count(metrics.RECONCILE_CHECKS, "delta") - delta,
            _count(metrics.RECONCILE_FULL_CHECK_DISAGREEMENTS) - disagreed)


def test_delta_checked_outcomes_equal_full_checked_outcomes_after_every_step(
        haproxy_paths: list[str], tmp_path: Path) -> None:
    for n, haproxy in enumerate(haproxy_paths):
        seeds = (SEEDS[n % len(SEEDS)],)  # one sequence per binary, each its own (CI time)
        found, delta_checked, disagreed = _run(haproxy, tmp_path / str(n), seeds)
        assert not found, "\n".join(found)
        assert delta_checked >= 3, f"too few runs were delta-checked ({delta_checked}) to compare"
        assert disagreed == 0


def test_a_delta_check_that_misses_a_closure_member_is_caught(haproxy_path: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: a delta check that passes every closure without looking (a closure that
    misses the object it should check) lets a broken route through where the full check holds it back."""
    from haproxy_check.results import CheckResult
    from webhook.reconcile import reconciler as reconcile

    real = reconcile.Reconciler._attempt

    async def lenient(self: Reconciler, view: State, previous: Any, timings: dict[str, float] | None = None, *,
                      delta: bool = False) -> isolating.Attempt:
        if not delta or isinstance(self, FullChecked):
            return await real(self, view, previous, timings, delta=delta)
        check = self.gate.checker.check

        async def passing(render: Any) -> CheckResult:
            if render is self._patcher.closure:
                return CheckResult(ok=True, binary=self.gate.checker.binary, exit_code=0)
            return await check(render)

        self.gate.checker.check = passing  # type: ignore[method-assign]
        try:
            return await real(self, view, previous, timings, delta=delta)
        finally:
            del self.gate.checker.check

    monkeypatch.setattr(reconcile.Reconciler, "_attempt", lenient)
    found, _, _ = _run(haproxy_path, tmp_path, SEEDS[:1], stop_at_first=True)
    assert found, "a delta check that passes everything went unnoticed"
