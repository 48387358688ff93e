"""Which kept version a running data plane has loaded (``haproxy_check.runtime.running``), against a real
master-worker HAProxy: the version it started on, the one a runtime plan brought it to, and no answer
when the versions that match differ where the socket cannot see (or none matches)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import pytest

from haproxy_check.descriptions import Description
from haproxy_check.runtime import running, runtimeapi, runtimeplans
from tests.haproxy_check import dataplanes as dp
from tests.haproxy_check.test_runtime_live import ADDRS, renders, state


@pytest.fixture(scope="module")
def backend_port() -> Iterator[int]:
    port = dp.free_port()
    with dp.backend_servers(ADDRS, port):
        yield port


def which(socket: str, candidates: list[tuple[str, Description]]) -> str | None:
    observed = asyncio.run(running.observe(socket, (m.path for _, d in candidates for m in d.maps)))
    return running.which(observed, candidates)


def test_the_version_it_runs_is_found_and_follows_runtime_updates(haproxy_path: str, backend_port: int) -> None:
    port = dp.free_port()
    before, after = renders(state(port, backend_port), state(port, backend_port, env="two",
                                                             addrs=("127.0.0.1", "127.0.0.3")))
    old, new = before.description, after.description
    with dp.dataplane(haproxy_path, before) as live:
        assert which(live.socket, [("v2", new), ("v1", old)]) == "v1"
        plan = runtimeplans.plan(old, new, dataplane_version=(2, 8))
        assert asyncio.run(runtimeapi.apply(plan, live.socket)).ok
        assert which(live.socket, [("v2", new), ("v1", old)]) == "v2"
        # into maintenance and out again
        for maint in (True, False):
            backend = new.backends[0]
            first = replace(backend.servers[0], options=("disabled",) if maint else ())
            nxt = replace(new, backends=(replace(backend, servers=(first, *backend.servers[1:])),))
            plan = runtimeplans.plan(new, nxt, dataplane_version=(2, 8))
            assert asyncio.run(runtimeapi.apply(plan, live.socket)).ok
            assert which(live.socket, [("v3", nxt), ("v2", new)]) == "v3"
            new = nxt
        # the same records, another frame (a frontend rule): the socket cannot tell them apart
        assert which(live.socket, [("v3", replace(new, frame="other")), ("v2", new)]) is None
        # a version whose records are not what runs
        assert which(live.socket, [("v1", old)]) is None


def test_a_socket_that_does_not_answer_is_an_error(tmp_path: object) -> None:
    with pytest.raises(runtimeapi.SocketError):
        asyncio.run(running.observe("/nonexistent/haproxy.sock", ()))
