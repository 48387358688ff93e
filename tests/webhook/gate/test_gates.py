"""The Gate's own rules: baseline, admission subject, reload notes, caching and 'cannot decide'."""

from __future__ import annotations

import asyncio
import copy
import stat
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.check.checker import Checker
from haproxy_check.results import HAProxyBinary, RenderResult
from tests.webhook.conftest import INPUTS, STATE_DIR, load_objects
from validators.changes import Change, Operation
from validators.objects import Ref
from validators.states import MemoryState, Overlay, State
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision

pytestmark = pytest.mark.haproxy


def named(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(o for o in load_objects(INPUTS) if o["metadata"]["name"] == name))  # type: ignore[index]


def state_with(*extra: dict[str, Any], version: str = "v1") -> MemoryState:
    return MemoryState([*load_objects(STATE_DIR), *extra], version=version)


def header_route(name: str, header: str, value: str) -> dict[str, Any]:
    route = named("shop")
    route["metadata"]["name"] = name
    route["spec"]["hostnames"] = [f"{name}.example.com"]
    route["spec"]["rules"] = [{"backendRefs": [{"name": "web", "port": 8080}], "filters": [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": header, "value": value}]}}]}]
    return route


class CountingRenderer:
    """The real renderer, counting how often the gate asks for a render of the state alone."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.baselines = 0

    def render(self, state: State, *, subject: Ref | None = None, previous: Any = None) -> RenderResult:
        if subject is None:
            self.baselines += 1
        result: RenderResult = self.inner.render(state, subject=subject, previous=previous)
        return result


async def test_a_route_already_broken_by_others_does_not_block_an_unrelated_change(gate: Gate) -> None:
    state = state_with(named("broken"))
    full = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=False)
    verdict = await full.review(Change(Operation.CREATE, named("shop")), state=state)
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert any("already fails haproxy -c because of HTTPRoute capture/broken" in n
               for n in verdict.notes), verdict.notes
    # The delta check never renders the unrelated broken route (another host: not in the closure).
    verdict = await gate.review(Change(Operation.CREATE, named("shop")), state=state)
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert not any("already fails" in n for n in verdict.notes), verdict.notes


async def test_the_baseline_note_names_the_culprit_but_not_its_values(gate: Gate) -> None:
    """Another tenant's hosts, paths and regexes stay out of this tenant's review (issue 16, item 10)."""
    state = state_with(named("broken"))
    full = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=False)  # sees the culprit
    verdict = await full.review(Change(Operation.CREATE, named("shop")), state=state)
    [note] = [n for n in verdict.notes if "already fails" in n]
    assert "HTTPRoute capture/broken (spec.rules[1].matches[0].path.value)" in note
    for value in ("broken.example.com", "a{2,1}", "/a{2,1}", "path-regex.map", "/ok"):
        assert value not in note, note


async def test_the_change_that_breaks_the_config_is_denied(gate: Gate) -> None:
    verdict = await gate.review(Change(Operation.CREATE, named("broken")), state=state_with())
    assert verdict.decision is Decision.DENY
    assert [f.field for f in verdict.denials] == ["spec.rules[1].matches[0].path.value"]
    assert verdict.alerts and verdict.alerts[0].context


async def test_breaking_a_second_thing_in_a_broken_config_is_denied(gate: Gate) -> None:
    other = named("broken")
    other["metadata"]["name"] = "broken-too"
    other["spec"]["hostnames"] = ["other.example.com"]
    other["spec"]["rules"][1]["matches"][0]["path"]["value"] = "/b{9,3}"
    verdict = await gate.review(Change(Operation.CREATE, other), state=state_with(named("broken")))
    assert verdict.decision is Decision.DENY
    assert "b{9,3}" in verdict.message and "a{2,1}" not in verdict.message


async def test_deleting_the_object_that_breaks_the_config_is_allowed(gate: Gate) -> None:
    broken = named("broken")
    verdict = await gate.review(Change(Operation.DELETE, None, broken), state=state_with(broken))
    assert verdict.decision is Decision.ALLOW, verdict.message


async def test_findings_about_other_objects_never_deny_the_subject(gate: Gate) -> None:
    sticky = named("sticky")  # breaks a deny rule, but it is not the subject here
    verdict = await gate.review(Change(Operation.CREATE, named("shop")), state=state_with(sticky))
    assert verdict.decision is Decision.ALLOW
    assert not any("sessionName" in w for w in verdict.warnings)


async def test_the_baseline_is_checked_once_for_a_burst_of_reviews(gate: Gate) -> None:
    counting = CountingRenderer(gate.renderer)
    # The full check: every review shares one baseline (a delta review's baseline is its own closure's).
    burst_gate = Gate(rules=gate.rules, renderer=counting, checker=gate.checker, delta=False)
    state = state_with(named("broken"), version="burst")
    routes = []
    for i in range(5):
        route = named("shop")
        route["metadata"]["name"] = f"shop-{i}"
        route["spec"]["hostnames"] = [f"shop-{i}.example.com"]
        routes.append(route)
    verdicts = await asyncio.gather(*(burst_gate.review(Change(Operation.CREATE, r), state=state) for r in routes))
    assert all(v.decision is Decision.ALLOW for v in verdicts)
    assert counting.baselines == 1


async def test_a_new_header_name_needs_a_reload_but_a_new_value_does_not(gate: Gate) -> None:
    first = header_route("hdr", "X-Team", "blue")
    verdict = await gate.review(Change(Operation.CREATE, first), state=state_with())
    assert any(n.startswith("needs a reload: ") and "frontend" in n for n in verdict.notes), verdict.notes
    changed = header_route("hdr", "X-Team", "green")
    verdict = await gate.review(Change(Operation.UPDATE, changed, first), state=state_with(first, version="v2"))
    assert verdict.decision is Decision.ALLOW
    assert "applies at runtime (1 command)" in verdict.notes, verdict.notes


async def test_the_note_plans_for_the_data_planes_version(gate: Gate) -> None:
    """Seed 000: a new backend with a loaded profile is runtime on 3.4, a reload before; the checker's
    version (2.8 here) is only the default. The whole-state gate: a delta review's baseline is the
    change's closure, which holds no other route to have loaded the profile."""
    first = header_route("hdr", "X-Team", "blue")
    other = header_route("hdr2", "X-Team", "red")
    other["spec"]["rules"][0]["backendRefs"] = [{"name": "web", "port": 8080}]
    state = state_with(first, version="dp")
    on_34 = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, dataplane_version=(3, 4),
                 delta=False, note_budget=60.0)  # a render on a busy machine must not skip the note
    verdict = await on_34.review(Change(Operation.CREATE, other), state=state)
    assert any(n.startswith("applies at runtime (") for n in verdict.notes), verdict.notes
    on_28 = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, delta=False, note_budget=60.0)
    verdict = await on_28.review(Change(Operation.CREATE, other), state=state)
    assert any(n.startswith("needs a reload: ") and "3.4+" in n for n in verdict.notes), verdict.notes


async def test_a_route_attached_to_no_listener_gets_no_runtime_note(gate: Gate) -> None:
    lonely = header_route("lonely", "X-Team", "blue")
    lonely["spec"]["parentRefs"] = [{"name": "nowhere"}]
    verdict = await gate.review(Change(Operation.CREATE, lonely), state=state_with(version="lonely"))
    assert verdict.decision is Decision.ALLOW
    assert not any("reload" in n or "runtime" in n for n in verdict.notes), verdict.notes


async def test_a_check_that_hangs_is_an_error_not_a_deny(gate: Gate, tmp_path: Path) -> None:
    fake = tmp_path / "haproxy"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    hanging = Checker(HAProxyBinary(str(fake), "2.8.0"), timeout=0.3)
    slow_gate = Gate(rules=gate.rules, renderer=gate.renderer, checker=hanging)
    verdict = await slow_gate.review(Change(Operation.CREATE, named("shop")), state=state_with())
    assert verdict.decision is Decision.ERROR
    assert "did not finish within 0.3s" in verdict.message and not verdict.allowed


async def test_an_unattached_route_is_still_checked_and_warned_about(gate: Gate) -> None:
    lonely = named("broken")
    lonely["spec"]["parentRefs"] = [{"name": "nowhere"}]
    verdict = await gate.review(Change(Operation.CREATE, lonely), state=state_with())
    assert verdict.decision is Decision.DENY, "a data-plane error must surface even without a Gateway"
    ok = named("shop")
    ok["spec"]["parentRefs"] = [{"name": "nowhere"}]
    verdict = await gate.review(Change(Operation.CREATE, ok), state=state_with())
    assert verdict.decision is Decision.ALLOW
    assert any("nowhere" in w or "not attached" in w.lower() or "NoMatchingParent" in w for w in verdict.warnings), \
        verdict.warnings


async def test_header_names_with_dollar_and_ampersand_are_allowed_end_to_end(gate: Gate) -> None:
    """Every HTTP token is a header name (issue 27): admission, render and haproxy -c agree."""
    for n, name in enumerate(("X-Team$Co&Sons", "X-Team#1", "X'Team|`%")):
        verdict = await gate.review(Change(Operation.CREATE, header_route(f"r{n}", name, "blue")), state=state_with())
        assert verdict.decision is Decision.ALLOW, (name, verdict.message)
    refused = header_route("colon", "X-Team:1", "blue")  # no token: the CRD's pattern and RG0107 refuse it
    verdict = await gate.review(Change(Operation.CREATE, refused), state=state_with())
    assert verdict.decision is Decision.DENY
    assert {f.field for f in verdict.denials} == {"spec.rules[0].filters[0].requestHeaderModifier.set[0].name"}
    assert "RG0107" in {f.code for f in verdict.denials}


async def test_the_reload_note_is_skipped_when_a_render_is_too_slow_for_a_second_one(gate: Gate) -> None:
    counting = CountingRenderer(gate.renderer)
    # (the traffic diff renders the baseline too, under its own budget: tests/webhook/gate/test_traffic_verdicts.py)
    hurried = Gate(rules=gate.rules, renderer=counting, checker=gate.checker, note_budget=0.0, traffic=False)
    verdict = await hurried.review(Change(Operation.CREATE, header_route("hdr", "X-Team", "blue")),
                                   state=state_with(version="slow"))
    assert verdict.decision is Decision.ALLOW
    assert counting.baselines == 0
    assert any(n.startswith("reload classification skipped") for n in verdict.notes), verdict.notes


def batch(*objects: dict[str, Any]) -> tuple[list[tuple[Change, State]], MemoryState]:
    combined = state_with(*objects, version="batch")
    items: list[tuple[Change, State]] = [
        (Change(Operation.CREATE, obj), Overlay(combined, Change(Operation.DELETE, None, obj))) for obj in objects]
    return items, combined


def many_shops(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        route = named("shop")
        route["metadata"]["name"] = f"shop-{i}"
        route["spec"]["hostnames"] = [f"shop-{i}.example.com"]
        out.append(route)
    return out


async def test_a_passing_batch_is_rendered_and_checked_once(gate: Gate) -> None:
    counting = CountingRenderer(gate.renderer)
    batch_gate = Gate(rules=gate.rules, renderer=counting, checker=gate.checker)
    items, combined = batch(*many_shops(6))
    verdicts = await batch_gate.review_all(items, combined=combined)
    assert [v.decision for v in verdicts] == [Decision.ALLOW] * 6
    assert counting.baselines == 1, "one render of the combined state serves every change"
    assert [(c["type"], c["status"]) for c in verdicts[0].status["parents"][0]["conditions"]] == [
        ("Accepted", "True"), ("ResolvedRefs", "True")]


async def test_batch_verdicts_equal_one_by_one_verdicts(gate: Gate) -> None:
    lonely = named("broken")  # a broken regex, attached nowhere: only a per-change review renders it
    lonely["metadata"]["name"] = "lonely"
    lonely["spec"]["parentRefs"] = [{"name": "nowhere"}]
    objects = [*many_shops(2), named("sticky"), lonely]
    items, combined = batch(*objects)
    together = await gate.review_all(items, combined=combined)
    alone = [await gate.review(change, state=state, reload_note=False) for change, state in items]
    assert [(v.ref, v.decision, [f.field for f in v.denials]) for v in together] == \
        [(v.ref, v.decision, [f.field for f in v.denials]) for v in alone]
    assert [v.decision for v in together] == [Decision.ALLOW, Decision.ALLOW, Decision.DENY, Decision.DENY]


def judged(verdicts: list[Any]) -> list[tuple[Any, ...]]:
    return [(v.ref, v.decision, [f.field for f in v.denials], v.notes) for v in verdicts]


@pytest.mark.parametrize("delta", [False, True], ids=["whole-state", "delta"])
async def test_a_failing_batch_bisects_to_the_broken_change_with_the_one_by_one_verdicts(gate: Gate,
                                                                                       delta: bool) -> None:
    counting = CountingRenderer(gate.renderer)
    batch_gate = Gate(rules=gate.rules, renderer=counting, checker=gate.checker, delta=delta)
    shops = many_shops(15)
    items, combined = batch(*shops[:11], named("broken"), *shops[11:])
    together = await batch_gate.review_all(items, combined=combined)
    bisected = counting.baselines
    counting.baselines = 0
    alone = [await batch_gate.review(change, state=state, reload_note=False) for change, state in items]
    assert judged(together) == judged(alone)
    assert [v.decision for v in together].count(Decision.DENY) == 1 and together[11].decision is Decision.DENY
    # The combined check, the state outside the batch, a bisection of 16 (2 log2 16), the state without
    # the culprit and the culprit's own baseline: 12 renders of everything, not 16 reviews of 2 or 3 each.
    assert bisected <= 12, bisected
    if delta:
        # Each shop's closure holds its own host only: the broken route is none of their business.
        assert not any(n for v in together if v.allowed for n in v.notes if "already fails" in n)
        return
    assert counting.baselines == 16, "one by one, every review checks its own baseline"
    assert all(any("already fails haproxy -c because of HTTPRoute capture/broken" in n for n in v.notes)
               for v in together if v.allowed)


async def test_a_gateway_in_a_failing_batch_stays_visible_and_is_judged_one_by_one(gate: Gate) -> None:
    gateway = next(o for o in load_objects(STATE_DIR) if o["kind"] == "Gateway")
    items, combined = batch(gateway, *many_shops(6), named("broken"))
    together = await gate.review_all(items, combined=combined)
    alone = [await gate.review(change, state=state, reload_note=False) for change, state in items]
    assert judged(together) == judged(alone)
    assert together[-1].decision is Decision.DENY and all(v.allowed for v in together[1:-1])


async def test_two_changes_breaking_one_map_file_leave_the_batch_to_one_by_one_review(gate: Gate) -> None:
    # HAProxy names only the first bad entry of a map file, so the alerts name one of the two suspects;
    # a one-by-one review then behaves differently from what bisection could argue: it decides.
    twin = named("broken")
    twin["metadata"]["name"] = "broken-twin"
    items, combined = batch(*many_shops(3), named("broken"), twin)
    together = await gate.review_all(items, combined=combined)
    alone = [await gate.review(change, state=state, reload_note=False) for change, state in items]
    assert judged(together) == judged(alone)


class CountingReviews:
    """A gate's one-by-one reviews, counted (the fall-back of a batch that could not be settled)."""

    def __init__(self, gate: Gate) -> None:
        self.count = 0
        self.inner = gate.review

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return await self.inner(*args, **kwargs)


async def test_the_alerts_name_the_culprit_so_a_failing_batch_is_not_bisected_whole(gate: Gate) -> None:
    counting = CountingRenderer(gate.renderer)
    batch_gate = Gate(rules=gate.rules, renderer=counting, checker=gate.checker, delta=False)
    shops = many_shops(40)
    items, combined = batch(*shops[:29], named("broken"), *shops[29:])
    together = await batch_gate.review_all(items, combined=combined)
    renders = counting.baselines
    alone = [await batch_gate.review(change, state=state, reload_note=False) for change, state in items]
    assert judged(together) == judged(alone)
    assert together[29].decision is Decision.DENY and sum(not v.allowed for v in together) == 1
    # The combined check, the state outside the batch, the batch without the route the alerts name, that
    # route alone and the culprit's own review with its baseline: not 2 log2(41) renders of everything.
    assert renders <= 6, renders


async def test_two_culprits_in_one_map_file_settle_the_delta_batch_without_reviewing_it_all(gate: Gate) -> None:
    # HAProxy names only the first bad entry of a map file: the check without it names the second.
    twin = named("broken")
    twin["metadata"]["name"] = "broken-twin"
    counting = CountingRenderer(gate.renderer)
    batch_gate = Gate(rules=gate.rules, renderer=counting, checker=gate.checker, delta=True)
    reviews = CountingReviews(batch_gate)
    batch_gate.review = reviews  # type: ignore[method-assign]
    items, combined = batch(*many_shops(30), named("broken"), twin)
    together = await batch_gate.review_all(items, combined=combined)
    renders, reviewed = counting.baselines, reviews.count
    alone = [await batch_gate.review(change, state=state, reload_note=False) for change, state in items]
    assert judged(together) == judged(alone)
    assert [v.decision for v in together[-2:]] == [Decision.DENY, Decision.DENY]
    assert all(v.allowed for v in together[:-2])
    assert reviewed == 2, f"only the two culprits are reviewed one by one, not {reviewed}"
    assert renders <= 10, renders


async def test_a_failing_batch_is_judged_one_by_one(gate: Gate) -> None:
    items, combined = batch(*many_shops(2), named("broken"))
    verdicts = await gate.review_all(items, combined=combined)
    assert [v.decision for v in verdicts] == [Decision.ALLOW, Decision.ALLOW, Decision.DENY]
    assert [f.field for f in verdicts[2].denials] == ["spec.rules[1].matches[0].path.value"]
    assert not any("already fails" in n for n in verdicts[0].notes), "another host: not in shop-0's closure"


class BaselineWatchingChecker:
    """The real checker, holding each check until the gate started a render of a state alone (at most
    five seconds): whether the reload note's baseline is rendered while haproxy -c runs."""

    def __init__(self, inner: Checker, renderer: CountingRenderer) -> None:
        self.inner, self.renderer = inner, renderer
        self.binary = inner.binary
        self.saw_baseline: list[bool] = []

    async def check(self, render: RenderResult) -> Any:
        for _ in range(500):
            if self.renderer.baselines:
                break
            await asyncio.sleep(0.01)
        self.saw_baseline.append(self.renderer.baselines > 0)
        return await self.inner.check(render)


async def test_the_reload_note_is_worked_out_while_haproxy_checks_and_reads_the_same(gate: Gate) -> None:
    change = Change(Operation.CREATE, header_route("hdr", "X-Team", "blue"))
    counting = CountingRenderer(gate.renderer)
    assert isinstance(gate.checker, Checker)
    watching = BaselineWatchingChecker(gate.checker, counting)
    overlapped = Gate(rules=gate.rules, renderer=counting, checker=watching)
    verdict = await overlapped.review(change, state=state_with(version="overlap"))
    assert watching.saw_baseline == [True]
    plain = await Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker).review(
        change, state=state_with(version="overlap"))
    assert verdict.decision is plain.decision is Decision.ALLOW
    assert (verdict.findings, verdict.notes, verdict.status) == (plain.findings, plain.notes, plain.status)
    assert verdict.notes, "a clean allow has a reload note"


class PoolWatchingChecker:
    """The real (warm) checker, noting how many checks wait ahead when each review's check is over."""

    def __init__(self, inner: Checker) -> None:
        self.inner = inner
        self.binary = inner.binary
        self.answered = 0

    async def check(self, render: RenderResult) -> Any:
        return await self.inner.check(render)

    def top_up_soon(self) -> None:
        self.answered += 1
        self.inner.top_up_soon()


async def test_the_check_taken_ahead_is_replaced_once_the_review_is_answered(gate: Gate) -> None:
    """Starting the next check ahead (a spawn holding the GIL, haproxy's start on a core) waits until the
    review returns its verdict: it no longer delays the reload note, the traffic diff and the answer."""
    assert isinstance(gate.checker, Checker)
    runner = gate.checker.runner
    if not runner.warm:
        pytest.skip("no warm starts here (pidfds or a tmpfs at /dev/shm)")
    watching = PoolWatchingChecker(gate.checker)
    watched = Gate(rules=gate.rules, renderer=gate.renderer, checker=watching)
    state = state_with(version="pool")
    try:
        await watched.review(Change(Operation.CREATE, header_route("warm-a", "X-Team", "a")), state=state)
        await asyncio.sleep(0.05)
        assert len(runner.waiting_ahead) == runner.pool
        verdict = await watched.review(Change(Operation.CREATE, header_route("warm-b", "X-Team", "b")), state=state)
        assert verdict.decision is Decision.ALLOW, verdict.message
        assert watching.answered == 2
        assert len(runner.waiting_ahead) == runner.pool - 1  # nothing started while the review ran
        await asyncio.sleep(0.02)
        assert len(runner.waiting_ahead) == runner.pool  # and replaced right after
    finally:
        runner.close()
