"""routegate's own policies (``--config`` ``policies:``), judged without I/O: the variables only routegate
knows (attachments, traffic, lookup), actions, kinds, matchConditions, errors and setup errors."""

from __future__ import annotations

from typing import Any

import pytest

from validators.changes import Change, Operation
from validators.checks import Checks
from validators.enforcement import Enforcement
from validators.findings import Severity
from validators.policies import ownpolicies
from validators.policies.expressions import SetupError
from validators.policies.policychecks import PolicyChecks
from validators.states import MemoryState

GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
           "metadata": {"name": "edge", "namespace": "gw"},
           "spec": {"gatewayClassName": "haproxy", "listeners": [
               {"name": "web", "protocol": "HTTP", "port": 80, "hostname": "*.example.com",
                "allowedRoutes": {"namespaces": {"from": "All"}}}]}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"tier": "gold"}}}
SERVICE = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "web", "namespace": "team", "labels": {"exposed": "yes"}}}
STATE = MemoryState([GATEWAY, NAMESPACE, SERVICE])


def route(hostnames: list[str] | None = None, backend: str = "web") -> dict[str, Any]:
    spec: dict[str, Any] = {"parentRefs": [{"name": "edge", "namespace": "gw"}],
                            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}
    if hostnames is not None:
        spec["hostnames"] = hostnames
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "api", "namespace": "team"}, "spec": spec}


def judged(policies: list[dict[str, Any]], obj: dict[str, Any], *, audit: bool = False,
           enforcement: Enforcement | None = None) -> list[tuple[str, str, str, str]]:
    checks = PolicyChecks(Checks(schemas=None, enforcement=enforcement or Enforcement()),
                          own=ownpolicies.parse(policies))
    change = Change(Operation.CREATE, obj, None)
    run = checks.audit_run if audit else checks.run
    return [(f.code, str(f.severity), f.field, f.message) for f in run(change, STATE).findings
            if f.code.startswith("RG06")]


def one(expression: str, **more: Any) -> list[dict[str, Any]]:
    return [{"name": "p", "validations": [{"expression": expression, "message": "m", **more.pop("v", {})}], **more}]


@pytest.mark.parametrize(("policies", "obj", "expected"), [
    # attachments: the listener's hostname when the route names none; the intersection otherwise
    (one("attachments.hostnames == ['*.example.com']"), route(), []),
    (one("attachments.hostnames == ['a.example.com']"), route(["a.example.com", "b.other.org"]), []),
    (one("attachments.listeners.all(l, l.gateway == 'gw/edge' && l.port == 80 && l.protocol == 'HTTP')"),
     route(["a.example.com"]), []),
    # lookup: the object's namespace and the Services it names, nothing else
    (one("lookup.namespaces['team'].labels['tier'] == 'gold' && "
         "lookup.namespaces['team'].labels['kubernetes.io/metadata.name'] == 'team'"), route(), []),
    (one("lookup.services['team/web'].labels.exposed == 'yes' && size(lookup.services) == 1"), route(), []),
    (one("object.spec.rules.all(r, r.backendRefs.all(b, "
         "(object.metadata.namespace + '/' + b.name) in lookup.services))", v={"message": "unknown Service"}),
     route(backend="nope"), [("RG0610", "deny", "spec.rules", "policy p: unknown Service")]),
    # action warn, kinds, matchConditions
    (one("false", action="warn"), route(), [("RG0611", "warn", "", "policy p: m")]),
    (one("false", kinds=["TLSRoute"]), route(), []),
    (one("false", matchConditions=[{"name": "gold", "expression": "namespaceObject.metadata.labels.tier == 'x'"}]),
     route(), []),
    # a run-time error is a finding, never a pass
    (one("object.spec.nope == 1"), route(),
     [("RG0610", "deny", "spec.nope", "policy p: expression 'object.spec.nope == 1' resulted in error: "
       "no such key: nope")]),
    # messageExpression and fieldPath
    (one("false", v={"messageExpression": "'serves ' + attachments.hostnames.join(',')",
                     "fieldPath": ".spec.hostnames"}), route(["a.example.com"]),
     [("RG0610", "deny", "spec.hostnames", "policy p: serves a.example.com")]),
])
def test_outcome(policies: list[dict[str, Any]], obj: dict[str, Any], expected: list[Any]) -> None:
    assert judged(policies, obj) == expected


def test_traffic_policies_wait_for_the_diff_except_in_the_audit() -> None:
    policy = one("traffic.all(m, !m.host.endsWith('.example.com'))",
                 v={"messageExpression": "traffic.map(m, m.change + ' ' + m.entry + ' ' + m.host)[0]"})
    assert judged(policy, route(["a.example.com"])) == []  # the Gate judges it on the diff
    assert judged(policy, route(["a.example.com"]), audit=True) == [
        ("RG0610", "deny", "", "policy p: gained HTTP :80 a.example.com")]
    checks = PolicyChecks(Checks(schemas=None), own=ownpolicies.parse(policy))
    moves = [{"entry": "HTTP :80", "host": "b.example.com", "path": "/*", "matchers": [], "change": "moved",
              "before": {}, "after": {}, "gateways": [], "listeners": []}]
    found = checks.traffic_findings(Change(Operation.CREATE, route(), None), STATE, moves)
    assert [(f.code, f.message) for f in found] == [("RG0610", "policy p: moved HTTP :80 b.example.com")]
    assert checks.traffic_findings(Change(Operation.CREATE, route(), None), STATE, []) == []


def test_enforcement_applies_to_own_policies() -> None:
    exempt = Enforcement(exempt_namespaces=frozenset({"team"}))
    assert [s for _, s, _, _ in judged(one("false"), route(), enforcement=exempt)] == [str(Severity.WARN)]


@pytest.mark.parametrize(("raw", "words"), [
    ({"policies": "x"}, "policies: expected a list"),
    ([{"validations": [{"expression": "true"}]}], "policies[0].name: required"),
    ([{"name": "a", "validations": [{"expression": "true"}]}] * 2, "policy a: the name is used twice"),
    ([{"name": "a", "validation": []}], "policy a: unknown key 'validation'"),
    ([{"name": "a", "validations": []}], "policy a: validations: at least one is required"),
    ([{"name": "a", "action": "block", "validations": [{"expression": "true"}]}], "action: 'block'"),
    ([{"name": "a", "kinds": ["Pod"], "validations": [{"expression": "true"}]}], "policy a: kinds:"),
    ([{"name": "a", "validations": [{"expression": "authorizer.group('').check('get').allowed()"}]}],
     "authorizer is not available"),
    ([{"name": "a", "validations": [{"expression": "true", "fieldPath": "spec"}]}], "fieldPath"),
    ([{"name": "a", "validations": [{"expression": "nothing.here"}]}],
     "policy a: validations[0].expression: 'nothing.here': compilation failed"),
])
def test_setup_errors(raw: Any, words: str) -> None:
    with pytest.raises(SetupError) as caught:
        ownpolicies.parse(raw["policies"] if isinstance(raw, dict) else raw)
    assert words in str(caught.value)


def test_policies_share_the_objects_cpu_budget_with_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policies get what the rules left of the object's budget, not a budget of their own."""
    from validators import cputime
    from validators.checks import Result

    clock = [0.0]

    def now() -> float:
        clock[0] += 1e-6
        return clock[0]

    class Slow(Checks):
        def run(self, change: Change, state: Any) -> Result:
            clock[0] += 1.5  # the rules used three quarters of the 2 s budget
            return Result([], None)

    monkeypatch.setattr(cputime, "now", now)
    policy = ownpolicies.parse(one("true"))
    change = Change(Operation.CREATE, route(), None)
    assert PolicyChecks(Slow(schemas=None, cpu_budget_seconds=2.0), own=policy).run(change, STATE).findings == []
    starved = PolicyChecks(Slow(schemas=None, cpu_budget_seconds=1.0), own=policy).run(change, STATE).findings
    assert [f.code for f in starved] == ["RG0007"] and "admission policies" in starved[0].message
