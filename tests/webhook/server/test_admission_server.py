"""Admission control and the verdict cache through the real HTTPS webhook."""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from certs import bootstrap, reloading
from tests.conftest import need_shared
from tests.webhook.conftest import STATE_DIR, load_objects
from validators.changes import Change
from validators.states import MemoryState, State
from webhook.gate.gates import Gate
from webhook.gate.verdicts import Verdict
from webhook.server import servers
from webhook.server.admission import Batcher
from webhook.sources import StaticSource

pytestmark = pytest.mark.haproxy


class CountingGate(Gate):
    """The real gate, counting reviews and optionally holding each one for ``delay`` seconds."""

    def __init__(self, inner: Gate, delay: float = 0.0) -> None:
        super().__init__(rules=inner.rules, renderer=inner.renderer, checker=inner.checker)
        self.reviews = 0
        self.delay = delay

    async def review(self, change: Change, *, state: State, reload_note: bool = True) -> Verdict:
        self.reviews += 1
        await asyncio.sleep(self.delay)
        return await super().review(change, state=state, reload_note=reload_note)

    async def review_together(self, changes: Sequence[Change], *, state: State,
                              notes_for: float | None = None) -> list[Verdict]:
        self.reviews += len(changes)
        await asyncio.sleep(self.delay * len(changes))  # as slow per review as one by one
        return await super().review_together(changes, state=state, notes_for=notes_for)


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session, self.base = session, base

    async def post(self, body: dict[str, Any], query: str = "") -> dict[str, Any]:
        """The AdmissionReview's response; "could not decide" (a 503 call failure) as its Status
        document, marked ``undecided``."""
        async with self.session.post(f"{self.base}/validate{query}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}) as resp:
            doc = await resp.json()
            if resp.status == 503:
                assert resp.headers["Retry-After"] == "1" and doc["kind"] == "Status", doc
                return {"undecided": True, **doc}
            assert resp.status == 200
            out: dict[str, Any] = doc["response"]
            return out


async def serving(gate: Gate, tmp_path: Path, queue: Batcher | None = None,
                  state_objects: Sequence[dict[str, Any]] = ()) -> AsyncIterator[Client]:
    paths = bootstrap.ensure_self_signed(tmp_path / "certs")
    reloader = reloading.CertReloader(paths.cert, paths.key)
    reloader.load()
    state = MemoryState([*load_objects(STATE_DIR), *state_objects], version="test")
    app = servers.make_app(gate, StaticSource(state, origin=str(STATE_DIR)), certs=reloader, queue=queue)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=reloader.context)
    trust = ssl.create_default_context(cafile=str(paths.ca))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
        yield Client(session, f"https://localhost:{server.port}")
    await server.close()


@pytest.fixture
async def counted(gate: Gate, tmp_path: Path) -> AsyncIterator[tuple[Client, CountingGate]]:
    counting = CountingGate(gate)
    async for client in serving(counting, tmp_path):
        yield client, counting


async def test_a_dry_run_then_the_real_apply_is_judged_once_and_each_answer_carries_its_own_uid(
        counted: tuple[Client, CountingGate]) -> None:
    client, gate = counted
    fixtures = need_shared("fixtures", "admission-reviews")
    dry = json.loads((fixtures / "02-httproute-create-dryrun.json").read_text())
    real = json.loads((fixtures / "03-httproute-create.json").read_text())
    # The captured pair differs in the object's uid; give both the same annotations (the dry run was
    # captured from a server-side apply) so that only what a real pair differs in remains.
    real["request"]["object"]["metadata"]["annotations"] = copy.deepcopy(
        dry["request"]["object"]["metadata"].get("annotations"))
    first = await client.post(dry)
    second = await client.post(real)
    assert first["uid"] == dry["request"]["uid"] and second["uid"] == real["request"]["uid"]
    assert first["allowed"] is second["allowed"] is True
    assert gate.reviews == 1
    changed = copy.deepcopy(real)
    changed["request"]["uid"] = "another"
    changed["request"]["object"]["spec"]["hostnames"] = ["other.example.com"]
    third = await client.post(changed)
    assert third["uid"] == "another" and gate.reviews == 2


async def test_a_review_that_cannot_meet_the_apiserver_timeout_is_answered_could_not_decide_at_once(
        gate: Gate, tmp_path: Path) -> None:
    slow = CountingGate(gate, delay=0.5)
    async for client in serving(slow, tmp_path, queue=Batcher(slow, concurrency=1)):
        fixtures = need_shared("fixtures", "admission-reviews")
        body = json.loads((fixtures / "03-httproute-create.json").read_text())

        def distinct(i: int, body: dict[str, Any] = body) -> dict[str, Any]:
            out = copy.deepcopy(body)
            out["request"]["uid"] = f"uid-{i}"
            out["request"]["object"]["spec"]["hostnames"] = [f"h{i}.example.com"]
            return out

        # Durations to estimate from: one review alone, then one alone and two together.
        assert (await client.post(distinct(0), "?timeout=10s"))["allowed"] is True
        seeded = await asyncio.gather(*(client.post(distinct(i), "?timeout=10s") for i in range(1, 4)))
        assert all(a["allowed"] for a in seeded) and slow.reviews == 4
        answers = await asyncio.gather(*(client.post(distinct(i), "?timeout=3s") for i in range(4, 10)))
        undecided = [a for a in answers if a.get("undecided")]
        assert undecided, "six reviews of over 0.5 s each, even together, cannot all finish within 2 s"
        assert all(a["allowed"] for a in answers if not a.get("undecided"))
        assert all(a["code"] == 503 and "could not decide" in a["message"] for a in undecided)
        assert any(word in a["message"] for a in undecided for word in ("deadline", "less than a review"))
        assert slow.reviews < 10, "a refused review never reached the gate"


async def test_new_crd_schemas_invalidate_the_reused_verdicts(counted: tuple[Client, CountingGate]) -> None:
    client, gate = counted
    body = json.loads((need_shared("fixtures", "admission-reviews") / "03-httproute-create.json").read_text())
    await client.post(body)
    await client.post(body)
    assert gate.reviews == 1
    gate.rules.schemas = None  # type: ignore[attr-defined]  # as liveschemas.follow replaces the set
    await client.post(body)
    assert gate.reviews == 2


async def test_a_burst_is_judged_together_in_time_and_healthz_answers_throughout(gate: Gate, tmp_path: Path) -> None:
    queue = Batcher(gate)
    async for client in serving(gate, tmp_path, queue=queue):
        body = json.loads((need_shared("fixtures", "admission-reviews") / "03-httproute-create.json").read_text())

        def distinct(i: int, body: dict[str, Any] = body) -> dict[str, Any]:
            out = copy.deepcopy(body)
            out["request"]["uid"] = f"burst-{i}"
            out["request"]["object"]["metadata"]["name"] = f"burst-{i}"
            out["request"]["object"]["spec"]["hostnames"] = [f"burst-{i}.example.com"]
            return out

        burst = asyncio.ensure_future(asyncio.gather(*(client.post(distinct(i), "?timeout=30s") for i in range(40))))
        probes = 0
        while not burst.done():
            async with client.session.get(f"{client.base}/healthz") as resp:
                assert resp.status == 200 and (await resp.json())["status"] == "ok"
            probes += 1
            await asyncio.sleep(0.02)
        answers = await burst
        assert [a["uid"] for a in answers] == [f"burst-{i}" for i in range(40)]
        assert all(a["allowed"] for a in answers), [a["status"]["message"] for a in answers if not a["allowed"]]
        assert probes >= 2, "/healthz was answered while the burst was being judged"
        assert queue.batches >= 1, "the reviews that waited were judged together"
        assert queue.running == 0 and queue.waiting == 0
