"""A lost claim's message names its match from the match key alone (the words are not kept per match):
the same keys and the same words as reading them off the match itself."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.crossobject import claims
from validators.objects import as_list, dig

TEXT = st.sampled_from(["", "/", "/api", "x-a", "X-B", "Exact", "GET", "svc.Echo", "Say"])
PAIRS = st.lists(st.fixed_dictionaries({}, optional={"name": TEXT, "type": TEXT, "value": TEXT}), max_size=3)
HTTP = st.fixed_dictionaries({}, optional={
    "path": st.fixed_dictionaries({}, optional={"type": TEXT, "value": TEXT}),
    "method": TEXT, "headers": PAIRS, "queryParams": PAIRS})
GRPC = st.fixed_dictionaries({}, optional={
    "method": st.fixed_dictionaries({}, optional={"type": TEXT, "service": TEXT, "method": TEXT}),
    "headers": PAIRS})


def read_off(route: dict[str, Any], rule: Any) -> list[tuple[int, tuple[Any, ...], str]]:
    """(match index, key, words) read off each match of the rule directly."""
    out = []
    for k, m in enumerate(as_list(dig(rule, "matches")) or [{}]):
        headers = tuple(sorted((str(dig(h, "name", default="")).lower(), str(dig(h, "type", default="Exact")),
                                str(dig(h, "value", default=""))) for h in as_list(dig(m, "headers"))))
        key: tuple[Any, ...]
        if route["kind"] == "GRPCRoute":
            method = (str(dig(m, "method", "type", default="Exact")), str(dig(m, "method", "service", default="")),
                      str(dig(m, "method", "method", default="")))
            key, words = ("grpc", method, headers), f"gRPC method {'/'.join(x for x in method[1:] if x) or '*'}"
        else:
            ptype, pvalue = str(dig(m, "path", "type", default="PathPrefix")), str(dig(m, "path", "value", default="/"))
            query = tuple(sorted((str(dig(q, "name", default="")), str(dig(q, "type", default="Exact")),
                                  str(dig(q, "value", default=""))) for q in as_list(dig(m, "queryParams"))))
            method_s = str(dig(m, "method", default=""))
            key = ("http", ptype, pvalue, method_s, headers, query)
            words = f"{ptype} {pvalue}" + (f" method {method_s}" if method_s else "")
        if headers:
            words += f" with {len(headers)} header matcher(s)"
        out.append((k, key, words))
    return out


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["HTTPRoute", "GRPCRoute"]).flatmap(
    lambda kind: st.tuples(st.just(kind), st.lists(HTTP if kind == "HTTPRoute" else GRPC, max_size=3))))
def test_keys_and_words_are_those_of_the_match(case: tuple[str, list[dict[str, Any]]]) -> None:
    kind, matches = case
    route: dict[str, Any] = {"kind": kind, "spec": {"rules": [{"matches": matches}]}}
    rule = route["spec"]["rules"][0]
    got = [(k, key, claims._words(key)) for k, key in claims._match_keys(route, rule)]
    assert got == read_off(route, rule)
