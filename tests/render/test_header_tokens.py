"""Every header name HTTP allows (RFC 9110 ``tchar``, the CRDs' own pattern) and every gRPC service and
method name the GRPCRoute CRD allows render into a configuration both haproxy versions accept, and do at
request time what the route says: ``#`` (a comment to the config parser), ``'`` (a quote), ``%``, ``|``
(the map-key separator) and backtick are quoted or encoded, never refused (issue 27, no false denials)."""

from __future__ import annotations

import copy
import http.client
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.render.conftest import Check, assert_valid, fixture, map_lines, render
from tests.render.test_live import running
from validators.objects import Ref
from webhook.gate import assembly

pytestmark = pytest.mark.haproxy

WEIRD = "X#a|b'c`d%e"  # every token character HAProxy's parsers give a meaning


def _crd(name: str) -> dict[str, Any]:
    """The Gateway API CRD routegate bundles (v1.6.1, the API server's own schema and CEL rules)."""
    return next(d for d in assembly.bundled_crd_documents() if d["metadata"]["name"] == name)


def _schema_patterns(crd_name: str) -> set[str]:
    """Every ``pattern`` in the CRD (the header/query name one is among them)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(_crd(crd_name))
    return found


def _header_name_pattern() -> str:
    """The HTTPRoute CRD's pattern for header and query parameter names, as the CRD spells it."""
    [pattern] = [p for p in _schema_patterns("httproutes.gateway.networking.k8s.io") if "!#$%&'" in p]
    return pattern


def _grpc_patterns() -> dict[str, str]:
    """The GRPCRoute CRD's CEL patterns for an Exact method match's service and method."""
    text = json.dumps(_crd("grpcroutes.gateway.networking.k8s.io"))
    found = {m.group(1): json.loads(f'"{m.group(2)}"')
             for m in re.finditer(r'self\.(service|method)\.matches\(r\\"\\"\\"(.*?)\\"\\"\\"\)', text)}
    assert set(found) == {"service", "method"}, found
    # RE2 takes (?i) anywhere, Python's re only at the very start: the same language either way
    return {part: ("(?i)" + p.replace("(?i)", "")) if "(?i)" in p else p for part, p in found.items()}


HEADER_NAMES = st.from_regex(_header_name_pattern(), fullmatch=True).filter(lambda s: len(s) <= 64)
GRPC = _grpc_patterns()


def _live_objects() -> list[Any]:
    """live.yaml's Gateway, Services and EndpointSlices, and one route that uses ``names``."""
    return [o for o in fixture("live.yaml") if o["kind"] != "HTTPRoute"]


def _route(names: list[str]) -> dict[str, Any]:
    first, rest = names[0], names[1:] or names[:1]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["app.example.com"], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/m"},
                          "headers": [{"name": n, "value": "yes"} for n in dict.fromkeys(names)][:16]}],
             "backendRefs": [{"name": "b", "port": 80}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/m"}}],
             "filters": [
                 {"type": "RequestHeaderModifier", "requestHeaderModifier": {
                     "set": [{"name": n, "value": f"set {k}"} for k, n in enumerate(dict.fromkeys(rest))],
                     "remove": [first]}},
                 {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                     "add": [{"name": n, "value": "r"} for n in dict.fromkeys(names)]}}],
             "backendRefs": [{"name": "a", "port": 80}]},
        ]},
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(HEADER_NAMES, min_size=1, max_size=6))
def test_every_name_the_crd_accepts_renders_and_passes_haproxy(haproxy_check: Check, names: list[str]) -> None:
    result = render([*_live_objects(), _route(names)], subject=Ref("HTTPRoute", "ns", "r"))
    assert [f for f in result.findings if f.severity == "deny"] == []
    assert_valid(haproxy_check(result))


def test_header_names_with_every_parser_character_work_at_request_time(haproxy_path: str, tmp_path: Path) -> None:
    """Real traffic: a match on such a header routes, set/remove/add apply to the right header."""
    other = "q'|`x"
    objs = copy.deepcopy([*_live_objects(), _route([WEIRD, other])])
    objs[-1]["spec"]["rules"][0]["matches"][0]["queryParams"] = [{"name": "p|'`", "value": "1"}]
    with running(haproxy_path, objs, tmp_path) as port:
        def get(path: str, headers: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path, headers={"Host": "app.example.com", **headers})
            resp = conn.getresponse()
            body = json.loads(resp.read())
            conn.close()
            return body, {k.lower(): v for k, v in resp.getheaders()}

        body, _ = get("/m?p|'`=1", {WEIRD: "yes", other: "yes"})
        assert body["server"] == "B"  # the match on both names and the query parameter
        body, _ = get("/m?p|'`=2", {WEIRD: "yes", other: "yes"})
        assert body["server"] == "A"  # the query parameter differs
        body, resp = get("/m", {WEIRD: "gone", other: "old"})
        assert body["server"] == "A"
        assert WEIRD.lower() not in body["headers"]  # removed
        assert body["headers"][other.lower()] == "set 0"  # set (replaced)
        assert resp[WEIRD.lower()] == "r" and resp[other.lower()] == "r"  # response add


def test_the_map_key_of_a_name_is_its_own(haproxy_path: str) -> None:
    """Two names that differ only where one is encoded never share a map key."""
    result = render([*_live_objects(), _route(["a=23", "a#", "a|b"])], subject=Ref("HTTPRoute", "ns", "r"))
    keys = [line.split(" ", 1)[0] for line in map_lines(result, "gw-reqhdr.map")]
    assert len(keys) == len(set(keys)), keys


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(service=st.from_regex(GRPC["service"], fullmatch=True).filter(lambda s: len(s) <= 200),
       method=st.from_regex(GRPC["method"], fullmatch=True).filter(lambda s: len(s) <= 100))
def test_every_grpc_method_match_the_crd_accepts_renders(haproxy_check: Check, service: str, method: str) -> None:
    grpc = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "g", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "edge"}], "rules": [
                {"matches": [{"method": {"service": service, "method": method}}],
                 "backendRefs": [{"name": "a", "port": 80}]},
                {"matches": [{"method": {"service": service}}], "backendRefs": [{"name": "a", "port": 80}]},
                {"matches": [{"method": {"method": method}}], "backendRefs": [{"name": "b", "port": 80}]}]}}
    result = render([*_live_objects(), grpc], subject=Ref("GRPCRoute", "ns", "g"))
    assert [f for f in result.findings if f.severity == "deny"] == []
    assert_valid(haproxy_check(result))


def test_a_dot_led_grpc_service_routes_at_request_time(haproxy_path: str, tmp_path: Path) -> None:
    grpc = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "g", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["app.example.com"], "rules": [
                {"matches": [{"method": {"service": "._pkg.Svc_1", "method": "_Get"}}],
                 "backendRefs": [{"name": "b", "port": 80}]}]}}
    with running(haproxy_path, [*_live_objects(), grpc], tmp_path) as port:
        def status(path: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("POST", path, body=b"", headers={"Host": "app.example.com",
                                                          "Content-Type": "application/grpc"})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            return resp.status

        # Matched: sent to the gRPC backend (an HTTP/1 echo server cannot answer it, hence no 200); any
        # other service or method: no route at all.
        assert status("/._pkg.Svc_1/_Get") != 404
        assert status("/_pkg.Svc_1/_Get") == 404
        assert status("/._pkg.Svc_1/Get") == 404
