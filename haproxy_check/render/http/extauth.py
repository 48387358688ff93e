"""ExternalAuth through the SPOA hub: the SPOE engine, its generated config file and the agent backend.

The HTTP frontends' ``http-frontend/400-external-auth`` snippet sets ``txn.gw_auth_url`` and
``txn.gw_auth_hdrs`` per rule, then sends the ``check`` SPOE group; the hub's external-auth plugin asks
the authorization service and sets ``txn.extauth.allowed`` (and ``txn.extauth.hdr_<name>`` for the copied
response headers) through the engine's ``var-prefix``. Everything here is static per deployment
(``RenderSettings.external_auth_agent`` / ``external_auth_timeout``): only the first route with an
ExternalAuth filter adds it, which reloads once (seed 004).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from haproxy_check import escaping
from haproxy_check.render.servertls import FileSink

ENGINE = "extauth"
GROUP = "check"
SPOE_PATH = "spoe/extauth.conf"
AGENT_BACKEND = "routegate_spoa_hub"


def agent_address(value: str, what: str = "external_auth_agent") -> tuple[str, int]:
    """``host:port`` of the hub's SPOP listener (an IP literal: no DNS lookup at check or start)."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        number = 0
    if not isinstance(value, str) or not sep or not 1 <= number <= 65535:
        raise ValueError(f"{what} {value!r}: use <IP>:<port>, e.g. 127.0.0.1:12345")
    return host, number


def check_settings(settings: Any) -> None:
    """Setting errors surface when the Renderer is made, not in a render."""
    agent_address(settings.external_auth_agent)
    escaping.check(settings.external_auth_timeout, key=True, what="external_auth_timeout")


def spoe_config(settings: Any) -> bytes:
    timeout = settings.external_auth_timeout
    return (f"[{ENGINE}]\n"
            f"spoe-agent {ENGINE}-agent\n"
            f"    groups {GROUP}\n"
            f"    option var-prefix {ENGINE}\n"
            "    option set-on-error error\n"
            "    timeout hello 2s\n"
            "    timeout idle 2m\n"
            f"    timeout processing {timeout}\n"
            f"    use-backend {AGENT_BACKEND}\n"
            "\n"
            f"spoe-group {GROUP}\n"
            "    messages check-request\n"
            "\n"
            "spoe-message check-request\n"
            "    args method=method path=path url=var(txn.gw_auth_url) headers=var(txn.gw_auth_hdrs) "
            "host=req.hdr(host) authorization=req.hdr(authorization)\n").encode()


@dataclass(frozen=True, slots=True)
class ExtAuthWiring:
    """Template view: ``spoe_file()`` writes the SPOE config (once per render) and returns its path."""
    settings: Any
    files: FileSink
    engine: str = ENGINE
    group: str = GROUP
    backend: str = AGENT_BACKEND

    def spoe_file(self) -> str:
        return self.files.add_file(SPOE_PATH, spoe_config(self.settings))

    def server(self) -> dict[str, Any]:
        host, port = agent_address(self.settings.external_auth_agent)
        return {"name": "hub", "address": host, "port": port}
