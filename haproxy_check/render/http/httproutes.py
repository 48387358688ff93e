"""HTTPRoute and GRPCRoute -> the HTTP routing model: host/path map entries, advanced matcher lines,
one backend per (route, Service, port), weight slots, and the per-rule filters (``httpfilters``).

Attachment and backend resolution come from ``validators.views.attachments`` / ``validators.crossobject.backendrefs``
(the same code the cross-object findings use). A route whose values cannot be rendered safely is left
out of the config entirely and reported as a deny finding naming the field.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from haproxy_check import escaping
from haproxy_check.escaping import FieldError, guard
from haproxy_check.render import servertls
from haproxy_check.render.endpoints import ServersMemo, servers_within
from haproxy_check.render.http import frontends, httpfilters, precedence, rulepolicies
from haproxy_check.render.http.httpmodels import (
    FAIL,
    SLOTS,
    WEIGHTED,
    WEIGHTED_MAP,
    Advanced,
    BackendSpec,
    FrontendModel,
    HttpModel,
    RuleModel,
    condition_words,
)
from haproxy_check.traffic.facts import Matcher
from validators import codes
from validators.crossobject import backendrefs
from validators.findings import Finding, PathPart, Severity
from validators.objectrules import unhonoured
from validators.objects import Obj, Ref, as_list, created_at, dig, name_of, namespace_of, ref_of
from validators.states import State
from validators.views.attachments import Attachment

UNSAFE = "RG0120"
BACKEND_TLS = "RG0515"

Mark = Callable[[Ref, Sequence[PathPart]], str]


_PCRE_SPECIAL = set("\\.^$|?*+()[]{}/")
_PCRE_ESCAPES = str.maketrans({c: "\\" + c for c in _PCRE_SPECIAL})  # every special character backslashed


def pcre_escape(text: str) -> str:
    return text.translate(_PCRE_ESCAPES)


@dataclass(frozen=True, slots=True)
class Context:
    state: State
    mark: Mark
    settings: Any
    files: servertls.FileSink
    servers: ServersMemo | None = None  # the render's servers of each Service port (``servers_within``)


def slots(weights: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """Spread 100 slots over (target, weight) by largest remainder; weight 0 gets none."""
    total = sum(w for _, w in weights)
    if total <= 0:
        return ()
    shares = [w * SLOTS / total for _, w in weights]
    counts = [int(x) for x in shares]
    short = SLOTS - sum(counts)
    if short:
        # largest remainder first, ties in order (a stable sort); count - share is exactly -(share - count)
        below = [n - x for n, x in zip(counts, shares, strict=True)]
        for i in sorted(range(len(below)), key=below.__getitem__)[:short]:
            counts[i] += 1
    out: list[str] = []
    for (t, _), n in zip(weights, counts, strict=True):
        out += [t] * n
    return tuple(out)


def backend_name(route: Obj, ref: backendrefs.BackendRef, *, grpc: bool, rule_suffix: str) -> str:
    svc = ref.name if ref.namespace == namespace_of(route) else f"{ref.name}.{ref.namespace}"
    prefix = "gw_g" if grpc else "gw_h"
    return f"{prefix}_{namespace_of(route)}_{name_of(route)}_{svc}_{ref.port}{rule_suffix}"


def _hostname_path(route: Obj, host: str) -> tuple[PathPart, ...]:
    """The spec.hostnames[k] a (lower-cased, intersected) hostname came from."""
    for k, raw in enumerate(as_list(dig(route, "spec", "hostnames"))):
        if isinstance(raw, str) and raw.lower() == host:
            return ("spec", "hostnames", k)
    return ("spec", "hostnames")


def _path_of_match(route: Obj, rule_index: int, match_index: int, raw: Any, grpc: bool
                   ) -> tuple[str, str, tuple[PathPart, ...]]:
    """(type, value, field path) of a match's path; gRPC method matches become paths."""
    base: tuple[PathPart, ...] = ("spec", "rules", rule_index, "matches", match_index)
    if not grpc:
        raw_path = raw.get("path") if type(raw) is dict else None
        if type(raw_path) is dict:  # ``dig``, inline: a missing or null value is the default
            ptype = raw_path.get("type")
            value = raw_path.get("value")
            ptype = precedence.PREFIX if ptype is None else ptype
            value = "/" if value is None else value
        else:
            ptype = dig(raw, "path", "type", default=precedence.PREFIX)
            value = dig(raw, "path", "value", default="/")
        if not isinstance(value, str) or ptype not in (precedence.EXACT, precedence.PREFIX, precedence.REGEX):
            raise FieldError(f"path type {ptype!r} is not Exact, PathPrefix or RegularExpression", (*base, "path"))
        vpath = (*base, "path", "value")
        try:  # ``guard``, inline: one path per match of every route
            return ptype, escaping.regex(value) if ptype == precedence.REGEX else escaping.path(value), vpath
        except escaping.Unsafe as exc:
            raise FieldError(str(exc), vpath) from None
    mtype = dig(raw, "method", "type", default="Exact")
    service = dig(raw, "method", "service", default="")
    method = dig(raw, "method", "method", default="")
    mpath = (*base, "method")
    if mtype == "RegularExpression":
        s = guard((*mpath, "service"), escaping.regex, service) if service else "[^/]+"
        m = guard((*mpath, "method"), escaping.regex, method) if method else "[^/]+"
        return precedence.REGEX, f"/(?:{s})/(?:{m})$", mpath
    for part, value in (("service", service), ("method", method)):
        if value:
            guard((*mpath, part), escaping.grpc_name, value, part)
    if service and method:
        return precedence.EXACT, f"/{service}/{method}", mpath
    if service:
        return precedence.PREFIX, f"/{service}", mpath
    if method:
        return precedence.REGEX, f"/[^/]+/{pcre_escape(method)}$", mpath
    return precedence.PREFIX, "/", mpath


def _conditions(raw: Any, rule_index: int, match_index: int, grpc: bool,
                matchers: list[Matcher] | None = None) -> tuple[list[str], list[str], bool]:
    """ACL blocks for method, headers and query params of spec.rules[rule_index].matches[match_index];
    and a readable description. ``matchers``: filled with what each block matches (the routing table's
    record of it)."""
    conds: list[str] = []
    reason: list[str] = []
    if type(raw) is dict and (grpc or raw.get("method") is None) and raw.get("headers") is None \
            and raw.get("queryParams") is None:
        return conds, reason, False  # a path-only match (most): what the loops below make of it
    if matchers is None:
        matchers = []
    base: tuple[PathPart, ...] = ("spec", "rules", rule_index, "matches", match_index)
    method = dig(raw, "method") if not grpc else None
    if isinstance(method, str) and method:
        conds.append(f"{{ method {guard((*base, 'method'), escaping.method, method)} }}")
        reason.append(f"method {method}")
        matchers.append(Matcher("method", "", "Exact", method))
    for kind, fetch, field in (("headers", "req.hdr", "headers"), ("queryParams", "urlp", "queryParams")):
        for k, item in enumerate(as_list(dig(raw, field))):
            # ``guard``, inline: the field paths made only for an error (one per header of every match)
            name = str(dig(item, "name", default=""))
            try:
                sample = escaping.header_fetch(fetch, name)
            except escaping.Unsafe as exc:
                raise FieldError(str(exc), (*base, field, k, "name")) from None
            value = str(dig(item, "value", default=""))
            try:
                if dig(item, "type", default="Exact") == "RegularExpression":
                    escaping.value_regex(value)
                    conds.append(f"{{ {sample} -m reg -- {escaping.quote(value)} }}")
                    matchers.append(Matcher(kind[:-1] if kind == "headers" else "query", name.lower(),
                                            "RegularExpression", value))
                else:
                    conds.append(f"{{ {sample} -m str -- {escaping.quote(value)} }}")
                    matchers.append(Matcher(kind[:-1] if kind == "headers" else "query", name.lower(), "Exact",
                                            value))
            except escaping.Unsafe as exc:
                raise FieldError(str(exc), (*base, field, k, "value")) from None
            # the reason is a debug header's text, read back with field(N,|): other characters become "?"
            reason.append(f"{'header' if kind == 'headers' else 'query'} {escaping.bare_text(name.lower())}")
    return conds, reason, isinstance(method, str) and bool(method)


@dataclass(frozen=True, slots=True)
class StagedRoute:
    """Everything one route adds to the model, compiled apart from the other routes (``stage_route``)
    and added by ``commit_route``: cacheable, since nothing in it points at one render's model. Tuples
    and frozensets (empty ones cost nothing): an incremental render keeps one per route."""

    maps: tuple[tuple[str, tuple[tuple[object, str], ...]], ...]  # map name -> (sort key, entry)
    ordered: frozenset[str]
    backends: tuple[tuple[str, BackendSpec], ...]
    uses: frozenset[str]
    auth_headers: frozenset[str]
    session_headers: frozenset[str]
    redirect_plens: frozenset[int]
    rewrite_plens: frozenset[int]
    headers: tuple[frozenset[tuple[str, str]], ...]  # request, response, request_be, response_be
    pending: tuple[tuple[str, tuple[tuple[object, Advanced], ...]], ...]  # frontend name -> advanced lines
    rules: tuple[RuleModel, ...]
    targets: tuple[str, ...]  # frontend names
    hosts: tuple[tuple[str, tuple[object, str]], ...]  # host map name -> (sort key, entry)
    any_host: tuple[str, ...]  # frontends where the route takes any host
    weighted: tuple[tuple[str, tuple[str, ...]], ...]  # (rule id, its 100 weight slots' backends)


_NONE: frozenset[Any] = frozenset()
_FIRST: Any = operator.itemgetter(0)  # a map entry's sort key (no Python call per entry)


def _staged(model: HttpModel, rules: list[RuleModel], targets: Mapping[str, tuple[FrontendModel, list[str]]],
            weighted: list[tuple[str, tuple[str, ...]]]) -> StagedRoute:
    names = sorted(targets)
    in_frontends = frozenset(names)
    for rm in rules:
        rm.frontends = in_frontends
    hosts: list[tuple[str, tuple[object, str]]] = []
    any_host: list[str] = []
    for fe_name in names:
        for vh in targets[fe_name][1]:
            host, _, token = vh.rpartition(":")
            if host == "*":
                any_host.append(fe_name)
            elif host.startswith("*."):
                hosts.append(("host-wildcard.map", ((-len(host), host, token), f"{host[1:]}:{token} {vh}")))
            else:
                hosts.append(("host.map", ("", f"{vh} {vh}")))
    h = model.headers
    none = _NONE  # the one shared empty frozenset where there is nothing (most routes use few features)
    return StagedRoute(  # in field order: a keyword call costs a record's worth again
        tuple([(name, tuple(entries)) for name, entries in model.maps.items()]),
        frozenset(model.ordered) if model.ordered else none, tuple(model.backends.items()),
        frozenset(model.uses) if model.uses else none,
        frozenset(model.auth_headers) if model.auth_headers else none,
        frozenset(model.session_headers) if model.session_headers else none,
        frozenset(model.redirect_plens) if model.redirect_plens else none,
        frozenset(model.rewrite_plens) if model.rewrite_plens else none,
        (frozenset(h.request) if h.request else none, frozenset(h.response) if h.response else none,
         frozenset(h.request_be) if h.request_be else none, frozenset(h.response_be) if h.response_be else none),
        tuple([(name, tuple(lines)) for name, lines in model.pending.items()]),
        tuple(rules), tuple(names), tuple(hosts), tuple(any_host), tuple(weighted))


def compile_route(model: HttpModel, ctx: Context, route: Obj, attachments: Sequence[Attachment],
                  fronts: dict[tuple[str, str], FrontendModel], findings: list[Finding]) -> None:
    """Add one route to ``model``. Raises escaping.FieldError (nothing added) when a value is unsafe."""
    staged = stage_route(ctx, route, attachments, fronts, findings, taken=model.backends)
    commit_route(model, staged, {fe.name: fe for fe in fronts.values()})


def stage_route(ctx: Context, route: Obj, attachments: Sequence[Attachment],
                fronts: Mapping[tuple[str, str], FrontendModel], findings: list[Finding], *,
                taken: Container[str] = ()) -> StagedRoute:
    """One route's share of the model; backends named in ``taken`` (already in the model) are not made
    again. Raises escaping.FieldError when a value is unsafe."""
    ref = ref_of(route)
    grpc = ref.kind == "GRPCRoute"
    ns = guard(("metadata", "namespace"), escaping.ident, namespace_of(route), what="namespace")
    name = guard(("metadata", "name"), escaping.ident, name_of(route), what="name")
    # vhost keys per frontend
    targets: dict[str, tuple[FrontendModel, list[str]]] = {}
    for att in attachments:
        fe = frontends.lookup(fronts, att.listener)
        if fe is None:
            continue
        hosts = att.hostnames or ("*",)
        keys = targets.setdefault(fe.name, (fe, []))[1]
        for h in hosts:
            if h != "*":
                try:
                    escaping.hostname(h)
                except escaping.Unsafe as exc:  # ``guard``, the field path found only when needed
                    raise FieldError(str(exc), _hostname_path(route, h)) from None
            vh = f"{h}:{fe.token}"
            if vh not in keys:
                keys.append(vh)
    staged = HttpModel()
    rules_out: list[RuleModel] = []
    weighted: list[tuple[str, tuple[str, ...]]] = []
    created = created_at(route)
    res = httpfilters.Resolver(
        backend_ref=lambda raw, p: backendrefs.filter_backend_ref(route, ctx.state, int(p[2]), raw, p),
        settings=ctx.settings)
    mark = ctx.mark
    settings = ctx.settings
    # ``backend_name``'s words of this route (its namespace and name are the guarded ones: the same text)
    be_prefix = f"{'gw_g' if grpc else 'gw_h'}_{ns}_{name}_"
    plain_profile: tuple[str, ...] = ("default-server proto h2",) if grpc else ()
    # a custom filter is never skipped (Gateway API): a rule with a HAProxyRoutePolicy answers 500; a rule with
    # a RequestMirror serves without it (httpfilters.rule_filters; validators.objectrules.unhonoured)
    failing = {u.rule for u in unhonoured.route_policy_rules(route)}
    for i, rule in enumerate(as_list(dig(route, "spec", "rules"))):
        rid = f"{ns}_{name}_{i}"
        rm = RuleModel(rid, f"{ns}/{name}", ref.kind, i, mark(ref, ("spec", "rules", i)))
        retry, persistence = (rule.get("retry"), rule.get("sessionPersistence")) if type(rule) is dict else (
            dig(rule, "retry"), dig(rule, "sessionPersistence"))
        own = bool(retry) or bool(persistence)
        suffix = f"_r{i}" if own else ""
        if retry is None and persistence is None:
            profile = plain_profile  # what backend_profile makes of a rule without either policy
        else:
            profile = rulepolicies.backend_profile(
                rule, i, grpc=grpc, findings=findings, ref=ref, haproxy_version=settings.haproxy_version,
                cookie_key=settings.dynamic_cookie_key,
                retry_non_idempotent=bool(getattr(settings, "retry_non_idempotent", False)))
            header = rulepolicies.session_header(rule, i)
            if header:
                sp_mark = mark(ref, ("spec", "rules", i, "sessionPersistence"))
                staged.add("gw-session-header.map", f"{rid} {header}{sp_mark}")
                staged.session_headers.add(header)
        weights: list[tuple[str, int]] = []
        chosen: list[tuple[int, str]] = []
        for bref in () if i in failing else backendrefs.rule_backend_refs(route, ctx.state, i):
            servable = bref.resolved or (bref.reason == backendrefs.BACKEND_NOT_FOUND and bref.kind == "Service")
            if servable and bref.port is not None:
                try:  # ``guard``, inline: the field path made only for an error
                    escaping.ident(bref.name, what="Service name")
                except escaping.Unsafe as exc:
                    raise FieldError(str(exc), (*bref.path, "name")) from None
                svc = bref.name if bref.namespace == ns else f"{bref.name}.{bref.namespace}"
                be = f"{be_prefix}{svc}_{bref.port}{suffix}"  # ``backend_name``
                if be not in staged.backends and be not in taken:
                    servers = []
                    if bref.service:
                        tls = servertls.server_tls(ctx.state, bref.service, bref.port, ctx.files, settings=settings)
                        if tls.blocked:
                            findings.append(Finding(BACKEND_TLS, f"{tls.blocked}; the backend gets no servers",
                                                    bref.path, Severity.WARN, subject=True, about=str(ref)))
                        else:
                            servers = _servers(ctx, ref, bref, findings, options=tls.options)
                    staged.backends[be] = BackendSpec(be, mark(ref, bref.path), tuple(servers), grpc, profile,
                                                      (f"{ref.kind} {ns}/{name} rule {i}",),
                                                      f"{bref.namespace}/{bref.name}:{bref.port}")
                weights.append((be, bref.weight))
                chosen.append((bref.ref_index, be))
            else:
                # An unresolved backendRef is reported once, by validators.crossobject.crossobjects (RG0501-RG0503,
                # which also says what the render does with it), not again here.
                weights.append((FAIL, bref.weight))
        if i in failing:
            weights = [(FAIL, 1)]
        live = [(t, w) for t, w in weights if w > 0]
        if len({t for t, _ in live}) == 1:
            rm.target = live[0][0]
        elif live:
            rm.target = WEIGHTED
            rm.slots = slots(weights)
            weighted.append((rid, rm.slots))  # its 100 map entries are made when committed, never kept
            staged.ordered.add(WEIGHTED_MAP)
        staged.add("rule-backend.map", f"{rid} {rm.target}{rm.mark}")
        plens = _matches(staged, ctx, route, rule, i, rm, targets, grpc, ref, created)
        httpfilters.rule_filters(staged, rm, route, rule, i, plens, findings, ctx.mark, res, ref=ref)
        raw_refs = rule.get("backendRefs") if type(rule) is dict else None
        for j, be in chosen:
            raw_ref = raw_refs[j] if type(raw_refs) is list and 0 <= j < len(raw_refs) else None
            if type(raw_ref) is dict and not raw_ref.get("filters"):
                continue  # no filters (most backendRefs): what backend_filters makes of it
            httpfilters.backend_filters(staged, rm, route, i, j, be, plens, findings, mark)
        rules_out.append(rm)
    return _staged(staged, rules_out, targets, weighted)


def commit_route(model: HttpModel, route: StagedRoute, fronts: Mapping[str, FrontendModel]) -> None:
    """Add a staged route to ``model`` and its frontends (by name). Reads ``route``, never changes it, so
    one staged route can be committed into many renders, concurrently."""
    for mapname, entries in route.maps:
        model.maps.setdefault(mapname, []).extend(entries)
    model.weighted.extend(route.weighted)  # its map entries are made when the map is read (map_entries)
    model.ordered |= route.ordered
    model.backends.update(route.backends)
    model.uses |= route.uses
    model.auth_headers |= route.auth_headers
    model.session_headers |= route.session_headers
    model.redirect_plens |= route.redirect_plens
    model.rewrite_plens |= route.rewrite_plens
    h = model.headers
    h.request |= route.headers[0]
    h.response |= route.headers[1]
    h.request_be |= route.headers[2]
    h.response_be |= route.headers[3]
    for mapname, item in route.hosts:
        model.maps.setdefault(mapname, []).append(item)
        if mapname == "host-wildcard.map":
            model.ordered.add(mapname)
    for fe_name in route.any_host:
        fronts[fe_name].any_host = True
    pending = dict(route.pending)
    for fe_name in route.targets:
        fe = fronts[fe_name]
        fe.advanced.extend(pending.get(fe_name, ()))
        fe.rules.extend(route.rules)


def _matches(staged: HttpModel, ctx: Context, route: Obj, rule: Any, i: int, rm: RuleModel,
             targets: dict[str, tuple[FrontendModel, list[str]]], grpc: bool, ref: Ref, created: str) -> set[int]:
    """``ref`` and ``created``: the route's ``ref_of`` and ``created_at``."""
    matches = as_list(dig(rule, "matches")) or [{}]
    plens: set[int] = set()
    new_key, Key = tuple.__new__, precedence.Key
    for j, raw in enumerate(matches):
        ptype, value, vpath = _path_of_match(route, i, j, raw, grpc)
        matchers: list[Matcher] = []
        conds, reason, has_method = _conditions(raw, i, j, grpc, matchers)
        score = precedence.score(ptype, value)
        prefix = value.rstrip("/") if ptype == precedence.PREFIX else ""
        plen = len(prefix) if ptype == precedence.PREFIX else 0
        if ptype == precedence.PREFIX:
            plens.add(plen)
        if conds:
            headers, queries = len(as_list(dig(raw, "headers"))), len(as_list(dig(raw, "queryParams")))
        else:
            headers = queries = 0  # no condition: no header or query matcher either
        # ``precedence.key``, built directly (keyword calls cost as much as the key; the record's own
        # constructor is a Python function too)
        key = new_key(Key, (-score, not has_method, -headers, -queries, created, ref.namespace, ref.name, i, j))
        mark = ctx.mark(ref, vpath)
        why = "-".join(reason) if reason else "path"
        value_field = f"{score}|{rm.rid}|{plen}|{why.replace(' ', ':')}"
        guarded: tuple[tuple[str, ...], str, int, tuple[str, str, tuple[Matcher, ...]]] | None = None
        # (the same in every frontend: made once)
        for fe, vhosts in targets.values():
            if conds:
                if guarded is None:
                    cond = _path_condition(ptype, value, prefix)
                    blocks = tuple(c for c in (cond, *conds) if c)
                    guarded = (blocks, f"{ref.kind} {ref.namespace}/{ref.name} rule {i} match {j} - "
                               f"{' '.join(reason)}", condition_words(blocks),
                               (ptype, prefix if ptype == precedence.PREFIX else value, tuple(matchers)))
                adv = Advanced(value_field, score, tuple(vhosts), guarded[0], guarded[1], mark, guarded[2],
                               guarded[3])
                staged.pending.setdefault(fe.name, []).append((key, adv))
                continue
            for vh in vhosts:
                if ptype == precedence.EXACT:
                    staged.add("path-exact.map", f"{vh}{value} {value_field}{mark}", key)
                elif ptype == precedence.PREFIX:
                    if prefix:
                        staged.add("path-prefix-exact.map", f"{vh}{prefix} {value_field}{mark}", key)
                    staged.add("path-prefix.map", f"{vh}{prefix}/ {value_field}{mark}", key)
                else:
                    body = value[1:] if value.startswith("^") else value
                    # ``(?=/)``: the pattern starts at the path; without it, ``a.com:80``'s ``[0-9]*/x`` matched
                    # ``a.com:8080/x``, a request of another frontend (another owner's Gateway)
                    staged.add("path-regex.map", f"^{pcre_escape(vh)}(?=/)(?:{body}) {value_field}{mark}", key,
                               ordered=True)
    return plens


def _path_condition(ptype: str, value: str, prefix: str) -> str:
    if ptype == precedence.EXACT:
        return f"{{ var(txn.gw_path) -m str -- {escaping.quote(value)} }}"
    if ptype == precedence.PREFIX:
        if not prefix:
            return ""
        return f"{{ var(txn.gw_path) -m reg -- {escaping.quote('^' + pcre_escape(prefix) + '(/|$)')} }}"
    body = value[1:] if value.startswith("^") else value
    return f"{{ var(txn.gw_path) -m reg -- {escaping.quote('^(?:' + body + ')')} }}"


def _servers(ctx: Context, ref: Ref, bref: backendrefs.BackendRef, findings: list[Finding], *,
             options: Sequence[str]) -> list[Any]:
    """The backend's servers within ``limits.serversPerBackend``; a warning on the route when capped
    (EndpointSlices are written by controllers: never a denial)."""
    assert bref.service is not None and bref.port is not None
    limit = ctx.settings.limits.servers_per_backend
    servers, over = servers_within(ctx.state, bref.service, bref.port, options=options, limit=limit,
                                   memo=ctx.servers)
    if over:
        findings.append(Finding(
            codes.RENDER_SERVERS_CAPPED, f"Service {namespace_of(bref.service)}/{name_of(bref.service)} port "
            f"{bref.port} has more than {limit} ready endpoints; only {limit} are rendered, from the first "
            "EndpointSlices by name (limits.serversPerBackend)", bref.path, Severity.WARN, subject=True,
            about=str(ref)))
    return servers


def dedupe_path_maps(model: HttpModel) -> None:
    """Keep only the best (precedence) entry per key in each path map: oldest route wins a tie."""
    for name in ("path-exact.map", "path-prefix-exact.map", "path-prefix.map", "path-regex.map"):
        best: dict[str, tuple[object, str]] = {}
        for sort, entry in sorted(model.maps.get(name, []), key=_FIRST):
            best.setdefault(entry.split(" ", 1)[0], (sort, entry))
        if name in model.maps:
            model.maps[name] = list(best.values())
