"""TLSRoute model: one SNI-routing tcp frontend per TLS port, one weighted backend per rule and mode.

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
from haproxy_check.render import listenercerts, tlscerts
from haproxy_check.render.http.httpmodels import MAX_CRTS
from haproxy_check.render.l4 import rulebackends
from haproxy_check.render.l4.rulebackends import RuleBackend
from haproxy_check.render.servertls import FileSink
from validators.findings import Finding, Severity
from validators.objects import Ref, as_list, dig, ref_of
from validators.states import State
from validators.views import attachments

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

    def entries(self, wild: bool, mark: Callable[[Ref, tuple[str, ...]], str]) -> list[str]:
        """Map lines ``<sni> <backend>`` carrying the route's source-map marker."""
        rows = self.wild if wild else self.exact
        return [f"{k} {be}{mark(ref, ('spec', 'hostnames'))}" for k, be, ref in rows]

    @property
    def share_backend(self) -> str:
        return f"routegate_https_{self.port}"

    @property
    def exact_map(self) -> str:
        return f"tls-sni-{self.port}.map"

    @property
    def wild_map(self) -> str:
        return f"tls-sni-wild-{self.port}.map"


@dataclass(slots=True)
class TLSModel:
    frontends: list[TLSFrontend] = field(default_factory=list)
    backends: list[RuleBackend] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def backend_name(route: Ref, rule_index: int, mode: str) -> str:
    tag = "tls" if mode == PASSTHROUGH else "tlst"
    return escaping.ident(f"gtw_{tag}_{route.namespace}_{route.name}_{rule_index}", what="backend name")


def frontend_name(port: int) -> str:
    return f"gateway-tls-port-{port}"


def _finding(code: str, message: str, about: Ref, path: tuple[str | int, ...]) -> Finding:
    return Finding(code, message, path, Severity.WARN, subject=False, about=str(about))


def passthrough_on(state: State, port: int) -> bool:
    """Whether any Passthrough TLS listener uses ``port`` (the HTTP engine then yields the bind)."""
    return any(x.protocol == "TLS" and x.tls_mode == PASSTHROUGH and x.port == port and not x.conflicted
               for x in attachments.listeners(state))


def http_engine_ports(lsts: Sequence[attachments.Listener]) -> dict[int, str]:
    """Ports the HTTP engine binds (HTTP/HTTPS listeners) -> "HTTPS" when any listener there is HTTPS."""
    out: dict[int, str] = {}
    for x in lsts:
        if x.protocol in ("HTTP", "HTTPS"):
            out[x.port] = "HTTPS" if x.protocol == "HTTPS" or out.get(x.port) == "HTTPS" else "HTTP"
    return out


def build(state: State, files: FileSink, *, https_shared: bool = False,
          http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS, settings: Any = None) -> TLSModel:
    """The TLS frontends/backends of the state. ``https_shared``: the HTTP engine binds its HTTPS
    frontends on ``abns@routegate-https-<port>`` when passthrough listeners share the port."""
    model = TLSModel()
    lsts = attachments.listeners(state, http_ports=http_ports)
    engine = http_engine_ports(lsts)
    fronts: dict[int, TLSFrontend] = {}
    for lst in lsts:
        if lst.protocol != "TLS" or lst.conflicted or lst.tls_mode not in (PASSTHROUGH, TERMINATE):
            continue
        if lst.port in engine and not (lst.tls_mode == PASSTHROUGH and engine[lst.port] == "HTTPS"
                                       and https_shared):
            why = ("only Passthrough TLS listeners may share an HTTPS port; use a separate port"
                   if lst.tls_mode == TERMINATE or engine[lst.port] == "HTTP" else
                   "the HTTP engine does not share its HTTPS port with passthrough")
            model.findings.append(_finding("RG0517", f"TLS listener on port {lst.port} is not rendered: "
                                           f"{why}", lst.source, (*lst.path, "port")))
            continue
        front = fronts.setdefault(lst.port, TLSFrontend(frontend_name(lst.port), lst.port, lst.tls_mode,
                                                         shared_https=lst.port in engine))
        front.owners.append((lst.source, lst.path))
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
    for route in sorted(state.list("TLSRoute"), key=attachments.age_key):
        try:
            _route(state, route, fronts, claimed, built, model, files, http_ports, settings)
        except escaping.Unsafe as exc:  # names/hostnames the schema check denies; never a render crash
            model.findings.append(_finding("RG0519", f"TLSRoute is not rendered: {exc}", ref_of(route),
                                           ("spec",)))
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
        if len(front.certs) > MAX_CRTS:  # two words per `crt`: a crt-list keeps the bind line under 64 words
            body = "".join(f"{path}\n" for path in front.certs).encode()
            front.crt_list, front.certs = files.add_file(f"certs/{front.name}.crt-list", body), []
    model.frontends = [f for _, f in sorted(fronts.items())]
    model.backends.sort(key=lambda b: b.name)
    return model


def _route(state: State, route: Any, fronts: dict[int, TLSFrontend],
           claimed: set[tuple[int, str]], built: set[str], model: TLSModel, files: FileSink,
           http_ports: Sequence[int], settings: Any) -> None:
    """One TLSRoute: its rule backend per mode and its server names on every attached port."""
    attached, _ = attachments.attach(route, state, http_ports=http_ports)
    ref = ref_of(route)
    if not as_list(dig(route, "spec", "rules")):
        return
    for a in attached:  # every server name first: a route is rendered whole or not at all
        for host in a.hostnames:
            escaping.hostname(host)
    for a in attached:
        front = fronts.get(a.listener.port)
        if front is None:
            continue
        name = backend_name(ref, 0, front.mode)  # a TLSRoute rule has no matches: rule 0 serves
        if name not in built:
            built.add(name)
            model.backends.append(rulebackends.build(state, route, 0, name, files,
                                                     tls=front.mode == TERMINATE, settings=settings))
            model.findings.extend(model.backends[-1].findings)
        for host in a.hostnames:
            if (front.port, host) in claimed:
                model.findings.append(_finding(
                    "RG0518", f"server name {host} on port {front.port} is already claimed by an older "
                    "TLSRoute", ref, ("spec", "hostnames")))
                continue
            claimed.add((front.port, host))
            if host.startswith("*."):
                front.wild.append((host[1:], name, ref))
            else:
                front.exact.append((host, name, ref))
