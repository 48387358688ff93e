"""``celprograms.whole_to_cel`` (the one-call path's conversion, compiled per site) against ``to_cel``
itself: the same value, node count and ConversionError, on the Gateway API sites of the real CRDs, for
the seeds and for values of every shape ``to_cel`` tells apart (tuples, other Mappings, scalar
subclasses, non-string keys, non-JSON values, escaped and inaccessible names, root metadata, nesting
past MAX_DEPTH)."""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.validators.test_cel_fastpath import SEEDS, fuzz_values, mutated, schema_sets, validators
from validators.cel import celprograms


class _Frozen(Mapping[str, Any]):
    """A Mapping that is not a dict (to_cel's long way)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class _Level(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


def _converted(convert: Any) -> tuple[str, Any]:
    try:
        return "ok", convert()
    except celprograms.ConversionError as e:
        return type(e).__name__, str(e)


def _both(value: Any, root: celprograms.Site) -> tuple[Any, Any]:
    fast = _converted(lambda: celprograms.whole_to_cel(value, root, celprograms.Memo(keep=False)))
    reference = _converted(lambda: celprograms.to_cel(value, root, root=True,
                                                      memo=celprograms.Memo(keep=False)))
    return fast, reference


def _root(seed: dict[str, Any], bundle: str = "bundled") -> celprograms.Site | None:
    group, _, version = seed["apiVersion"].rpartition("/")
    if schema_sets()[bundle].get(group, version, seed["kind"]) is None:
        return None
    validator, _ = validators(bundle, group, version, seed["kind"])
    return validator._root


odd_values = st.recursive(
    fuzz_values | st.sampled_from([_Level.ONE, _Text("x"), b"bytes", {1, 2}, 1 + 2j]),
    lambda inner: (st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(st.sampled_from(["namespace", "name", "x-y", "a b", "metadata", "spec"]),
                                     inner, max_size=3).map(_Frozen)
                   | st.dictionaries(st.sampled_from([1, None, "namespace"]), inner, max_size=2)),
    max_leaves=6,
)


def _put(obj: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    at: Any = out
    for key in path[:-1]:
        at = at.setdefault(key, {}) if isinstance(at, dict) else at
    if isinstance(at, dict):
        at[path[-1]] = value
    return out


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"{s['kind']}-{s['metadata']['name']}")
def test_every_seed_converts_the_same(seed: dict[str, Any]) -> None:
    root = _root(seed)
    if root is None:
        pytest.skip("no schema")
    fast, reference = _both(seed, root)
    assert fast == reference
    assert fast[0] == "ok"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.sampled_from(SEEDS))
def test_mutated_and_odd_values_convert_the_same(data: st.DataObject, seed: dict[str, Any]) -> None:
    root = _root(seed)
    if root is None:
        return
    obj = data.draw(mutated(seed))
    if data.draw(st.booleans()):
        where = data.draw(st.sampled_from([["spec", "x"], ["metadata", "labels"], ["spec", "rules"],
                                           ["spec", "parentRefs"], ["metadata"], ["status"], ["spec"]]))
        obj = _put(obj, where, data.draw(odd_values))
    assert _both(obj, root) == _both(obj, root)  # deterministic
    fast, reference = _both(obj, root)
    assert fast == reference


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = {"x": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("depth", [62, 63, 64, 65, 66])
@pytest.mark.parametrize("leaf", [1, [], {}, "s"])
def test_nesting_around_the_limit_converts_the_same(depth: int, leaf: Any) -> None:
    root = _root(SEEDS[0])
    assert root is not None
    obj = {**SEEDS[0], "spec": {**SEEDS[0].get("spec", {}), "x": _nested(depth, leaf)}}
    for site in (root, celprograms.Site(preserve_unknown=True)):
        assert _both(obj, site) == _both(obj, site)
        fast, reference = _both(obj, site)
        assert fast == reference
    assert _both(_nested(depth, leaf), celprograms.Site()) == _both(_nested(depth, leaf), celprograms.Site())
    fast, reference = _both(_nested(depth, leaf), celprograms.Site())
    assert fast == reference
