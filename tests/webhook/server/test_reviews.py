"""The AdmissionReview v1 contract, on the wire format alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from validators.changes import Operation
from validators.findings import Finding, Severity
from validators.objects import Ref
from webhook.gate.verdicts import Decision, Verdict
from webhook.server import reviews

ROUTE = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
         "metadata": {"name": "api", "namespace": "default"}, "spec": {}}


def review(**request: Any) -> bytes:
    req = {"uid": "u-1", "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
           "operation": "CREATE", "namespace": "default", "name": "api", "object": ROUTE}
    req.update(request)
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


@pytest.mark.parametrize(("body", "says"), [
    pytest.param(b"{not json", "not valid JSON", id="invalid JSON"),
    pytest.param(b"\xff\xfe", "not valid JSON", id="not UTF-8"),
    pytest.param(b"[1, 2]", "must be a JSON object", id="a list is not an object"),
    pytest.param(b'"text"', "must be a JSON object", id="a string is not an object"),
    pytest.param(json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                             "request": {}}).encode(), "apiVersion must be", id="wrong apiVersion"),
    pytest.param(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Review"}).encode(),
                 "kind must be 'AdmissionReview'", id="wrong kind"),
    pytest.param(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
                 "request is missing", id="missing request"),
    pytest.param(review(uid=""), "request.uid", id="empty uid"),
    pytest.param(review(uid=None), "request.uid", id="missing uid"),
    pytest.param(review(operation="PATCH"), "request.operation", id="unknown operation"),
    pytest.param(review(kind="HTTPRoute"), "request.kind must be an object", id="kind not an object"),
    pytest.param(review(object=[1]), "request.object must be an object", id="non-object object"),
    pytest.param(review(object="x"), "request.object must be an object", id="string object"),
    pytest.param(review(object=None), "request.object is required for CREATE", id="CREATE without object"),
    pytest.param(review(operation="DELETE", object=None, oldObject=None), "oldObject is required",
                 id="DELETE without oldObject"),
    pytest.param(review(oldObject=7), "request.oldObject must be an object", id="non-object oldObject"),
    pytest.param(b"[" * 1000 + b"]" * 1000, "nested deeper than 64 levels", id="JSON nested 1000 deep"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64 levels", id="JSON nested 100000 deep"),
    pytest.param(review(object={**ROUTE, "spec": json.loads('{"a":' * 70 + "1" + "}" * 70)}),
                 "nested deeper than 64 levels", id="object nested 70 deep"),
    pytest.param(b'{"a": ' + b"7" * 4301 + b"}", "integer with 4301 digits", id="4301-digit integer"),
    pytest.param(review(object={**ROUTE, "spec": {"n": 12345}}).replace(b"12345", b"9" * 5001),
                 "integer with 5001 digits",
                 id="5001-digit integer in the object"),
    pytest.param(b'{"a": NaN}', "NaN is not JSON", id="NaN"),
    pytest.param(b'{"a": -Infinity}', "-Infinity is not JSON", id="-Infinity"),
])
def test_broken_requests_raise_bad_review_naming_the_problem(body: bytes, says: str) -> None:
    with pytest.raises(reviews.BadReview, match=says.replace("(", r"\(").replace(".", r"\.")):
        reviews.parse(body)


def test_the_depth_bound_leaves_room_for_real_objects() -> None:
    deep = json.loads('{"a":' * 60 + "1" + "}" * 60)
    parsed = reviews.parse(review(object={**ROUTE, "spec": deep}))
    assert parsed.change.obj is not None and parsed.change.obj["spec"] == deep
    assert reviews.parse(review(object={**ROUTE, "spec": {"n": -(10**40), "f": 1.5e300}})).uid == "u-1"


def test_delete_carries_the_old_object_as_subject() -> None:
    parsed = reviews.parse(review(operation="DELETE", object=None, oldObject=ROUTE))
    assert parsed.change.operation is Operation.DELETE
    assert parsed.change.obj is None and parsed.change.subject == ROUTE


def test_identity_missing_from_the_object_is_filled_from_the_request() -> None:
    bare = {"spec": {}, "metadata": {"generateName": "api-"}}
    parsed = reviews.parse(review(object=bare, name="api-x1"))
    assert parsed.change.ref == Ref("HTTPRoute", "default", "api-x1")
    assert parsed.change.subject["apiVersion"] == "gateway.networking.k8s.io/v1"


def test_dry_run_is_read() -> None:
    assert reviews.parse(review(dryRun=True)).dry_run is True
    assert reviews.parse(review()).dry_run is False


def test_a_denial_answers_403_with_the_object_and_field() -> None:
    verdict = Verdict(Decision.DENY, Ref("HTTPRoute", "default", "api"), findings=(
        Finding("RG0101", '"a b" has a space', ("spec", "rules", 0, "sessionPersistence", "sessionName")),))
    out = reviews.respond("u-1", verdict)
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == "u-1" and out["response"]["allowed"] is False
    assert out["response"]["status"] == {"code": 403, "reason": "Forbidden", "message":
        'HTTPRoute default/api: spec.rules[0].sessionPersistence.sessionName: "a b" has a space'}


def test_could_not_decide_is_no_admission_review_but_a_call_failure() -> None:
    """The apiserver applies failurePolicy only to a failed call: "could not decide" must not be an
    AdmissionReview (an allowed: false one is a rejection whatever its code)."""
    verdict = Verdict(Decision.ERROR, Ref("HTTPRoute", "d", "a"), error="haproxy timed out\nafter 5s")
    with pytest.raises(ValueError, match="call failure"):
        reviews.respond("u", verdict)
    out = reviews.call_failure(verdict.message)
    assert out["kind"] == "Status" and out["apiVersion"] == "v1" and out["status"] == "Failure"
    assert out["code"] == 503 and out["reason"] == "ServiceUnavailable"
    assert out["message"] == "HTTPRoute d/a: routegate could not decide: haproxy timed out after 5s"
    assert out["details"]["retryAfterSeconds"] == reviews.RETRY_AFTER
    assert len(reviews.call_failure("x " * 5000)["message"]) == reviews.MAX_REASON


def test_an_allowed_review_has_no_status_and_carries_warnings() -> None:
    verdict = Verdict(Decision.ALLOW, Ref("HTTPRoute", "d", "a"), findings=(
        Finding("RG0307", "timeouts.request is ignored", ("spec", "rules", 0, "timeouts", "request"),
                Severity.WARN),), notes=("needs a reload",))
    out = reviews.respond("u", verdict)["response"]
    assert "status" not in out and out["allowed"] is True
    assert out["warnings"] == ["spec.rules[0].timeouts.request: timeouts.request is ignored [RG0307]",
                               "needs a reload"]


def test_warnings_are_deduplicated_cleaned_and_capped() -> None:
    lines = ["a\x00b\nc", "a b c", "x" * 1000, *[f"w{i:04d}" + "y" * 200 for i in range(40)]]
    out = reviews.clean_warnings(lines)
    assert out[0] == "a b c" and out.count("a b c") == 1
    assert all(len(w) <= reviews.MAX_WARNING for w in out)
    assert sum(len(w) for w in out) <= reviews.MAX_WARNINGS_TOTAL
    assert all(ch.isprintable() for w in out for ch in w)
    assert len(out) < len(lines) - 1, "the total cap must have dropped some"
