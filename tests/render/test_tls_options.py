"""Listener tls.options (GEP-2907): the keys routegate knows become bind keywords HAProxy takes (checked with
the real haproxy -c), listeners sharing a bind that disagree get none and are told; nothing is silently
dropped (the validators report unknown keys: tests/validators/test_unhonoured.py)."""

from __future__ import annotations

from typing import Any

from tests.render.conftest import Check, assert_valid, lines, render, tls_secret

OPTIONS = {"routegate.io/ssl-min-ver": "TLSv1.2", "routegate.io/ssl-max-ver": "TLSv1.3",
           "routegate.io/ciphers": "ECDHE+AESGCM:!aNULL", "routegate.io/ciphersuites": "TLS_AES_128_GCM_SHA256",
           "example.com/unknown": "x"}


def gateway(*options: dict[str, str]) -> dict[str, Any]:
    listeners = [{"name": f"l{i}", "protocol": "HTTPS", "port": 443, "hostname": f"h{i}.example.com",
                  "tls": {"mode": "Terminate", "certificateRefs": [{"name": "cert"}], "options": opts}}
                 for i, opts in enumerate(options)]
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "infra"}, "spec": {"gatewayClassName": "c", "listeners": listeners}}


def bind(result: Any) -> str:
    return next(line for line in lines(result) if line.startswith("bind :443"))


def test_known_options_are_bind_keywords_haproxy_accepts(haproxy_check: Check) -> None:
    result = render([gateway(OPTIONS, OPTIONS), tls_secret("cert", "infra", "h0.example.com")])
    assert bind(result).endswith("alpn h2,http/1.1 ciphers ECDHE+AESGCM:!aNULL ciphersuites TLS_AES_128_GCM_SHA256 "
                                 "ssl-max-ver TLSv1.3 ssl-min-ver TLSv1.2")
    assert "unknown" not in result.config
    assert_valid(haproxy_check(result))


def test_listeners_sharing_a_bind_that_disagree_get_none_and_are_told() -> None:
    result = render([gateway(OPTIONS, {}), tls_secret("cert", "infra", "h0.example.com")])
    assert bind(result).endswith("alpn h2,http/1.1")
    told = sorted(f.field for f in result.findings if f.code == "RG0125")
    assert told == ["spec.listeners[0].tls.options", "spec.listeners[1].tls.options"]
