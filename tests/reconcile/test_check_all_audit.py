"""``routegate check --kubeconfig --all`` judges the stored objects with the reconcile loop's own steps
(``Reconciler.judge``: ``audits.audit``, leave-outs, the whole render and its haproxy -c): the findings it
reports per object are the ones the reconcile loop logs and writes Events for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.clusterkit import install_gateway_api
from tests.fakekube import FakeKube
from tests.reconcile.test_audits import GATEWAY, SERVICE, _route
from tests.webhook.cli.test_cli_cluster import run_check
from validators.states import MemoryState
from webhook.gate.gates import Gate
from webhook.reconcile import audits
from webhook.reconcile.reconciler import Reconciler

pytestmark = pytest.mark.haproxy


def _reported(results: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    return {f"{r['kind']} {r['namespace']}/{r['name']}": sorted((f["code"], f["path"]) for f in r["findings"])
            for r in results if r["findings"]}


async def test_check_all_reports_what_the_reconcile_audit_finds(tmp_path: Path, gate: Gate) -> None:
    objects = [GATEWAY, SERVICE, _route("ok", "a.example.com"), _route("astray", "a.other.org"),
               _route("sticky", "b.example.com", sessionPersistence={"sessionName": "a b"})]
    async with FakeKube() as kube:
        install_gateway_api(kube)
        stored = [kube.create(o) for o in objects]
        code, out, err = await run_check("--kubeconfig", kube.write_kubeconfig(tmp_path / "kubeconfig"),
                                         "--all", "-o", "json")
    assert code == 1, out + err
    got = _reported(json.loads(out)["results"])
    audited = {str(ref): sorted((x.code, x.field) for x in found) for ref, found in
               audits.audit(gate.rules, MemoryState(stored))}
    assert {ref: [f for f in got.get(ref, []) if f in found] for ref, found in audited.items()} == audited
    outcome = await Reconciler(gate, None).judge(MemoryState(stored))
    want = {str(f.ref): sorted((x.code, x.field) for x in f.findings) for f in outcome.faults}
    assert got == want
    assert ("RG0101", "spec.rules[0].sessionPersistence.sessionName") in got["HTTPRoute team/sticky"]
    assert "Gateway gw/edge" not in got  # the route it has no listener for is the route's finding
    assert any(code == "RG0506" for code, _ in got["HTTPRoute team/astray"])
