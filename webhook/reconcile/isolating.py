"""Per-object isolation: when the whole state fails ``haproxy -c``, promote everything but the culprits.

One tenant's broken stored object (a regex HAProxy's PCRE rejects, stored while the webhook was down)
must not freeze every other tenant's changes. ``isolate`` finds the objects at fault and sets each
aside, then renders and checks again, for at most ``ROUNDS`` rounds (HAProxy reports one error per map
file or section, so a culprit can hide the next one):

- the culprits are the objects the failing lines come from (the alerts' source map,
  ``Alert.origin``; a refused render's ``RenderError.origin``); when nothing names an object, the
  objects changed since the last promotion are bisected (``webhook.gate.bisection``, as the Gate's
  batch settling does): a group is checked with every other suspect back at its last promoted version;
- a culprit that was promoted before, at another version, is **held back** at that version (a bad edit
  does not take a live route down); a new one is **left out**; one whose promoted version fails too is
  left out if it is a route;
- traffic ownership: a Gateway, ListenerSet or GatewayClass the data plane runs is never left out (its
  listeners' ports would go to whichever owner lost them to it); when holding it back is not enough, or nothing
  is known of what was promoted (the first run after a start), nothing can be isolated.

``None``: no culprit could be found, or setting the culprits aside did not lead to a passing
configuration within the rounds; the caller keeps last-known-good for the whole set. A check that could
not decide raises (``CheckTimedOut``) or ends the isolation (an undecided result), never an allow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from haproxy_check.results import Alert, CheckResult, RenderError, RenderResult
from validators import codes
from validators.findings import Finding, Severity
from validators.objects import REVIEWED_KINDS, Obj, Ref, dig, ref_of
from validators.states import State, Without
from webhook.gate.bisection import failing_alone
from webhook.reconcile import leaveouts

ROUNDS = 8  # renders and checks after the first failure; each sets aside what the previous one named
# Kinds whose objects own listener ports (a GatewayClass: those of all its Gateways): the data plane's
# version of one is never taken away.
PORT_OWNERS = frozenset({"Gateway", "ListenerSet", "GatewayClass"})
# Bisected in turn: the objects routes need to be rendered at all come last (hiding a new Gateway in a
# group hides its routes too, so a route that fails only with it would never be split down to).
_PHASES = (REVIEWED_KINDS - PORT_OWNERS, REVIEWED_KINDS & PORT_OWNERS)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One render of a view and its ``haproxy -c``: the render refused, or the check's result."""

    view: State
    render: RenderResult | None = None
    refused: RenderError | None = None
    checked: CheckResult | None = None

    @property
    def ok(self) -> bool:
        return self.render is not None and self.checked is not None and self.checked.ok

    @property
    def decided(self) -> bool:
        return self.refused is not None or (self.checked is not None and self.checked.decided)


Attempter = Callable[[State], Awaitable[Attempt]]
AlertFinding = Callable[[Ref, Alert], Finding]


@dataclass(frozen=True, slots=True)
class Isolated:
    attempt: Attempt  # the passing render and check of the view with the culprits set aside
    set_aside: tuple[leaveouts.LeftOut, ...]  # held back or left out, with HAProxy's message
    rounds: int


def refused_finding(exc: RenderError) -> Finding:
    return Finding(codes.RENDER_REFUSED, exc.message, exc.origin.path if exc.origin else (), Severity.DENY)


def named(attempt: Attempt, alert_finding: AlertFinding) -> dict[Ref, list[Finding]]:
    """The objects a failed attempt's refusal or alerts name, with the finding for each."""
    out: dict[Ref, list[Finding]] = {}
    if attempt.refused is not None:
        if attempt.refused.origin is not None:
            out[attempt.refused.origin.ref] = [refused_finding(attempt.refused)]
        return out
    for alert in attempt.checked.alerts if attempt.checked is not None else ():
        if alert.origin is not None:
            found = out.setdefault(alert.origin.ref, [])
            finding = alert_finding(alert.origin.ref, alert)
            if finding not in found:
                found.append(finding)
    return out


def view_of(base: State, held: Mapping[Ref, Obj], gone: frozenset[Ref]) -> State:
    """``base`` with the held-back objects at their promoted versions and the left-out ones hidden."""
    view = leaveouts.replacing(base, held) if held else base
    return Without(view, gone) if gone else view


class _Isolation:
    def __init__(self, base: State, attempt: Attempter, last_good: State | None,
                 alert_finding: AlertFinding) -> None:
        self.base = base
        self.attempt = attempt
        self.last_good = last_good
        self.alert_finding = alert_finding
        self.held: dict[Ref, Obj] = {}
        self.gone: set[Ref] = set()
        self.why: dict[Ref, list[Finding]] = {}

    def promoted(self, ref: Ref) -> Obj | None:
        return self.last_good.get(ref.kind, ref.namespace, ref.name) if self.last_good is not None else None

    def view(self, held: Mapping[Ref, Obj] | None = None, gone: frozenset[Ref] = frozenset()) -> State:
        return view_of(self.base, {**self.held, **(held or {})}, frozenset(self.gone) | gone)

    def set_aside(self, ref: Ref, found: list[Finding]) -> bool:
        """Hold ``ref`` back, or leave it out; False when neither is allowed (module docstring)."""
        known = self.why.setdefault(ref, [])
        known.extend(f for f in found if f not in known)
        if ref in self.gone:
            return False  # named although hidden: the failure is not its own
        good = self.promoted(ref)
        stored = self.base.get(ref.kind, ref.namespace, ref.name)
        if ref not in self.held and good is not None and stored is not None and good != stored:
            self.held[ref] = good
            return True
        if ref.kind in PORT_OWNERS and (good is not None or self.last_good is None):
            return False  # the data plane runs it (or may: nothing is known yet); keep everyone's last good
        self.held.pop(ref, None)
        self.gone.add(ref)
        return True

    def suspects(self, kinds: frozenset[str]) -> list[Ref]:
        """Objects to bisect: of ``kinds``, neither set aside nor unchanged since the last promotion."""
        out: list[Ref] = []
        for kind in sorted(kinds):
            for obj in self.base.list(kind):
                ref = ref_of(obj)
                if ref in self.held or ref in self.gone:
                    continue
                good = self.promoted(ref)
                if good is None or good != obj:
                    out.append(ref)
        return out

    def reverted(self, refs: Sequence[Ref]) -> State:
        """The current view with ``refs`` back at their promoted versions (hidden when there is none)."""
        back: dict[Ref, Obj] = {}
        hidden: set[Ref] = set()
        for ref in refs:
            good = self.promoted(ref)
            if good is not None:
                back[ref] = good
            else:
                hidden.add(ref)
        return self.view(back, frozenset(hidden))

    async def bisected(self, failed: Attempt) -> dict[Ref, list[Finding]]:
        """The changed objects that fail on their own: routes and policies first, then Gateways and
        ListenerSets (nothing when that cannot be told apart)."""
        for kinds in _PHASES:
            suspects = self.suspects(kinds)
            if not suspects:
                continue
            without = await self.attempt(self.reverted(suspects))
            if not without.decided:
                return {}
            if without.ok:
                return await self._bisect(suspects, failed)
        return {}  # the failure is not among the changes since the last promotion

    async def _bisect(self, suspects: list[Ref], failed: Attempt) -> dict[Ref, list[Finding]]:
        """``suspects`` fail together and pass all reverted: those of them that fail on their own."""

        async def passes_with(group: Sequence[Ref]) -> bool | None:
            members = set(group)
            tried = await self.attempt(self.reverted([r for r in suspects if r not in members]))
            return tried.ok if tried.decided else None

        culprits = await failing_alone(suspects, passes_with, fails=True)
        if not culprits:
            return {}
        return {ref: [self._unnamed(ref, failed)] for ref in culprits}

    def _unnamed(self, ref: Ref, failed: Attempt) -> Finding:
        """What a culprit found by bisection is told: HAProxy's first message, or the renderer's."""
        if failed.refused is not None:
            return Finding(codes.RENDER_REFUSED, failed.refused.message, (), Severity.DENY)
        alerts = failed.checked.alerts if failed.checked is not None else ()
        if alerts:
            return self.alert_finding(ref, alerts[0])
        error = failed.checked.error if failed.checked is not None else ""
        return Finding(codes.HAPROXY_REJECTED,
                       "haproxy -c rejects the configuration with it" + (f": {error}" if error else ""))

    def left_out(self) -> tuple[leaveouts.LeftOut, ...]:
        out: list[leaveouts.LeftOut] = []
        for ref in sorted(self.held.keys() | self.gone):
            found = tuple(self.why.get(ref, ()))
            if ref in self.held:
                kept = self.held[ref]
                version = str(dig(kept, "metadata", "resourceVersion") or "")
                generation = dig(kept, "metadata", "generation")
                generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
                named_as = (f"generation {generation}" if generation is not None
                            else f"resourceVersion {version}" if version else "")
                out.append(leaveouts.LeftOut(
                    ref, "held back at its last promoted version" + (f" ({named_as})" if named_as else ""), found,
                    leaveouts.Treatment.HELD_BACK, kept_resource_version=version, kept_generation=generation))
            else:
                out.append(leaveouts.LeftOut(ref, "left out (not in the configuration)", found,
                                             leaveouts.Treatment.LEFT_OUT))
        return tuple(out)


async def isolate(base: State, failed: Attempt, attempt: Attempter, *, last_good: State | None,
                  alert_finding: AlertFinding, rounds: int = ROUNDS) -> Isolated | None:
    """A passing configuration of ``base`` with its culprits set aside (module docstring), or None.

    ``failed``: the attempt of ``base`` itself; ``attempt(view)``: render and check a view;
    ``last_good``: the view last promoted (None: nothing promoted since the start)."""
    isolation = _Isolation(base, attempt, last_good, alert_finding)
    current = failed
    for done in range(1, rounds + 1):
        if not current.decided:
            return None
        culprits = named(current, alert_finding)
        if not culprits:
            culprits = await isolation.bisected(current)
        if not culprits:
            return None
        for ref, found in sorted(culprits.items()):
            if not isolation.set_aside(ref, found):
                return None
        current = await attempt(isolation.view())
        if current.ok:
            return Isolated(current, isolation.left_out(), done)
    return None
