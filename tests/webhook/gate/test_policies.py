"""routegate's own policies and ValidatingAdmissionPolicies on every surface: ``serve`` (a real HTTPS
AdmissionReview round trip), ``check`` (the CLI's ``main`` in process: files, ``--state``, a live
cluster), and the reconcile audit (``audits``, ``check --all``). The
two policies of issue 30 §2 are in tests/data/policies/config.yaml; the namespace ``capture`` may serve
api.example.com and pay.example.com."""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from haproxy_check.results import HAProxyBinary
from tests.cluster.clusterkit import install_gateway_api
from tests.conftest import need_shared
from tests.fakekube import FakeKube
from tests.webhook.cli.test_cli_cluster import run_check
from tests.webhook.clirun import closed_port, env, in_process
from tests.webhook.conftest import STATE_DIR, load_objects
from tests.webhook.server.test_admission_server import Client, serving
from validators.policies.policychecks import PolicyChecks
from validators.schema.crds import SchemaSet
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.gate.gates import Gate
from webhook.reconcile import audits
from webhook.reconcile.reconciler import Reconciler

pytestmark = pytest.mark.haproxy

DATA = Path(__file__).resolve().parents[2] / "data" / "policies"
CONFIG = DATA / "config.yaml"
NAMESPACES = load_objects(DATA / "namespaces.yaml")


def review(hostnames: list[str], namespace: str = "capture") -> dict[str, Any]:
    body: dict[str, Any] = json.loads(
        (need_shared("fixtures", "admission-reviews") / "03-httproute-create.json").read_text())
    body["request"]["uid"] = "-".join(hostnames)
    body["request"]["object"]["spec"]["hostnames"] = hostnames
    body["request"]["namespace"] = namespace
    body["request"]["object"]["metadata"]["namespace"] = namespace
    return body


def policy_gate(binary: HAProxyBinary, schemas: SchemaSet | None, config: Path) -> Gate:
    return assembly.build_gate(binary, assembly.GateSettings(config=str(config)), schemas=schemas)


@pytest.fixture
async def client(binary: HAProxyBinary, schemas: SchemaSet | None, tmp_path: Path) -> AsyncIterator[Client]:
    gate = policy_gate(binary, schemas, CONFIG)
    async for c in serving(gate, tmp_path, state_objects=NAMESPACES):
        yield c


# --- serve ------------------------------------------------------------------------------------------------


async def test_serve_allows_what_the_label_lists(client: Client) -> None:
    answer = await client.post(review(["api.example.com"]))
    assert answer["allowed"] is True, answer


async def test_serve_denies_a_hostname_the_namespace_label_does_not_list(client: Client) -> None:
    answer = await client.post(review(["api.example.com", "shop.example.com"]))
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "policy hosts-from-namespace-label: namespace capture may serve only the hostnames of its label " \
           "routegate.io/hosts ([api.example.com, pay.example.com]), not shop.example.com" in message
    assert message.startswith("HTTPRoute capture/api: spec.hostnames: policy hosts-from-namespace-label")


async def test_serve_denies_moving_pay_traffic_outside_payments(client: Client) -> None:
    """The label allows pay.example.com, the traffic policy does not: only the diff says so."""
    answer = await client.post(review(["pay.example.com"]))
    assert answer["allowed"] is False
    assert "policy pay-traffic-stays-in-payments: only namespace payments may move traffic for " \
           "*.pay.example.com; this change: gained HTTP :80 pay.example.com" in answer["status"]["message"]


async def test_serve_evaluates_configured_vaps_only_when_asked(binary: HAProxyBinary, schemas: SchemaSet | None,
                                                               tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"validatingAdmissionPolicies: [{DATA / 'vaps.yaml'}]\n")
    async for c in serving(policy_gate(binary, schemas, config), tmp_path, state_objects=NAMESPACES):
        answer = await c.post(review(["api.example.com"]))
        assert answer["allowed"] is False
        assert "ValidatingAdmissionPolicy 'corp-hosts' with binding 'corp-hosts' denied request: hostnames " \
               "must end in .corp.example, got api.example.com" in answer["status"]["message"]
    async for c in serving(assembly.build_gate(binary, assembly.GateSettings(), schemas=schemas), tmp_path / "b",
                           state_objects=NAMESPACES):
        assert (await c.post(review(["api.example.com"])))["allowed"] is True  # off by default


def test_serve_refuses_a_policy_that_does_not_compile(binary: HAProxyBinary, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("policies:\n- name: broken\n  validations:\n  - expression: 'object.spec.hostnames.all(h,'\n")
    with pytest.raises(assembly.SetupError, match=r"policy broken: validations\[0\]\.expression: "
                                                  r"'object.spec.hostnames.all\(h,': compilation failed"):
        assembly.build_gate(binary, assembly.GateSettings(config=str(config)))
    config.write_text("policies:\n- name: unknown\n  validations:\n  - expression: 'variables.nope'\n")
    with pytest.raises(assembly.SetupError, match=r"policy unknown: .*unknown variable 'variables\.nope'"):
        assembly.build_gate(binary, assembly.GateSettings(config=str(config)))



async def test_serve_with_a_policy_that_does_not_compile_runs_not_ready(tmp_path: Path) -> None:
    """The real ``routegate serve``: up, not ready with the reason on /readyz, and every review a call
    failure (503) so that the API server's failurePolicy decides, until a fixed --config is rolled out."""
    config = tmp_path / "config.yaml"
    config.write_text("policies:\n- name: broken\n  validations:\n  - expression: 'object.spec.hostnames.all(h,'\n")
    port, metrics_port = closed_port(), closed_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook", "serve", "--state", str(STATE_DIR), "--config", str(config),
        "--cert-dir", str(tmp_path / "certs"), "--listen", f"127.0.0.1:{port}",
        "--metrics-listen", f"127.0.0.1:{metrics_port}", stderr=asyncio.subprocess.PIPE, env=env())
    try:
        assert proc.stderr is not None
        async with asyncio.timeout(120):
            while b"listening on https://" not in (line := await proc.stderr.readline()):
                assert line, "serve exited before listening"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{metrics_port}/readyz") as ready:
                body = await ready.json()
            assert ready.status == 503 and body["ready"] is False
            assert "policy broken: validations[0].expression" in body["reasons"][0], body
            async with session.post(f"https://127.0.0.1:{port}/validate", json=review(["api.example.com"]),
                                    ssl=False) as answer:
                status = await answer.json()
            assert answer.status == 503 and "Retry-After" in answer.headers
            assert "could not decide: cannot judge as configured: --config" in status["message"], status
            assert "policy broken: validations[0].expression" in status["message"], status
    finally:
        proc.terminate()
        await proc.wait()

# --- check ------------------------------------------------------------------------------------------------


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state.yaml"
    state.write_text((STATE_DIR / "cluster.yaml").read_text() + "\n---\n" + (DATA / "namespaces.yaml").read_text())
    return state


def _route(tmp_path: Path, hostnames: list[str], namespace: str = "capture") -> Path:
    obj = review(hostnames, namespace)["request"]["object"]
    path = tmp_path / f"route-{namespace}-{'-'.join(hostnames)}.json"
    path.write_text(json.dumps(obj))
    return path


def test_check_own_policies(tmp_path: Path) -> None:
    state = _state(tmp_path)
    ok = in_process("check", "--config", str(CONFIG), "--state", str(state),
                   "-f", str(_route(tmp_path, ["api.example.com"])))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    denied = in_process("check", "--config", str(CONFIG), "--state", str(state), "-o", "json",
                       "-f", str(_route(tmp_path, ["pay.example.com"])))
    assert denied.returncode == 1, denied.stdout + denied.stderr
    [result] = json.loads(denied.stdout)["results"]
    assert [(f["code"], f["path"]) for f in result["findings"] if f["code"].startswith("RG06")] == [
        ("RG0610", "spec.hostnames")]
    assert "pay-traffic-stays-in-payments" in result["findings"][0]["message"]


def test_check_applies_the_vaps_among_the_inputs(tmp_path: Path) -> None:
    state = _state(tmp_path)
    route = _route(tmp_path, ["api.example.com"])
    out = in_process("check", "--state", str(state), "-f", str(DATA / "vaps.yaml"), "-f", str(route))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "error RG0600 spec.hostnames: ValidatingAdmissionPolicy 'corp-hosts' with binding 'corp-hosts' denied " \
           "request: hostnames must end in .corp.example, got api.example.com" in out.stdout
    assert "1 object: 0 allowed, 1 denied" in out.stdout  # the policy and binding are applied, not judged
    corp = _route(tmp_path, ["api.corp.example"])
    assert in_process("check", "--state", str(state), "-f", str(DATA / "vaps.yaml"), "-f", str(corp)).returncode == 0
    # the binding's namespaceSelector: a namespace without corp=yes is not bound
    elsewhere = _route(tmp_path, ["api.example.com"], namespace="payments")
    assert in_process("check", "--state", str(state), "-f", str(DATA / "vaps.yaml"), "-f", str(elsewhere)
                     ).returncode == 0
    # the policies may also come with the state (what the cluster enforces)
    both = tmp_path / "both.yaml"
    both.write_text(state.read_text() + "\n---\n" + (DATA / "vaps.yaml").read_text())
    assert in_process("check", "--state", str(both), "-f", str(route)).returncode == 1


def test_check_setup_error_names_policy_and_expression(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((DATA / "vaps.yaml").read_text().replace("h.endsWith('.corp.example')", "h.endsWith("))
    out = in_process("check", "-f", str(bad), "-f", str(_route(tmp_path, ["api.example.com"])))
    assert out.returncode == 2
    assert "ValidatingAdmissionPolicy corp-hosts: spec.validations[0].expression: " \
           "'object.spec.hostnames.all(h, h.endsWith()': compilation failed" in out.stderr
    assert "Traceback" not in out.stderr


async def test_check_reads_the_vaps_of_a_live_cluster(tmp_path: Path) -> None:
    async with FakeKube() as kube:
        install_gateway_api(kube)
        for obj in [*load_objects(STATE_DIR), *NAMESPACES, *load_objects(DATA / "vaps.yaml")]:
            kube.create(obj)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = await run_check("--kubeconfig", kubeconfig, "-f", str(_route(tmp_path, ["api.example.com"])))
    assert code == 1, out + err
    assert "ValidatingAdmissionPolicy 'corp-hosts' with binding 'corp-hosts' denied request" in out



async def test_credentials_that_may_not_list_the_vaps_get_a_check_and_a_warning(tmp_path: Path) -> None:
    """A CI account allowed to read routes but not admission policies: judged without them, told so."""
    async with FakeKube() as kube:
        install_gateway_api(kube)
        for obj in [*load_objects(STATE_DIR), *NAMESPACES, *load_objects(DATA / "vaps.yaml")]:
            kube.create(obj)
        kube.forbid("validatingadmissionpolicies")
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = await run_check("--kubeconfig", kubeconfig, "-f", str(_route(tmp_path, ["api.example.com"])))
    assert code == 0, out + err
    assert "ValidatingAdmissionPolicies could not be read (HTTP 403" in out + err

# --- reconcile audit --------------------------------------------------------------------------------------


def _stored(hostnames: list[str], name: str) -> dict[str, Any]:
    obj: dict[str, Any] = review(hostnames)["request"]["object"]
    obj["metadata"]["name"] = name
    return obj


async def test_audit_reports_stored_objects_a_policy_added_later_forbids(binary: HAProxyBinary,
                                                                         schemas: SchemaSet | None) -> None:
    gate = policy_gate(binary, schemas, CONFIG)
    assert isinstance(gate.rules, PolicyChecks)
    objects = [*load_objects(STATE_DIR), *NAMESPACES, _stored(["api.example.com"], "ok"),
               _stored(["shop.example.com"], "astray"), _stored(["pay.example.com"], "pay")]
    found = {str(ref): sorted({(f.code, f.field, f.message.split(":")[0]) for f in fs})
             for ref, fs in audits.audit(gate.rules, MemoryState(objects))}
    assert found["HTTPRoute capture/astray"] == [("RG0610", "spec.hostnames", "policy hosts-from-namespace-label")]
    assert found["HTTPRoute capture/pay"] == [("RG0610", "spec.hostnames", "policy pay-traffic-stays-in-payments")]
    assert "HTTPRoute capture/ok" not in found
    outcome = await Reconciler(gate, None).judge(MemoryState(objects))
    faults = {str(f.ref): {x.code for x in f.findings} for f in outcome.faults}
    assert "RG0610" in faults["HTTPRoute capture/astray"] and "RG0610" in faults["HTTPRoute capture/pay"]


def test_incremental_audit_sees_a_namespace_label_change(binary: HAProxyBinary, schemas: SchemaSet | None) -> None:
    """The audit cache reuses a judgement while what it read holds: the namespace's labels are read."""
    gate = policy_gate(binary, schemas, CONFIG)
    cache = audits.AuditCache(gate.rules)
    route = _stored(["shop.example.com"], "astray")
    before = [*load_objects(STATE_DIR), *NAMESPACES, route]
    assert [str(r) for r, _ in cache.audit(MemoryState(before, version="1"))] == ["HTTPRoute capture/astray"]
    relabelled: list[dict[str, Any]] = copy.deepcopy(NAMESPACES)
    relabelled[0]["metadata"]["labels"]["routegate.io/hosts"] = "shop.example.com"
    after = [*load_objects(STATE_DIR), *relabelled, route]
    assert cache.audit(MemoryState(after, version="2")) == audits.audit(gate.rules, MemoryState(after)) == []


async def test_check_all_audits_a_live_cluster_with_the_policies(tmp_path: Path) -> None:
    """``check --all``: the stored objects, judged by the reconcile loop's steps, with both kinds of policy."""
    async with FakeKube() as kube:
        install_gateway_api(kube)
        for obj in [*load_objects(STATE_DIR), *NAMESPACES, *load_objects(DATA / "vaps.yaml"),
                    _stored(["shop.corp.example"], "astray"), _stored(["api.example.com"], "plain")]:
            kube.create(obj)
        code, out, err = await run_check("--kubeconfig", kube.write_kubeconfig(tmp_path / "kubeconfig"),
                                         "--config", str(CONFIG), "--all")
    assert code == 1, out + err
    assert "HTTPRoute capture/astray: denied" in out and "policy hosts-from-namespace-label" in out
    assert "HTTPRoute capture/plain: denied" in out and "ValidatingAdmissionPolicy 'corp-hosts'" in out


def test_explain_a_policy_finding() -> None:
    for code, words in (("RG0600", "ValidatingAdmissionPolicy"), ("RG0610", "routegate policy")):
        out = in_process("explain", code)
        assert out.returncode == 0 and words in out.stdout and "Fix:" in out.stdout, out.stdout + out.stderr


def test_check_says_which_policy_is_not_enforced(tmp_path: Path) -> None:
    policy_only = tmp_path / "policy.yaml"
    policy_only.write_text((DATA / "vaps.yaml").read_text().split("---")[0])
    binding_only = tmp_path / "binding.yaml"
    binding_only.write_text((DATA / "vaps.yaml").read_text().split("---")[1].replace("policyName: corp-hosts",
                                                                                       "policyName: gone"))
    route = _route(tmp_path, ["api.example.com"])
    out = in_process("check", "--state", str(_state(tmp_path)), "-f", str(policy_only), "-f", str(binding_only),
                    "-f", str(route))
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "ValidatingAdmissionPolicy corp-hosts: no ValidatingAdmissionPolicyBinding names it: not enforced" in text
    assert "ValidatingAdmissionPolicyBinding corp-hosts: policy 'gone' does not exist" in text
