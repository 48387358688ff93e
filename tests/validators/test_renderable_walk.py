"""The one-pass walk of ``sweeps.renderable`` finds exactly what the string-by-string definition
(``sweeps.renderable_scan``: ``strings`` then ``_reason`` per string) finds, in the same order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from validators.contexts import Context
from validators.objectrules import sweeps

KEYS = st.sampled_from(sorted({*sweeps.KEY_FIELDS, *sweeps.KEY_LISTS, *sweeps.REF_FIELDS, "matches", "path",
                               "value", "infrastructure", "spec", "rules", "x"}))
TEXTS = st.one_of(
    st.sampled_from(["", "a", "ok-name", "a b", "bad name", "-lead", "x.y_z", "/path", "tab\there", "lf\n",
                     "nb\xa0sp", "del\x7f", "\u2028", "caf\u00e9", "\ud800", "\U000e0000x", "emoji\U0001f600"]),
    st.text(max_size=8),
)


def json_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.one_of(TEXTS, st.integers(-2, 2), st.none(), st.booleans()),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.one_of(KEYS, TEXTS), inner, max_size=4)),
        max_leaves=25,
    )


def route_specs() -> st.SearchStrategy[Any]:
    """Route-shaped specs: references (parentRefs, backendRefs, a filter's backendRef) whose names and
    namespaces are drawn from plain and odd texts, next to any JSON."""
    ref = st.dictionaries(st.sampled_from(["name", "namespace", "kind", "port", "filters"]),
                          st.one_of(TEXTS, json_values()), max_size=4)
    rule = st.fixed_dictionaries({}, optional={
        "backendRefs": st.lists(ref, max_size=2), "matches": json_values(),
        "filters": st.lists(st.fixed_dictionaries({"requestMirror": st.fixed_dictionaries(
            {"backendRef": ref})}), max_size=1)})
    return st.fixed_dictionaries({}, optional={"parentRefs": st.lists(ref, max_size=2),
                                               "rules": st.lists(rule, max_size=2), "hostnames": json_values(),
                                               "infrastructure": json_values()})


@settings(max_examples=400, deadline=None)
@given(st.one_of(json_values(), route_specs()))
def test_walk_agrees_with_scan(spec: Any) -> None:
    obj = {"kind": "HTTPRoute", "spec": spec}
    assert list(sweeps.renderable(obj, Context())) == list(sweeps.renderable_scan(obj, Context()))


def test_deep_and_skipped() -> None:
    deep: Any = "a b"
    for _ in range(70):
        deep = {"name": deep, "backendRefs": [{"name": "x y", "hostname": "h\n"}]}
    for spec in (deep, {"infrastructure": {"name": "a\nb"}, "hostnames": ["a b"]}):
        obj = {"spec": spec}
        assert list(sweeps.renderable(obj, Context())) == list(sweeps.renderable_scan(obj, Context()))
        assert list(sweeps.renderable(obj, Context()))
