"""Gateway HTTP/HTTPS listeners -> one HAProxy frontend per Gateway listener address (seed 004).

The listeners of one Gateway on one port share a frontend; another Gateway on the same port gets its own
frontend on a dedicated pod port (``isolation``). Map keys carry the frontend's token (its port) so routes
of different frontends never meet. HTTPS frontends load each listener's
certificates (a placeholder + warning when a Secret is missing) and get the 421 Misdirected Request
check when several HTTPS listeners with distinct hostnames share the port.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from haproxy_check import escaping
from haproxy_check.render import clienttrust, isolation, listenercerts, tlscerts
from haproxy_check.render.helpers import Recorder
from haproxy_check.render.http import extauth
from haproxy_check.render.http.httpmodels import MAX_CRTS, FrontendModel, HttpModel
from haproxy_check.render.l4 import tlsroutes
from haproxy_check.traffic.facts import ListenerFacts
from validators import codes
from validators.findings import Finding, PathPart, Severity
from validators.objectrules import unhonoured
from validators.objects import Ref, as_map, dig
from validators.states import State
from validators.views.attachments import Listener

PLACEHOLDER_CERT = "RG0405"
PORT_CONFLICT = "RG0406"
CERT_VALIDITY = "RG0409"
SYNTHETIC = Ref("Gateway", "", "routegate-unattached")
SYNTHETIC_TOKEN = "unattached"  # noqa: S105 - a map key token, not a secret

Mark = Callable[[Ref, Sequence[PathPart]], str]


def synthetic_listener() -> Listener:
    return Listener(gateway=SYNTHETIC, source=SYNTHETIC, name="unattached", port=0, protocol="HTTP", hostname=None,
                    tls_mode=None, certificate_refs=(), allowed_kinds=("HTTPRoute", "GRPCRoute"), path=())


def check_settings(settings: Any) -> None:
    """Deployment settings of the frontends, checked when the Renderer is made (ValueError / Unsafe)."""
    isolation.check_range(settings.isolation_pod_port_base, settings.isolation_pod_port_span)
    extauth.check_settings(settings)
    escaping.check(settings.access_log, key=False, what="access_log")
    for server in settings.dns_nameservers:
        extauth.agent_address(server, "dns_nameservers entry")


def lookup(fronts: Mapping[tuple[str, str], FrontendModel], lst: Listener) -> FrontendModel | None:
    """The frontend serving a listener: its Gateway's own (isolated) one, else the port's."""
    return fronts.get((lst.protocol, isolated_key(lst.port, lst.gateway))) or fronts.get((lst.protocol, str(lst.port)))


def isolated_key(port: int, gateway: Ref) -> str:
    return f"{port}@{gateway.namespace}/{gateway.name}"


def build(state: State, listeners: Sequence[Listener], *, recorder: Recorder, model: HttpModel, mark: Mark,
          findings: list[Finding], settings: Any) -> dict[tuple[str, str], FrontendModel]:
    """Frontends keyed (protocol, port token); the synthetic one keyed ("HTTP", "0").

    Per-Gateway isolation (``isolation.assign``): the oldest Gateway with HTTP/HTTPS listeners on a port
    binds ``:<port>`` (key ``(protocol, "<port>")``); every other one gets a frontend on its own pod port
    (key ``(protocol, "<port>@<ns>/<gateway>")``, map token = the pod port), so its routes never match
    on another Gateway's address.
    """
    by_port: dict[int, list[Listener]] = {}
    for lst in listeners:
        if lst.protocol in ("HTTP", "HTTPS"):
            refused = isolation.unbound(lst, settings)
            if refused is not None:
                findings.append(refused)
                continue
            by_port.setdefault(lst.port, []).append(lst)
    # The addresses come from every Gateway of the state, also those a review's closure does not list.
    reserved = isolation.pod_range(settings) or ()
    whole = [x for x in (*listeners, *isolation.outside_listeners(state, (settings.http_port, settings.https_port)))
             if x.port not in reserved]
    pods = isolation.assign(state, whole, base=settings.isolation_pod_port_base,
                            span=settings.isolation_pod_port_span)
    out: dict[tuple[str, str], FrontendModel] = {}
    for port, group in sorted(by_port.items()):
        by_gateway: dict[Ref, list[Listener]] = {}
        for lst in group:
            by_gateway.setdefault(lst.gateway, []).append(lst)
        for gateway, own in sorted(by_gateway.items()):
            pod = pods.get((gateway, port))
            protocol = tlsroutes.http_engine_ports(own)[port]
            token, key = (str(pod), isolated_key(port, gateway)) if pod else (str(port), str(port))
            fe = FrontendModel(f"gw-{protocol.lower()}-{token}", token, protocol, f":{token}", pod or port,
                               mark(own[0].source, own[0].path))
            fe.gateway, fe.public_port = f"{gateway.namespace}/{gateway.name}", port
            fe.listener_facts = tuple(ListenerFacts(x.name, str(x.source), x.hostname, x.tls_mode) for x in own
                                      if x.protocol == protocol)
            _listeners(state, fe, own, protocol, recorder, findings)
            if protocol == "HTTPS":
                _tls_options(state, fe, own, findings)
                if not pod and settings.share_https_with_passthrough and tlsroutes.passthrough_on(state, port):
                    fe.bind = tlsroutes.https_share_socket(port, settings.internal_socket_prefix) + " accept-proxy"
                _client_trust(state, fe, gateway, port, recorder, findings, mark)
                _misdirected(fe, [x for x in own if x.protocol == "HTTPS"], model)
                if not fe.certs:
                    fe.certs.append(recorder.add_file(tlscerts.PLACEHOLDER_PATH, tlscerts.placeholder_pem(), "cert"))
                _crt_list(fe, recorder)
            out[(protocol, key)] = fe
    return out


def _listeners(state: State, fe: FrontendModel, own: Sequence[Listener], protocol: str, recorder: Recorder,
               findings: list[Finding]) -> None:
    for lst in own:
        if lst.protocol != protocol:
            findings.append(Finding(PORT_CONFLICT, f"listener {lst.name!r} is {lst.protocol} on port {lst.port}, "
                                    f"which other listeners use for {protocol}; it is not rendered",
                                    lst.path, Severity.WARN, subject=False, about=str(lst.source)))
            continue
        if protocol == "HTTPS":
            _certs(state, fe, lst, recorder, findings)


def _tls_options(state: State, fe: FrontendModel, own: Sequence[Listener], findings: list[Finding]) -> None:
    """``tls.options`` routegate knows (validators.objectrules.unhonoured.TLS_OPTIONS) become bind keywords,
    when every terminating HTTPS listener of the frontend asks for the same ones: one bind serves them all."""
    asked: dict[tuple[str, ...], list[Listener]] = {}
    for lst in own:
        if lst.protocol != "HTTPS" or lst.tls_mode == "Passthrough":
            continue
        source = state.get(lst.source.kind, lst.source.namespace, lst.source.name)
        raw = dig(source, *lst.path) if source is not None else None
        words = tuple(w for _, got in unhonoured.tls_options(as_map(raw)) if not isinstance(got, str) for w in got)
        asked.setdefault(words, []).append(lst)
    if len(asked) == 1:
        fe.tls_options = list(next(iter(asked)))
    elif len(asked) > 1:
        for listeners in asked.values():
            for lst in listeners:
                findings.append(Finding(
                    codes.TLS_OPTION, f"listener {lst.name!r} shares port {lst.port} with listeners asking for other "
                    f"tls.options ({len(asked)} different sets); none is applied on this port",
                    (*lst.path, "tls", "options"), Severity.WARN, subject=False, about=str(lst.source)))


def _client_trust(state: State, fe: FrontendModel, gateway: Ref, port: int, recorder: Recorder,
                  findings: list[Finding], mark: Mark) -> None:
    """Frontend mTLS (``spec.tls.frontend``): verify options on the bind (the line traced to the
    validation block), or no traffic at all."""
    trust = clienttrust.resolve(state, gateway, port, recorder)
    findings.extend(trust.findings)
    fe.client_verify = list(trust.bind_options())
    fe.reject_all = trust.reject_all
    if trust.validated:
        fe.trust_mark = mark(gateway, trust.path)


def _crt_list(fe: FrontendModel, recorder: Recorder) -> None:
    """Many certificates (64 certificateRefs per listener are valid) go to a crt-list file: two words per
    ``crt`` would pass HAProxy's 64 words per line. The first entry stays the default certificate."""
    if len(fe.certs) > MAX_CRTS:
        body = "".join(f"{path}\n" for path in fe.certs).encode()
        fe.crt_list = recorder.add_file(f"certs/{fe.name}.crt-list", body)
        fe.certs = []


def synthetic() -> FrontendModel:
    return FrontendModel("gw-http-unattached", SYNTHETIC_TOKEN, "HTTP", "abns@routegate-unattached", None)


def _certs(state: State, fe: FrontendModel, lst: Listener, recorder: Recorder, findings: list[Finding]) -> None:
    if lst.tls_mode == "Passthrough":
        return
    if not lst.certificate_refs:
        findings.append(Finding(PLACEHOLDER_CERT, f"HTTPS listener {lst.name!r} has no certificateRefs; a "
                                "placeholder certificate is used for the check", (*lst.path, "tls"), Severity.WARN,
                                subject=False, about=str(lst.source)))
    for k, secret in enumerate(lst.certificate_refs):
        got = listenercerts.certificate(state, lst.source, secret, recorder)
        path = got.path
        if not path:
            findings.append(Finding(PLACEHOLDER_CERT, f"{got.problem}; a placeholder certificate is used for the "
                                    "check", (*lst.path, "tls", "certificateRefs", k), Severity.WARN,
                                    subject=False, about=str(lst.source)))
            path = recorder.add_file(tlscerts.PLACEHOLDER_PATH, tlscerts.placeholder_pem(), "cert")
        if got.warning:
            findings.append(Finding(CERT_VALIDITY, f"{got.warning}; clients will reject it",
                                    (*lst.path, "tls", "certificateRefs", k), Severity.WARN,
                                    subject=False, about=str(lst.source)))
        if path not in fe.certs:
            fe.certs.append(path)


def _misdirected(fe: FrontendModel, group: Sequence[Listener], model: HttpModel) -> None:
    named = [x for x in group if x.hostname]
    if len({x.hostname for x in named}) < 2:
        return
    fe.misdirected = True
    for lst in named:
        try:
            lid = escaping.ident(f"{lst.gateway.namespace}_{lst.gateway.name}_{lst.name}")
            host = escaping.hostname(str(lst.hostname))
        except escaping.Unsafe:
            continue  # the Gateway's own check reports it
        if host.startswith("*."):
            model.add("https-listener-wildcard.map", f"{host[1:]}:{fe.token} {lid}", (-len(host), host), ordered=True)
        else:
            model.add("https-listener.map", f"{host}:{fe.token} {lid}")
