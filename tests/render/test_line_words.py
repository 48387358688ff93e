"""Objects at the CRDs' maximums render lines HAProxy accepts: never more than 64 words on a line
("too many words, truncating after word 64" is an error). A match with 16 hostnames, a method, 16
headers and 16 query params, and a CORS filter with 64 allowOrigins are valid Gateway API objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from haproxy_check import escaping
from tests.render.conftest import Check, assert_valid, fixture, render, tls_secret
from tests.render.test_injection import words
from tests.render.test_live import get, running

GW = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "edge", "namespace": "ns"},
      "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}
SVC = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"},
       "spec": {"ports": [{"name": "http", "port": 80}]}}


def maximal_route(*, regex: bool) -> dict[str, Any]:
    kind = "RegularExpression" if regex else "Exact"
    match = {"path": {"type": "PathPrefix", "value": "/api"}, "method": "GET",
             "headers": [{"type": kind, "name": f"X-H{i}", "value": f"v {i}" if not regex else f"v{i}.*"}
                         for i in range(16)],
             "queryParams": [{"type": kind, "name": f"q{i}", "value": f"w{i}"} for i in range(16)]}
    origins = [f"https://app{i}.example.com" for i in range(32)] + [f"https://*.t{i}.example.com" for i in range(32)]
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "big", "namespace": "ns"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"h{i}.example.com" for i in range(16)],
                     "rules": [{"matches": [match, {**match, "method": "POST"}],
                                "filters": [{"type": "CORS", "cors": {"allowOrigins": origins,
                                                                      "allowMethods": ["GET", "POST"]}}],
                                "backendRefs": [{"name": "svc", "port": 80}]}]}}


@pytest.mark.parametrize("regex", [False, True])
def test_crd_maximums_render_lines_haproxy_accepts(regex: bool, haproxy_check: Check) -> None:
    result = render([GW, SVC, maximal_route(regex=regex)])
    assert not [f for f in result.findings if f.severity == "deny"], result.findings
    longest = max(len(words(line)) for line in result.config.splitlines())
    assert longest <= 64, longest
    assert_valid(haproxy_check(result))  # both binaries (2.8 and 3.2)


def test_short_lines_keep_the_one_line_form() -> None:
    route = maximal_route(regex=False)
    route["spec"]["hostnames"] = ["a.example.com"]
    route["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/x"},
                                             "headers": [{"name": "X-A", "value": "b"}]}]
    config = render([GW, SVC, route]).config
    assert "acl gwa_" not in config and "{ req.hdr(X-A) -m str -- 'b' }" in config


def test_quoted_spaces_are_one_word_and_keep_the_one_line_form(haproxy_check: Check) -> None:
    """A header value with 100 spaces is one quoted word to HAProxy: counting it as 100 words split a
    short rule into named ACLs (a different config shape for a value that changes nothing)."""
    route = maximal_route(regex=True)
    route["spec"]["hostnames"] = ["a.example.com"]
    route["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "/x"},
                                             "headers": [{"type": "RegularExpression", "name": "X-A",
                                                          "value": "x " * 100}]}]
    result = render([GW, SVC, route])
    assert "acl gwa_" not in result.config
    assert max(len(words(line)) for line in result.config.splitlines()) <= 64
    assert_valid(haproxy_check(result))


@pytest.mark.parametrize(("text", "count"), [
    ("a b", 2), ("req.hdr(X) -m reg -- 'x x x'", 5), ("a\\ b", 1), ("'it'\\''s'", 1), ("a # b c", 1),
    ('"a b" c', 2), ("", 0), ("  a \t b  ", 2),
])
def test_word_count_tokenizes_like_haproxy(text: str, count: int) -> None:
    assert escaping.word_count(text) == count == len(words(text))


def test_the_split_form_routes_like_the_one_line_form(haproxy_path: str, tmp_path: Path) -> None:
    """Live: every header and query param is still required (AND) and any of the 16 hostnames selects."""
    objs = [o for o in fixture("live.yaml") if o["kind"] != "HTTPRoute"]
    route = maximal_route(regex=False)
    route["spec"]["rules"][0]["backendRefs"] = [{"name": "a", "port": 80}]
    route["spec"]["rules"][0]["filters"] = []
    route["spec"]["parentRefs"] = [{"name": "edge"}]
    objs.append(route)
    headers = {f"X-H{i}": f"v {i}" for i in range(16)}
    query = "&".join(f"q{i}=w{i}" for i in range(16))
    with running(haproxy_path, objs, tmp_path) as port:
        assert "acl gwa_" in (tmp_path / "haproxy.cfg").read_text()
        for host in ("h0.example.com", "h15.example.com"):
            status, _, body = get(port, f"/api/x?{query}", host=host, headers=headers)
            assert (status, body.get("server")) == (200, "A")
        assert get(port, f"/api/x?{query}", host="h3.example.com", headers={**headers, "X-H7": "no"})[0] == 404
        assert get(port, f"/api/x?{query.replace('q9=w9', 'q9=no')}", host="h3.example.com", headers=headers)[0] == 404
        assert get(port, f"/api/x?{query}", host="other.example.com", headers=headers)[0] == 404


def test_many_listener_certificates_stay_within_64_words(haproxy_check: Check) -> None:
    """64 certificateRefs on one HTTPS listener (the CRD maximum): the bind line cannot list 64 `crt`s."""
    secrets = [tls_secret(f"c{i}", "ns", f"h{i}.example.com") for i in range(64)]
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "edge", "namespace": "ns"},
               "spec": {"gatewayClassName": "c", "listeners": [{
                   "name": "https", "protocol": "HTTPS", "port": 443,
                   "tls": {"mode": "Terminate", "certificateRefs": [{"name": f"c{i}"} for i in range(64)]}}]}}
    result = render([gateway, SVC, *secrets])
    assert max(len(words(line)) for line in result.config.splitlines()) <= 64
    bind = next(line for line in result.config.splitlines() if line.strip().startswith("bind "))
    assert "crt-list" in bind or bind.count(" crt ") == 64
    assert_valid(haproxy_check(result))


def test_many_certificates_on_a_terminating_tls_listener(haproxy_check: Check) -> None:
    secrets = [tls_secret(f"c{i}", "ns", f"h{i}.example.com") for i in range(64)]
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "edge", "namespace": "ns"},
               "spec": {"gatewayClassName": "c", "listeners": [{
                   "name": "term", "protocol": "TLS", "port": 7443,
                   "tls": {"mode": "Terminate", "certificateRefs": [{"name": f"c{i}"} for i in range(64)]}}]}}
    result = render([gateway, SVC, *secrets])
    assert max(len(words(line)) for line in result.config.splitlines()) <= 64
    assert any("crt-list" in line for line in result.config.splitlines() if line.strip().startswith("bind "))
    assert_valid(haproxy_check(result))
