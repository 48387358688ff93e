"""Builders for validator tests: objects, the shared Gateway API CRDs, and a one-call check."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from validators.changes import Change, Operation
from validators.checks import Checks
from validators.enforcement import Enforcement
from validators.findings import Finding
from validators.objects import Obj
from validators.schema.crds import SchemaSet
from validators.states import MemoryState

GROUP = "gateway.networking.k8s.io"


def shared_dir() -> Path | None:
    """``shared/`` beside the repository root (CI), else the machine-wide copy."""
    for candidate in (Path(__file__).resolve().parents[2].parent / "shared", Path("/work/shared")):
        if candidate.is_dir():
            return candidate
    return None


def need(*parts: str) -> Path:
    base = shared_dir()
    if base is None or not base.joinpath(*parts).exists():
        pytest.skip(
            f"{'/'.join(parts)} is not beside this checkout (shared test data lives outside the repo)"
        )
    return base.joinpath(*parts)


@functools.cache
def gateway_api(channel: str = "experimental") -> SchemaSet:
    path = need("gateway-api", "v1.6.1", f"{channel}-install.yaml")
    return SchemaSet.from_documents(yaml.safe_load_all(path.read_text()))


def fixture_requests() -> list[tuple[str, dict[str, Any]]]:
    folder = need("fixtures", "admission-reviews")
    return [(p.name, json.loads(p.read_text())["request"]) for p in sorted(folder.glob("*.json"))]


def obj(
    kind: str,
    spec: dict[str, Any] | None = None,
    *,
    name: str = "r",
    namespace: str = "n",
    version: str = "v1",
    group: str = GROUP,
) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/{version}" if group else version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec if spec is not None else {},
    }


def route(*rules: dict[str, Any], kind: str = "HTTPRoute", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"parentRefs": [{"name": "edge"}], **spec}
    if rules:
        body["rules"] = list(rules)
    return obj(kind, body)


def prefix(value: str = "/") -> dict[str, Any]:
    return {"path": {"type": "PathPrefix", "value": value}}


def regex(value: str) -> dict[str, Any]:
    return {"path": {"type": "RegularExpression", "value": value}}


def backend(name: str = "svc", port: int = 80, **extra: Any) -> dict[str, Any]:
    return {"name": name, "port": port, **extra}


def run(
    o: Obj,
    *,
    schemas: SchemaSet | None = None,
    enforcement: Enforcement | None = None,
    haproxy_version: tuple[int, ...] = (2, 8),
    operation: Operation = Operation.CREATE,
    old: Obj | None = None,
) -> list[Finding]:
    checks = Checks(
        schemas=schemas,
        enforcement=enforcement or Enforcement(),
        haproxy_version=haproxy_version,
        cross_object=False,
    )
    return checks.check(Change(operation, o, old), MemoryState())


def hits(o: Obj, code: str, **kw: Any) -> list[tuple[str, str]]:
    """(severity, field) of every finding with ``code``, in output order."""
    return [(str(f.severity), f.field) for f in run(o, **kw) if f.code == code]


# Object builders for the rule tables

R0 = "spec.rules[0]"


def sp(**persistence: Any) -> dict[str, Any]:
    return {"backendRefs": [backend()], "sessionPersistence": persistence}


def hdr(kind: str = "RequestHeaderModifier", **ops: Any) -> dict[str, Any]:
    field = kind[0].lower() + kind[1:]
    return {"type": kind, field: ops}


def rewrite(kind: str = "URLRewrite") -> dict[str, Any]:
    field = "urlRewrite" if kind == "URLRewrite" else "requestRedirect"
    return {"type": kind, field: {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}


def auth(**settings: Any) -> dict[str, Any]:
    body = {
        "protocol": "HTTP",
        "backendRef": {"name": "auth", "port": 8080},
        "http": {"allowedResponseHeaders": ["X-Auth-User"]},
    }
    body.update(settings)
    return {"type": "ExternalAuth", "externalAuth": body}


def btls(**validation: Any) -> dict[str, Any]:
    spec = {
        "targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
        "validation": {"hostname": "api.example.com", "wellKnownCACertificates": "System", **validation},
    }
    return obj("BackendTLSPolicy", spec)


def gateway(*listeners: dict[str, Any]) -> dict[str, Any]:
    return obj("Gateway", {"gatewayClassName": "haptic", "listeners": list(listeners)})


def listener(name: str, protocol: str, port: int, mode: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "protocol": protocol, "port": port}
    if mode is not None:
        out["tls"] = {"mode": mode}
    return out


def crd_route(header: str, address: str = "10.0.0.1") -> dict[str, Any]:
    spec = {
        "backend": {"address": address, "port": 8080},
        "requestHeaders": [{"name": header, "value": "a b;%"}],
    }
    return obj("Route", spec, group="routegate.io", version="v1alpha1")
