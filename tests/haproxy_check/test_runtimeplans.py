"""The planner's guard rails: values on the socket cannot split or add commands; bad input is a reload
with the reason, never a command."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from haproxy_check.descriptions import BackendDesc, Description, MapDesc, ProfileDesc
from haproxy_check.runtime import runtimeapi, runtimeplans
from haproxy_check.runtime.runtimeplans import Action, UnsafeValue, cli_word

HDR = MapDesc("maps/gw-reqhdr.map", ordered=False, entries=("k one",))
BASE = Description(maps=(HDR,), frame="f")


def test_cli_words_escape_the_separators_and_refuse_line_breaks() -> None:
    assert cli_word("a b;c\\d", what="v") == "a\\ b\\;c\\\\d"
    for bad in ("a\nshow info", "a\rb", "a\x00", ""):
        with pytest.raises(UnsafeValue):
            cli_word(bad, what="v")


@pytest.mark.parametrize("entry", ["k two\nshow info", "k two\x00", "k\x1bx"])
def test_a_value_the_socket_cannot_carry_makes_a_reload(entry: str) -> None:
    plan = runtimeplans.plan(BASE, replace(BASE, maps=(replace(HDR, entries=(entry,)),)), dataplane_version=(3, 4))
    assert plan.action is Action.RELOAD and not plan.commands
    assert any("control character" in r for r in plan.reasons), plan.reasons


def test_a_value_with_separators_is_one_argument() -> None:
    plan = runtimeplans.plan(BASE, replace(BASE, maps=(replace(HDR, entries=("k two; del map x k",)),)),
                             dataplane_version=(2, 8))
    assert [c.line for c in plan.commands] == ["set map maps/gw-reqhdr.map k two\\;\\ del\\ map\\ x\\ k"]


def test_a_map_the_running_configuration_does_not_load_is_a_reload() -> None:
    plan = runtimeplans.plan(BASE, replace(BASE, maps=(HDR, MapDesc("maps/new.map", False, ("a b",)))),
                             dataplane_version=(3, 4))
    assert plan.action is Action.RELOAD and "maps/new.map is not loaded" in plan.reasons[0]


def test_many_changes_to_an_unordered_map_are_one_atomic_replace() -> None:
    old = replace(HDR, entries=tuple(f"k{i} a" for i in range(100)))
    new = replace(HDR, entries=tuple(f"k{i} b" for i in range(100)))
    plan = runtimeplans.plan(replace(BASE, maps=(old,)), replace(BASE, maps=(new,)), dataplane_version=(2, 8))
    assert [c.text() for c in plan.commands] == ["prepare map maps/gw-reqhdr.map",
                                                 "add map @<ver> maps/gw-reqhdr.map <<100 lines>>",
                                                 "commit map @<ver> maps/gw-reqhdr.map"]


def test_without_a_previous_description_the_safe_answer_is_a_reload() -> None:
    plan = runtimeplans.plan(None, BASE, dataplane_version=(3, 4))
    assert plan.action is Action.RELOAD and plan.reasons == ("rule 1: no previous configuration to compare with",)


def test_applying_a_reload_plan_or_to_no_socket_fails_with_the_reason(tmp_path: object) -> None:
    reload = runtimeplans.plan(None, BASE, dataplane_version=(3, 4))
    assert not asyncio.run(runtimeapi.apply(reload, "/nonexistent/s.sock")).ok
    runtime = runtimeplans.plan(BASE, replace(BASE, maps=(replace(HDR, entries=("k two",)),)),
                                dataplane_version=(3, 4))
    result = asyncio.run(runtimeapi.apply(runtime, "/nonexistent/s.sock"))
    assert not result.ok and "stats socket /nonexistent/s.sock" in result.error


@pytest.mark.parametrize("text,want", [("3.4", (3, 4)), ("3.4.7-1", (3, 4, 7)), ("2.8.25", (2, 8, 25))])
def test_versions(text: str, want: tuple[int, ...]) -> None:
    assert runtimeplans.parse_version(text) == want


def test_descriptions_without_a_frame_digest_are_a_reload() -> None:
    legacy = Description.from_dict({k: v for k, v in BASE.as_dict().items() if k != "frame"})
    for old, new in ((legacy, legacy), (BASE, replace(BASE, frame="")), (replace(BASE, frame=""), BASE)):
        plan = runtimeplans.plan(old, new, dataplane_version=(3, 4))
        assert plan.action is Action.RELOAD and "not recorded" in plan.reasons[0]


def test_a_profile_that_sets_balance_otherwise_cannot_create_the_backend_at_runtime() -> None:
    profile = ProfileDesc("p", ("mode http", "balance leastconn"))
    base = replace(BASE, profiles=(profile,))
    new = replace(base, backends=(BackendDesc("be", profile="p"),))  # the section says roundrobin
    plan = runtimeplans.plan(base, new, dataplane_version=(3, 4))
    assert plan.action is Action.RELOAD and "balance roundrobin" in plan.reasons[0]
    agreeing = replace(base, backends=(BackendDesc("be", profile="p", balance="leastconn"),))
    assert runtimeplans.plan(base, agreeing, dataplane_version=(3, 4)).action is Action.RUNTIME
