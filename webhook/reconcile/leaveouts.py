"""What the output leaves out of an object stored despite the admission rules (seed 004).

Admission denies these; an object stored anyway is rendered as the seed says:
- a route whose sessionPersistence name is not a token gets no session persistence (the rule keeps
  routing, without the cookie or header);
- a BackendTLSPolicy HAProxy cannot verify as written (several or URI subjectAltNames, a SAN that is
  not validation.hostname) blocks its backend: it still governs its targets but yields no trust, so
  the renderer serves that backend without servers rather than in plaintext. A policy without any
  trust (RG0105) is blocked by the renderer already.

A Gateway the Gateway API says to reject (an ``infrastructure.parametersRef``, an address type routegate
cannot bind: ``validators.objectrules.gatewayrefusals``) is not served: the renderer hides it. One the data
plane runs already, at a version that is not refused, is held back at that version (``refused_gateways``):
the spec rejects the new generation (its status says ``Accepted=False`` with the reason), and nothing in
it asks to tear down what an earlier, accepted generation programmed; dropping it would take every
tenant's routes on it down for one edit and hand its ports to whichever listener lost them to it (the
traffic-ownership rule). A new Gateway, or one whose promoted version is refused too, is not served.

Everything else is rendered as stored: whether HAProxy accepts it is the check's call. When it does
not, reconcile isolates the objects at fault (``webhook.reconcile.isolating``): each is held back at its last
promoted version or left out, and recorded here as a ``LeftOut`` too, with its ``treatment``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from validators import codes
from validators.changes import Change, Operation
from validators.findings import Finding
from validators.objectrules import gatewayrefusals
from validators.objects import Obj, Ref, dig
from validators.states import Overlay, State
from webhook.reconcile.audits import Audited

UNVERIFIABLE = frozenset({codes.SAN_SEVERAL, codes.SAN_URI, codes.SAN_MISMATCH, codes.TLS_NO_TRUST})
ROUTE_KINDS = frozenset({"HTTPRoute", "GRPCRoute"})


class Treatment(StrEnum):
    """What the promoted output holds of an object that could not be rendered as stored."""

    PARTLY = "partly"  # rendered without the fields seed 004 names (``apply``)
    HELD_BACK = "held-back"  # rendered at its last promoted version: its update broke haproxy -c
    LEFT_OUT = "left-out"  # not rendered at all: new (or its last promoted version fails too), and broken


@dataclass(frozen=True, slots=True)
class LeftOut:
    ref: Ref
    what: str  # what the output does without, in words for logs and events
    findings: tuple[Finding, ...]  # the admission findings behind it (HAProxy's message when isolated)
    treatment: Treatment = Treatment.PARTLY
    # HELD_BACK: the metadata.generation of the version that stays live (and its resourceVersion where the
    # source keeps it: state files; the cluster state drops it, webhook.cluster.slimming)
    kept_resource_version: str = ""
    kept_generation: int | None = None


def _without_session_persistence(obj: Obj, rules: set[int]) -> Obj:
    out = copy.deepcopy(obj)
    for i, rule in enumerate(dig(out, "spec", "rules") or []):
        if i in rules and isinstance(rule, dict):
            rule.pop("sessionPersistence", None)
    return out


def _without_trust(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    validation = dig(out, "spec", "validation")
    if isinstance(validation, dict):
        validation.pop("caCertificateRefs", None)
        validation.pop("wellKnownCACertificates", None)
    return out


def apply(state: State, audited: Audited) -> tuple[State, list[LeftOut]]:
    """``state`` as the output renders it, and what was left out of which object."""
    replaced: dict[Ref, Obj] = {}
    left: list[LeftOut] = []
    for ref, findings in audited:
        obj = state.get(ref.kind, ref.namespace, ref.name)
        if obj is None:
            continue
        if ref.kind in ROUTE_KINDS:
            session = [f for f in findings if f.code == codes.SESSION_NAME]
            rules = {f.path[2] for f in session if len(f.path) > 2 and isinstance(f.path[2], int)}
            if rules:
                replaced[ref] = _without_session_persistence(obj, rules)
                which = ", ".join(f"spec.rules[{i}]" for i in sorted(rules))
                left.append(LeftOut(ref, f"no session persistence on {which}", tuple(session)))
        elif ref.kind == "BackendTLSPolicy":
            unverifiable = [f for f in findings if f.code in UNVERIFIABLE]
            if unverifiable:
                replaced[ref] = _without_trust(obj)
                left.append(LeftOut(ref, "its target backends are blocked (no servers)", tuple(unverifiable)))
    return replacing(state, replaced), left


def replacing(state: State, replaced: Mapping[Ref, Obj]) -> State:
    """``state`` with each object of ``replaced`` in place of the stored one."""
    view = state
    for ref in sorted(replaced):
        old = state.get(ref.kind, ref.namespace, ref.name)
        view = Overlay(view, Change(Operation.UPDATE, replaced[ref], old))
    return view


def refused_gateways(state: State, refused: Mapping[Ref, gatewayrefusals.Refusal], last_good: State | None,
                     found: Mapping[Ref, list[Finding]]) -> tuple[State, list[LeftOut]]:
    """``state`` with each refused Gateway the data plane runs held back at its promoted version (module
    docstring), and a ``LeftOut`` for every refused one. ``found``: the audit's findings (RG0130 among them)."""
    replaced: dict[Ref, Obj] = {}
    left: list[LeftOut] = []
    for ref, refusal in sorted(refused.items()):
        told = tuple(f for f in found.get(ref, ()) if f.code == codes.GATEWAY_REFUSED) or (refusal.finding(),)
        good = last_good.get(ref.kind, ref.namespace, ref.name) if last_good is not None else None
        if good is not None and gatewayrefusals.refusal(good) is None:
            replaced[ref] = good
            generation = dig(good, "metadata", "generation")
            generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
            named = f" (generation {generation})" if generation is not None else ""
            left.append(LeftOut(ref, f"held back at its last promoted version{named}", told, Treatment.HELD_BACK,
                                kept_generation=generation))
        else:
            left.append(LeftOut(ref, "not served (not accepted)", told, Treatment.LEFT_OUT))
    return (replacing(state, replaced) if replaced else state), left
