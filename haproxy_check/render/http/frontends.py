"""Gateway HTTP/HTTPS listeners -> one HAProxy frontend per listener port (seed 004).

All Gateways' HTTP/HTTPS listeners on one port share that port's frontend (a port can be bound once);
map keys carry the port so routes of different ports never meet. HTTPS frontends load each listener's
certificates (a placeholder + warning when a Secret is missing) and get the 421 Misdirected Request
check when several HTTPS listeners with distinct hostnames share the port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from haproxy_check import escaping
from haproxy_check.render import listenercerts, tlscerts
from haproxy_check.render.helpers import Recorder
from haproxy_check.render.http.httpmodels import MAX_CRTS, FrontendModel, HttpModel
from haproxy_check.render.l4 import l4contexts, tlsroutes
from validators.findings import Finding, PathPart, Severity
from validators.objects import Ref
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


def build(state: State, listeners: Sequence[Listener], *, recorder: Recorder, model: HttpModel, mark: Mark,
          findings: list[Finding], settings: Any = None) -> dict[tuple[str, str], FrontendModel]:
    """Frontends keyed (protocol, port token); the synthetic one keyed ("HTTP", "0")."""
    by_port: dict[int, list[Listener]] = {}
    for lst in listeners:
        if lst.protocol in ("HTTP", "HTTPS"):
            by_port.setdefault(lst.port, []).append(lst)
    engine = tlsroutes.http_engine_ports(listeners)  # the port's protocol, as the TLS frontends see it
    out: dict[tuple[str, str], FrontendModel] = {}
    for port, group in sorted(by_port.items()):
        protocol = engine[port]
        name = f"gw-{protocol.lower()}-{port}"
        fe = FrontendModel(name, str(port), protocol, f":{port}", port, mark(group[0].source, group[0].path))
        for lst in group:
            if lst.protocol != protocol:
                findings.append(Finding(PORT_CONFLICT, f"listener {lst.name!r} is {lst.protocol} on port {port}, "
                                        f"which other listeners use for {protocol}; it is not rendered",
                                        lst.path, Severity.WARN, subject=False, about=str(lst.source)))
                continue
            if protocol == "HTTPS":
                _certs(state, fe, lst, recorder, findings)
        if protocol == "HTTPS" and getattr(settings, "share_https_with_passthrough", False) \
                and tlsroutes.passthrough_on(state, port):
            fe.bind = l4contexts.HTTPS_SHARE_SOCKET.format(port=port) + " accept-proxy"
        if protocol == "HTTPS":
            _misdirected(fe, [x for x in group if x.protocol == "HTTPS"], model)
            if not fe.certs:
                fe.certs.append(recorder.add_file(tlscerts.PLACEHOLDER_PATH, tlscerts.placeholder_pem(), "cert"))
            _crt_list(fe, recorder)
        out[(protocol, str(port))] = fe
    return out


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
