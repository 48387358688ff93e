"""Gateway API status of every kind seed 004 reports on, through ``routegate check -o json`` (and the
``statuses.json`` of ``routegate render``): Gateway and ListenerSet listeners (Accepted, Programmed,
ResolvedRefs, Conflicted, supportedKinds, attachedRoutes) and BackendTLSPolicy (Accepted, ResolvedRefs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.attachments.gwbuilders import gateway, listener, listener_set, parent, route
from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy

NS = "default"
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": NS},
           "spec": {"ports": [{"port": 80}, {"port": 443, "name": "https"}]}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "half", "namespace": NS},
          "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}}


def _policy(name: str, validation: dict[str, Any], target: str = "") -> dict[str, Any]:
    target = target or f"svc-{name}"  # a Service each: policies sharing one conflict (the oldest governs it)
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": target}], "validation": validation}}


EDGE = gateway("edge",
               listener("http", 80),
               listener("https", 443, "HTTPS", hostname="*.example.com", certs=[{"name": "missing-tls"}]),
               listener("half", 443, "HTTPS", hostname="half.example.com", certs=[{"name": "half"}]),
               listener("foreign", 443, "HTTPS", hostname="x.example.com",
                        certs=[{"name": "t", "namespace": "other"}]),
               listener("dns", 53, "UDP"),
               listener("kinds", 8080, kinds=["TCPRoute"]),
               allowed_listeners="Same")
EXTRA = listener_set("extra", "edge", listener("dup", 80), listener("own", 80, hostname="a.example.com"))
LONELY = listener_set("lonely", "nowhere", listener("x", 80))
ROUTES = [route("HTTPRoute", "r1", parent("edge", sectionName="http")),
          route("HTTPRoute", "r2", parent("edge")),
          route("HTTPRoute", "r3", parent("extra", kind="ListenerSet"), hosts=["a.example.com"])]
POLICY_SERVICES = [{**SERVICE, "metadata": {"name": f"svc-{name}", "namespace": NS}}
                   for name in ("no-ca", "wrong-kind", "system", "two-sans")]
POLICIES = [_policy("no-ca", {"hostname": "svc.example.com",
                              "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "nope"}]}),
            _policy("wrong-kind", {"hostname": "svc.example.com",
                                   "caCertificateRefs": [{"group": "apps", "kind": "Deployment", "name": "x"}]}),
            _policy("system", {"hostname": "svc.example.com", "wellKnownCACertificates": "System"}),
            _policy("orphan", {"hostname": "svc.example.com", "wellKnownCACertificates": "System"}, target="gone"),
            _policy("two-sans", {"hostname": "svc.example.com", "wellKnownCACertificates": "System",
                                 "subjectAltNames": [{"type": "Hostname", "hostname": "other.example.com"}]})]


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], subjects: list[dict[str, Any]]) -> dict[str, Any]:
    everything = [SERVICE, SECRET, EDGE, EXTRA, LONELY, *ROUTES, *POLICIES, *POLICY_SERVICES]
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all(everything))
    (tmp_path / "subjects.yaml").write_text(yaml.safe_dump_all(subjects))
    main(["check", "--state", str(tmp_path / "state.yaml"), "-f", str(tmp_path / "subjects.yaml"), "-o", "json"])
    results = json.loads(capsys.readouterr().out)["results"]
    return {f"{r['kind']} {r['name']}": r for r in results}


def _conditions(entry: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}


def test_gateway_status_per_listener(tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    status = _run(tmp_path, capsys, [EDGE])["Gateway edge"]["status"]
    assert _conditions(status) == {"Accepted": ("True", "ListenersNotValid"), "Programmed": ("True", "Programmed")}
    listeners = {x["name"]: x for x in status["listeners"]}
    assert list(listeners) == ["http", "https", "half", "foreign", "dns", "kinds"]
    http = listeners["http"]
    assert _conditions(http) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
                                 "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}
    assert http["supportedKinds"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
                                      {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"}]
    assert http["attachedRoutes"] == 2  # r1 by sectionName, r2 by the Gateway; r3 is the ListenerSet's
    assert _conditions(listeners["https"])["ResolvedRefs"] == ("False", "InvalidCertificateRef")
    assert "Secret default/missing-tls does not exist" in listeners["https"]["conditions"][2]["message"]
    assert "has no tls.key" in listeners["half"]["conditions"][2]["message"]
    assert _conditions(listeners["foreign"])["ResolvedRefs"] == ("False", "RefNotPermitted")
    assert _conditions(listeners["dns"])["Accepted"] == ("False", "UnsupportedProtocol")
    assert _conditions(listeners["dns"])["Programmed"][0] == "False" and listeners["dns"]["attachedRoutes"] == 0
    assert _conditions(listeners["kinds"])["ResolvedRefs"] == ("False", "InvalidRouteKinds")
    assert listeners["kinds"]["supportedKinds"] == []


def test_listener_set_clash_with_the_parent_is_conflicted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          haproxy_path: str) -> None:
    found = _run(tmp_path, capsys, [EXTRA, LONELY])
    extra = found["ListenerSet extra"]["status"]
    assert _conditions(extra) == {"Accepted": ("True", "ListenersNotValid"), "Programmed": ("True", "Programmed")}
    listeners = {x["name"]: x for x in extra["listeners"]}
    assert _conditions(listeners["dup"])["Conflicted"] == ("True", "HostnameConflict")
    assert "listener 'http' of Gateway default/edge" in listeners["dup"]["conditions"][3]["message"]
    assert _conditions(listeners["dup"])["Programmed"][0] == "False"
    assert _conditions(listeners["own"])["Conflicted"] == ("False", "NoConflicts")
    assert listeners["own"]["attachedRoutes"] == 1
    lonely = found["ListenerSet lonely"]["status"]
    assert _conditions(lonely)["Accepted"] == ("False", "ParentNotAccepted") and lonely["listeners"] == []


def test_backend_tls_policy_status(tmp_path: Path, capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    found = _run(tmp_path, capsys, POLICIES)
    got = {name.split(" ", 1)[1]: _conditions(r["status"]) for name, r in found.items()}
    assert got["no-ca"] == {"Accepted": ("False", "NoValidCACertificate"),
                            "ResolvedRefs": ("False", "InvalidCACertificateRef")}
    assert got["wrong-kind"]["ResolvedRefs"] == ("False", "InvalidKind")
    assert got["system"] == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    assert got["orphan"]["Accepted"] == ("False", "TargetNotFound")
    assert got["two-sans"]["Accepted"] == ("False", "Invalid")


def test_render_writes_every_kind_s_status(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           haproxy_path: str) -> None:
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all([SERVICE, SECRET, EDGE, EXTRA, *ROUTES, *POLICIES]))
    assert main(["render", "--state", str(tmp_path / "state.yaml"), "-O", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    written = json.loads((tmp_path / "out" / "statuses.json").read_text())
    assert {"Gateway default/edge", "ListenerSet default/extra", "BackendTLSPolicy default/system",
            "HTTPRoute default/r1"} <= set(written)


def test_a_listener_set_clash_is_an_admission_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      haproxy_path: str) -> None:
    extra = _run(tmp_path, capsys, [EXTRA])["ListenerSet extra"]
    warned = [(f["code"], f["path"]) for f in extra["findings"] if f["code"] == "RG0524"]
    assert warned == [("RG0524", "spec.listeners[0].port")], extra["findings"]
    assert "already listener 'http' of Gateway default/edge" in extra["warnings"][0]
