"""``routegate check`` gives inputs of a kind the gate does not review (``checking.UNREVIEWED_AT_ONCE``:
Services, EndpointSlices, Secrets, ...) their verdict at once, without a change, a state and a place in
the batch each. Differential: on a generated corpus with many kinds of findings (test_check_lazy's routes
with every kind of problem, an ``haproxy -c`` rejection, broken input) and every unreviewed kind, also
duplicated, replayed as an AdmissionReview and skipped, every verdict and the report in every format are
those of the plain path at the same commit (every input through ``Gate.review_all``: the shortcut's
kinds emptied), for a set applied together and for ``--each``. A sabotaged shortcut (taking a reviewed
kind too) is caught."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.cli.test_check_lazy import corpus
from tests.webhook.conftest import STATE_DIR
from webhook.cli import checking, reports
from webhook.cli import routegate as cli
from webhook.gate import gateparts

NS = "capture"


def _unreviewed(n: int) -> list[dict[str, Any]]:
    """One object of every kind the shortcut takes, in the corpus's namespace."""
    meta = {"name": f"u{n}", "namespace": NS}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": dict(meta),
         "spec": {"selector": {"app": f"u{n}"}, "ports": [{"name": "http", "port": 8080}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "labels": {"kubernetes.io/service-name": f"u{n}"}}, "addressType": "IPv4",
         "endpoints": [{"addresses": ["10.9.0.1"]}], "ports": [{"name": "http", "port": 8080}]},
        {"apiVersion": "v1", "kind": "Secret", "metadata": dict(meta), "type": "Opaque", "data": {}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": {"k": "v"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-u{n}"}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": f"gc-u{n}"},
         "spec": {"controllerName": "example.com/other"}},
    ]


def full_corpus(root: Path, seed: int) -> None:
    """test_check_lazy's corpus, plus every unreviewed kind (twice over), one of them duplicated in the
    same apply (its earlier copy is judged alone), one replayed as an AdmissionReview, and a Service
    backing the corpus's routes in a file of its own."""
    corpus(root, seed)
    rng = random.Random(seed)
    extra = [*_unreviewed(1), *_unreviewed(2)]
    rng.shuffle(extra)
    extra.append(copy.deepcopy(extra[0]))  # the same unreviewed object twice in one apply
    (root / "unreviewed.yaml").write_text(yaml.safe_dump_all(extra, sort_keys=False))
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "operation": "CREATE", "object": _unreviewed(3)[0]}}
    (root / "review.json").write_text(json.dumps(review))
    (root / "web.json").write_text(json.dumps(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-canary", "namespace": NS},
         "spec": {"ports": [{"name": "http", "port": 8080}]}}))


def _run(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         *more: str) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """Every input's verdict (without timings: seconds differ between runs) with its place, and the
    report in every format."""
    seen: dict[str, Any] = {}
    judged_in_files = checking.judged_in_files

    def recorded(results: Any, positions: Any) -> list[reports.Judged]:
        seen["results"] = list(results)
        return judged_in_files(results, positions)

    render = reports.render

    def kept(report: reports.Report, output: str, **kwargs: Any) -> str:
        seen["report"] = report
        return render(report, output, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(checking, "judged_in_files", recorded)
        patched.setattr(reports, "render", kept)
        code = cli.main(["check", "--state", str(STATE_DIR), "-f", str(root), "-j", "0", "--no-prediction", *more])
    capsys.readouterr()
    verdicts = [(item.file, item.line, item.column, item.prefix, replace(v, timings={}))
                for item, v in seen["results"]]
    report: reports.Report = seen["report"]
    for judged in report.results:
        judged.verdict = replace(judged.verdict, timings={})
    outputs = {fmt: render(report, fmt) for fmt in ("text", "json", "yaml", "junit", "github", "sarif")}
    outputs["code"] = str(code)
    return verdicts, outputs


@pytest.mark.parametrize("more", [(), ("--each",), ("--skip-kinds", "ConfigMap,HTTPRoute")])
def test_unreviewed_inputs_judged_as_the_batch_judges_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str],
                                                           more: tuple[str, ...]) -> None:
    full_corpus(tmp_path, 3)
    taken = []
    unchecked = gateparts.unchecked

    def counted(ref: Any) -> Any:
        taken.append(ref)
        return unchecked(ref)

    monkeypatch.setattr(checking, "unchecked", counted)
    fast, fast_out = _run(tmp_path, monkeypatch, capsys, *more)
    assert len(taken) >= 10  # the shortcut was taken for the unreviewed inputs
    monkeypatch.setattr(checking, "UNREVIEWED_AT_ONCE", frozenset())
    plain, plain_out = _run(tmp_path, monkeypatch, capsys, *more)

    # worth comparing: denials and warnings of the rules, an haproxy -c rejection, unchecked notes
    assert {v.decision.value for *_, v in plain} >= {"allow", "deny"} or "--skip-kinds" in more
    assert sum(not v.handled for *_, v in plain) >= 10
    assert fast == plain
    assert fast_out == plain_out


def test_a_sabotaged_shortcut_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The comparison above fails when the shortcut takes a kind the gate reviews."""
    full_corpus(tmp_path, 3)
    plain, plain_out = _run(tmp_path, monkeypatch, capsys)
    monkeypatch.setattr(checking, "UNREVIEWED_AT_ONCE", checking.UNREVIEWED_AT_ONCE | {"HTTPRoute"})
    sabotaged, sabotaged_out = _run(tmp_path, monkeypatch, capsys)
    assert sabotaged != plain
    assert sabotaged_out != plain_out
