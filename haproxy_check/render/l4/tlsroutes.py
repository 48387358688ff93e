"""TLSRoute model: one SNI-routing tcp frontend per TLS port (two behind an SNI split), one weighted
backend per rule and mode.

Passthrough frontends read the SNI from the ClientHello (``req.ssl_sni``); Terminate frontends
decrypt with the listeners' certificates and read ``ssl_fc_sni``. Route hostnames (already
intersected with listener hostnames by ``validators.views.attachments``) go into two maps per port: exact
names (``tls-sni-<port>.map``) and wildcard suffixes (``tls-sni-wild-<port>.map``, ordered longest
suffix first). A server name no route claims is rejected. When two routes claim one name on one port,
the oldest route wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from haproxy_check import escaping
from haproxy_check.render import clienttrust, isolation, listenercerts, tlscerts
from haproxy_check.render.http.httpmodels import MAX_CRTS
from haproxy_check.render.l4 import rulebackends
from haproxy_check.render.l4.rulebackends import RuleBackend
from haproxy_check.render.servertls import FileSink
from validators import codes
from validators.findings import Finding, Severity
from validators.objects import Obj, Ref, as_list, dig, ref_of
from validators.states import State
from validators.views import attachments, indexes, sniprecedence

PASSTHROUGH, TERMINATE = "Passthrough", "Terminate"


@dataclass(slots=True)
class TLSFrontend:
    name: str
    port: int
    mode: str  # Passthrough | Terminate
    certs: list[str] = field(default_factory=list)
    crt_list: str = ""  # a crt-list file replacing ``certs`` when they would not fit one bind line
    exact: list[tuple[str, str, Ref]] = field(default_factory=list)  # (sni, backend, route)
    wild: list[tuple[str, str, Ref]] = field(default_factory=list)  # (".suffix", backend, route)
    shared_https: bool = False  # passthrough on the HTTPS port: the rest goes to the HTTP engine
    owners: list[tuple[Ref, tuple[str | int, ...]]] = field(default_factory=list)  # listeners (source, path)
    bind: str = ""  # ":<port>", or the internal socket of a Terminate frontend behind an SNI split
    hop: str = ""  # the backend name the SNI split uses to reach this (inner) Terminate frontend
    share_address: str = ""  # shared_https: the HTTP engine's internal socket for this port
    inner: bool = False  # bound on an internal socket (accept-proxy) behind the port's SNI split
    gateways: list[Ref] = field(default_factory=list)  # the Gateways of the listeners, in listener order
    client_verify: list[str] = field(default_factory=list)  # frontend mTLS bind keywords (clienttrust)
    reject_all: bool = False  # client validation without a usable CA: no traffic

    def entries(self, wild: bool, mark: Callable[[Ref, tuple[str, ...]], str]) -> list[str]:
        """Map lines ``<sni> <backend>`` carrying the route's source-map marker."""
        rows = self.wild if wild else self.exact
        return [f"{k} {be}{mark(ref, ('spec', 'hostnames'))}" for k, be, ref in rows]

    @property
    def share_backend(self) -> str:
        return f"routegate_https_{self.port}"

    @property
    def exact_map(self) -> str:
        return f"tls-sni-terminate-{self.port}.map" if self.inner else f"tls-sni-{self.port}.map"

    @property
    def wild_map(self) -> str:
        return f"tls-sni-wild-terminate-{self.port}.map" if self.inner else f"tls-sni-wild-{self.port}.map"


@dataclass(frozen=True, slots=True)
class Hop:
    """A static tcp backend forwarding a connection (PROXY v2 header first) to an internal frontend."""
    name: str
    address: str


@dataclass(slots=True)
class TLSModel:
    frontends: list[TLSFrontend] = field(default_factory=list)
    backends: list[RuleBackend] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    hops: list[Hop] = field(default_factory=list)


DEFAULT_SOCKETS = "abns@routegate"


def https_share_socket(port: int, prefix: str = DEFAULT_SOCKETS) -> str:
    """Where the HTTP engine's HTTPS frontend listens when the TLS frontend owns ``:<port>``."""
    return f"{prefix}-https-{port}"


def terminate_socket(port: int, prefix: str = DEFAULT_SOCKETS) -> str:
    """Where a port's Terminate frontend listens when passthrough listeners share the port."""
    return f"{prefix}-tlst-{port}"


def backend_name(route: Ref, rule_index: int, mode: str) -> str:
    tag = "tls" if mode == PASSTHROUGH else "tlst"
    return escaping.ident(f"gtw_{tag}_{route.namespace}_{route.name}_{rule_index}", what="backend name")


def frontend_name(port: int) -> str:
    return f"gateway-tls-port-{port}"


def _finding(code: str, message: str, about: Ref, path: tuple[str | int, ...]) -> Finding:
    return Finding(code, message, path, Severity.WARN, subject=False, about=str(about))


def passthrough_on(state: State, port: int) -> bool:
    """Whether any Passthrough TLS listener, or an HTTPS listener an SSLPassthrough HTTPRoute attaches to,
    uses ``port`` (the HTTP engine then yields the bind)."""
    if any(x.protocol == "TLS" and x.tls_mode == PASSTHROUGH and x.port == port and not x.conflicted
           for x in attachments.listeners(state)):
        return True
    return any(a.listener.port == port for route, _ in ssl_passthrough_routes(state)
               for a in attachments.attach(route, state)[0] if a.listener.protocol == "HTTPS")


SSL_PASSTHROUGH = "SSLPassthrough"


def ssl_passthrough_rules(route: Obj) -> list[int]:
    """Rules of an HTTPRoute whose filters carry the SSLPassthrough ExtensionRef."""
    found = []
    for i, rule in enumerate(as_list(dig(route, "spec", "rules"))):
        filters = rule.get("filters") if type(rule) is dict else dig(rule, "filters")
        if not filters:
            continue  # most rules: none (asked of every HTTPRoute of a state)
        if any(dig(f, "type") == "ExtensionRef" and dig(f, "extensionRef", "kind") == SSL_PASSTHROUGH
               for f in as_list(filters)):
            found.append(i)
    return found


def ssl_passthrough_routes(state: State) -> Sequence[tuple[Obj, list[int]]]:
    """HTTPRoutes with SSLPassthrough rules, oldest first (the oldest claim on a server name wins). An index
    per state version: every HTTPS frontend of a render asks (``passthrough_on``), and the TLS model."""
    return indexes.index_reading(state, "ssl-passthrough-routes-by-age", _ROUTE_KINDS, _ssl_passthrough_routes)


_ROUTE_KINDS = frozenset({"HTTPRoute"})


def _ssl_passthrough_routes(state: State) -> tuple[tuple[Obj, list[int]], ...]:
    found = [(r, rules) for r in state.list("HTTPRoute") if (rules := ssl_passthrough_rules(r))]
    return tuple(sorted(found, key=lambda pair: attachments.age_key(pair[0])))


def _unbound(lst: attachments.Listener, settings: Any, model: TLSModel) -> bool:
    """A TLS listener on a pod port is not bound (``isolation.unbound``)."""
    refused = isolation.unbound(lst, settings) if lst.protocol == "TLS" else None
    if refused is not None:
        model.findings.append(refused)
    return refused is not None


class Precedence:
    """On a passthrough port shared with the HTTP engine: the names the port's more specific HTTPS
    listeners keep (``validators.views.sniprecedence``). A route's name such a listener wholly owns gets
    no entry; every kept name gets an entry sending it to the HTTP engine, so no passthrough entry (a
    wildcard suffix) takes it. Only written where a route would have taken one: other ports render as
    before."""

    def __init__(self, state: State, listeners: Sequence[attachments.Listener]) -> None:
        self.state, self.listeners = state, listeners
        self.https: dict[int, list[attachments.Listener]] = {}
        self.pending: dict[tuple[int, str], Ref] = {}

    def _https(self, port: int) -> list[attachments.Listener]:
        got = self.https.get(port)
        if got is None:
            got = self.https[port] = sniprecedence.shared_https(self.state, self.listeners, port)
        return got

    def loses(self, port: int, host: str, through: attachments.Listener, route: Ref, model: TLSModel) -> bool:
        """Whether ``route``'s entry for ``host`` on ``port`` yields wholly to an HTTPS listener."""
        found = sniprecedence.https_claims(host, through, self._https(port))
        for c in found:
            self.pending.setdefault((port, c.host), c.listener.source)
        if not found or not found[0].whole:
            return False
        owner = found[0].listener
        model.findings.append(_finding(
            codes.PASSTHROUGH_OVER_HTTPS, f"server name {host} on port {port} is not passed through: the more "
            f"specific HTTPS listener {owner.name!r} of {owner.source} (hostname {owner.hostname}) terminates it",
            route, ("spec", "hostnames")))
        return True

    def write(self, fronts: dict[tuple[int, str], TLSFrontend], claimed: set[tuple[int, str]]) -> None:
        for (port, host), source in sorted(self.pending.items()):
            front = fronts.get((port, PASSTHROUGH))
            if front is None or (port, host) in claimed:
                continue
            claimed.add((port, host))
            if host.startswith("*."):
                front.wild.append((host[1:], front.share_backend, source))
            else:
                front.exact.append((host, front.share_backend, source))


def http_engine_ports(lsts: Sequence[attachments.Listener]) -> dict[int, str]:
    """Ports the HTTP engine binds (HTTP/HTTPS listeners) -> "HTTPS" when any listener there is HTTPS."""
    out: dict[int, str] = {}
    for x in lsts:
        if x.protocol in ("HTTP", "HTTPS"):
            out[x.port] = "HTTPS" if x.protocol == "HTTPS" or out.get(x.port) == "HTTPS" else "HTTP"
    return out


def _usable(lsts: Sequence[attachments.Listener], engine: dict[int, str], https_shared: bool,
            model: TLSModel) -> list[attachments.Listener]:
    """The TLS listeners that render; RG0517 for those on a port the HTTP engine keeps to itself."""
    out = []
    for lst in lsts:
        if lst.protocol != "TLS" or lst.conflicted or lst.tls_mode not in (PASSTHROUGH, TERMINATE):
            continue
        if lst.port in engine and not (lst.tls_mode == PASSTHROUGH and engine[lst.port] == "HTTPS"
                                       and https_shared):
            why = ("only Passthrough TLS listeners may share an HTTPS port; use a separate port"
                   if lst.tls_mode == TERMINATE or engine[lst.port] == "HTTP" else
                   "the HTTP engine does not share its HTTPS port with passthrough "
                   "(RenderSettings.share_https_with_passthrough is off)")
            model.findings.append(_finding("RG0517", f"TLS listener on port {lst.port} is not rendered: "
                                           f"{why}", lst.source, (*lst.path, "port")))
            continue
        out.append(lst)
    return out


def build(state: State, files: FileSink, *, https_shared: bool = True,
          http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS, settings: Any = None,
          sockets: str = DEFAULT_SOCKETS) -> TLSModel:
    """The TLS frontends/backends of the state.

    A port with Passthrough listeners gets one SNI-reading frontend on ``:<port>``: passthrough names go
    to their backends, the names of the port's Terminate listeners to the Terminate frontend on
    ``<sockets>-tlst-<port>``, and (``https_shared``, an HTTPS port of the HTTP engine) every other name
    to the engine's HTTPS frontend on ``<sockets>-https-<port>``. A port with only Terminate listeners
    gets its Terminate frontend on ``:<port>``.
    """
    model = TLSModel()
    lsts = attachments.listeners(state, http_ports=http_ports)
    engine = http_engine_ports(lsts)
    usable = _usable([x for x in lsts if not _unbound(x, settings, model)], engine, https_shared, model)
    split = {x.port for x in usable if x.tls_mode == PASSTHROUGH}
    fronts: dict[tuple[int, str], TLSFrontend] = {}
    for lst in usable:
        key = (lst.port, lst.tls_mode or TERMINATE)
        front = fronts.get(key)
        if front is None:
            front = fronts[key] = TLSFrontend(frontend_name(lst.port), lst.port, key[1],
                                              shared_https=key[1] == PASSTHROUGH and lst.port in engine,
                                              bind=f":{lst.port}")
            if front.shared_https:
                front.share_address = https_share_socket(lst.port, sockets)
                model.hops.append(Hop(front.share_backend, front.share_address))
            if key[1] == TERMINATE and lst.port in split:
                front.name, front.inner = f"{front.name}-terminate", True
                front.bind = terminate_socket(lst.port, sockets) + " accept-proxy"
                front.hop = f"routegate_tlst_{lst.port}"
                model.hops.append(Hop(front.hop, terminate_socket(lst.port, sockets)))
        front.owners.append((lst.source, lst.path))
        if lst.gateway not in front.gateways:
            front.gateways.append(lst.gateway)
        if lst.tls_mode == TERMINATE:
            for k, cert in enumerate(lst.certificate_refs):
                got = listenercerts.certificate(state, lst.source, cert, files)
                if got.warning:
                    model.findings.append(_finding("RG0409", f"{got.warning}; clients will reject it", lst.source,
                                                   (*lst.path, "tls", "certificateRefs", k)))
                if got.path and got.path not in front.certs:
                    front.certs.append(got.path)
                elif got.invalid:  # missing / not permitted: RG0509 / RG0510 from validators.crossobject.crossobjects
                    model.findings.append(_finding("RG0520", got.problem, lst.source,
                                                   (*lst.path, "tls", "certificateRefs", k)))
    claimed: set[tuple[int, str]] = set()
    built: set[str] = set()
    # Names a more specific HTTPS listener keeps on a port shared with passthrough (sniprecedence).
    keep = Precedence(state, lsts)
    if https_shared:
        _ssl_passthrough(state, fronts, engine, claimed, built, model, files, settings, sockets, keep)
    else:
        for route, rules in ssl_passthrough_routes(state):
            if any(a.listener.protocol == "HTTPS" for a in attachments.attach(route, state)[0]):
                model.findings.append(_finding(
                    "RG0517", "the SSLPassthrough rule is not passed through: the HTTP engine does not share its "
                    "HTTPS port (RenderSettings.share_https_with_passthrough is off); it is served as HTTP",
                    ref_of(route), ("spec", "rules", rules[0], "filters")))
    for route in sorted(state.list("TLSRoute"), key=attachments.age_key):
        try:
            _route(state, route, fronts, claimed, built, model, files, http_ports, settings, keep)
        except escaping.Unsafe as exc:  # names/hostnames the schema check denies; never a render crash
            model.findings.append(_finding("RG0519", f"TLSRoute is not rendered: {exc}", ref_of(route),
                                           ("spec",)))
    keep.write(fronts, claimed)
    for front in fronts.values():
        front.wild.sort(key=lambda e: (-len(e[0]), e[0]))
        front.exact.sort()
        if front.mode == TERMINATE and not front.certs:
            # The check must still run: a placeholder certificate, as the HTTPS frontends do.
            front.certs.append(files.add_file(tlscerts.PLACEHOLDER_PATH, tlscerts.placeholder_pem(), "cert"))
            for source, path in front.owners:
                model.findings.append(_finding("RG0521", f"terminating TLS port {front.port} has no usable "
                                               "certificate; a placeholder is used for the check", source,
                                               (*path, "tls", "certificateRefs")))
        if front.mode == TERMINATE and front.gateways:
            # frontend mTLS of the port's Gateway (a TLS port has one frontend: the first Gateway's rules)
            trust = clienttrust.resolve(state, front.gateways[0], front.port, files)
            model.findings.extend(trust.findings)
            front.client_verify, front.reject_all = list(trust.bind_options()), trust.reject_all
        if len(front.certs) > MAX_CRTS:  # two words per `crt`: a crt-list keeps the bind line under 64 words
            body = "".join(f"{path}\n" for path in front.certs).encode()
            front.crt_list, front.certs = files.add_file(f"certs/{front.name}.crt-list", body), []
    # the outer frontend first: sorted (port, Passthrough before Terminate)
    model.frontends = [f for _, f in sorted(fronts.items(), key=lambda kv: (kv[0][0], kv[0][1] != PASSTHROUGH))]
    model.backends.sort(key=lambda b: b.name)
    model.hops.sort(key=lambda h: h.name)
    return model


def _ssl_passthrough(state: State, fronts: dict[tuple[int, str], TLSFrontend], engine: dict[int, str],
                     claimed: set[tuple[int, str]], built: set[str], model: TLSModel, files: FileSink,
                     settings: Any, sockets: str, keep: Precedence) -> None:
    """HTTPRoute rules with the SSLPassthrough ExtensionRef: on the HTTPS ports the route attaches to,
    its hostnames are passed through by SNI to the rule's backends (TLS stays end to end); the rest of
    the port stays with the HTTP engine. They claim names before TLSRoutes (the HTTPS port is theirs)."""
    for route, rules in ssl_passthrough_routes(state):
        ref = ref_of(route)
        attached = [a for a in attachments.attach(route, state)[0] if a.listener.protocol == "HTTPS"
                    and engine.get(a.listener.port) == "HTTPS"]
        for a in attached:  # the port's bind moves here (passthrough_on) whatever becomes of the route
            port = a.listener.port
            if (port, PASSTHROUGH) not in fronts:
                front = fronts[(port, PASSTHROUGH)] = TLSFrontend(frontend_name(port), port, PASSTHROUGH,
                                                                  shared_https=True, bind=f":{port}")
                front.share_address = https_share_socket(port, sockets)
                model.hops.append(Hop(front.share_backend, front.share_address))
        try:
            for a in attached:
                for host in a.hostnames:
                    escaping.hostname(host)
            names = [(i, escaping.ident(f"gtw_tls_{ref.namespace}_{ref.name}_{i}", what="backend name"))
                     for i in rules]
        except escaping.Unsafe as exc:
            model.findings.append(_finding("RG0519", f"SSLPassthrough HTTPRoute is not rendered: {exc}", ref,
                                           ("spec",)))
            continue
        rule_index, name = names[0]  # SNI carries no path: the first passthrough rule takes the names
        for a in attached:
            port = a.listener.port
            front = fronts[(port, PASSTHROUGH)]
            if name not in built:
                built.add(name)
                model.backends.append(rulebackends.build(state, route, rule_index, name, files, tls=False,
                                                         settings=settings))
                model.findings.extend(model.backends[-1].findings)
            if not a.hostnames:
                model.findings.append(_finding("RG0519", "an SSLPassthrough rule needs spec.hostnames (routing is "
                                               "by SNI); it is not passed through", ref, ("spec", "hostnames")))
            for host in a.hostnames:
                if keep.loses(port, host, a.listener, ref, model):
                    continue
                if (port, host) in claimed:
                    model.findings.append(_finding("RG0518", f"server name {host} on port {port} is already "
                                                   "claimed by an older route", ref, ("spec", "hostnames")))
                    continue
                claimed.add((port, host))
                (front.wild if host.startswith("*.") else front.exact).append(
                    (host[1:] if host.startswith("*.") else host, name, ref))


def _route(state: State, route: Any, fronts: dict[tuple[int, str], TLSFrontend],
           claimed: set[tuple[int, str]], built: set[str], model: TLSModel, files: FileSink,
           http_ports: Sequence[int], settings: Any, keep: Precedence) -> None:
    """One TLSRoute: its rule backend per mode and its server names on every attached port."""
    attached, _ = attachments.attach(route, state, http_ports=http_ports)
    ref = ref_of(route)
    if not as_list(dig(route, "spec", "rules")):
        return
    for a in attached:  # every server name first: a route is rendered whole or not at all
        for host in a.hostnames:
            escaping.hostname(host)
    for a in attached:
        front = fronts.get((a.listener.port, a.listener.tls_mode or TERMINATE))
        if front is None:
            continue
        name = backend_name(ref, 0, front.mode)  # a TLSRoute rule has no matches: rule 0 serves
        if name not in built:
            built.add(name)
            model.backends.append(rulebackends.build(state, route, 0, name, files,
                                                     tls=front.mode == TERMINATE, settings=settings))
            model.findings.extend(model.backends[-1].findings)
        # behind an SNI split, the outer frontend sends the name on to this frontend's hop
        outer = fronts.get((front.port, PASSTHROUGH)) if front.inner else None
        for host in a.hostnames:
            if front.shared_https and keep.loses(front.port, host, a.listener, ref, model):
                continue
            if (front.port, host) in claimed:
                model.findings.append(_finding(
                    "RG0518", f"server name {host} on port {front.port} is already claimed by an older "
                    "TLSRoute", ref, ("spec", "hostnames")))
                continue
            claimed.add((front.port, host))
            targets = [(front, name)] + ([(outer, front.hop)] if outer is not None else [])
            for target, be in targets:
                if host.startswith("*."):
                    target.wild.append((host[1:], be, ref))
                else:
                    target.exact.append((host, be, ref))
