"""The status each object of our GatewayClasses should carry in the API, in the Gateway API's shape.

``validators.crossobject.statuses`` says what is true of the state (conditions, listeners, attached
routes); this module turns that into what a Gateway API implementation writes, and decides which part
of a stored status is ours to replace:

- every condition carries ``observedGeneration`` (the ``metadata.generation`` that was judged) and a
  ``lastTransitionTime`` that moves only when the condition's status changes (as apimachinery's
  ``meta.SetStatusCondition`` keeps it);
- GatewayClass (``Accepted``, ``SupportedVersion`` from the CRDs' bundle-version annotation), Gateway and
  ListenerSet statuses are wholly ours;
- a route's ``status.parents[]`` holds one entry per controller: ours carry the ``controllerName`` of the
  parent's GatewayClass and a ``parentRef`` with group, kind and namespace defaulted; entries of other
  controllers are kept as they are, in their order;
- a BackendTLSPolicy reports per ancestor (``status.ancestors[]``): each of our Gateways with a route
  that sends traffic to a Service the policy targets;
- ``Programmed`` is True only when the data plane has the version (``dataplane`` below);
- a custom Route (routegate.io, seed 000) is ours wholly: ``status.conditions`` with ``Accepted`` (False
  when it is not rendered or not in the data plane), ``Programmed`` and ``Conflicted`` (a host/path
  another Route claimed first, reason ``HostPathConflict``), each with ``observedGeneration``;
- an object reconcile held back (HAProxy rejected it, the renderer refused it) is not Accepted, with
  the field and HAProxy's message; a Gateway the Gateway API says to reject (a parametersRef, an
  unsupported address type: ``validators.objectrules.gatewayrefusals``) is ``Accepted=False`` with the
  spec's reason (``InvalidParameters``, ``UnsupportedAddress``), whether an earlier generation keeps
  serving or nothing does; a route reconcile served without a part gets ``routegate.io/NotApplied``
  (``validators.crossobject.statuses.NOT_APPLIED`` says why not PartiallyInvalid).

Pure: no I/O. The writer (``webhook.reconcile.statuswriter``) compares the result with what is stored.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from validators import codes
from validators.crossobject import statuses
from validators.findings import Finding
from validators.objectrules import gatewayrefusals
from validators.objects import GATEWAY_GROUP, KINDS, Obj, Ref, as_list, as_map, dig, kind_of, ref_of
from validators.states import State
from validators.views import attachments, closures
from validators.views.foreign import is_foreign
from validators.views.scopes import Scope

#: Findings that mean reconcile kept the object (or its change) out of the data plane.
HELD_BACK = frozenset({codes.HAPROXY_REJECTED, codes.RENDER_REFUSED})
#: The kinds whose statuses are written, in the order they are written (classes and Gateways first:
#: what a route's status points at is visible by the time the route's is).
WRITTEN_KINDS = ("GatewayClass", "Gateway", "ListenerSet", *attachments.ROUTE_KINDS, "BackendTLSPolicy", "Route")
#: Render findings about a custom Route (routegate.io; haproxy_check.render.l4.crdroutes): not rendered, and a
#: host/path another Route claimed first (the loser's finding names its own field; the winner's, ``spec``).
ROUTE_NOT_RENDERED = "RG0519"
ROUTE_CONFLICT = "RG0523"
MAX_PARENTS = 32  # status.parents maxItems
MAX_ANCESTORS = 16  # status.ancestors maxItems
MAX_MESSAGE = 32768  # condition message maxLength
BUNDLE_VERSION = "gateway.networking.k8s.io/bundle-version"  # the annotation on every Gateway API CRD
OLDEST_BUNDLE = (1, 0)


@dataclass(frozen=True, slots=True)
class Target:
    """The status one object should have: ``status`` is ours (for routes and policies: our entries only)."""

    ref: Ref
    api_version: str
    plural: str
    generation: int
    status: dict[str, Any]
    controllers: frozenset[str] = frozenset()  # controllerNames whose parents/ancestors entries are ours
    foreign: frozenset[tuple[str, str, str]] = frozenset()  # (kind, ns, name) parents of other controllers
    keep: tuple[str, ...] = ()  # top-level status fields that are not ours to set (left as stored)

    def fingerprint(self) -> str:
        """What decides whether a write is needed, without times (they are derived from what is stored)."""
        return json.dumps([self.api_version, self.generation, self.status, sorted(self.controllers),
                           sorted(self.foreign), self.keep], sort_keys=True, default=str)


@dataclass(frozen=True, slots=True)
class Facts:
    """What reconcile knows beyond the state: per object, why it was held back or served in part."""

    held: Mapping[Ref, str] = field(default_factory=dict)  # "field: HAProxy's message"
    partial: Mapping[Ref, str] = field(default_factory=dict)  # what the output does without
    dataplane: bool = True  # the data plane has loaded the live version
    version: str = ""  # the live version (for messages)
    addresses: tuple[str, ...] = ()  # the data plane's addresses, reported on every Gateway
    bundle_version: str | None = None  # the installed Gateway API CRDs' bundle version (None: unknown)
    routes: Mapping[Ref, tuple[Finding, ...]] = field(default_factory=dict)  # findings of custom Routes


def held_message(findings: Iterable[Finding]) -> str:
    """The held-back findings of an object as one line: "field: message; ..." ("" when none)."""
    return "; ".join(f"{f.field}: {f.message}" if f.field else f.message for f in findings if f.code in HELD_BACK)


def _condition(kind: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": message}


def _generation(obj: Obj) -> int:
    value = dig(obj, "metadata", "generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _stamp(conditions: Sequence[Mapping[str, Any]], generation: int) -> list[dict[str, Any]]:
    out = []
    for c in conditions:
        item = {**c, "message": str(c.get("message") or "")[:MAX_MESSAGE]}
        if generation:
            item["observedGeneration"] = generation
        out.append(item)
    return out


def controller_of(gateway_ref: Ref, state: State) -> str:
    """The controllerName of a Gateway's (or a ListenerSet's parent Gateway's) class; "" when unknown."""
    obj = state.get(gateway_ref.kind, gateway_ref.namespace, gateway_ref.name)
    if obj is None or is_foreign(obj):
        return ""
    if gateway_ref.kind == "ListenerSet":
        parent = attachments.listener_set_parent(obj)
        return controller_of(parent, state) if parent is not None else ""
    gateway_class = state.get("GatewayClass", "", str(dig(obj, "spec", "gatewayClassName", default="")))
    name = dig(gateway_class, "spec", "controllerName")
    return name if isinstance(name, str) else ""


def our_controllers(state: State, scope: Scope) -> frozenset[str]:
    """The controllerNames of our GatewayClasses."""
    return frozenset(str(dig(c, "spec", "controllerName")) for c in state.list("GatewayClass")
                     if kind_of(c) == "GatewayClass" and dig(c, "spec", "controllerName")
                     and scope.owns_class(str(dig(c, "metadata", "name", default="")), state))


def parent_ref(raw: Any, namespace: str) -> dict[str, Any]:
    """A route's parentRef as the status shows it: group, kind and namespace defaulted."""
    ref = {k: v for k, v in as_map(raw).items() if v is not None}
    ref.setdefault("group", GATEWAY_GROUP)
    ref.setdefault("kind", "Gateway")
    ref["namespace"] = ref.get("namespace") or namespace
    return ref


def _entry_key(ref: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(ref.get(k) or "") for k in ("group", "kind", "namespace", "name", "sectionName", "port"))


def targets(scoped: State, computed: Mapping[str, Any], facts: Facts, scope: Scope,
            only: Iterable[Ref] | None = None) -> list[Target]:
    """The statuses to write for our objects in ``scoped`` (the Gate's scoped view), from ``computed``
    (``statuses.all_statuses`` of what was promoted, keyed by ``str(Ref)``); with ``only``, for those
    objects alone (missing from ``computed``: computed here from ``scoped``)."""
    wanted = set(only) if only is not None else None
    controllers = our_controllers(scoped, scope)
    out: list[Target] = []
    for kind in WRITTEN_KINDS:
        info = KINDS.get(kind)
        if info is None:
            continue
        for obj in scoped.list(kind):
            if kind_of(obj) != kind or is_foreign(obj):
                continue
            ref = ref_of(obj)
            if wanted is not None and ref not in wanted:
                continue
            target = _target(obj, ref, info.plural, scoped, computed, facts, scope, controllers)
            if target is not None:
                out.append(target)
    return out


def target_of(obj: Obj, plural: str, scoped: State, computed: Mapping[str, Any], facts: Facts, scope: Scope,
              controllers: frozenset[str]) -> Target | None:
    """One object's Target, as ``targets`` builds it (``webhook.reconcile.statustargets`` builds them one by one)."""
    if is_foreign(obj):
        return None
    return _target(obj, ref_of(obj), plural, scoped, computed, facts, scope, controllers)


def _target(obj: Obj, ref: Ref, plural: str, scoped: State, computed: Mapping[str, Any], facts: Facts, scope: Scope,
            controllers: frozenset[str]) -> Target | None:
    generation = _generation(obj)
    api_version = str(obj.get("apiVersion") or f"{GATEWAY_GROUP}/v1")
    if ref.kind == "GatewayClass":
        if not scope.owns_class(ref.name, scoped):
            return None
        conditions = _class_conditions(obj, facts.bundle_version)
        return Target(ref, api_version, plural, generation, {"conditions": _stamp(conditions, generation)},
                      keep=("supportedFeatures",))
    if ref.kind == "Route":
        return _custom_route(ref, api_version, plural, generation, facts)
    found = computed.get(str(ref))
    if found is None:
        found = statuses.status_of(obj, scoped)
        if found is None:
            return None
    found = copy.deepcopy(found)
    held = facts.held.get(ref, "")
    if ref.kind in ("Gateway", "ListenerSet"):
        return _listener_owner(obj, ref, api_version, plural, generation, found, held, facts, scoped, computed)
    if ref.kind in attachments.ROUTE_KINDS:
        return _route(obj, ref, api_version, plural, generation, found, held, facts, scoped, controllers)
    if ref.kind == "BackendTLSPolicy":
        return _policy(obj, ref, api_version, plural, generation, found, held, facts, scoped, controllers)
    return None


def _custom_route(ref: Ref, api_version: str, plural: str, generation: int, facts: Facts) -> Target:
    """A custom Route's status (routegate.io/v1alpha1: ours wholly, no parents): Accepted, Programmed and
    Conflicted, in the shape of a Gateway API condition list."""
    found = facts.routes.get(ref, ())
    held = facts.held.get(ref, "")
    refused = [f for f in found if f.code == ROUTE_NOT_RENDERED]
    lost = [f for f in found if f.code == ROUTE_CONFLICT and f.path != ("spec",)]
    if held:
        accepted = _condition("Accepted", False, "Invalid", f"not in the data plane: {held}")
    elif refused:
        accepted = _condition("Accepted", False, "Invalid", "; ".join(f.message for f in refused))
    else:
        accepted = _condition("Accepted", True, "Accepted", "Accepted")
    programmed = (_condition("Programmed", True, "Programmed", "Programmed") if accepted["status"] == "True" else
                  _condition("Programmed", False, "Invalid", accepted["message"]))
    conflicted = (_condition("Conflicted", True, "HostPathConflict",
                             "; ".join(f"{f.field}: {f.message}" for f in lost)) if lost else
                  _condition("Conflicted", False, "NoConflicts", "No conflicts"))
    conditions = [accepted, programmed, conflicted]
    _programmed(conditions, facts, str(ref))
    return Target(ref, api_version, plural, generation, {"conditions": _stamp(conditions, generation)})


def _class_conditions(gateway_class: Obj, bundle_version: str | None) -> list[dict[str, Any]]:
    # A parametersRef is not a reason to reject the class: its Gateways are served all the same (routegate
    # takes no parameters), and a status must say what runs.
    accepted = (_condition("Accepted", True, "Accepted", "spec.parametersRef is ignored: routegate takes no "
                           "parameters") if dig(gateway_class, "spec", "parametersRef") is not None else
                _condition("Accepted", True, "Accepted", "Accepted"))
    return [accepted, supported_version(bundle_version)]


def supported_version(bundle_version: str | None) -> dict[str, Any]:
    """SupportedVersion from the gatewayclasses CRD's ``gateway.networking.k8s.io/bundle-version``
    annotation (None: the CRD or the annotation is missing): True for a v1 bundle at least
    :data:`OLDEST_BUNDLE` (the rules are written against v1.6)."""
    if not bundle_version:
        return _condition("SupportedVersion", False, "UnsupportedVersion",
                          f"the gatewayclasses CRD has no {BUNDLE_VERSION} annotation: the installed Gateway API "
                          "version is unknown")
    parsed = _version_tuple(bundle_version)
    if parsed is None or not OLDEST_BUNDLE <= parsed < (2,):
        return _condition("SupportedVersion", False, "UnsupportedVersion",
                          f"Gateway API {bundle_version} is not supported (v{'.'.join(map(str, OLDEST_BUNDLE))} "
                          "or a later v1 is)")
    return _condition("SupportedVersion", True, "SupportedVersion", f"Gateway API {bundle_version} is supported")


def _version_tuple(text: str) -> tuple[int, ...] | None:
    core = text.strip().lstrip("v").split("-")[0].split("+")[0]
    try:
        return tuple(int(x) for x in core.split("."))
    except ValueError:
        return None


def _programmed(conditions: list[dict[str, Any]], facts: Facts, what: str) -> None:
    """Programmed=True only once the data plane has the version: Pending until then."""
    for c in conditions:
        if c["type"] == "Programmed" and c["status"] == "True" and not facts.dataplane:
            c.update(status="False", reason="Pending",
                     message=f"{what} is in version {facts.version or '(none)'}, which the data plane has not "
                             "loaded yet")


def _listener_owner(obj: Obj, ref: Ref, api_version: str, plural: str, generation: int, found: dict[str, Any],
                    held: str, facts: Facts, scoped: State, computed: Mapping[str, Any]) -> Target:
    conditions: list[dict[str, Any]] = list(found.get("conditions") or [])
    listeners: list[dict[str, Any]] = list(found.get("listeners") or [])
    refused = gatewayrefusals.refusal(obj) if ref.kind == "Gateway" else None
    if refused is not None:
        # the stored generation is rejected as the spec says (Accepted=False, its reason); what runs is an
        # earlier generation held back (webhook.reconcile.leaveouts.refused_gateways) or nothing
        kept = facts.partial.get(ref, "")
        message = refused.message + (f"; the data plane keeps its {kept.removeprefix('held back at its ')}"
                                     if kept.startswith("held back") else "")
        conditions = [_condition("Accepted", False, refused.reason, message),
                      _condition("Programmed", False, "Invalid", message)]
        _unprogrammed(listeners, message)
    elif held:
        message = f"not in the data plane: {held}"
        conditions = [_condition("Accepted", False, "Invalid", message),
                      _condition("Programmed", False, "Invalid", message)]
        _unprogrammed(listeners, message)
    else:
        _programmed(conditions, facts, str(ref))
        for listener in listeners:
            _programmed(listener.get("conditions") or [], facts, f"listener {listener.get('name')}")
    status: dict[str, Any] = {"conditions": _stamp(conditions, generation),
                              "listeners": [{**x, "conditions": _stamp(x.get("conditions") or [], generation)}
                                            for x in listeners]}
    keep: tuple[str, ...] = ()
    if ref.kind == "Gateway":
        attached, named = _attached_listener_sets(ref, scoped, computed)
        status["attachedListenerSets"] = attached
        listener_sets = _listener_sets_condition(obj, attached, named)
        if listener_sets is not None:
            status["conditions"].extend(_stamp([listener_sets], generation))
        if facts.addresses:
            status["addresses"] = [{"type": _address_type(a), "value": a} for a in facts.addresses]
        else:
            keep = ("addresses",)  # not ours to know: left as whoever set it left it
    return Target(ref, api_version, plural, generation, status, keep=keep)


def _address_type(address: str) -> str:
    import ipaddress

    try:
        ipaddress.ip_address(address)
    except ValueError:
        return "Hostname"
    return "IPAddress"


def _attached_listener_sets(gateway: Ref, scoped: State, computed: Mapping[str, Any]) -> tuple[int, int]:
    """(ListenerSets of ``gateway`` that are Accepted, ListenerSets that name it as their parent)."""
    count = named = 0
    for listener_set in scoped.list("ListenerSet"):
        if kind_of(listener_set) != "ListenerSet" or attachments.listener_set_parent(listener_set) != gateway:
            continue
        named += 1
        found = computed.get(str(ref_of(listener_set))) or statuses.status_of(listener_set, scoped) or {}
        if any(c.get("type") == "Accepted" and c.get("status") == "True" for c in found.get("conditions") or []):
            count += 1
    return count, named


def _listener_sets_condition(gateway: Obj, attached: int, named: int) -> dict[str, Any] | None:
    """The Gateway's AttachedListenerSets condition (GEP-1713); None for a Gateway no ListenerSet concerns."""
    if attached:
        return _condition("AttachedListenerSets", True, "ListenerSetsAttached",
                          f"{attached} ListenerSet{'s' if attached != 1 else ''} attached")
    if named:
        return _condition("AttachedListenerSets", False, "ListenerSetsNotAllowed",
                          f"{named} ListenerSet{'s' if named != 1 else ''} name this Gateway; none is accepted "
                          "(spec.allowedListeners, or no valid listener)")
    if dig(gateway, "spec", "allowedListeners") is not None:
        return _condition("AttachedListenerSets", False, "NoListenerSetsAttached", "no ListenerSet is attached")
    return None


def _route(obj: Obj, ref: Ref, api_version: str, plural: str, generation: int, found: dict[str, Any], held: str,
           facts: Facts, scoped: State, controllers: frozenset[str]) -> Target:
    parents: list[dict[str, Any]] = []
    for entry in found.get("parents") or []:
        pref = parent_ref(entry.get("parentRef"), ref.namespace)
        target = Ref(str(pref["kind"]), str(pref["namespace"]), str(pref.get("name") or ""))
        if pref["group"] != GATEWAY_GROUP or target.kind not in ("Gateway", "ListenerSet"):
            continue
        controller = controller_of(target, scoped)
        if not controller:  # a parent that does not exist (or whose class does not): no controller to speak for
            continue
        conditions = list(entry.get("conditions") or [])
        if held:
            conditions = [_condition("Accepted", False, "UnsupportedValue", f"not in the data plane: {held}")
                          if c["type"] == "Accepted" else c for c in conditions]
        elif ref in facts.partial:
            conditions = _not_applied(conditions, f"served with {facts.partial[ref]}")
        parents.append({"parentRef": pref, "controllerName": controller,
                        "conditions": _stamp(conditions, generation)})
        if len(parents) == MAX_PARENTS:
            break
    return Target(ref, api_version, plural, generation, {"parents": parents}, controllers=controllers,
                  foreign=_foreign_parents(obj, scoped))


def _not_applied(conditions: list[dict[str, Any]], said: str) -> list[dict[str, Any]]:
    """``conditions`` with ``said`` in the route's routegate.io/NotApplied condition (one per type: a mirror's
    may be there already; statuses.NOT_APPLIED says why it is not PartiallyInvalid)."""
    for i, c in enumerate(conditions):
        if c["type"] == statuses.NOT_APPLIED:
            return [*conditions[:i], {**c, "message": f"{said}; {c['message']}"}, *conditions[i + 1:]]
    return [*conditions, _condition(statuses.NOT_APPLIED, True, "UnsupportedValue", said)]


def _foreign_parents(route: Obj, scoped: State) -> frozenset[tuple[str, str, str]]:
    return frozenset((p.kind, p.namespace, p.name) for p in closures.parent_refs(route)
                     if is_foreign(scoped.get(p.kind, p.namespace, p.name)))


def _policy(obj: Obj, ref: Ref, api_version: str, plural: str, generation: int, found: dict[str, Any], held: str,
            facts: Facts, scoped: State, controllers: frozenset[str]) -> Target:
    conditions = list(found.get("conditions") or [])
    if held:
        conditions = [_condition("Accepted", False, "Invalid", f"not in the data plane: {held}")
                      if c["type"] == "Accepted" else c for c in conditions]
    ancestors = []
    for gateway in _ancestors(obj, scoped):
        controller = controller_of(gateway, scoped)
        if not controller:
            continue
        ancestors.append({"ancestorRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": gateway.namespace,
                                          "name": gateway.name},
                          "controllerName": controller, "conditions": _stamp(conditions, generation)})
        if len(ancestors) == MAX_ANCESTORS:
            break
    return Target(ref, api_version, plural, generation, {"ancestors": ancestors}, controllers=controllers,
                  foreign=frozenset(("Gateway", g.namespace, g.name) for g in _foreign_ancestors(obj, scoped)))


def _policy_routes(policy: Obj, scoped: State) -> list[Obj]:
    index = closures.index_of(scoped)
    namespace = ref_of(policy).namespace
    routes: dict[Ref, Obj] = {}
    for target in as_list(dig(policy, "spec", "targetRefs")):
        if str(dig(target, "group", default="")) != "" or str(dig(target, "kind", default="Service")) != "Service":
            continue
        for route_ref in index.users.get((namespace, str(dig(target, "name", default=""))), ()):
            route = scoped.get(route_ref.kind, route_ref.namespace, route_ref.name)
            if route is not None:
                routes[route_ref] = route
    return [routes[r] for r in sorted(routes)]


def _gateways_of(route: Obj, scoped: State) -> list[tuple[Ref, bool]]:
    out = []
    for parent in closures.parent_refs(route):
        got = scoped.get(parent.kind, parent.namespace, parent.name)
        if got is None:
            continue
        gateway: Ref | None = parent
        if parent.kind == "ListenerSet":
            gateway = None if is_foreign(got) else attachments.listener_set_parent(got)
            got = scoped.get("Gateway", gateway.namespace, gateway.name) if gateway is not None else got
        if gateway is not None and got is not None:
            out.append((gateway, is_foreign(got)))
    return out


def _ancestors(policy: Obj, scoped: State) -> list[Ref]:
    """Our Gateways whose routes send traffic to a Service the policy targets, in name order."""
    return sorted({g for route in _policy_routes(policy, scoped) for g, foreign in _gateways_of(route, scoped)
                   if not foreign})


def _foreign_ancestors(policy: Obj, scoped: State) -> list[Ref]:
    return sorted({g for route in _policy_routes(policy, scoped) for g, foreign in _gateways_of(route, scoped)
                   if foreign})


# ---------------------------------------------------------------- merging with what is stored


def merged(stored: Mapping[str, Any] | None, target: Target, now: str) -> dict[str, Any]:
    """The whole status to write: ``target`` merged into ``stored`` (the object's status as read).

    Other controllers' ``parents``/``ancestors`` entries stay as they are; a condition whose status did
    not change keeps its ``lastTransitionTime``; fields of ``target.keep`` stay as stored."""
    old = as_map(stored)
    out: dict[str, Any] = {k: copy.deepcopy(old[k]) for k in target.keep if k in old}
    for key, value in target.status.items():
        if key in ("parents", "ancestors"):
            out[key] = _merge_entries(as_list(old.get(key)), value, target, now,
                                      "parentRef" if key == "parents" else "ancestorRef")
        elif key == "conditions":
            out[key] = _timed(value, as_list(old.get("conditions")), now)
        elif key == "listeners":
            before = {str(dig(x, "name")): x for x in as_list(old.get("listeners"))}
            out[key] = [{**x, "conditions": _timed(x["conditions"], as_list(dig(before.get(x["name"]), "conditions")),
                                                   now)} for x in value]
        else:
            out[key] = copy.deepcopy(value)
    return out


def _timed(conditions: Sequence[Mapping[str, Any]], before: Sequence[Any], now: str) -> list[dict[str, Any]]:
    previous = {str(dig(c, "type")): c for c in before if isinstance(c, Mapping)}
    out = []
    for c in conditions:
        old = previous.get(str(c["type"]))
        same = old is not None and old.get("status") == c["status"] and old.get("lastTransitionTime")
        out.append({**c, "lastTransitionTime": old["lastTransitionTime"] if same and old is not None else now})
    return out


def _is_ours(entry: Mapping[str, Any], target: Target, ref_key: str) -> bool:
    if entry.get("controllerName") not in target.controllers:
        return False
    ref = as_map(entry.get(ref_key))
    kind = str(ref.get("kind") or "Gateway")
    return (kind, str(ref.get("namespace") or target.ref.namespace), str(ref.get("name") or "")) not in target.foreign


def _merge_entries(before: list[Any], ours: list[dict[str, Any]], target: Target, now: str,
                   ref_key: str) -> list[dict[str, Any]]:
    kept = [dict(copy.deepcopy(e)) for e in before if isinstance(e, Mapping) and not _is_ours(e, target, ref_key)]
    previous = {(str(e.get("controllerName")), _entry_key(parent_ref(e.get(ref_key), target.ref.namespace))): e
                for e in before if isinstance(e, Mapping)}
    out = list(kept)
    for entry in ours:
        old = previous.get((str(entry["controllerName"]), _entry_key(entry[ref_key])))
        out.append({**entry, "conditions": _timed(entry["conditions"], as_list(dig(old, "conditions")), now)})
    return out


def facts_from(faults: Iterable[tuple[Ref, Sequence[Finding]]], left_out: Iterable[tuple[Ref, str, Sequence[Finding]]],
               *, dataplane: bool, version: str, addresses: Sequence[str] = (),
               bundle_version: str | None = None) -> Facts:
    """Facts from a reconcile outcome's faults and left-out parts."""
    held: dict[Ref, str] = {}
    partial: dict[Ref, str] = {}
    routes: dict[Ref, tuple[Finding, ...]] = {}
    for ref, found in faults:
        message = held_message(found)
        if message:
            held[ref] = message
        if ref.kind == "Route":
            routes[ref] = tuple(found)
    for ref, what, found in left_out:
        message = held_message(found)
        if message:
            held[ref] = held.get(ref) or message
        elif ref not in held:
            partial[ref] = what
    return Facts(held, partial, dataplane, version, tuple(addresses), bundle_version, routes)


def _unprogrammed(listeners: list[dict[str, Any]], message: str) -> None:
    """Each listener of a Gateway the data plane does not run: not Programmed, no route attached."""
    for listener in listeners:
        listener["conditions"] = [
            _condition("Programmed", False, "Invalid", message) if c["type"] == "Programmed" else c
            for c in listener.get("conditions") or []]
        listener["attachedRoutes"] = 0
