"""Every overlay builds with `kubectl kustomize`, and the built YAML passes structural checks."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(p.name for p in (ROOT / "manifests" / "overlays").iterdir() if p.is_dir())
NS = "routegate-system"
GATEWAY_KINDS = {"gateways", "httproutes", "grpcroutes", "tlsroutes", "tcproutes", "listenersets",
                 "backendtlspolicies", "referencegrants"}
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not on PATH")

Doc = dict[str, Any]


@cache
def _build(overlay: str) -> tuple[Doc, ...]:
    assert KUBECTL is not None
    out = subprocess.run([KUBECTL, "kustomize", str(ROOT / "manifests" / "overlays" / overlay)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def _one(docs: tuple[Doc, ...], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def _all(docs: tuple[Doc, ...], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def _container(docs: tuple[Doc, ...]) -> Doc:
    containers = _one(docs, "Deployment", "routegate")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


def _walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _walk_strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk_strings(v)


@pytest.fixture(params=OVERLAYS)
def docs(request: pytest.FixtureRequest) -> tuple[Doc, ...]:
    return _build(request.param)


def test_both_overlays_exist() -> None:
    assert OVERLAYS == ["cert-manager", "self-managed"]


def test_the_webhook_configuration_has_the_required_fields(docs: tuple[Doc, ...]) -> None:
    vwc = _one(docs, "ValidatingWebhookConfiguration")
    assert vwc["webhooks"], "no webhooks"
    service = _one(docs, "Service", "routegate")
    for hook in vwc["webhooks"]:
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] == 10
        assert hook["matchPolicy"] == "Equivalent"
        svc = hook["clientConfig"]["service"]
        assert (svc["name"], svc["namespace"], svc["path"]) == ("routegate", NS, "/validate")
        assert svc["port"] in [p["port"] for p in service["spec"]["ports"]]


def test_the_webhook_only_matches_gateway_api_kinds_and_routes(docs: tuple[Doc, ...]) -> None:
    hook_rules = [r for h in _one(docs, "ValidatingWebhookConfiguration")["webhooks"] for r in h["rules"]]
    resources: dict[str, set[str]] = {}
    for rule in hook_rules:
        assert sorted(rule["operations"]) == ["CREATE", "DELETE", "UPDATE"]
        assert "*" not in "".join(_walk_strings(rule)), f"wildcard in {rule}"
        for group in rule["apiGroups"]:
            resources.setdefault(group, set()).update(rule["resources"])
    assert resources == {"gateway.networking.k8s.io": GATEWAY_KINDS, "routegate.io": {"routes"}}


def test_the_namespace_selector_excludes_system_namespaces_and_honours_break_glass(
        docs: tuple[Doc, ...]) -> None:
    for hook in _one(docs, "ValidatingWebhookConfiguration")["webhooks"]:
        exprs = {e["key"]: e for e in hook["namespaceSelector"]["matchExpressions"]}
        name = exprs["kubernetes.io/metadata.name"]
        assert name["operator"] == "NotIn" and {"kube-system", NS} <= set(name["values"])
        glass = exprs["routegate.io/skip-validation"]
        assert glass["operator"] == "NotIn" and glass["values"] == ["true"]


def test_rbac_has_no_wildcards_and_no_broad_secret_access(docs: tuple[Doc, ...]) -> None:
    roles = _all(docs, "ClusterRole") + _all(docs, "Role")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), f"{role['metadata']['name']}: wildcard {field}"
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            if "secrets" in rule["resources"]:
                if role["kind"] == "ClusterRole":
                    assert set(rule["verbs"]) <= {"get", "list", "watch"}, "cluster-wide secrets: read only"
                elif set(rule["verbs"]) - {"create"}:
                    assert rule.get("resourceNames") in (["routegate-webhook-tls"], ["routegate-tls"])
            if "validatingwebhookconfigurations" in rule["resources"]:
                assert rule["resourceNames"] == ["routegate"] and set(rule["verbs"]) <= {"get", "patch"}
            if "leases" in rule["resources"]:
                assert role["kind"] == "Role" and role["metadata"]["namespace"] == NS
            writes = set(rule["verbs"]) & {"create", "update", "patch", "delete", "deletecollection"}
            if writes and role["kind"] == "ClusterRole":
                statuses = {r for r in rule["resources"] if r.endswith("/status")}
                assert set(rule["resources"]) - statuses <= {"events", "validatingwebhookconfigurations"}, rule
                if statuses:  # status subresources only, and only what the status writer uses
                    assert statuses == set(rule["resources"]) and set(rule["verbs"]) == {"get", "update"}, rule


def test_rbac_lets_the_status_writer_write_exactly_the_statuses_it_writes(docs: tuple[Doc, ...]) -> None:
    """get and update (PUT with the resourceVersion read) on the status subresource of every kind
    webhook/reconcile/statusshapes.py writes, nothing more (issue 25)."""
    from validators.objects import KINDS
    from webhook.reconcile.statusshapes import WRITTEN_KINDS

    role = _one(docs, "ClusterRole", "routegate")
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] if resource.endswith("/status") for verb in rule["verbs"]}
    wanted = {(KINDS[k].group, f"{KINDS[k].plural}/status", verb) for k in WRITTEN_KINDS if k in KINDS
              for verb in ("get", "update")}
    assert granted == wanted


def test_bindings_point_at_roles_and_the_service_account_that_exist(docs: tuple[Doc, ...]) -> None:
    roles = {(d["kind"], d["metadata"]["name"]) for d in _all(docs, "ClusterRole") + _all(docs, "Role")}
    _one(docs, "ServiceAccount", "routegate")
    for binding in _all(docs, "ClusterRoleBinding") + _all(docs, "RoleBinding"):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "routegate", "namespace": NS}]


def test_the_deployment_is_hardened_and_highly_available(docs: tuple[Doc, ...]) -> None:
    dep = _one(docs, "Deployment", "routegate")
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2
    assert pod.get("topologySpreadConstraints") or pod.get("affinity", {}).get("podAntiAffinity")
    assert pod["serviceAccountName"] == "routegate"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    c = _container(docs)
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"https": 8443, "metrics": 9090}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c[probe]["httpGet"]
        assert (get["path"], get["scheme"], ports.get(get["port"], get["port"])) == (path, "HTTPS", 8443)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/scratch"]] and "emptyDir" in volumes[mounts["/tmp"]]
    args = c["args"]
    assert c["command"] == ["routegate"] and args[0] == "serve"
    flags = dict(zip(args[1::2], args[2::2], strict=True))
    assert flags["--listen"] == "0.0.0.0:8443" and flags["--metrics-listen"] == "0.0.0.0:9090"
    assert flags["--tls-cert"] == "/certs/tls.crt" and flags["--tls-key"] == "/certs/tls.key"
    assert flags["--scratch-dir"] == "/scratch" and mounts["/certs"] == "certs"


def test_service_pdb_and_network_policy_select_the_pods(docs: tuple[Doc, ...]) -> None:
    labels = _one(docs, "Deployment", "routegate")["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str]) -> bool:
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    svc = _one(docs, "Service", "routegate")
    assert selects(svc["spec"]["selector"])
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(443, "https")]
    pdb = _one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and selects(pdb["spec"]["selector"]["matchLabels"])
    np = _one(docs, "NetworkPolicy")
    assert selects(np["spec"]["podSelector"]["matchLabels"]) and np["spec"]["policyTypes"] == ["Ingress"]
    assert sorted(p["port"] for rule in np["spec"]["ingress"] for p in rule["ports"]) == [8443, 9090]
    [webhook_rule] = [r for r in np["spec"]["ingress"] if [p["port"] for p in r["ports"]] == [8443]]
    assert "from" not in webhook_rule  # ports-only: the apiserver is no pod


def test_only_the_monitoring_stack_may_scrape_metrics(docs: tuple[Doc, ...]) -> None:
    """The 9090 rule selects the monitoring namespace AND its Prometheus pods (one peer with both
    selectors), never every pod of the cluster (issue 16, item 9)."""
    np = _one(docs, "NetworkPolicy")
    [rule] = [r for r in np["spec"]["ingress"] if [p["port"] for p in r["ports"]] == [9090]]
    [peer] = rule.get("from") or [{}]
    assert peer.get("namespaceSelector", {}).get("matchLabels") == {"kubernetes.io/metadata.name": "monitoring"}
    assert peer.get("podSelector", {}).get("matchLabels") == {"app.kubernetes.io/name": "prometheus"}
    assert "ipBlock" not in peer


def test_namespaced_objects_live_in_our_namespace_and_the_route_crd_is_included(
        docs: tuple[Doc, ...]) -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                      "CustomResourceDefinition"}
    for d in docs:
        if d["kind"] not in cluster_scoped:
            assert d["metadata"].get("namespace") == NS, f"{d['kind']}/{d['metadata']['name']}"
    _one(docs, "Namespace", NS)
    crd = _one(docs, "CustomResourceDefinition", "routes.routegate.io")
    assert crd["spec"]["group"] == "routegate.io"


def test_cert_manager_overlay_injects_the_ca_of_the_certificate_the_pods_mount() -> None:
    docs = _build("cert-manager")
    vwc = _one(docs, "ValidatingWebhookConfiguration")
    ns, name = vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    cert = _one(docs, "Certificate", name)
    assert ns == NS == cert["metadata"]["namespace"]
    pod = _one(docs, "Deployment", "routegate")["spec"]["template"]["spec"]
    certs_volume = next(v for v in pod["volumes"] if v["name"] == "certs")
    assert certs_volume["secret"]["secretName"] == cert["spec"]["secretName"]
    svc = vwc["webhooks"][0]["clientConfig"]["service"]
    assert f"{svc['name']}.{svc['namespace']}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["privateKey"] == {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
    issuer = _one(docs, "Issuer", cert["spec"]["issuerRef"]["name"])
    assert "ca" in issuer["spec"]  # signed by a CA, so leaf renewals keep the caBundle
    assert "--cert-mode" in _container(docs)["args"]
    assert _container(docs)["args"][-2:] == ["--cert-mode", "files"]
    assert not [d for d in docs if d["kind"] == "Secret"]


def test_self_managed_overlay_writes_certs_itself_with_narrow_rights() -> None:
    docs = _build("self-managed")
    vwc = _one(docs, "ValidatingWebhookConfiguration")
    assert "cert-manager.io/inject-ca-from" not in (vwc["metadata"].get("annotations") or {})
    assert not [d for d in docs if d["apiVersion"].startswith("cert-manager.io")]
    c = _container(docs)
    assert c["args"][-2:] == ["--cert-mode", "self"]
    flags = dict(zip(c["args"][1::2], c["args"][2::2], strict=True))
    service = vwc["webhooks"][0]["clientConfig"]["service"]
    assert (flags["--webhook-name"], flags["--service"], flags["--namespace"]) == (
        vwc["metadata"]["name"], service["name"], service["namespace"])
    env = {e["name"]: e for e in c["env"]}
    assert env["ROUTEGATE_WEBHOOK_NAME"]["value"] == vwc["metadata"]["name"]
    assert env["ROUTEGATE_SERVICE"]["value"] == service["name"]
    # `routegate serve` keeps the pair in `<--service>-tls`; RBAC must name exactly that Secret
    assert env["ROUTEGATE_CERT_SECRET"]["value"] == f"{service['name']}-tls"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    pod = _one(docs, "Deployment", "routegate")["spec"]["template"]["spec"]
    certs_volume = next(v for v in pod["volumes"] if v["name"] == "certs")
    assert "emptyDir" in certs_volume and "secret" not in certs_volume
    assert next(m for m in c["volumeMounts"] if m["name"] == "certs").get("readOnly") is False
    vwc_rules = [r for d in _all(docs, "ClusterRole") for r in d["rules"]
                 if "validatingwebhookconfigurations" in r["resources"]]
    assert vwc_rules == [{"apiGroups": ["admissionregistration.k8s.io"],
                          "resources": ["validatingwebhookconfigurations"],
                          "resourceNames": [vwc["metadata"]["name"]], "verbs": ["get", "patch"]}]
    secret_rules = [r for d in _all(docs, "Role") for r in d["rules"] if "secrets" in r["resources"]]
    assert {tuple(r["verbs"]) for r in secret_rules} == {("create",), ("get", "update")}
    assert all(r.get("resourceNames") == [env["ROUTEGATE_CERT_SECRET"]["value"]]
               for r in secret_rules if r["verbs"] != ["create"])


def test_the_webhook_port_rule_is_open_by_default_and_its_commented_from_is_a_valid_restriction() -> None:
    import ipaddress

    path = ROOT / "manifests" / "base" / "networkpolicy.yaml"
    text = path.read_text()
    default = yaml.safe_load(text)["spec"]["ingress"]
    webhook = next(rule for rule in default if rule["ports"][0]["port"] == 8443)
    assert "from" not in webhook  # works on every cluster as shipped
    lines = text.splitlines()
    start = lines.index("      # from:")
    block = [start]
    while lines[block[-1] + 1].startswith("      #   "):
        block.append(block[-1] + 1)
    uncommented = [line.replace("# ", "", 1) if i in block else line for i, line in enumerate(lines)]
    restricted = yaml.safe_load("\n".join(uncommented))["spec"]["ingress"]
    peers = next(rule for rule in restricted if rule["ports"][0]["port"] == 8443)["from"]
    assert [sorted(p) for p in peers] == [["ipBlock"], ["ipBlock"], ["namespaceSelector"]]
    for peer in peers[:2]:
        ipaddress.ip_network(peer["ipBlock"]["cidr"])
    assert next(rule for rule in restricted if rule["ports"][0]["port"] == 9090) == next(
        rule for rule in default if rule["ports"][0]["port"] == 9090)


def _documented_overlay(tmp: Path, overlay: str, component: str) -> tuple[Doc, ...]:
    """docs/DEPLOY.md's overlay ("Metrics and the NetworkPolicy") as a user writes it, pointed at this
    checkout's overlay and component, built with kubectl kustomize."""
    deploy = (ROOT / "docs" / "DEPLOY.md").read_text()
    section = deploy[deploy.index("### Metrics and the NetworkPolicy"):]
    text = section[section.index("```yaml\n") + 8:section.index("```", section.index("```yaml\n") + 8)]
    kustomization = yaml.safe_load(text)
    rel = os.path.relpath(ROOT / "manifests", tmp)
    kustomization["resources"] = [f"{rel}/overlays/{overlay}"]
    kustomization["components"] = [f"{rel}/components/{component}"]
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    assert KUBECTL is not None
    out = subprocess.run([KUBECTL, "kustomize", str(tmp)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("component", ["servicemonitor", "podmonitor"])
def test_the_monitoring_components_scrape_the_metrics_port_the_documented_patch_opens(
        tmp_path: Path, overlay: str, component: str) -> None:
    docs = _documented_overlay(tmp_path, overlay, component)
    pod = _one(docs, "Deployment", "routegate")["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    [metrics_port] = [p for p in _container(docs)["ports"] if p["name"] == "metrics"]
    if component == "servicemonitor":
        monitor = _one(docs, "ServiceMonitor", "routegate")
        service = _one(docs, "Service", "routegate-metrics")
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert service["spec"]["selector"].items() <= pod_labels.items()
        [port] = service["spec"]["ports"]
        assert port["targetPort"] == "metrics" and [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]]
        assert not _all(docs, "PodMonitor")
    else:
        monitor = _one(docs, "PodMonitor", "routegate")
        assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
        assert not _all(docs, "ServiceMonitor")
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NS] and monitor["metadata"]["namespace"] == NS
    np = _one(docs, "NetworkPolicy")
    [rule] = [r for r in np["spec"]["ingress"] if [p["port"] for p in r["ports"]] == [metrics_port["containerPort"]]]
    [peer] = rule["from"]  # the documented patch replaced the monitoring stack's selectors, nothing else
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "observability"}
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "vmagent"}
    assert [p["port"] for r in np["spec"]["ingress"] for p in r["ports"]] == [8443, 9090]
