"""Per-rule enforcement: parsing the config (errors name the key) and applying it to findings."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from validatorbuilders import backend, route, run

from validators import codes, rules
from validators.enforcement import Action, Enforcement

SAN_ROUTE = route(
    {"backendRefs": [backend()], "sessionPersistence": {"sessionName": "a b"}, "timeouts": {"request": "1s"}}
)


def summary(**kw: Any) -> list[tuple[str, str]]:
    return [(f.code, str(f.severity)) for f in run(SAN_ROUTE, **kw) if f.code != codes.NO_SCHEMA]


def test_defaults_follow_the_rule_table() -> None:
    assert summary() == [(codes.SESSION_NAME, "deny"), (codes.REQUEST_TIMEOUT, "warn")]


def test_a_rule_can_be_turned_to_warn_deny_or_off() -> None:
    cfg = Enforcement.from_mapping({"rules": {codes.SESSION_NAME: "warn", codes.REQUEST_TIMEOUT: "deny"}})
    # the space still cannot be rendered, so the generic unsafe-value denial shows once the
    # specific rule is only a warning
    assert summary(enforcement=cfg) == [
        (codes.SESSION_NAME, "warn"),
        (codes.UNSAFE_VALUE, "deny"),
        (codes.REQUEST_TIMEOUT, "deny"),
    ]
    off = Enforcement.from_mapping({"rules": {codes.SESSION_NAME: "off", codes.UNSAFE_VALUE: "off"}})
    assert summary(enforcement=off) == [(codes.REQUEST_TIMEOUT, "warn")]


def test_turning_a_specific_rule_off_does_not_let_an_unsafe_value_through() -> None:
    off = Enforcement.from_mapping({"rules": {codes.SESSION_NAME: "off"}})
    assert [
        (f.code, str(f.severity)) for f in run(SAN_ROUTE, enforcement=off) if f.code == codes.UNSAFE_VALUE
    ] == [(codes.UNSAFE_VALUE, "deny")]


def test_exempt_namespaces_only_warn() -> None:
    cfg = Enforcement.from_mapping({"exemptNamespaces": ["n"]})
    assert summary(enforcement=cfg) == [(codes.SESSION_NAME, "warn"), (codes.REQUEST_TIMEOUT, "warn")]
    other = Enforcement.from_mapping({"exemptNamespaces": ["kube-system"]})
    assert (codes.SESSION_NAME, "deny") in summary(enforcement=other)


def test_strict_makes_unknown_fields_deny_unless_configured_otherwise() -> None:
    assert Enforcement.from_mapping({"strict": True}).action(codes.UNKNOWN_FIELD, codes.WARN) is Action.DENY
    explicit = Enforcement.from_mapping({"strict": True, "rules": {codes.UNKNOWN_FIELD: "warn"}})
    assert explicit.action(codes.UNKNOWN_FIELD, codes.WARN) is Action.WARN
    assert Enforcement().action(codes.UNKNOWN_FIELD, codes.WARN) is Action.WARN


def test_every_code_of_the_table_is_configurable_including_cel_and_cross_object() -> None:
    table = rules.table()
    assert len({i.code for i in table}) == len(table)
    configurable = {i.code for i in table if i.configurable}
    cfg = Enforcement.from_mapping({"rules": {code: "off" for code in configurable}})
    assert set(cfg.rules) == configurable
    assert summary(enforcement=cfg) == []


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        pytest.param({"rule": {}}, "unknown key 'rule'", id="typo in a top-level key"),
        pytest.param({"rules": ["RG0101"]}, "'rules' must map rule codes", id="rules not a mapping"),
        pytest.param({"rules": {"RG9999": "warn"}}, "rules.RG9999: unknown rule code", id="unknown code"),
        pytest.param({"rules": {"RG0800": "warn"}}, "rules.RG0800: a verdict of the gate", id="gate verdict"),
    pytest.param({"rules": {"RG0800": "warn"}}, "rules.RG0800: a verdict of the gate", id="gate verdict"),
        pytest.param(
            {"rules": {"RG0101": "block"}},
            "rules.RG0101: 'block' is not one of deny, warn, off",
            id="unknown action",
        ),
        pytest.param(
            {"exemptNamespaces": "kube-system"}, "'exemptNamespaces' must be a list", id="namespaces string"
        ),
        pytest.param({"strict": "yes"}, "'strict' must be true or false", id="strict not a bool"),
        pytest.param(["rules"], "expected a mapping", id="not a mapping"),
    ],
)
def test_config_errors_name_the_key(cfg: Any, needle: str) -> None:
    with pytest.raises(ValueError, match="enforcement config") as info:
        Enforcement.from_mapping(cfg)
    assert needle in str(info.value)


def test_empty_config_is_the_default() -> None:
    assert Enforcement.from_mapping(None) == Enforcement()
    assert Enforcement.from_mapping({}) == Enforcement()


def test_the_documented_yaml_parses_including_a_bare_off() -> None:
    text = """
rules:
  RG0113: off
  RG0101: Warn
exemptNamespaces: [kube-system]
strict: true
"""
    cfg = Enforcement.from_mapping(yaml.safe_load(text))
    assert cfg.rules == {codes.REQUEST_TIMEOUT: Action.OFF, codes.SESSION_NAME: Action.WARN}
    assert cfg.exempt_namespaces == frozenset({"kube-system"})
    assert cfg.strict is True
    with pytest.raises(ValueError, match=r"rules\.RG0101: True is not one of deny, warn, off"):
        Enforcement.from_mapping(yaml.safe_load("rules: {RG0101: on}"))


def test_raising_a_rule_to_deny_never_denies_the_subject_for_another_objects_finding() -> None:
    # The older route wins a claims conflict; RG0508 on it names the newer loser. Raising RG0508 to
    # deny must deny the loser's own change, never the winner's.
    from tests.attachments.gwbuilders import gateway, listener, parent, service
    from tests.attachments.gwbuilders import route as gw_route
    from validators.changes import Change, Operation
    from validators.checks import Checks
    from validators.states import MemoryState

    rule = {"matches": [{"path": {"value": "/api"}}], "backendRefs": [{"name": "svc", "port": 80}]}
    old = gw_route("HTTPRoute", "old", parent("gw"), hosts=["a.com"], rules=[rule], ts="2026-01-01T00:00:00Z")
    new = gw_route("HTTPRoute", "new", parent("gw"), hosts=["a.com"], rules=[rule], ts="2026-03-01T00:00:00Z")
    state = MemoryState([gateway("gw", listener("http", 80, frm="All")), service("svc"), old, new])
    checks = Checks(schemas=None, enforcement=Enforcement.from_mapping({"rules": {"RG0508": "deny"}}))

    def claim_findings(o: dict[str, Any]) -> list[tuple[str, bool]]:
        found = checks.check(Change(Operation.UPDATE, o, o), state)
        return [(str(f.severity), f.subject) for f in found if f.code == "RG0508"]

    assert claim_findings(old) == [("warn", False)]
    assert claim_findings(new) == [("deny", True)]


def test_enforcement_leaves_findings_about_other_objects_at_warn_but_can_turn_them_off() -> None:
    from validators.findings import Finding, Severity

    other = Finding("RG0508", "lost", (), Severity.WARN, subject=False, about="HTTPRoute n/b")
    deny = Enforcement.from_mapping({"rules": {"RG0508": "deny"}})
    assert [f.severity for f in deny.apply([other])] == [Severity.WARN]
    assert Enforcement.from_mapping({"rules": {"RG0508": "off"}}).apply([other]) == []
