"""``routegate check`` with the route findings worked out once for a route and its Gateway
(``crossobjects._kept_route_findings``: one memo for both readings, a defaulted input taking its stored
twin's answer) gives every verdict, finding for finding, and every report format of the plain path at the
same commit: each route's findings computed from scratch for each asker. The corpus: test_check_lazy's
routes with every kind of problem (missing backends, wrong ports, refused references, parents that do not
exist, an ``haproxy -c`` rejection), unreviewed kinds, and the routes' Gateway among the inputs (its
review walks every route naming it). A sabotaged reading about a route (marked as the Gateway's own) is
caught."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.cli.test_check_unreviewed import _run, full_corpus
from tests.webhook.conftest import STATE_DIR
from validators.crossobject import crossobjects
from validators.findings import Finding
from validators.objects import ref_of


def _plain(route: Any, state: Any, ports: tuple[int, ...], about_itself: bool) -> Any:
    """The from-scratch path: no memo, no twin."""
    return crossobjects._route_findings(route, state, ports, ref_of(route) if about_itself else None)


def _with_gateway(root: Path) -> None:
    full_corpus(root, 4)
    gateway = next(d for d in yaml.safe_load_all((STATE_DIR / "cluster.yaml").read_text())
                   if d and d["kind"] == "Gateway")
    (root / "gateway.yaml").write_text(yaml.safe_dump(gateway))


def test_check_equals_the_plain_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    _with_gateway(tmp_path)
    fast, fast_out = _run(tmp_path, monkeypatch, capsys)
    monkeypatch.setattr(crossobjects, "_kept_route_findings", _plain)
    plain, plain_out = _run(tmp_path, monkeypatch, capsys)
    gateway = next(v for *_, v in plain if v.ref.kind == "Gateway")
    assert {f.code for f in gateway.findings} >= {"RG0501", "RG0516"}  # about its routes
    assert {f.code for *_, v in plain for f in v.findings if f.subject} >= {"RG0501", "RG0502", "RG0516"}
    assert fast == plain
    assert fast_out == plain_out


def test_a_sabotaged_reading_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _with_gateway(tmp_path)
    plain, _ = _run(tmp_path, monkeypatch, capsys)
    real = crossobjects._kept_route_findings

    def sabotaged(*args: Any) -> Any:  # the findings about a route marked as the asker's own
        found: list[Finding] = list(real(*args))
        return iter([replace(f, subject=True) for f in found])

    monkeypatch.setattr(crossobjects, "_kept_route_findings", sabotaged)
    broken, _ = _run(tmp_path, monkeypatch, capsys)
    assert broken != plain
