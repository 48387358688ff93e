"""The memoized cross-object checks and statuses (a route's attachments once per state version, the
attached-route counts patched per overlay, the rules' shared walks of one object) give what the
from-scratch path gives, on random clusters, on a review's overlay and on ``routegate check``'s stacks
(each input taken out of the combined state, then put back). The from-scratch path is the same call
through a ``Recording`` view, which no memo serves (its reads are what it is for)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from tests.webhook import deltastates
from validators import rules
from validators.changes import Change, Operation
from validators.contexts import Context
from validators.crossobject import crossobjects, statuses
from validators.objectrules import traversals
from validators.objects import REVIEWED_KINDS, Obj, kind_of
from validators.states import MemoryState, Overlay, State
from validators.views import attachments
from validators.views.reads import Recording


def judged(subject: Obj, state: State) -> tuple[Any, ...]:
    found = list(crossobjects.findings(subject, state))
    status = statuses.status_of(subject, state) if kind_of(subject) in statuses.STATUS_KINDS else None
    return found, status, attachments.attach(subject, state)


def cases(objects: list[Obj], change: Change) -> list[tuple[Obj, State]]:
    everything = MemoryState(objects, version="v1")
    out: list[tuple[Obj, State]] = [(change.subject, Overlay(everything, change))]
    for obj in objects:
        if kind_of(obj) in REVIEWED_KINDS:
            others = Overlay(everything, Change(Operation.DELETE, None, obj))
            out += [(obj, Overlay(others, Change(Operation.CREATE, obj))), (obj, everything)]
    return [*out, out[0]]  # the review again, its base's memo now filled by the others


@settings(max_examples=60, deadline=None)
@given(deltastates.cluster_and_change())
def test_memoized_cross_checks_and_statuses_agree(drawn: tuple[list[Obj], Change]) -> None:
    objects, change = drawn
    for subject, state in cases(objects, change):
        want = judged(subject, Recording(state))
        assert judged(subject, state) == want
        assert judged(subject, state) == want  # served from the memo this time
        for ports in ((80, 443), (8443,)):
            assert statuses._attached_counts(state, None, ports) == statuses.attached_counts_scan(
                Recording(state), ports)


@settings(max_examples=60, deadline=None)
@given(deltastates.cluster_and_change())
def test_shared_walks_change_no_rule(drawn: tuple[list[Obj], Change]) -> None:
    objects, change = drawn
    ctx = Context(state=MemoryState(objects))
    for obj in [*objects, change.subject]:
        chosen = rules.RULES.get(kind_of(obj), rules.COMMON)
        alone = [f for rule in chosen for f in rule(obj, ctx)]  # outside rules.run: every rule walks
        assert rules.run(obj, ctx) == alone
        with traversals.walking(obj):
            assert list(traversals.filters_of(obj)) == list(traversals._filters_of(obj))
            assert list(traversals.rules_of(obj)) == list(traversals._rules_of(obj))
