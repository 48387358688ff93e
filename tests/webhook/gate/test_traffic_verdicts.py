"""The traffic diff in the verdict (webhook.gate.trafficdiffs): the admission warning naming the other
owners whose requests a change moves, "could not decide" when the diff runs out of budget on an entry
point shared with another owner, and the plan in ``routegate check`` (text by default when other owners
are affected, every plan with --traffic, and a ``traffic`` section in -o json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.results import HAProxyBinary
from tests.webhook.clirun import in_process
from validators.changes import Change, Operation
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Decision

pytestmark = pytest.mark.haproxy


def gateway(name: str, ns: str, port: int = 80) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"gatewayClassName": "haproxy", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": port, "allowedRoutes": {"namespaces": {"from": "All"}}}]}}


def service(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": "http", "port": 80}]}}


def route(name: str, ns: str, hosts: list[str], path: str, svc: str, parent: tuple[str, str] = ("edge", "infra"),
          ) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-02T00:00:00Z"},
            "spec": {"parentRefs": [{"name": parent[0], "namespace": parent[1]}], "hostnames": hosts,
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}],
                                "backendRefs": [{"name": svc, "port": 80}]}]}}


SHOP = route("shop", "team-a", ["*.shop.example"], "/", "shop")
PAY = route("pay", "team-b", ["pay.shop.example"], "/api", "pay")
BASE = [gateway("edge", "infra"), service("shop", "team-a"), service("pay", "team-b"), SHOP]


@pytest.fixture
def gate(binary: HAProxyBinary) -> Gate:
    return assembly.build_gate(binary, assembly.GateSettings())


async def test_a_route_that_takes_another_owners_requests_is_allowed_with_a_warning_naming_them(gate: Gate) -> None:
    verdict = await gate.review(Change(Operation.CREATE, PAY), state=MemoryState(BASE, version="t1"))
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert verdict.traffic is not None and verdict.traffic.affected("team-b") == ["team-a"]
    notes = [n for n in verdict.notes if n.startswith("traffic:")]
    assert notes == [
        "traffic: moves 3 request classes of other owners (team-a)",
        "traffic: HTTP :80 pay.shop.example /* -> gw_h_team-a_shop_shop_80 (team-a) => no route",
        "traffic: HTTP :80 pay.shop.example /api (prefix) -> gw_h_team-a_shop_shop_80 (team-a) => "
        "gw_h_team-b_pay_pay_80 (team-b)",
        "traffic: HTTP :80 pay.shop.example /api/* -> gw_h_team-a_shop_shop_80 (team-a) => "
        "gw_h_team-b_pay_pay_80 (team-b)"]
    assert all(n in verdict.warnings and len(n) <= 256 for n in notes)


async def test_moving_only_its_own_requests_warns_nobody(gate: Gate) -> None:
    narrowed = route("shop", "team-a", ["*.shop.example"], "/shop", "shop")
    verdict = await gate.review(Change(Operation.UPDATE, narrowed, SHOP), state=MemoryState(BASE, version="t2"))
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert verdict.traffic is not None and [m.kind for m in verdict.traffic.moves] == ["lost"]
    assert not [n for n in verdict.notes if n.startswith("traffic")], verdict.notes


async def test_a_diff_past_its_budget_cannot_decide_a_change_on_a_shared_listener(gate: Gate) -> None:
    hurried = Gate(rules=gate.rules, renderer=gate.renderer, checker=gate.checker, traffic_budget=0.0)
    verdict = await hurried.review(Change(Operation.CREATE, PAY), state=MemoryState(BASE, version="t3"))
    assert verdict.decision is Decision.ERROR
    assert "the traffic diff did not finish within 0s" in verdict.error
    assert "HTTPRoute team-b/pay enters traffic through a listener or port another owner shares" in verdict.error
    # alone on its own Gateway and port, the change keeps its verdict, with a warning
    alone = [gateway("own", "team-c", 8080), service("web", "team-c")]
    mine = route("web", "team-c", ["web.example"], "/", "web", parent=("own", "team-c"))
    verdict = await hurried.review(Change(Operation.CREATE, mine), state=MemoryState(alone, version="t4"))
    assert verdict.decision is Decision.ALLOW, verdict.message
    assert any(n.startswith("traffic diff skipped: the traffic diff did not finish") for n in verdict.notes)


def _write(where: Path) -> list[str]:
    (where / "base.yaml").write_text(yaml.safe_dump_all(BASE))
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "1", "operation": "CREATE", "object": PAY,
                          "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"}}}
    (where / "review.yaml").write_text(yaml.safe_dump(review))
    return ["check", "-f", str(where / "base.yaml"), "-f", str(where / "review.yaml")]


def test_check_prints_the_plan_of_a_change_that_moves_other_owners_requests(tmp_path: Path, haproxy_path: str) -> None:
    args = _write(tmp_path)
    done = in_process(*args, ROUTEGATE_HAPROXY=haproxy_path)
    lines = done.stdout.splitlines()
    start = lines.index(next(line for line in lines if "HTTPRoute team-b/pay: allowed" in line))
    assert lines[start + 1:start + 4] == [
        "    traffic: HTTP :80 pay.shop.example /* -> gw_h_team-a_shop_shop_80 (team-a) => no route",
        "    traffic: HTTP :80 pay.shop.example /api (prefix) -> gw_h_team-a_shop_shop_80 (team-a) => "
        "gw_h_team-b_pay_pay_80 (team-b)",
        "    traffic: HTTP :80 pay.shop.example /api/* -> gw_h_team-a_shop_shop_80 (team-a) => "
        "gw_h_team-b_pay_pay_80 (team-b)"], done.stdout
    # the route of the base files claims requests nobody served: no plan unless asked for
    assert not any("shop.example /* -> no listener" in line for line in lines), done.stdout
    asked = in_process(*args, "--traffic", ROUTEGATE_HAPROXY=haproxy_path).stdout
    assert "    traffic: HTTP :80 *.shop.example /* -> no listener => gw_h_team-a_shop_shop_80 (team-a)" in asked


def test_check_json_has_the_traffic_section(tmp_path: Path, haproxy_path: str) -> None:
    done = in_process(*_write(tmp_path), "-o", "json", ROUTEGATE_HAPROXY=haproxy_path)
    results = {r["name"]: r for r in json.loads(done.stdout)["results"]}
    traffic = results["pay"]["traffic"]
    assert traffic["complete"] is True
    first = traffic["moves"][0]
    assert (first["entry"], first["host"], first["path"], first["change"]) == ("HTTP :80", "pay.shop.example", "/*",
                                                                                "lost")
    assert first["before"]["rule"] == "HTTPRoute team-a/shop rule 0" and first["before"]["owner"] == "team-a"
    assert first["before"]["backends"] == [{"name": "gw_h_team-a_shop_shop_80", "service": "team-a/shop:80",
                                            "owner": "team-a", "share": 100}]
    assert first["after"]["outcome"] == "no route"
    assert results["shop"]["traffic"]["moves"][0]["change"] == "gained"  # applied together with the Gateway
