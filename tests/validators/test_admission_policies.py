"""ValidatingAdmissionPolicy + binding + object -> the API server's outcome, as a table.

Where a case comes from the Kubernetes project's own tests it says which (kubernetes/kubernetes at
008b3652959c): ``validator_test.go`` is staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/
validator_test.go (TestValidate), ``integration`` is test/integration/apiserver/cel/
validatingadmissionpolicy_test.go (Test_ValidateNamespace_NoParams and the param tests).
"""

from __future__ import annotations

from typing import Any

import pytest

from validators.findings import Severity
from validators.policies import expressions, policycodes, vaps
from validators.policies.expressions import SetupError

ROUTE_RULE = {"apiGroups": ["gateway.networking.k8s.io"], "apiVersions": ["v1"], "resources": ["httproutes"],
              "operations": ["CREATE", "UPDATE"]}


def policy(validations: list[dict[str, Any]], *, name: str = "p", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"matchConstraints": {"resourceRules": [ROUTE_RULE]}, "validations": validations}
    body.update(spec)
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": body}


def binding(*, name: str = "b", policy_name: str = "p", actions: tuple[str, ...] = ("Deny",),
            **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": policy_name, "validationActions": list(actions), **spec}}


def route(name: str = "api", namespace: str = "team", labels: dict[str, str] | None = None,
          hostnames: tuple[str, ...] = ("api.example.com",), version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": f"gateway.networking.k8s.io/{version}", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"hostnames": list(hostnames), "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}}


def namespace(name: str = "team", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **(labels or {})}}}


def configmap(name: str, namespace: str, data: dict[str, str], labels: dict[str, str] | None = None,
              ) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "data": data}


CONFIGMAP_PARAMS = {"apiVersion": "v1", "kind": "ConfigMap"}


def judge(objects: list[dict[str, Any]], obj: dict[str, Any] | None = None, *, old: dict[str, Any] | None = None,
          ns: dict[str, Any] | None = None, operation: str = "CREATE") -> list[tuple[str, str, str]]:
    obj = route() if obj is None and operation != "DELETE" else obj
    policies = vaps.PolicySet.of(objects)
    subject = vaps.subject_of(operation, obj, old, ns if ns is not None else namespace())
    found = policies.judge(subject) + vaps.unsupported_findings(policies, subject)
    return [(f.code, str(f.severity), f.message) for f in found]


DENY = "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: "

CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[tuple[str, str, str]]]] = [
    # validator_test.go "test pass"
    ("true admits", [policy([{"expression": "object.metadata.name == 'api'"}]), binding()], {}, []),
    # integration Test_ValidateNamespace_NoParams: the message of a false expression without message
    ("false without message", [policy([{"expression": "object.metadata.name.endsWith('k8s')"}]), binding()], {},
     [("RG0600", "deny", DENY + "failed expression: object.metadata.name.endsWith('k8s')")]),
    # validator_test.go "test message for failed validations"
    ("static message", [policy([{"expression": "false", "message": "test"}]), binding()], {},
     [("RG0600", "deny", DENY + "test")]),
    # validator_test.go "messageExpression successful, overwritten message"
    ("messageExpression wins", [policy([{"expression": "false", "message": "I am overwritten",
                                         "messageExpression": "'evaluated ' + object.metadata.name"}]), binding()], {},
     [("RG0600", "deny", DENY + "evaluated api")]),
    # validator_test.go "messageExpression user failure", "eval to empty", "eval to multi-line", "too long"
    ("messageExpression error falls back", [policy([{"expression": "false", "message": "test1",
                                                     "messageExpression": "object.nope"}]), binding()], {},
     [("RG0600", "deny", DENY + "test1")]),
    ("messageExpression empty falls back", [policy([{"expression": "false", "message": "test1",
                                                     "messageExpression": "' '"}]), binding()], {},
     [("RG0600", "deny", DENY + "test1")]),
    ("messageExpression multi-line falls back", [policy([{"expression": "false", "message": "test1",
                                                          "messageExpression": "'hello\\nthere'"}]), binding()], {},
     [("RG0600", "deny", DENY + "test1")]),
    ("messageExpression too long falls back", [policy([{"expression": "false", "message": "test1",
                                                        "messageExpression": "'" + "x" * 5121 + "'"}]),
                                                binding()], {},
     [("RG0600", "deny", DENY + "test1")]),
    # validator_test.go "test error with failurepolicy nil" (Fail is the default) and "... ignore"
    ("error fails by default", [policy([{"expression": "object.spec.nope == 1"}]), binding()], {},
     [("RG0600", "deny", DENY + "expression 'object.spec.nope == 1' resulted in error: no such key: nope")]),
    ("error ignored", [policy([{"expression": "object.spec.nope == 1"}], failurePolicy="Ignore"), binding()], {}, []),
    # validator_test.go "test fail with failurepolicy ignore with multiple validations"
    ("ignore keeps the false ones", [policy([{"expression": "object.spec.nope == 1"},
                                            {"expression": "false", "message": "two"}], failurePolicy="Ignore"),
                                    binding()], {}, [("RG0600", "deny", DENY + "two")]),
    # validator_test.go "test message for failed validations multiple validations": one decision each
    ("every false validation", [policy([{"expression": "false", "message": "test1"},
                                        {"expression": "false", "message": "test2"}]), binding()], {},
     [("RG0600", "deny", DENY + "test1"), ("RG0600", "deny", DENY + "test2")]),
    # validationActions: Warn and Audit never deny (dispatcher.go words the warning so)
    ("warn", [policy([{"expression": "false", "message": "m"}]), binding(actions=("Warn",))], {},
     [("RG0601", "warn", "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': m")]),
    ("deny and audit", [policy([{"expression": "false", "message": "m"}]), binding(actions=("Deny", "Audit"))], {},
     [("RG0600", "deny", DENY + "m"),
      ("RG0602", "warn", "audit: ValidatingAdmissionPolicy 'p' with binding 'b' failed: m")]),
    # matchConditions: a false one skips the policy (validator_test.go "no match surpresses failure")
    ("matchCondition false skips", [policy([{"expression": "false"}], matchConditions=[
        {"name": "only-prod", "expression": "object.metadata.namespace == 'prod'"}]), binding()], {}, []),
    ("matchCondition true runs", [policy([{"expression": "false", "message": "m"}], matchConditions=[
        {"name": "only-team", "expression": "object.metadata.namespace == 'team'"}]), binding()], {},
     [("RG0600", "deny", DENY + "m")]),
    # "match error => presumed match": one failure under Fail
    ("matchCondition error fails", [policy([{"expression": "false", "message": "m"}], matchConditions=[
        {"name": "broken", "expression": "object.nope == 1"}]), binding()], {},
     [("RG0600", "deny", DENY + "failed to evaluate matchConditions: expression 'object.nope == 1' resulted in "
       "error: no such key: nope")]),
    # variables, composited in order
    ("variables", [policy([{"expression": "variables.hosts.all(h, h.endsWith(variables.suffix))",
                            "messageExpression": "'hosts must end in ' + variables.suffix"}],
                          variables=[{"name": "suffix", "expression": "'.corp.example'"},
                                     {"name": "hosts", "expression": "object.spec.hostnames"}]), binding()], {},
     [("RG0600", "deny", DENY + "hosts must end in .corp.example")]),
    ("failing variable fails its reader only", [policy(
        [{"expression": "variables.bad == 1"}, {"expression": "true"}],
        variables=[{"name": "bad", "expression": "object.nope"}]), binding()], {},
     [("RG0600", "deny", DENY + "expression 'variables.bad == 1' resulted in error: composited variable \"bad\" "
       "fails to evaluate: no such key: nope")]),
    # matchConstraints and binding matchResources
    ("other resource not matched", [policy([{"expression": "false"}], matchConstraints={"resourceRules": [
        {**ROUTE_RULE, "resources": ["grpcroutes"]}]}), binding()], {}, []),
    ("operation not matched", [policy([{"expression": "false"}], matchConstraints={"resourceRules": [
        {**ROUTE_RULE, "operations": ["DELETE"]}]}), binding()], {}, []),
    ("Equivalent matches another version", [policy([{"expression": "false", "message": "m"}], matchConstraints={
        "resourceRules": [{**ROUTE_RULE, "apiVersions": ["v1beta1"]}]}), binding()], {},
     [("RG0600", "deny", DENY + "m")]),
    ("Exact does not", [policy([{"expression": "false"}], matchConstraints={
        "resourceRules": [{**ROUTE_RULE, "apiVersions": ["v1beta1"]}], "matchPolicy": "Exact"}), binding()], {}, []),
    ("excluded by name", [policy([{"expression": "false"}], matchConstraints={
        "resourceRules": [ROUTE_RULE], "excludeResourceRules": [{**ROUTE_RULE, "resourceNames": ["api"]}]}),
        binding()], {}, []),
    ("namespaceSelector misses", [policy([{"expression": "false"}], matchConstraints={
        "resourceRules": [ROUTE_RULE], "namespaceSelector": {"matchLabels": {"env": "prod"}}}), binding()], {}, []),
    ("namespaceSelector hits", [policy([{"expression": "false", "message": "m"}], matchConstraints={
        "resourceRules": [ROUTE_RULE],
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                    "values": ["team"]}]}}), binding()], {},
     [("RG0600", "deny", DENY + "m")]),
    ("objectSelector misses", [policy([{"expression": "false"}], matchConstraints={
        "resourceRules": [ROUTE_RULE], "objectSelector": {"matchLabels": {"tier": "edge"}}}), binding()], {}, []),
    ("binding matchResources narrows", [policy([{"expression": "false"}]), binding(matchResources={
        "namespaceSelector": {"matchLabels": {"env": "prod"}}})], {}, []),
    ("binding to a missing policy is ignored", [binding(policy_name="nope")], {}, []),
    # params (integration tests with params: a ConfigMap named by paramRef)
    ("params by name", [policy([{"expression": "object.spec.hostnames.all(h, h.endsWith(params.data.suffix))",
                                 "messageExpression": "'suffix ' + params.data.suffix"}],
                               paramKind={"apiVersion": "v1", "kind": "ConfigMap"}),
                        binding(paramRef={"name": "limits", "namespace": "policy", "parameterNotFoundAction": "Deny"}),
                        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "policy"},
                         "data": {"suffix": ".corp.example"}}], {},
     [("RG0600", "deny", DENY + "suffix .corp.example")]),
    ("params not found, Deny", [policy([{"expression": "true"}], paramKind={"apiVersion": "v1", "kind": "ConfigMap"}),
                                binding(paramRef={"name": "gone", "parameterNotFoundAction": "Deny"})], {},
     [("RG0600", "deny", DENY + "failed to configure binding: no params found for policy binding with `Deny` "
       "parameterNotFoundAction")]),
    ("params not found, Allow", [policy([{"expression": "false"}], paramKind={"apiVersion": "v1", "kind": "ConfigMap"}),
                                 binding(paramRef={"name": "gone", "parameterNotFoundAction": "Allow"})], {}, []),
    ("params by selector, each judged", [
        policy([{"expression": "object.metadata.name != params.data.banned", "messageExpression":
                 "'banned by ' + params.metadata.name"}], paramKind=CONFIGMAP_PARAMS),
        binding(paramRef={"selector": {"matchLabels": {"ban": "yes"}}, "parameterNotFoundAction": "Allow"}),
        configmap("a", "team", {"banned": "api"}, {"ban": "yes"}),
        configmap("b", "team", {"banned": "other"}, {"ban": "yes"}),
        configmap("c", "elsewhere", {"banned": "api"}, {"ban": "yes"})],
     {}, [("RG0600", "deny", DENY + "banned by a")]),
    ("paramKind without paramRef", [policy([{"expression": "true"}], paramKind=CONFIGMAP_PARAMS),
                                    binding()], {},
     [("RG0600", "deny", DENY + "failed to configure binding: policy 'p' has paramKind but binding 'b' has no "
       "paramRef")]),
    # request and namespaceObject
    ("request and namespaceObject", [policy([{"expression": "request.operation == 'CREATE' && "
                                              "namespaceObject.metadata.labels['team'] == 'blue'",
                                              "message": "m"}]), binding()], {"ns_labels": {"team": "red"}},
     [("RG0600", "deny", DENY + "m")]),
    ("oldObject on UPDATE", [policy([{"expression": "oldObject == null || object.spec.hostnames == "
                                      "oldObject.spec.hostnames", "message": "hostnames are immutable"}]), binding()],
     {"old": route(hostnames=("old.example.com",)), "operation": "UPDATE"},
     [("RG0600", "deny", DENY + "hostnames are immutable")]),
    # offline the user is nobody: an exemption for a group does not apply (and reading it is no error)
    ("userInfo of nobody", [policy([{"expression": "'system:masters' in request.userInfo.groups || "
                                     "request.userInfo.username == 'admin' || object.spec.hostnames.size() < 1",
                                     "message": "only admins"}]), binding()], {},
     [("RG0600", "deny", DENY + "only admins")]),
    # authorizer: cannot be asked offline, reported and not judged
    ("authorizer unsupported", [policy([{"expression": "authorizer.group('').resource('pods').check('get').allowed()"},
                                        {"expression": "true"}]), binding()], {},
     [("RG0603", "warn", "ValidatingAdmissionPolicy 'p': spec.validations[0].expression: "
       "\"authorizer.group('').resource('pods').check('get').allowed()\" uses authorizer, which routegate cannot "
       "ask offline; not judged")]),
]


@pytest.mark.parametrize(("objects", "how", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_outcome(objects: list[dict[str, Any]], how: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    ns = namespace(labels=how.get("ns_labels"))
    assert judge(objects, old=how.get("old"), ns=ns, operation=how.get("operation", "CREATE")) == expected


def test_field_path_from_the_expression() -> None:
    objects = [policy([{"expression": "object.spec.hostnames.all(h, h.endsWith('.corp'))"}]), binding()]
    subject = vaps.subject_of("CREATE", route(), None, namespace())
    (finding,) = vaps.PolicySet.of(objects).judge(subject)
    assert finding.field == "spec.hostnames" and finding.severity is Severity.DENY


@pytest.mark.parametrize(("objects", "words"), [
    ([policy([{"expression": "object.metadata.name =="}])],
     "ValidatingAdmissionPolicy p: spec.validations[0].expression: 'object.metadata.name ==': compilation failed"),
    ([policy([{"expression": "variables.missing"}])],
     "ValidatingAdmissionPolicy p: spec.validations[0].expression: 'variables.missing': unknown variable "
     "'variables.missing'; none is declared"),
    ([policy([{"expression": "undeclaredThing.x"}])], "undeclared reference to 'undeclaredThing"),
    ([policy([{"expression": "true"}], variables=[{"name": "a", "expression": "variables.b"},
                                                  {"name": "b", "expression": "1"}])],
     "spec.variables[0].expression: 'variables.b': unknown variable 'variables.b'"),
    ([policy([{"expression": "true"}], failurePolicy="Sometimes")], "spec.failurePolicy: 'Sometimes'"),
    ([binding(actions=("Deny", "Warn"))], "Deny and Warn may not be used together"),
    ([binding(actions=())], "spec.validationActions"),
    ([policy([{"expression": "true"}], matchConstraints={})], "spec.matchConstraints.resourceRules: required"),
])
def test_setup_errors_name_policy_field_and_expression(objects: list[dict[str, Any]], words: str) -> None:
    with pytest.raises(SetupError, match=None) as caught:
        vaps.PolicySet.of(objects)
    assert words in str(caught.value)


def test_cost_limit_per_expression() -> None:
    """A comprehension nested three deep over a route with 200 hostnames: 200^3 > PerCallLimit; the
    API server stops it with its own words, and failurePolicy applies."""
    deep = "object.spec.hostnames.all(a, object.spec.hostnames.all(b, object.spec.hostnames.all(c, true)))"
    big = route(hostnames=tuple(f"h{i}.example.com" for i in range(200)))
    assert judge([policy([{"expression": deep}]), binding()], big) == [
        ("RG0600", "deny", DENY + f"expression '{deep}' resulted in error: {expressions.PER_CALL_EXCEEDED}")]
    assert judge([policy([{"expression": deep}], failurePolicy="Ignore"), binding()], big) == []
    assert judge([policy([{"expression": deep}]), binding()], route()) == []  # small: runs, true


def test_runtime_budget_stops_the_rest() -> None:
    """RuntimeCELCostBudget (10,000,000) is shared by one policy's expressions: past it, the API server's
    message and no further validations."""
    one = "object.spec.hostnames.exists(a, object.spec.hostnames.exists(b, true))"  # cheap to run, dear to estimate
    big = route(hostnames=tuple(f"h{i}.example.com" for i in range(900)))  # each: ~950 nodes x 900, < 1,000,000
    assert judge([policy([{"expression": one}] * 10), binding()], big) == []
    assert judge([policy([{"expression": one}] * 15), binding()], big) == [
        ("RG0600", "deny", DENY + f"expression '{one}' resulted in error: {expressions.BUDGET_EXCEEDED}")]


def test_codes_are_in_the_rule_table() -> None:
    from validators import rules

    codes = {i.code for i in rules.table()}
    assert {i.code for i in policycodes.RULE_INFOS} <= codes


def test_yaml_timestamps_are_the_strings_the_api_server_sees() -> None:
    """An unquoted YAML timestamp reaches the API server as a JSON string (kubectl converts the manifest)."""
    import datetime

    obj = route()
    obj["metadata"]["creationTimestamp"] = datetime.datetime(2026, 11, 1, 10, 0, tzinfo=datetime.UTC)
    obj["metadata"]["annotations"] = {"since": datetime.date(2026, 1, 1)}
    objects = [policy([{"expression": "object.metadata.creationTimestamp == '2026-11-01T10:00:00Z' && "
                                      "object.metadata.annotations.since == '2026-01-01'", "message": "m"}]), binding()]
    assert judge(objects, obj) == []


def test_only_objects_of_a_param_kind_are_kept_as_params() -> None:
    """A policy set keeps as possible params only the objects of a kind some policy takes as params (the
    only ones ``_params`` looks up): a check of 50,000 objects without such a policy indexes none of them.
    The judgement is the same (the table's param cases)."""
    others = [route(f"r{n}") for n in range(3)] + [namespace("team")]
    limits = configmap("limits", "policy", {"suffix": ".corp.example"})
    assert vaps.PolicySet.of([*others, limits]).params == {}
    assert vaps.PolicySet.of([*others, limits, policy([{"expression": "true"}]), binding()]).params == {}
    with_params = vaps.PolicySet.of([*others, limits, binding(paramRef={"name": "limits", "namespace": "policy"}),
                                     policy([{"expression": "object.spec.hostnames.all(h, h.endsWith("
                                                            "params.data.suffix))"}], paramKind=CONFIGMAP_PARAMS)])
    assert with_params.params == {("", "ConfigMap"): {"policy": [limits]}}
    (finding,) = with_params.judge(vaps.subject_of("CREATE", route(), None, namespace()))
    assert finding.severity is Severity.DENY
