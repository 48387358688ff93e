"""RG0107 on its boundary, drawn from the Gateway API CRD's own pattern for header and query parameter
names (the CRD routegate bundles, v1.6.1): a name the CRD accepts is allowed wherever HAProxy honours it
(every header name: the renderer quotes what HAProxy's parsers would read; tests/render/test_header_tokens.py
proves it with haproxy -c and traffic), and denied only where it cannot be, with the reason (a query
parameter name holding ``#`` or ``%``, which ``urlp()`` compares undecoded and so can never match)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from validatorbuilders import R0, backend, crd_route, hdr, prefix, route, run

from validators import codes
from webhook.gate import assembly


def _name_schema() -> dict[str, Any]:
    """The CRD's schema of ``matches[].headers[].name`` (the same pattern serves modifiers and queries)."""
    crd = next(d for d in assembly.bundled_crd_documents()
               if d["metadata"]["name"] == "httproutes.gateway.networking.k8s.io")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    rules = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["rules"]
    match = rules["items"]["properties"]["matches"]["items"]["properties"]
    schema: dict[str, Any] = match["headers"]["items"]["properties"]["name"]
    assert match["queryParams"]["items"]["properties"]["name"]["pattern"] == schema["pattern"]
    return schema


SCHEMA = _name_schema()
NAMES = st.from_regex(SCHEMA["pattern"], fullmatch=True).filter(lambda s: len(s) <= SCHEMA["maxLength"])


def _rg0107(o: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(str(f.severity), f.field, f.message) for f in run(o) if f.code == codes.HEADER_NAME]


@settings(max_examples=300, deadline=None)
@given(name=NAMES)
def test_every_header_name_the_crd_accepts_is_allowed(name: str) -> None:
    mods = {"set": [{"name": name, "value": "v"}], "add": [{"name": name, "value": "v"}], "remove": [name]}
    assert _rg0107(route({"filters": [hdr(**mods), hdr("ResponseHeaderModifier", **mods)]})) == []
    assert _rg0107(route({"backendRefs": [backend(filters=[hdr(**mods)])]})) == []
    assert _rg0107(route({"matches": [{**prefix(), "headers": [{"name": name, "value": "v"}]}]})) == []
    assert _rg0107(route({"matches": [{"method": {"service": "a.B", "method": "M"},
                                       "headers": [{"name": name, "value": "v"}]}]}, kind="GRPCRoute")) == []
    assert _rg0107(crd_route(name)) == []


@settings(max_examples=300, deadline=None)
@given(name=NAMES)
def test_a_query_parameter_name_is_denied_only_where_urlp_cannot_match_it(name: str) -> None:
    found = _rg0107(route({"matches": [{**prefix(), "queryParams": [{"name": name, "value": "v"}]}]}))
    if "#" not in name and "%" not in name:
        assert found == []
    else:
        [(severity, field, message)] = found
        assert (severity, field) == ("deny", f"{R0}.matches[0].queryParams[0].name")
        assert "urlp() compares names undecoded" in message and "could never match" in message


@given(name=st.text(min_size=1, max_size=20).filter(lambda s: not all(c.isascii() and c.isalnum() for c in s)))
def test_a_name_outside_the_crd_pattern_is_still_denied(name: str) -> None:
    """The other side of the boundary: what the CRD refuses, RG0107 refuses too (a space, a colon, ...)."""
    import re

    if re.fullmatch(SCHEMA["pattern"], name):
        return
    found = _rg0107(route({"filters": [hdr(set=[{"name": name, "value": "v"}])]}))
    assert [(s, f) for s, f, _ in found] == [("deny", f"{R0}.filters[0].requestHeaderModifier.set[0].name")]
