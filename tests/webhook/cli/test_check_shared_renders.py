"""``routegate check --state``: the stored state is rendered once, and that render serves both the
batch's traffic diff (its before-state) and the prediction (``checking._sharing_render_of``).

Differential: the json report (every verdict, finding, traffic diff, status and the prediction) is the
same as the plain path's at the same commit, where each step renders the state itself, on generated
states and inputs (all allowed, so the prediction is made; with many kinds of findings; ``--each``).
Only the timings differ, and the plain path renders the state once more (per apply set with --each)."""

from __future__ import annotations

import collections
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from haproxy_check.render import rendering
from tests.webhook.cli.test_check_lazy import corpus
from webhook.cli import checking
from webhook.cli import routegate as cli


def _state(root: Path, routes: int, seed: int) -> Path:
    """A stored state: the Gateway, Services and EndpointSlices the inputs use, and ``routes`` routes
    already there (some of them replaced by the inputs, whose names are r0, r1, ...)."""
    rng = random.Random(seed)
    objects: list[Any] = [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                           "metadata": {"name": "edge", "namespace": "capture"},
                           "spec": {"gatewayClassName": "routegate",
                                    "listeners": [{"name": "http", "protocol": "HTTP", "port": 80,
                                                   "allowedRoutes": {"namespaces": {"from": "All"}}}]}}]
    for name, address in (("web", "10.0.0.10"), ("web-canary", "10.0.0.11")):
        objects.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "capture"},
                        "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}})
        objects.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                        "metadata": {"name": f"{name}-1", "namespace": "capture",
                                     "labels": {"kubernetes.io/service-name": name}},
                        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
                        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}]})
    for n in range(routes):
        objects.append({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                        "metadata": {"name": f"r{rng.choice([n, n + 100])}", "namespace": "capture"},
                        "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"h{n % 7}.example.com"],
                                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/s{n}"}}],
                                            "backendRefs": [{"name": rng.choice(["web", "web-canary"]),
                                                             "port": 8080}]}]}})
    path = root / "state.yaml"
    path.write_text(yaml.safe_dump_all(list({(o["kind"], o["metadata"]["name"]): o for o in objects}.values())))
    return path


def _allowed(root: Path, seed: int) -> None:
    """Inputs that are all allowed: new routes, and routes replacing stored ones (their traffic moves)."""
    rng = random.Random(seed)
    for f in range(2):
        docs = [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                 "metadata": {"name": f"r{f * 6 + n}", "namespace": "capture"},
                 "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"h{rng.randrange(7)}.example.com"],
                          "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/s{rng.randrange(30)}"}}],
                                     "backendRefs": [{"name": rng.choice(["web", "web-canary"]), "port": 8080}]}]}}
                for n in range(6)]
        (root / f"in{f}.yaml").write_text(yaml.safe_dump_all(docs))


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "timings"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _run(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         *, plain: bool) -> tuple[Any, int]:
    """The json report of ``check args`` and the number of whole renders without a previous description."""
    renders: collections.Counter[bool] = collections.Counter()
    inner = rendering.Renderer._render

    def counted(self: rendering.Renderer, state: Any, subject: Any, previous: Any) -> Any:
        renders[subject is None and previous is None] += 1
        return inner(self, state, subject, previous)

    with monkeypatch.context() as m:
        m.setattr(rendering.Renderer, "_render", counted)
        if plain:
            m.setattr(checking, "_sharing_render_of", lambda gate, state: None)
        cli.main(["check", *args, "-o", "json", "-j", "0"])
    return _untimed(json.loads(capsys.readouterr().out)), renders[True]


@pytest.mark.parametrize(("inputs", "each"), [("allowed", False), ("findings", False), ("allowed", True)])
def test_reports_equal_the_plain_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, inputs: str, each: bool) -> None:
    state = _state(tmp_path, 40, seed=3)
    files = tmp_path / "inputs"
    files.mkdir()
    if inputs == "allowed":
        _allowed(files, seed=4)
    else:
        corpus(files, seed=5)
    args = ["--state", str(state), "-f", str(files), *(["--each"] if each else [])]
    shared, shared_renders = _run(args, capsys, monkeypatch, plain=False)
    plain, plain_renders = _run(args, capsys, monkeypatch, plain=True)
    assert shared == plain
    # worth comparing: traffic moved by the batch, and the prediction when every input is allowed
    assert any(r.get("traffic") for r in shared["results"])
    if inputs == "allowed" and not each:
        assert shared["prediction"] is not None
        assert plain_renders - shared_renders == 1
    if each:
        assert plain_renders - shared_renders == 1  # two apply sets, one render of the state
    if inputs == "findings":
        assert any(not r["allowed"] for r in shared["results"])
