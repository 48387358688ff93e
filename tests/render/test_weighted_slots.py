"""The weight slot map made from each rule's slots at once is the map one (sort key, entry) pair per slot
gave: the same entries in the same order, rule ids repeated or not."""

from __future__ import annotations

import operator

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render.http.httpmodels import WEIGHTED_MAP, HttpModel

rule_ids = st.sampled_from(("a_r_0", "a_r_1", "a_r_10", "b_r_0", "a_s_2"))
slot_lists = st.lists(st.sampled_from(("be1", "be2", "@500")), max_size=6).map(tuple)
rules = st.lists(st.tuples(rule_ids, slot_lists), max_size=6)


def _pairs_per_slot(weighted: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """The map as it was made: every slot a pair in ``maps``, sorted by (rule id, slot)."""
    pairs = [((rid, n), f"{n}:{rid} {target}") for rid, targets in weighted for n, target in enumerate(targets)]
    return [e for _, e in sorted(pairs, key=operator.itemgetter(0))]


@settings(max_examples=200, deadline=None)
@given(rules)
def test_slot_entries_equal_one_pair_per_slot(weighted: list[tuple[str, tuple[str, ...]]]) -> None:
    model = HttpModel()
    model.weighted.extend(weighted)
    assert model.map_entries(WEIGHTED_MAP) == _pairs_per_slot(weighted)


def test_a_model_without_weighted_rules_has_an_empty_slot_map() -> None:
    assert HttpModel().map_entries(WEIGHTED_MAP) == []
