"""The schema check against a small hand-written CRD: one case per Kubernetes extension.

Each Kubernetes addition to JSON Schema (int-or-string, nullable, preserve-unknown-fields, list-type
set/map, formats, structural defaults, pruning, embedded resources, Go regex semantics) is checked the
way the API server applies it, with its API-server-style message.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from validatorbuilders import run

from validators import codes
from validators.enforcement import Enforcement
from validators.schema import schemas
from validators.schema.crds import SchemaSet

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["limit"],
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "plain": {"type": "string"},
                "free": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "integer"}},
                },
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "protocol": {"type": "string", "default": "TCP"},
                            "port": {"type": "integer", "format": "int32"},
                        },
                    },
                },
                "size": {"type": "integer", "format": "int64"},
                "mode": {
                    "type": "string",
                    "enum": ["Exact", "PathPrefix", "RegularExpression"],
                    "default": "PathPrefix",
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": 65535},
                "ratio": {"type": "number", "maximum": 1, "exclusiveMaximum": True},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "when": {"type": "string", "format": "date-time"},
                "ip": {"type": "string", "format": "ipv4"},
                "nested": {
                    "type": "object",
                    "default": {},
                    "properties": {"inner": {"type": "string", "default": "x"}},
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
                },
            },
        },
    },
}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"kind": "Widget", "plural": "widgets"},
        "scope": "Namespaced",
        "versions": [
            {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}},
            {"name": "v0", "served": False, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}},
        ],
    },
}
SET = SchemaSet.from_documents([CRD, {"kind": "ConfigMap"}, None])


def widget(version: str = "v1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"example.com/{version}",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "n", "labels": {"anything": "goes"}},
        "spec": {"limit": 10, **spec},
    }


def found(**spec: Any) -> list[tuple[str, str, str, str]]:
    return [(f.code, str(f.severity), f.field, f.message) for f in run(widget(**spec), schemas=SET)]


def defaulted(**spec: Any) -> dict[str, Any]:
    out = schemas.check(widget(**spec), SCHEMA, kind="Widget").defaulted
    assert isinstance(out, dict)
    return dict(out["spec"])


def test_a_valid_widget_has_no_findings() -> None:
    assert (
        found(
            port=8080,
            tags=["a", "b"],
            ports=[{"name": "a", "port": 1}],
            when="2026-11-29T14:14:57Z",
            ip="10.0.0.1",
            labels={"k": "v"},
            name="abc",
            ratio=0.5,
            size=2**62,
        )
        == []
    )


def test_the_schema_set_indexes_served_versions_only() -> None:
    assert SET.kinds() == ["Widget"]
    assert SET.get("example.com", "v1", "Widget") is SCHEMA
    assert SET.get("example.com", "v0", "Widget") is None


def test_a_kind_without_schema_is_reported_once_as_a_warning() -> None:
    result = run(widget("v0"), schemas=SET)
    assert [(f.code, str(f.severity), f.message) for f in result] == [
        (codes.NO_SCHEMA, "warn", "no schema for Widget example.com/v0; schema checks skipped")
    ]
    assert [f.code for f in run(widget(), schemas=None)] == [codes.NO_SCHEMA]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"port": 8080}, [], id="int ok"),
        pytest.param({"port": "http"}, [], id="string ok"),
        pytest.param(
            {"port": 1.5},
            [
                (
                    codes.SCHEMA_INVALID,
                    "deny",
                    "spec.port",
                    "Invalid value: 1.5: must be of type int-or-string",
                )
            ],
            id="float denied",
        ),
        pytest.param(
            {"port": True},
            [
                (
                    codes.SCHEMA_INVALID,
                    "deny",
                    "spec.port",
                    "Invalid value: true: must be of type int-or-string",
                )
            ],
            id="bool denied",
        ),
    ],
)
def test_int_or_string(spec: dict[str, Any], expected: list[Any]) -> None:
    assert found(**spec) == expected


def test_nullable_keeps_null_and_a_non_nullable_null_is_pruned() -> None:
    assert found(note=None, plain=None) == []
    spec = defaulted(note=None, plain=None)
    assert "note" in spec and spec["note"] is None
    assert "plain" not in spec


def test_null_in_a_list_is_a_type_error() -> None:
    assert found(tags=[None]) == [
        (codes.SCHEMA_INVALID, "deny", "spec.tags[0]", "Invalid value: null: must be of type string")
    ]


def test_preserve_unknown_fields_keeps_extra_fields_but_checks_known_ones() -> None:
    assert found(free={"anything": {"deep": 1}}) == []
    assert defaulted(free={"anything": 1})["free"] == {"anything": 1}
    assert found(free={"known": "x"}) == [
        (codes.SCHEMA_INVALID, "deny", "spec.free.known", 'Invalid value: "x": must be of type integer')
    ]


def test_unknown_fields_warn_are_pruned_and_deny_with_strict() -> None:
    assert found(bogus=1) == [
        (
            codes.UNKNOWN_FIELD,
            "warn",
            "spec.bogus",
            'unknown field "bogus": not declared in the schema; the API server prunes it',
        )
    ]
    assert "bogus" not in defaulted(bogus=1)
    strict = run(widget(bogus=1), schemas=SET, enforcement=Enforcement(strict=True))
    assert [(f.code, str(f.severity)) for f in strict] == [(codes.UNKNOWN_FIELD, "deny")]


def test_metadata_and_embedded_resources_are_not_pruned() -> None:
    template = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"a": "x"},
    }
    assert found(template=template) == []
    assert found(template={**template, "spec": {"b": 1}}) == [
        (
            codes.UNKNOWN_FIELD,
            "warn",
            "spec.template.spec.b",
            'unknown field "b": not declared in the schema; the API server prunes it',
        )
    ]


def test_list_type_set_rejects_duplicates() -> None:
    assert found(tags=["a", "b", "a"]) == [
        (codes.DUPLICATE_ITEM, "deny", "spec.tags[2]", 'Duplicate value: "a"')
    ]


def test_list_type_map_keys_are_compared_after_defaulting() -> None:
    assert found(ports=[{"name": "a"}, {"name": "a", "protocol": "UDP"}]) == []
    assert found(ports=[{"name": "a"}, {"name": "a", "protocol": "TCP"}]) == [
        (codes.DUPLICATE_ITEM, "deny", "spec.ports[1]", 'Duplicate value: {"name":"a","protocol":"TCP"}')
    ]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param(
            {"ports": [{"name": "a", "port": 2**31}]},
            "spec.ports[0].port",
            "Invalid value: 2147483648: must be of type int32",
            id="int32 overflow",
        ),
        pytest.param(
            {"size": 2**63},
            "spec.size",
            "Invalid value: 9223372036854775808: must be of type int64",
            id="int64 overflow",
        ),
        pytest.param(
            {"when": "yesterday"},
            "spec.when",
            'Invalid value: "yesterday": must be of type date-time',
            id="date-time",
        ),
        pytest.param({"ip": "10.0.0"}, "spec.ip", 'Invalid value: "10.0.0": must be of type ipv4', id="ipv4"),
        pytest.param(
            {"mode": "Foo"},
            "spec.mode",
            'Unsupported value: "Foo": supported values: "Exact", "PathPrefix", "RegularExpression"',
            id="enum",
        ),
        pytest.param(
            {"limit": 70000},
            "spec.limit",
            "Invalid value: 70000: must be less than or equal to 65535",
            id="maximum",
        ),
        pytest.param(
            {"limit": 0}, "spec.limit", "Invalid value: 0: must be greater than or equal to 1", id="minimum"
        ),
        pytest.param(
            {"ratio": 1}, "spec.ratio", "Invalid value: 1: must be less than 1", id="exclusive maximum"
        ),
        pytest.param(
            {"name": "abcdefghij"}, "spec.name", "Too long: may not be more than 8 bytes", id="maxLength"
        ),
        pytest.param(
            {"name": "Abc"}, "spec.name", "Invalid value: \"Abc\": should match '^[a-z]+$'", id="pattern"
        ),
        pytest.param(
            {"name": "abc\n"},
            "spec.name",
            "Invalid value: \"abc\\n\": should match '^[a-z]+$'",
            id="pattern $ does not match before a trailing newline (Go semantics)",
        ),
        pytest.param(
            {"labels": {"k": 1}},
            "spec.labels.k",
            "Invalid value: 1: must be of type string",
            id="additionalProperties schema",
        ),
    ],
)
def test_schema_violation_messages(spec: dict[str, Any], field: str, message: str) -> None:
    assert [(c, f, m) for c, s, f, m in found(**spec) if s == "deny"] == [
        (codes.SCHEMA_INVALID, field, message)
    ]


def test_required_names_the_missing_field() -> None:
    o = widget()
    del o["spec"]["limit"]
    assert [(f.code, f.field, f.message) for f in run(o, schemas=SET)] == [
        (codes.SCHEMA_INVALID, "spec.limit", "Required value")
    ]


def test_defaults_are_applied_inside_defaults_without_touching_the_input() -> None:
    o = widget(ports=[{"name": "a"}], nested=None)
    before = copy.deepcopy(o)
    spec = dict(schemas.check(o, SCHEMA, kind="Widget").defaulted["spec"])
    assert spec["mode"] == "PathPrefix"
    assert spec["nested"] == {"inner": "x"}
    assert spec["ports"] == [{"name": "a", "protocol": "TCP"}]
    assert o == before


def test_semantic_rules_see_the_defaulted_object() -> None:
    o = widget(mode=None)  # pruned null, then defaulted
    assert defaulted(mode=None)["mode"] == "PathPrefix"
    assert run(o, schemas=SET) == []


def test_validators_are_compiled_once_per_schema() -> None:
    first = schemas.compiled(SCHEMA, kind="Widget")
    assert schemas.compiled(SCHEMA, kind="Widget") is first
    assert schemas.compiled(copy.deepcopy(SCHEMA), kind="Widget") is not first


def test_a_kubectl_list_of_crds_is_indexed_too() -> None:
    listed = SchemaSet.from_documents([{"apiVersion": "v1", "kind": "List", "items": [CRD]}])
    assert listed.get("example.com", "v1", "Widget") is SCHEMA


def test_concurrent_checks_share_one_compiled_validator() -> None:
    from concurrent.futures import ThreadPoolExecutor

    fresh = copy.deepcopy(SCHEMA)
    with ThreadPoolExecutor(max_workers=8) as pool:
        entries = list(pool.map(lambda _: schemas.compiled(fresh, kind="Widget"), range(32)))
    assert all(e is entries[0] for e in entries)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda i: schemas.check(widget(limit=i + 1), fresh, kind="Widget"), range(64)))
    assert all(o.findings == () for o in outcomes)


CEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "limit": {
                    "type": "integer",
                    "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "limit may only grow"}],
                },
                "mode": {"type": "string", "default": "Exact"},
            },
            "x-kubernetes-validations": [{"rule": "self.mode == 'Exact'", "message": "mode must be Exact"}],
        },
    },
}


def test_cel_rules_run_after_defaulting_and_see_the_old_object_on_update() -> None:
    pytest.importorskip("validators.cel.celchecks", reason="the CEL adapter is another module")
    crd = copy.deepcopy(CRD)
    crd["spec"]["versions"] = [{"name": "v1", "served": True, "schema": {"openAPIV3Schema": CEL_SCHEMA}}]
    cel_set = SchemaSet.from_documents([crd])
    assert [f.code for f in run(widget(), schemas=cel_set)] == []  # mode defaulted to Exact first
    from validators.changes import Operation

    old, new = widget(limit=10), widget(limit=5)
    found = run(new, schemas=cel_set, operation=Operation.UPDATE, old=old)
    assert [(f.code, f.field) for f in found] == [("RG0300", "spec.limit")]
    assert "limit may only grow" in found[0].message
    assert run(new, schemas=cel_set, operation=Operation.CREATE) == []
