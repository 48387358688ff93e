"""The Gate's entry point: Checks.check/run over CREATE, UPDATE, DELETE, with and without state."""

from __future__ import annotations

from typing import Any

from validatorbuilders import backend, gateway_api, obj, prefix, route

from validators import codes
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.findings import Finding
from validators.states import MemoryState

ROUTE = route(
    {"matches": [prefix("/api")], "backendRefs": [backend("web", 8080)]}, hostnames=["a.example.com"]
)


def service(name: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "n"},
        "spec": {"ports": [{"port": port}]},
    }


def listener_gateway() -> dict[str, Any]:
    return obj(
        "Gateway",
        {
            "gatewayClassName": "haptic",
            "listeners": [
                {
                    "name": "http",
                    "protocol": "HTTP",
                    "port": 80,
                    "allowedRoutes": {"namespaces": {"from": "Same"}},
                }
            ],
        },
        name="edge",
    )


def test_findings_come_most_specific_first() -> None:
    o = route({"retry": {"codes": [418]}, "timeouts": {"request": "1s"}, "backendRefs": [backend()]})
    found = Checks(schemas=None, cross_object=False).check(Change(Operation.CREATE, o), MemoryState())
    assert [f.code for f in found] == [codes.RETRY_CODE, codes.REQUEST_TIMEOUT, codes.NO_SCHEMA]


def test_cross_object_findings_are_included_and_follow_the_state() -> None:
    checks = Checks(schemas=gateway_api("experimental"))
    alone = checks.check(Change(Operation.CREATE, ROUTE), MemoryState())
    assert {f.code for f in alone} >= {"RG0501", "RG0504"}
    assert all(f.severity == "warn" for f in alone)
    complete = MemoryState([listener_gateway(), service("web", 8080)])
    assert checks.check(Change(Operation.CREATE, ROUTE), complete) == []


def test_cross_object_checks_can_be_disabled() -> None:
    checks = Checks(schemas=gateway_api("experimental"), cross_object=False)
    assert checks.check(Change(Operation.CREATE, ROUTE), MemoryState()) == []


def test_delete_checks_nothing_about_the_object_itself() -> None:
    bad = route({"timeouts": {"request": "1s"}})
    found = Checks(schemas=None, cross_object=False).check(Change(Operation.DELETE, None, bad), MemoryState())
    assert found == []


def test_the_defaulted_object_is_returned_for_the_renderer() -> None:
    checks = Checks(schemas=gateway_api("experimental"), cross_object=False)
    change = Change(Operation.CREATE, ROUTE)
    result = checks.run(change, MemoryState())
    assert result.defaulted is not None
    assert result.defaulted["spec"]["parentRefs"][0]["kind"] == "Gateway"
    assert result.defaulted["spec"]["rules"][0]["backendRefs"][0]["weight"] == 1
    assert checks.defaulted(change) == result.defaulted
    assert "kind" not in ROUTE["spec"]["parentRefs"][0]


def test_a_crashing_rule_becomes_a_warning_not_an_exception() -> None:
    def broken(o: Any, ctx: Any) -> Any:
        raise RuntimeError("boom")
        yield Finding("X", "")  # pragma: no cover

    checks = Checks(schemas=None, cross_object=False, rule_set={"HTTPRoute": (broken,)})
    found = checks.check(Change(Operation.CREATE, ROUTE), MemoryState())
    assert [(f.code, str(f.severity)) for f in found] == [
        (codes.NO_SCHEMA, "warn"),
        (codes.SCHEMA_UNCHECKED, "warn"),
    ]
    assert "boom" in found[1].message
