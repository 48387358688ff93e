"""Stable server slots: a server keeps its name while endpoints change, so the runtime plan is one
``set server`` per moved endpoint; renders with a previous description agree with stabilizing after."""

from __future__ import annotations

import copy

from haproxy_check.descriptions import ServerDesc
from haproxy_check.render.rendering import Renderer
from haproxy_check.runtime import runtimeplans, slots
from tests.attachments import gwbuilders as gb
from validators.objects import Obj
from validators.states import MemoryState


def servers(*pairs: tuple[str, str]) -> tuple[ServerDesc, ...]:
    return tuple(ServerDesc(name, addr, 80) for name, addr in pairs)


def named(found: tuple[ServerDesc, ...]) -> list[tuple[str, str]]:
    return [(s.name, s.address) for s in found]


OLD = servers(("s1", "10.0.0.1"), ("s2", "10.0.0.2"), ("s3", "10.0.0.3"))


def test_without_a_previous_description_names_are_address_order() -> None:
    new = servers(("s1", "10.0.0.2"), ("s2", "10.0.0.9"))
    assert slots.assign(new, ()) == new


def test_one_endpoint_moving_keeps_every_other_name() -> None:
    # by address order alone the move renames all three (s1=.2, s2=.3, s3=.9)
    new = servers(("s1", "10.0.0.2"), ("s2", "10.0.0.3"), ("s3", "10.0.0.9"))
    assert named(slots.assign(new, OLD)) == [("s1", "10.0.0.9"), ("s2", "10.0.0.2"), ("s3", "10.0.0.3")]


def test_a_removed_endpoint_leaves_its_slot_and_an_added_one_takes_the_lowest_free() -> None:
    removed = slots.assign(servers(("s1", "10.0.0.2"), ("s2", "10.0.0.3")), OLD)
    assert named(removed) == [("s2", "10.0.0.2"), ("s3", "10.0.0.3")]  # s1 is gone: one del server
    kept = servers(("s2", "10.0.0.2"), ("s3", "10.0.0.3"))
    grown = slots.assign(servers(("s1", "10.0.0.2"), ("s2", "10.0.0.3"), ("s3", "10.0.0.4")), kept)
    assert named(grown) == [("s1", "10.0.0.4"), ("s2", "10.0.0.2"), ("s3", "10.0.0.3")]


def test_groups_of_a_multi_backend_rule_and_template_names_stay_apart() -> None:
    old = (ServerDesc("r0-s1", "10.0.0.1", 80), ServerDesc("r1-s1", "10.0.1.1", 80),
           ServerDesc("primary", "10.0.2.1", 80))
    new = (ServerDesc("r0-s1", "10.0.1.1", 80), ServerDesc("r1-s1", "10.0.0.1", 80),
           ServerDesc("primary", "10.0.2.2", 80))
    # the same addresses in other groups: each group keeps its own names, a template's name is its own
    assert named(slots.assign(new, old)) == [("primary", "10.0.2.2"), ("r0-s1", "10.0.1.1"), ("r1-s1", "10.0.0.1")]


def _state(addresses: list[str]) -> list[Obj]:
    return [gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra"),
            gb.service("web", "default", ("http", 80)),
            gb.endpoint_slice("web-a", "web", "default", [("http", 8080)], [(a, True) for a in addresses]),
            gb.route("HTTPRoute", "r", gb.parent("edge", namespace="infra"), hosts=["a.example.com"],
                     rules=[{"backendRefs": [{"name": "web", "port": 80}]}])]


def test_a_render_with_the_previous_description_plans_one_set_server() -> None:
    renderer = Renderer()
    before = renderer.render(MemoryState(_state(["10.0.0.1", "10.0.0.2", "10.0.0.3"])))
    moved = MemoryState(_state(["10.0.0.2", "10.0.0.3", "10.0.0.9"]))
    plain = renderer.render(moved)
    after = renderer.render(moved, previous=before.description)
    assert after.description == slots.stabilize(plain.description, before.description)
    assert after.description.frame == plain.description.frame
    plan = runtimeplans.plan(before.description, after.description, dataplane_version=(2, 8))
    assert [c.line for c in plan.commands] == ["set server gw_h_default_r_web_80/s1 addr 10.0.0.9 port 8080"]
    naive = runtimeplans.plan(before.description, plain.description, dataplane_version=(2, 8))
    assert len(naive.commands) == 3  # what address-order names cost
    assert b"server s1 10.0.0.9:8080" in after.files["haproxy.cfg"]


def test_the_backend_memo_keys_on_the_previous_description() -> None:
    # one incremental renderer, one state, two previous descriptions: each render is the from-scratch one
    renderer = Renderer()
    state = MemoryState(_state(["10.0.0.2", "10.0.0.3"]))
    first = Renderer(incremental=False).render(MemoryState(_state(["10.0.0.1", "10.0.0.2"])))
    second = Renderer(incremental=False).render(MemoryState(_state(["10.0.0.3", "10.0.0.4"])))
    for previous in (first.description, second.description, None, first.description):
        got = renderer.render(copy.deepcopy(state), previous=previous)
        want = Renderer(incremental=False).render(state, previous=previous)
        assert got.files == want.files and got.description == want.description
