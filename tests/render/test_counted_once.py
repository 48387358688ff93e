"""Facts counted once where they are made: an advanced line's condition words (counted per match, for
all its frontends) decide the split form as counting them when asked does; and the SSLPassthrough rules
of a route, skipping rules without filters, are the ones a scan of every rule finds (differential)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render.http.httpmodels import Advanced, condition_words
from haproxy_check.render.l4 import tlsroutes
from validators.objects import as_list, dig

_CONDITIONS = st.lists(st.sampled_from(["{ method GET }", "{ req.hdr(x) -m str -- 'a b c' }", "{ a b c d e f }",
                                        "{ urlp(q) -m reg -- '^x y$' }", '{ x "a b" }', "{ a\\ b # c }"]),
                       max_size=20).map(tuple)


@settings(max_examples=200, deadline=None)
@given(conditions=_CONDITIONS, vhosts=st.lists(st.sampled_from(["a:80", "b:80", "*:443"]), max_size=30))
def test_counted_condition_words_split_as_counting_them(conditions: tuple[str, ...], vhosts: list[str]) -> None:
    asked = Advanced("1|r|0|path", 1, tuple(vhosts), conditions, "c", "")
    counted = Advanced("1|r|0|path", 1, tuple(vhosts), conditions, "c", "", condition_words(conditions))
    assert counted.split == asked.split
    assert counted.acl == asked.acl and counted.acl_conditions == asked.acl_conditions


def _rules_by_scanning_all(route: Any) -> list[int]:
    """``ssl_passthrough_rules`` as it was: every rule's filters scanned."""
    return [i for i, rule in enumerate(as_list(dig(route, "spec", "rules")))
            if any(dig(f, "type") == "ExtensionRef" and dig(f, "extensionRef", "kind") == tlsroutes.SSL_PASSTHROUGH
                   for f in as_list(dig(rule, "filters")))]


_FILTER = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["ExtensionRef", "CORS"]),
                           "extensionRef": st.one_of(st.none(), st.fixed_dictionaries(
                               {"kind": st.sampled_from(["SSLPassthrough", "Other"])}))}),
    st.none(), st.just("x"), st.just(3))
_FILTERS: st.SearchStrategy[Any] = st.one_of(st.lists(_FILTER, max_size=3), st.none(), st.just({}), st.just("f"))
_RULE: st.SearchStrategy[Any] = st.one_of(st.fixed_dictionaries({}, optional={"filters": _FILTERS}),
                                          st.none(), st.just([]), st.just("rule"))


@settings(max_examples=300, deadline=None)
@given(rules=st.one_of(st.lists(_RULE, max_size=4), st.none(), st.just({})))
def test_passthrough_rules_are_the_ones_a_full_scan_finds(rules: Any) -> None:
    route = {"kind": "HTTPRoute", "spec": {"rules": rules}}
    assert tlsroutes.ssl_passthrough_rules(route) == _rules_by_scanning_all(route)
