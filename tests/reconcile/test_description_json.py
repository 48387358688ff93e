"""description.json is serialized O(change): each backend's text is reused when the incremental render
kept its record; differential test against the whole serialization, over random change sequences. Its
maps name their files for their entries (``haproxy_check.runtime.descriptionfiles``), and read back whole."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from bench.bench_gate import objects
from haproxy_check.descriptions import BackendDesc
from haproxy_check.runtime import descriptionfiles
from haproxy_check.runtime.descriptionfiles import DescriptionJson
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.reconcile.reconciler import _json_bytes


def _mutate(objs: list[dict[str, Any]], rng: random.Random, n: int) -> None:
    routes = [o for o in objs if o["kind"] == "HTTPRoute"]
    slices = [o for o in objs if o["kind"] == "EndpointSlice"]
    route, rule = rng.choice(routes), None
    kind = rng.choice(["header", "weight", "endpoint", "hostname", "delete", "copy"])
    if kind == "header":
        rule = route["spec"]["rules"][0]
        rule["filters"][0]["requestHeaderModifier"]["set"][0]["value"] = f"v{n}"
    elif kind == "weight":
        route["spec"]["rules"][0]["backendRefs"][0]["weight"] = rng.randrange(0, 100)
    elif kind == "endpoint":
        rng.choice(slices)["endpoints"][0]["addresses"] = [f"10.9.{n % 250}.{rng.randrange(1, 250)}"]
    elif kind == "hostname":
        route["spec"]["hostnames"] = [f"h{n}.edge.example.com"]
    elif kind == "delete" and len(routes) > 5:
        objs.remove(route)
    else:
        twin = copy.deepcopy(route)
        twin["metadata"] = {**twin["metadata"], "name": f"twin-{n}", "uid": f"uid-twin-{n}"}
        objs.append(twin)


def test_description_json_is_the_whole_serialization_and_reuses_unchanged_backends(
        gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(28)
    objs = objects(40)
    serializer = DescriptionJson()
    previous = None
    serialized: list[str] = []
    original = BackendDesc.as_dict

    def counting(self: BackendDesc) -> dict[str, Any]:
        serialized.append(self.name)
        return original(self)

    for n in range(25):
        render = gate.renderer.render(MemoryState(copy.deepcopy(objs), version=f"v{n}"), subject=None,
                                      previous=previous)
        whole = descriptionfiles.from_scratch(render.description, render.files)
        # without the map files beside it, every map is inline: the description as it always was
        assert descriptionfiles.from_scratch(render.description, {}) == _json_bytes(render.description.as_dict())
        files = {**render.files, descriptionfiles.FILE: whole}
        read = descriptionfiles.parse(json.loads(whole), files.__getitem__)
        assert read.as_dict() == render.description.as_dict(), n
        assert any(descriptionfiles.ENTRIES_FILE in m for m in json.loads(whole)["maps"])
        serialized.clear()
        monkeypatch.setattr(BackendDesc, "as_dict", counting)
        assert serializer.of(render.description, render.files) == whole, n
        monkeypatch.setattr(BackendDesc, "as_dict", original)
        if previous is not None:
            before = {b.name: b for b in previous.backends}
            changed = {b.name for b in render.description.backends if before.get(b.name) is not b}
            assert set(serialized) <= changed  # unchanged records are not serialized again
            assert len(serialized) < len(render.description.backends) or not render.description.backends
        previous = render.description
        _mutate(objs, rng, n)
