"""What HAProxy cannot honour, at request time on the real binary (validators.objectrules.unhonoured): a rule
with a RequestMirror serves as it would without it (its backend answers, its other filters apply); a rule with
a HAProxyRoutePolicy answers 500; listener tls.options routegate knows are enforced in the TLS handshake."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from tests.render.conftest import fixture, tls_secret
from tests.render.test_live import get, running

pytestmark = pytest.mark.haproxy

GW = "gateway.networking.k8s.io/v1"


def backends() -> list[Any]:
    return [o for o in fixture("live-policies.yaml") if o["kind"] in ("Service", "EndpointSlice")]


def test_a_mirrored_rule_serves_without_the_mirror_and_a_route_policy_rule_answers_500(haproxy_path: str,
                                                                                         tmp_path: Path) -> None:
    gateway = {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "ns"},
               "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "protocol": "HTTP", "port": 1}]}}
    to_a = [{"name": "a", "port": 80}]
    route = {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "ns"},
             "spec": {"parentRefs": [{"name": "edge"}], "rules": [
                 {"matches": [{"path": {"type": "PathPrefix", "value": "/served"}}], "backendRefs": to_a},
                 {"matches": [{"path": {"type": "PathPrefix", "value": "/mirrored"}}], "backendRefs": to_a,
                  "filters": [{"type": "RequestMirror",
                               "requestMirror": {"backendRef": {"name": "b", "port": 80}}},
                              {"type": "RequestHeaderModifier",
                               "requestHeaderModifier": {"set": [{"name": "X-Kept", "value": "yes"}]}}]},
                 {"matches": [{"path": {"type": "PathPrefix", "value": "/policy"}}], "backendRefs": to_a,
                  "filters": [{"type": "ExtensionRef", "extensionRef": {
                      "group": "haproxy.org", "kind": "HAProxyRoutePolicy", "name": "limits"}}]}]}}
    with running(haproxy_path, [gateway, route, *backends()], tmp_path) as port:
        status, _, data = get(port, "/served/x")
        assert (status, data["server"]) == (200, "A")
        status, _, data = get(port, "/mirrored/x")
        assert (status, data["server"], data["path"]) == (200, "A", "/mirrored/x")  # served, not dropped
        assert data["headers"].get("x-kept") == "yes"  # the rule's other filter still applies
        assert get(port, "/policy/x")[0] == 500


def handshake(port: int, version: ssl.TLSVersion) -> bool:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = version
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="one.example.com"):
            return True
    except (ssl.SSLError, ConnectionError):
        return False


def test_tls_options_are_enforced_in_the_handshake(haproxy_path: str, tmp_path: Path) -> None:
    gateway = {"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "tls", "namespace": "ns"},
               "spec": {"gatewayClassName": "c", "listeners": [
                   {"name": "one", "protocol": "HTTPS", "port": 1, "hostname": "one.example.com",
                    "tls": {"certificateRefs": [{"name": "cert"}],
                            "options": {"routegate.io/ssl-min-ver": "TLSv1.3"}}}]}}
    route = {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": "r", "namespace": "ns"},
             "spec": {"parentRefs": [{"name": "tls"}], "rules": [{"backendRefs": [{"name": "a", "port": 80}]}]}}
    objs = [gateway, route, tls_secret("cert", "ns", "one.example.com"), *backends()]
    with running(haproxy_path, objs, tmp_path) as port:
        assert handshake(port, ssl.TLSVersion.TLSv1_3)
        assert not handshake(port, ssl.TLSVersion.TLSv1_2)  # refused by ssl-min-ver TLSv1.3
