"""Servers remembered for a render per (Service, EndpointSlices) objects are the servers made afresh,
whichever objects a later lookup brings, with the reads a cached route logs unchanged."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.render import endpoints
from tests.render.test_fast_paths import endpoint_slices
from validators.states import MemoryState
from validators.views.reads import Recording


def _service(external: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80}]}
    if external:
        spec.update(type="ExternalName", externalName="db.example")
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}, "spec": spec}


@settings(max_examples=150, deadline=None)
@given(first=endpoint_slices(), second=endpoint_slices(), keep=st.lists(st.booleans(), max_size=3),
       external=st.booleans(), limit=st.none() | st.integers(0, 5),
       options=st.sampled_from([(), ("ssl", "verify", "none")]))
def test_remembered_servers_are_the_servers_made_afresh(first: list[dict[str, Any]], second: list[dict[str, Any]],
                                                        keep: list[bool], external: bool, limit: int | None,
                                                        options: tuple[str, ...]) -> None:
    service = _service(external)
    memo: endpoints.ServersMemo = {}
    kw: dict[str, Any] = {"limit": limit, "options": options}
    one = MemoryState([service, *first])
    fresh = endpoints.servers_within(one, service, 80, **kw)
    assert endpoints.servers_within(one, service, 80, memo=memo, **kw) == fresh
    assert endpoints.servers_within(one, service, 80, memo=memo, **kw) == fresh  # remembered
    # other objects: some slices the very same, others new ones (equal or changed), the Service too
    mixed = [s if k else copy.deepcopy(s) for s, k in zip(first, keep, strict=False)] + second
    other_service = service if keep[:1] == [True] else copy.deepcopy(service)
    two = MemoryState([other_service, *mixed])
    assert endpoints.servers_within(two, other_service, 80, memo=memo, **kw) == endpoints.servers_within(
        two, other_service, 80, **kw)
    # through a recording view: the same servers, and the slice lookup logged as when made afresh
    seen, unmemoized = Recording(two), Recording(two)
    assert endpoints.servers_within(seen, other_service, 80, memo=memo, **kw) == endpoints.servers_within(
        unmemoized, other_service, 80, **kw)
    assert seen.reads.frozen().lookups == unmemoized.reads.frozen().lookups
