"""``routegate check`` places an object and its findings in its file only when the report shows them
(``reports.Judged(locate=...)``), and the text report skips the sections of a quiet allow
(``reports._quiet``). Differential: on a generated corpus with many kinds of findings (schema errors,
HAProxy rules, cross-object warnings, an ``haproxy -c`` rejection, input errors, duplicates, unchecked
kinds, YAML and JSON files), every format at every detail is the same text as the plain path's at the
same commit: every position found up front (``positions.of`` and ``reports.placed`` for every input, as
``check`` did before) and every section asked of every object."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import STATE_DIR
from validators import rules
from webhook.cli import checking, reports
from webhook.cli import routegate as cli
from webhook.loading.positions import Positions

FORMATS = ("text", "json", "yaml", "junit", "github", "sarif")


def _route(n: int, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": f"r{n}", "namespace": "capture"},
            "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [f"h{n}.example.com"],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": f"/p{rng.randrange(9)}"}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]}}


def _spoiled(route: dict[str, Any], how: str, n: int) -> dict[str, Any]:
    """``route`` with one kind of problem (or none: "clean")."""
    spec = route["spec"]
    rule = spec["rules"][0]
    if how == "bad-path-type":  # schema (enum)
        rule["matches"][0]["path"]["type"] = "Bogus"
    elif how == "bad-session":  # schema (CEL / pattern)
        rule["sessionPersistence"] = {"type": "Cookie", "sessionName": "a b"}
    elif how == "bad-hostname":  # schema (pattern)
        spec["hostnames"] = ["-bad-.example.com"]
    elif how == "no-backend":  # cross-object: BackendNotFound
        rule["backendRefs"] = [{"name": f"missing{n}", "port": 8080}]
    elif how == "wrong-port":  # cross-object: not a port of the Service
        rule["backendRefs"] = [{"name": "web", "port": 9999}]
    elif how == "other-namespace":  # cross-object: RefNotPermitted
        rule["backendRefs"] = [{"name": "web", "namespace": "elsewhere", "port": 8080}]
    elif how == "no-parent":  # cross-object: no such Gateway
        spec["parentRefs"] = [{"name": "nowhere"}]
    elif how == "shared-claim":  # cross-object: the same host+path as another input
        spec["hostnames"] = ["shared.example.com"]
        rule["matches"] = [{"path": {"type": "PathPrefix", "value": "/shared"}}]
    elif how == "bad-header":  # HAProxy rules: a header name HAProxy cannot carry
        rule["filters"] = [{"type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"set": [{"name": "X-Bad Header", "value": "v"}]}}]
    elif how == "rejected-regex":  # haproxy -c rejects it (the combined check fails and is bisected)
        spec["rules"].append({"matches": [{"path": {"type": "RegularExpression", "value": "/a{2,1}"}}],
                              "backendRefs": [{"name": "web", "port": 8080}]})
    elif how == "many-weights":
        rule["backendRefs"] = [{"name": "web", "port": 8080, "weight": 0},
                               {"name": "web-canary", "port": 8080, "weight": 3}]
    return route


SPOILS = ("clean", "bad-path-type", "bad-session", "bad-hostname", "no-backend", "wrong-port",
          "other-namespace", "no-parent", "shared-claim", "bad-header", "rejected-regex", "many-weights")


def corpus(root: Path, seed: int) -> None:
    """About 40 inputs over YAML (block and flow style, several documents) and JSON files, each kind of
    problem of ``SPOILS`` at least once, plus a Service (not checked), a duplicate and a broken file."""
    rng = random.Random(seed)
    hows = [*SPOILS, *(rng.choice(SPOILS) for _ in range(24))]
    rng.shuffle(hows)
    objects = [_spoiled(_route(n, rng), how, n) for n, how in enumerate(hows)]
    objects.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "extra", "namespace": "capture"},
                    "spec": {"ports": [{"name": "http", "port": 80}]}})
    objects.append(copy.deepcopy(objects[3]))  # the same object twice in one apply
    for k in range(0, len(objects), 6):
        chunk = objects[k:k + 6]
        if k % 18 == 0:
            (root / f"part{k:02d}.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": chunk},
                                                               indent=2))
        else:
            flow = k % 12 == 0
            (root / f"part{k:02d}.yaml").write_text(
                "# generated\n" + yaml.safe_dump_all(chunk, default_flow_style=flow, sort_keys=False))
    (root / "zz-broken.yaml").write_text("kind: HTTPRoute\nmetadata: {name: [\n")


def _plain(report: reports.Report, results: list[tuple[Any, Any]], positions: Positions) -> reports.Report:
    """The report as ``check`` built it before: every position found up front."""
    plain = copy.copy(report)
    plain.results = []
    for item, verdict in results:
        line, column = positions.of(item) if item.file != checking.CLUSTER else (0, 0)

        def where(path: tuple[Any, ...], item: Any = item) -> tuple[int, int]:
            return positions.of(item, path) if item.file != checking.CLUSTER else (0, 0)

        plain.results.append(reports.Judged(item, verdict, line, column, reports.placed(verdict.findings, where)))
    return plain


@pytest.mark.parametrize("seed", [1, 2])
def test_reports_equal_the_plain_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str], seed: int) -> None:
    corpus(tmp_path, seed)
    seen: dict[str, Any] = {}
    judged_in_files = checking.judged_in_files

    def recorded(results: Any, positions: Positions) -> list[reports.Judged]:
        seen["results"], seen["positions"] = list(results), positions
        return judged_in_files(results, positions)

    render = reports.render

    def kept(report: reports.Report, output: str, **kwargs: Any) -> str:
        seen["report"] = report
        return render(report, output, **kwargs)

    monkeypatch.setattr(checking, "judged_in_files", recorded)
    monkeypatch.setattr(reports, "render", kept)
    code = cli.main(["check", "--state", str(STATE_DIR), "-f", str(tmp_path), "-j", "0"])
    capsys.readouterr()
    assert code == checking.EXIT_INPUT  # the broken file
    report: reports.Report = seen["report"]
    plain = _plain(report, seen["results"], seen["positions"])

    # The corpus is worth comparing on: denials and warnings of every stage, a haproxy -c rejection,
    # unchecked notes, input errors.
    codes = {f.code for _, v in seen["results"] for f in v.findings}
    assert len(codes) >= 8, codes
    assert any(v.alerts for _, v in seen["results"])
    assert any(v.notes for _, v in seen["results"])
    assert report.problems and {"allowed", "denied"} <= {("allowed" if v.allowed else "denied")
                                                        for _, v in seen["results"]}

    infos = rules.table()
    lazy_out = {(fmt, detail): render(report, fmt, rule_infos=infos, detail=detail)
                for fmt in FORMATS for detail in reports.Detail}
    lazy_summary = reports.github_summary(report)
    monkeypatch.setattr(reports, "_quiet", lambda v, run: False)  # every section asked of every object
    for (fmt, detail), got in lazy_out.items():
        assert got == render(plain, fmt, rule_infos=infos, detail=detail), (fmt, detail)
    assert lazy_summary == reports.github_summary(plain)
    # and the objects themselves: each placed where the plain path places it
    assert [(j.line, j.column, j.findings) for j in report.results] == \
        [(j.line, j.column, j.findings) for j in plain.results]
