"""Every template feature given a value HAProxy cannot take: the verdict names the field at fault.

Each case puts one deliberately unsupported value into an otherwise valid object and runs it through
``routegate check`` on every haproxy binary found (2.8 and 3.x). A denial (or a warning about something
dropped) must carry the field path of the value; a raw ``haproxy -c`` alert without a field (RG0800 with
no path) is what a user cannot act on, so it fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy

NS = "shop"
GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": NS},
           "spec": {"gatewayClassName": "haproxy", "listeners": [
               {"name": "http", "port": 80, "protocol": "HTTP"},
               {"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "*.example.com",
                "tls": {"certificateRefs": [{"name": "edge-tls"}]}}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
           "spec": {"ports": [{"port": 80}]}}


def _route(rule: dict[str, Any], kind: str = "HTTPRoute") -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind, "metadata": {"name": "api", "namespace": NS},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["api.example.com"],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}], **rule}]}}


# (feature, object, the field the finding must name, the severity expected there)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("retry code 2.8 refuses", _route({"retry": {"codes": [503, 429]}}), "spec.rules[0].retry.codes[1]", "warn"),
    ("path regex lookbehind", _route({"matches": [{"path": {"type": "RegularExpression", "value": "/(?<=a+)b"}}]}),
     "spec.rules[0].matches[0].path.value", "deny"),
    ("header regex unclosed", _route({"matches": [{"headers": [{"type": "RegularExpression", "name": "x-a",
                                                                "value": "(["}]}]}),
     "spec.rules[0].matches[0].headers[0].value", "deny"),
    ("query regex named group", _route({"matches": [{"queryParams": [{"type": "RegularExpression", "name": "q",
                                                                      "value": "(?P<n>a)"}]}]}),
     "spec.rules[0].matches[0].queryParams[0].value", "deny"),
    ("session cookie name", _route({"sessionPersistence": {"sessionName": "a b"}}),
     "spec.rules[0].sessionPersistence.sessionName", "deny"),
    ("retry backoff", _route({"retry": {"attempts": 1, "backoff": "1s"}}), "spec.rules[0].retry.backoff", "warn"),
    ("request timeout", _route({"timeouts": {"request": "10s"}}), "spec.rules[0].timeouts.request", "warn"),
    ("redirect status", _route({"backendRefs": [], "filters": [
        {"type": "RequestRedirect", "requestRedirect": {"statusCode": 305}}]}),
     "spec.rules[0].filters[0].requestRedirect.statusCode", "deny"),
    ("grpc method regex", {**_route({"matches": [{"method": {"type": "RegularExpression", "service": "a\\1b"}}]},
                                    kind="GRPCRoute")},
     "spec.rules[0].matches[0].method.service", "deny"),
    ("listener certificate", {**GATEWAY}, "spec.listeners[1].tls.certificateRefs[0]", "warn"),
]


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], binary: str, obj: dict[str, Any]) -> dict[str, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all([GATEWAY, SERVICE]))
    (tmp_path / "obj.yaml").write_text(yaml.safe_dump(obj))
    main(["check", "--haproxy", binary, "--state", str(tmp_path / "state.yaml"), "-f", str(tmp_path / "obj.yaml"),
          "-o", "json", "--dataplane-version", "2.8"])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)["results"][0]
    return result


@pytest.mark.parametrize(("feature", "obj", "field", "severity"), CASES, ids=[c[0] for c in CASES])
def test_an_unsupported_value_is_reported_on_its_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_paths: list[str],
        feature: str, obj: dict[str, Any], field: str, severity: str) -> None:
    for n, binary in enumerate(haproxy_paths):
        result = _check(tmp_path / str(n), capsys, binary, obj)
        at = [f for f in result["findings"] if f["path"] == field]
        assert [f["severity"] for f in at][:1] == [severity], (binary, result["findings"])
        unplaced = [f for f in result["findings"] if f["severity"] == "deny" and not f["path"]]
        assert unplaced == [], (binary, unplaced)
        assert result["decision"] == ("deny" if severity == "deny" else "allow"), (binary, result)


def test_a_backend_request_timeout_above_haproxy_s_longest_is_cut_to_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    """99999h passes the CRD pattern; its 359996400000 ms went into gw-timeouts.map unchanged, a number
    HAProxy cannot count (the longest timeout is 2147483647 ms). Now it is cut to that, with RG0122."""
    route = _route({"timeouts": {"backendRequest": "99999h"}})
    result = _check(tmp_path, capsys, haproxy_path, route)
    assert result["decision"] == "allow", result
    (warned,) = [f for f in result["findings"] if f["code"] == "RG0122"]
    assert warned["path"] == "spec.rules[0].timeouts.backendRequest" and '"99999h"' in warned["message"]
    assert main(["render", "--state", str(tmp_path / "state.yaml"), "-f", str(tmp_path / "obj.yaml"),
                 "-O", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert (tmp_path / "out" / "maps" / "gw-timeouts.map").read_text().split() == ["shop_api_0", "2147483647"]
