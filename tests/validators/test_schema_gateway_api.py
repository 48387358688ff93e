"""The schema check against the real Gateway API v1.6.1 CRDs and the captured AdmissionReviews.

Skipped with a reason when ``shared/`` (the CRDs and fixtures) is not beside the checkout.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from validatorbuilders import backend, fixture_requests, gateway_api, prefix, route, run

from validators import codes
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.schema import schemas
from validators.states import MemoryState

CHANNELS = ["standard", "experimental"]
SCHEMA_CODES = {codes.SCHEMA_INVALID, codes.UNKNOWN_FIELD, codes.DUPLICATE_ITEM, codes.NO_SCHEMA}


@pytest.mark.parametrize("channel", CHANNELS)
def test_every_reviewed_kind_has_a_served_schema(channel: str) -> None:
    kinds = gateway_api(channel).kinds()
    for kind in (
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "TCPRoute",
        "ReferenceGrant",
        "ListenerSet",
        "BackendTLSPolicy",
    ):
        assert kind in kinds
    assert gateway_api("standard").get("gateway.networking.k8s.io", "v1alpha2", "TCPRoute") is None
    assert gateway_api("experimental").get("gateway.networking.k8s.io", "v1alpha2", "TCPRoute") is not None


@pytest.mark.parametrize("channel", CHANNELS)
def test_every_captured_review_object_is_schema_valid(channel: str) -> None:
    checks = Checks(schemas=gateway_api(channel), cross_object=False)
    for name, request in fixture_requests():
        for field in ("object", "oldObject"):
            obj = request.get(field)
            if obj is None:
                continue
            found = checks.check(Change(Operation.CREATE, obj), MemoryState())
            assert [
                (f.code, f.field, f.message) for f in found if f.severity == "deny" or f.code in SCHEMA_CODES
            ] == [], f"{name} {field}"


def test_the_review_fixtures_pass_check_for_their_own_operation() -> None:
    checks = Checks(schemas=gateway_api("experimental"), cross_object=False)
    for name, request in fixture_requests():
        change = Change(
            Operation(request["operation"]),
            request.get("object"),
            request.get("oldObject"),
            bool(request.get("dryRun")),
        )
        result = checks.run(change, MemoryState())
        assert result.findings == [], name
        assert (result.defaulted is None) == (change.operation is Operation.DELETE), name


def test_defaulting_the_users_manifest_gives_what_the_api_server_stored() -> None:
    request = dict(fixture_requests())["03-httproute-create.json"]
    stored = request["object"]
    applied = json.loads(
        stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    )
    assert applied["spec"] != stored["spec"]  # the user's manifest lacks the defaults
    schema = gateway_api("experimental").get("gateway.networking.k8s.io", "v1", "HTTPRoute")
    assert schema is not None
    assert schemas.check(applied, schema, kind="HTTPRoute").defaulted["spec"] == stored["spec"]


def bad_route(**changes: Any) -> dict[str, Any]:
    return route(
        {"matches": [prefix("/api")], "backendRefs": [backend("web", 8080)]}, hostnames=["a.example.com"]
    )


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        pytest.param(
            lambda r: r["spec"]["rules"][0]["backendRefs"][0].update(port=70000),
            "spec.rules[0].backendRefs[0].port",
            "Invalid value: 70000: must be less than or equal to 65535",
            id="port above 65535",
        ),
        pytest.param(
            lambda r: r["spec"]["rules"][0]["matches"][0]["path"].update(type="Foo"),
            "spec.rules[0].matches[0].path.type",
            'Unsupported value: "Foo": supported values: "Exact", "PathPrefix", "RegularExpression"',
            id="unknown path type",
        ),
        pytest.param(
            lambda r: r["spec"]["parentRefs"][0].pop("name"),
            "spec.parentRefs[0].name",
            "Required value",
            id="parentRef without name",
        ),
        pytest.param(
            lambda r: r["spec"].update(hostnames=["A_b.example.com"]),
            "spec.hostnames[0]",
            'Invalid value: "A_b.example.com": should match '
            r"'^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
            id="hostname pattern",
        ),
    ],
)
def test_gateway_api_violations_read_like_the_api_server(mutate: Any, field: str, message: str) -> None:
    o = bad_route()
    mutate(o)
    found = [
        (f.code, f.field, f.message)
        for f in run(o, schemas=gateway_api("experimental"))
        if f.code == codes.SCHEMA_INVALID
    ]
    assert (codes.SCHEMA_INVALID, field, message) in found


def test_a_forged_review_with_an_unknown_field_is_flagged() -> None:
    o = bad_route()
    o["spec"]["rules"][0]["backendRefs"][0]["hack"] = "x"
    found = [(f.code, str(f.severity), f.field) for f in run(o, schemas=gateway_api("standard"))]
    assert (codes.UNKNOWN_FIELD, "warn", "spec.rules[0].backendRefs[0].hack") in found


def test_the_input_object_is_not_mutated_by_a_full_check() -> None:
    request = dict(fixture_requests())["04-httproute-update.json"]
    before = copy.deepcopy(request)
    checks = Checks(schemas=gateway_api("experimental"))
    checks.check(Change(Operation.UPDATE, request["object"], request["oldObject"]), MemoryState())
    assert request == before
