"""Patched renders: the previous full render with only the changed objects' closure rendered again.

Reconcile renders a state that differs from the one it rendered last by a few objects. Rendering the
whole state costs ~0.35 ms per route on every change; ``Patcher.render`` instead

1. finds the objects whose content differs between the last rendered state and this one;
2. takes their closure the way the admission path does (``validators.views.closures.members``: the
   objects, the routes they affect, competitors, Gateways/ListenerSets with what renders their
   frontends, slices, policies, grants), over the state before and after (a Service or EndpointSlice
   is looked up by name, so its closure is the closure of the routes that use it);
3. renders that closure before and after with the same Renderer and the same live description (slot
   names), and splices the difference into the previous output (``splicing``): haproxy.cfg sections,
   map lines, files, and the description (backends, profiles, maps, files, frame, routing facts) and
   findings the same way.

The result is byte for byte what ``Renderer.render(state, previous=...)`` gives
(``tests/render/test_patched_renders.py`` checks it over random change sequences of every kind, with
``haproxy -c``). Where a change cannot be localised it renders in full and says why (``how``):
``first`` (nothing to patch from), ``templates`` (user templates may read any object), ``previous``
(the live description moved since: slot names may too), ``age`` (a changed route's creationTimestamp
moved), ``kind:<Kind>`` (GatewayClass, Secret, Namespace, ConfigMap... changes the closure does not
follow), ``many`` (more changed objects than ``max_changed``), ``refused`` (a closure render raised
RenderError), ``splice:<reason>`` (``splicing.Unspliceable``: a frontend line that comes or goes, a
precedence that moved, a section whose place its name does not give).

A patched result carries no source map (``origins`` is empty): a caller that needs to trace a failing
``haproxy -c`` back to objects renders in full first (``webhook.reconcile.reconciler`` does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from haproxy_check.descriptions import BackendDesc, Description, FileDesc, MapDesc, ProfileDesc
from haproxy_check.render import splicing
from haproxy_check.results import RenderError, RenderResult
from haproxy_check.runtime import frames
from haproxy_check.traffic.facts import FrontendFacts, MatchFacts, RoutingFacts
from validators.changes import Change, Operation
from validators.objects import KINDS, Obj, Ref, dig, ref_of
from validators.states import State
from validators.views import closures

# kinds whose changes the closure follows (validators.views.closures) or this module maps to routes
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute", "Route")
CLOSED_KINDS = frozenset({*ROUTE_KINDS, "Gateway", "ListenerSet", "ReferenceGrant", "BackendTLSPolicy"})
BY_SERVICE = frozenset({"Service", "EndpointSlice"})  # looked up by name: closed over the routes using them
# every kind a render (and a template's resources()) reads; a change to one not patchable renders in full
READ_KINDS = tuple(sorted({*CLOSED_KINDS, *BY_SERVICE, "GatewayClass", "Secret", "ConfigMap", "Namespace", *KINDS}))
MAX_CHANGED = 64
SERVICE_LABEL = closures.SERVICE_NAME_LABEL


class Renders(Protocol):
    def render(self, state: State, *, subject: Ref | None = None,
               previous: Description | None = None) -> RenderResult: ...


@dataclass(slots=True)
class Rendered:
    """A render the next one is patched from: its state, its result, the description it was rendered
    against, and its haproxy.cfg and maps split into the units splicing moves."""

    state: Linked
    result: RenderResult
    previous: Description | None
    sections: splicing.Sections
    maps: dict[str, list[str]]
    # a patch's render of the changed objects' closure in the new state: what reconcile's delta check
    # runs ``haproxy -c`` on (None for a full render)
    closure: RenderResult | None = None

    @classmethod
    def of(cls, state: Linked, result: RenderResult, previous: Description | None) -> Rendered:
        maps = {m.path: list(m.entries) for m in result.description.maps}
        return cls(state, result, previous, splicing.Sections.of(result.files[splicing.CONFIG].decode()), maps)


def changed_refs(before: State, after: State) -> list[Ref]:
    """The objects of ``READ_KINDS`` whose content differs (identity first: unchanged objects are
    usually the very same dicts), sorted."""
    out: list[Ref] = []
    for kind in READ_KINDS:
        old, new = before.list(kind), after.list(kind)
        if len(old) == len(new):
            pairs = [(a, b) for a, b in zip(old, new, strict=True) if a is not b and a != b]
            if all(ref_of(a) == ref_of(b) for a, b in pairs):  # the same objects, some changed
                out += [ref_of(b) for _, b in pairs]
                continue
        olds = {ref_of(o): o for o in old}
        news = {ref_of(o): o for o in new}
        for ref in olds.keys() | news.keys():
            a, b = olds.get(ref), news.get(ref)
            if a is not b and a != b:
                out.append(ref)
    return sorted(out)


def _age(state: State, ref: Ref) -> object:
    obj = state.get(ref.kind, ref.namespace, ref.name)
    return None if obj is None else dig(obj, "metadata", "creationTimestamp")


def _change(ref: Ref, old: Obj | None, new: Obj | None) -> Change:
    op = Operation.CREATE if old is None else Operation.DELETE if new is None else Operation.UPDATE
    return Change.of(ref, op, new, old)


def _users(state: State, ref: Ref, obj: Obj | None) -> set[Ref]:
    """The routes that use the Service ``ref`` (or the Service of the EndpointSlice ``ref``)."""
    if obj is None:
        return set()
    service = ref.name
    if ref.kind == "EndpointSlice":
        found = dig(obj, "metadata", "labels", SERVICE_LABEL)
        if not isinstance(found, str):
            return set()
        service = found
    return set(closures.index_of(state).users.get((ref.namespace, service), set()))


def closure_members(before: State, after: State, changed: Sequence[Ref]) -> set[Ref]:
    """The union of every changed object's closure, taken over the state before (the change applied
    forward) and after (backward), so that both renders list the same objects."""
    members: set[Ref] = set(changed)
    for ref in changed:
        old = before.get(ref.kind, ref.namespace, ref.name)
        new = after.get(ref.kind, ref.namespace, ref.name)
        if ref.kind in CLOSED_KINDS:
            members |= closures.members(before, _change(ref, old, new))
            members |= closures.members(after, _change(ref, new, old))
            continue
        # a Service/EndpointSlice: the closure of each route using it, as if that route changed
        for state, obj in ((before, old), (after, new)):
            for user in _users(state, ref, obj):
                route = state.get(user.kind, user.namespace, user.name)
                if route is not None:
                    members |= closures.members(state, _change(user, route, route))
    return members


class Linked:
    """``state`` as the patcher renders it: a State that names the state rendered before it and the
    objects changed since (``validators.views.indexes.prior_link``), so the closure index and the
    per-kind lookups are patched from the previous version's in O(changed objects) instead of being
    scanned again (the admission path's cluster snapshots link the same way). The link is cut once the
    render is done, so the chain never holds more than one state back."""

    recorded_index = None  # not a Recording view

    def __init__(self, state: State, before: Linked | None, changed: Sequence[Ref]) -> None:
        self.base = state
        self.index_memo: dict[str, tuple[str, object]] = {}  # validators.views.indexes: this state's own
        self._link: tuple[State, frozenset[Ref]] | None = (before, frozenset(changed)) if before is not None else None

    @property
    def version(self) -> str:
        return self.base.version

    def list(self, kind: str) -> Sequence[Obj]:
        return self.base.list(kind)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.base.get(kind, namespace, name)

    def prior(self) -> tuple[State, frozenset[Ref]] | None:
        return self._link

    def cut(self) -> None:
        self._link = None

    def __getattr__(self, name: str) -> object:  # provenance, kinds, ...: the wrapped state's
        return getattr(self.base, name)


class Patcher:
    """Renders each state as a patch of the last one it rendered, or in full (``render``'s ``how``)."""

    def __init__(self, renderer: Renders, *, max_changed: int = MAX_CHANGED, user_templates: bool = False) -> None:
        self.renderer = renderer
        self.max_changed = max_changed
        self.user_templates = user_templates
        self.last: Rendered | None = None
        # the closure render of the last ``render`` when it was ``patched``, else None (the delta check)
        self.closure: RenderResult | None = None
        self.changed: tuple[Ref, ...] = ()  # the objects the last ``render`` found changed
        self._forgotten = "first"  # why the next render is full after ``forget``
        self.reason = ""  # why the last full render was not a patch, in full

    def render(self, state: State, *, previous: Description | None = None) -> tuple[RenderResult, str]:
        """The render of ``state`` against the live ``previous`` description, and how it was made:
        ``patched``, ``unchanged`` (no object the render reads changed) or ``full:<reason>`` (first,
        templates, previous, kind, many, splice; ``self.reason`` has the details). Raises RenderError as
        ``Renderer.render`` does."""
        reason = self._why_not(state, previous)
        last = self.last
        changed = changed_refs(last.state, state) if last is not None else []
        linked = Linked(state, last.state if last is not None else None, changed)
        self.closure = None
        self.changed = tuple(changed)
        try:
            return self._render(linked, changed, reason, previous)
        finally:
            linked.cut()

    def _render(self, state: Linked, changed: Sequence[Ref], reason: str | None,
                previous: Description | None) -> tuple[RenderResult, str]:
        if reason is None:
            assert self.last is not None
            if not changed:
                self.last = dataclasses.replace(self.last, state=state)
                return self.last.result, "unchanged"
            reason = next((f"kind:{r.kind}" for r in changed if r.kind not in CLOSED_KINDS | BY_SERVICE), None)
            if reason is None and any(None not in (a := _age(self.last.state, r), b := _age(state, r)) and a != b
                                      for r in changed if r.kind in ROUTE_KINDS):
                reason = "age:a changed route's creationTimestamp moved (the precedence order it sets)"
            if reason is None and len(changed) > self.max_changed:
                reason = "many"
            if reason is None:
                try:
                    patched = self._patch(self.last, state, changed, previous)
                except splicing.Unspliceable as exc:
                    reason = f"splice:{exc}"
                except RenderError as exc:  # the closure refused: the full render says what to whom
                    reason = f"refused:{exc.message}"
                else:
                    self.last = patched
                    self.closure = patched.closure
                    return patched.result, "patched"
        self.reason = reason
        result = self.renderer.render(state, subject=None, previous=previous)
        self.last = Rendered.of(state, result, previous)
        self._forgotten = "first"
        return result, "full:" + reason.split(":", 1)[0]  # a bounded label; ``reason`` says all

    def warm(self) -> None:
        """Build the closure index of the last rendered state now (blocking: run it in a thread, off the
        propagation path), so the next patch derives its index in O(change) instead of scanning."""
        if self.last is not None:
            closures.index_of(self.last.state)
            closures.passthrough_routes(self.last.state)  # closures.members reads it on every change

    def forget(self, why: str = "first") -> None:
        """Render the next state in full (``why``: the ``how`` label's reason)."""
        self.last = None
        self._forgotten = why

    def _why_not(self, state: State, previous: Description | None) -> str | None:
        if self.user_templates:
            return "templates"
        if self.last is None:
            return self._forgotten
        if previous is not self.last.previous and previous is not self.last.result.description:
            return "previous"
        return None

    def _patch(self, last: Rendered, state: Linked, changed: Sequence[Ref],
               previous: Description | None) -> Rendered:
        members = closure_members(last.state, state, changed)
        before = self.renderer.render(closures.Closure(last.state, members), subject=None, previous=previous)
        after = self.renderer.render(closures.Closure(state, members), subject=None, previous=previous)
        patched = splice(last, state, before, after, previous, members)
        patched.closure = after
        return patched


def splice(last: Rendered, state: Linked, before: RenderResult, after: RenderResult, previous: Description | None,
           members: Iterable[Ref]) -> Rendered:
    """``last`` with the closure's output changed from ``before`` to ``after``. Raises Unspliceable."""
    pd, bd, ad = last.result.description, before.description, after.description
    sections, gone_profiles, new_profiles = splicing.splice_config(
        last.sections, before.files[splicing.CONFIG].decode(), after.files[splicing.CONFIG].decode())
    ordered = {m.path: m.ordered for m in pd.maps}
    if {m.path for m in bd.maps} != {m.path for m in ad.maps} or not {m.path for m in ad.maps} <= ordered.keys():
        raise splicing.Unspliceable("the set of map files changed")
    maps = dict(last.maps)
    before_maps = {m.path: m for m in bd.maps}
    for m in ad.maps:
        b = before_maps[m.path]
        if b.entries != m.entries:
            maps[m.path] = splicing.splice_map(m.path, ordered[m.path], last.maps[m.path],
                                               splicing.map_text(b.entries), splicing.map_text(m.entries))
    map_paths = set(ordered)
    others = splicing.splice_files({p: d for p, d in last.result.files.items()
                                    if p != splicing.CONFIG and p not in map_paths},
                                   {p: d for p, d in before.files.items()
                                    if p != splicing.CONFIG and p not in map_paths},
                                   {p: d for p, d in after.files.items()
                                    if p != splicing.CONFIG and p not in map_paths})
    config = sections.text()
    files: dict[str, bytes] = {splicing.CONFIG: config.encode()}
    for path, lines in maps.items():
        files[path] = (last.result.files[path] if lines is last.maps[path]
                       else splicing.map_text(lines).encode())
    files.update(others)
    backends = _by_name(pd.backends, bd.backends, ad.backends, "backend")
    profiles = _profiles(pd.profiles, bd.profiles, ad.profiles, gone_profiles, new_profiles)
    file_descs = _files(pd.files, bd.files, ad.files)
    if bd.extra != ad.extra:
        raise splicing.Unspliceable("the description's extra members changed")
    names = [b.name for b in backends]
    description = Description(
        backends=backends, profiles=profiles,
        maps=tuple(MapDesc(p, ordered[p], tuple(maps[p]) if maps[p] is not last.maps[p] else _entries(pd, p))
                   for p in sorted(maps)),
        files=file_descs, extra=pd.extra,
        frame=frames.digest(config, names, [p.name for p in profiles]),
        routing=_routing(pd.routing, bd.routing, ad.routing))
    old_findings, new_findings = set(before.findings), set(after.findings)
    findings = (set(last.result.findings) - (old_findings - new_findings)) | (new_findings - old_findings)
    result = RenderResult(
        files=dict(sorted(files.items())), origins={}, description=description,
        findings=tuple(sorted(findings, key=lambda f: (f.about, f.field, f.code, f.message))), statuses={})
    return Rendered(state, result, previous, sections, maps)


def _entries(description: Description, path: str) -> tuple[str, ...]:
    return next(m.entries for m in description.maps if m.path == path)


def _by_name(previous: Sequence[BackendDesc], before: Sequence[BackendDesc], after: Sequence[BackendDesc],
             what: str) -> tuple[BackendDesc, ...]:
    """Records sorted by name: the closure's changed, added and removed ones applied (an unchanged one
    is the previous object itself, so ``description.json`` reuses its text)."""
    out = {b.name: b for b in previous}
    old, new = {b.name: b for b in before}, {b.name: b for b in after}
    touched = False
    for name in old.keys() | new.keys():
        o, n = old.get(name), new.get(name)
        if o == n:
            continue
        touched = True
        p = out.get(name)
        if o is not None and p != o:
            raise splicing.Unspliceable(f"{what} {name} also depends on objects outside the closure")
        if n is None:
            out.pop(name, None)
        else:
            out[name] = n
    return tuple(previous) if not touched else tuple(out[n] for n in sorted(out))


def _profiles(previous: Sequence[ProfileDesc], before: Sequence[ProfileDesc], after: Sequence[ProfileDesc],
              gone: set[str], came: set[str]) -> tuple[ProfileDesc, ...]:
    out = {p.name: p for p in previous}
    for p in after:
        if p.name in came or p.name not in out:
            out[p.name] = p
    for name in gone:
        out.pop(name, None)
    return tuple(out[n] for n in sorted(out))


def _files(previous: Sequence[FileDesc], before: Sequence[FileDesc], after: Sequence[FileDesc]) -> tuple[FileDesc, ...]:
    out = {f.path: f for f in previous}
    old, new = {f.path: f for f in before}, {f.path: f for f in after}
    for path in old.keys() | new.keys():
        o, n = old.get(path), new.get(path)
        if o == n:
            continue
        if n is None:
            out.pop(path, None)
        else:
            out[path] = n
    return tuple(out[p] for p in sorted(out))


def _matches_in_place(name: str, previous: tuple[MatchFacts, ...], before: tuple[MatchFacts, ...],
                      after: tuple[MatchFacts, ...]) -> tuple[MatchFacts, ...]:
    """A frontend's advanced matches (in precedence order) with the closure's changed in place, as
    ``splicing.in_place`` changes their lines: each keeps its value and score (its precedence)."""
    if before == after:
        return previous
    if len(before) != len(after):
        raise splicing.Unspliceable(f"routing facts: frontend {name} gained or lost advanced matches")
    out = list(previous)
    for o, n in zip(before, after, strict=True):
        if o == n:
            continue
        if (o.value, o.score) != (n.value, n.score) or out.count(o) != 1:
            raise splicing.Unspliceable(f"routing facts: frontend {name}: a match changed its precedence")
        out[out.index(o)] = n
    return tuple(out)


def _routing(previous: RoutingFacts, before: RoutingFacts, after: RoutingFacts) -> RoutingFacts:
    """The routing facts: rules by rule id and Services by backend name patched; a frontend's facts
    patched in their route list only; the L4 facts must not change."""
    for name in ("tls", "tcp", "l4_backends", "crd_routes", "crd_port"):
        if getattr(before, name) != getattr(after, name):
            raise splicing.Unspliceable(f"routing facts: {name} changed")
    fronts = {f.name: f for f in previous.frontends}
    old, new = {f.name: f for f in before.frontends}, {f.name: f for f in after.frontends}
    for name in old.keys() | new.keys():
        o, n = old.get(name), new.get(name)
        if o == n:
            continue
        p = fronts.get(name)
        if (o is None or n is None or p is None
                or dataclasses.replace(o, routes=(), advanced=()) != dataclasses.replace(n, routes=(), advanced=())):
            raise splicing.Unspliceable(f"routing facts: frontend {name} changed beyond its routes and matches")
        routes = (set(p.routes) - (set(o.routes) - set(n.routes))) | (set(n.routes) - set(o.routes))
        fronts[name] = dataclasses.replace(p, routes=tuple(sorted(routes)),
                                           advanced=_matches_in_place(name, p.advanced, o.advanced, n.advanced))
    rules = {r.rid: r for r in previous.rules}
    for r in before.rules:
        rules.pop(r.rid, None)
    rules.update((r.rid, r) for r in after.rules)
    services = dict(previous.services)
    for name, _ in before.services:
        services.pop(name, None)
    services.update(after.services)
    frontends: tuple[FrontendFacts, ...] = tuple(fronts[n] for n in sorted(fronts))
    return dataclasses.replace(previous, frontends=frontends, rules=tuple(rules[r] for r in sorted(rules)),
                               services=tuple(sorted(services.items())))
