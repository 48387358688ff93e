"""Warning Events against the fake API server: created once, not repeated, bumped later, rate-limited."""

from __future__ import annotations

from typing import Any

from tests.fakekube import FakeKube
from validators.objects import Ref
from webhook.reconcile.events import EventRecorder

ROUTE = Ref("HTTPRoute", "shop", "cart")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _events(kube: FakeKube) -> list[dict[str, Any]]:
    return sorted(kube.objects[("", "events")].values(), key=lambda e: e["metadata"]["name"])


async def test_created_once_then_deduplicated_then_counted(kube: FakeKube, api: Any) -> None:
    clock = Clock()
    recorder = EventRecorder(api, repeat_after=600, clock=clock)
    assert await recorder.warn(ROUTE, "InvalidSessionPersistence", "m", uid="u-1")
    assert not await recorder.warn(ROUTE, "InvalidSessionPersistence", "m", uid="u-1")
    [event] = _events(kube)
    assert event["count"] == 1 and event["type"] == "Warning" and event["reason"] == "InvalidSessionPersistence"
    assert event["involvedObject"]["uid"] == "u-1" and event["source"]["component"] == "routegate"
    clock.now += 601
    assert await recorder.warn(ROUTE, "InvalidSessionPersistence", "m")
    [event] = _events(kube)
    assert event["count"] == 2
    assert sum(r.startswith("PATCH") for r in kube.requests) == 1
    assert sum(r.startswith("POST") for r in kube.requests) == 1


async def test_another_reason_or_object_is_another_event(kube: FakeKube, api: Any) -> None:
    recorder = EventRecorder(api)
    await recorder.warn(ROUTE, "RetryCodeUnsupported", "code 418")
    await recorder.warn(ROUTE, "RetryBackoffUnsupported", "backoff")
    await recorder.warn(Ref("HTTPRoute", "shop", "other"), "RetryCodeUnsupported", "code 418")
    assert sorted((e["involvedObject"]["name"], e["reason"]) for e in _events(kube)) == [
        ("cart", "RetryBackoffUnsupported"), ("cart", "RetryCodeUnsupported"), ("other", "RetryCodeUnsupported")]


async def test_rate_limited_per_object(kube: FakeKube, api: Any) -> None:
    clock = Clock()
    recorder = EventRecorder(api, burst=3, refill=60, clock=clock)
    written = [await recorder.warn(ROUTE, "Routegate", f"finding {i}") for i in range(5)]
    assert written == [True, True, True, False, False]
    assert await recorder.warn(Ref("HTTPRoute", "shop", "other"), "Routegate", "x")  # its own bucket
    clock.now += 60
    assert await recorder.warn(ROUTE, "Routegate", "finding 9")
    assert len(_events(kube)) == 5


async def test_a_restarted_recorder_continues_the_series(kube: FakeKube, api: Any) -> None:
    await EventRecorder(api).warn(ROUTE, "InvalidSessionPersistence", "m")
    assert await EventRecorder(api).warn(ROUTE, "InvalidSessionPersistence", "m")  # 409, then bumped
    [event] = _events(kube)
    assert event["count"] == 2


async def test_an_api_error_is_counted_not_raised(kube: FakeKube, api: Any) -> None:
    kube.fail_next("post", 403, plural="events")
    assert not await EventRecorder(api).warn(ROUTE, "InvalidSessionPersistence", "m")
    assert _events(kube) == []


async def test_a_line_number_moving_is_the_same_event(kube: FakeKube, api: Any) -> None:
    """HAProxy's message names the line of haproxy.cfg, which moves when other objects change: an object
    that stays broken keeps one Event (its count bumped), not one per reconcile."""
    clock = Clock()
    recorder = EventRecorder(api, repeat_after=600, clock=clock)
    message = "spec.rules[1]: haproxy rejects the configuration: regex 'a{2,1}' is invalid (haproxy.cfg:{n}: x)"
    assert await recorder.warn(ROUTE, "HAProxyRejected", message.replace("{n}", "34"))
    assert not await recorder.warn(ROUTE, "HAProxyRejected", message.replace("{n}", "61"))
    clock.now += 601
    assert await recorder.warn(ROUTE, "HAProxyRejected", message.replace("{n}", "75"))
    [event] = _events(kube)
    assert event["count"] == 2 and "haproxy.cfg:34:" in event["message"]
    assert await recorder.warn(ROUTE, "HAProxyRejected", "another message (haproxy.cfg:34: x)")
    assert len(_events(kube)) == 2
