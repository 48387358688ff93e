"""The ``--config FILE`` settings file: one YAML mapping for enforcement, render and scope settings.

docs/CONFIG.md documents every key. Sections:

- ``rules``, ``exemptNamespaces``, ``strict``, ``limits``: rule enforcement (``validators.enforcement``).
- ``render``: what the data plane is configured with, one key per field of
  ``haproxy_check.render.rendering.RenderSettings`` in camelCase (``dynamicCookieKey``, ``debugHeaders``, ...).
  The keys are read from the dataclass itself, so a field added there is configurable at once; the
  value must have the field's type (a string, a whole number, true/false).
- ``dataplaneVersion``, ``gatewayClasses``, ``controllerNames``: the same as ``--dataplane-version``,
  ``--gateway-class`` and ``--controller-name`` (a flag given on the command line wins).
- ``policies``: routegate's own CEL policies (``validators.policies.ownpolicies``, compiled by
  ``webhook.gate.policyloading``); ``validatingAdmissionPolicies``: files of ValidatingAdmissionPolicies and
  bindings the webhook and the reconcile audit evaluate too (off when absent: docs/POLICIES.md).

Every mistake raises :class:`SettingsError` naming the key (``render.debugHeaders: expected true or
false, got 'yes'``), so a typo never silently leaves a default in place.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from haproxy_check.render.rendering import RenderSettings
from haproxy_check.runtime import runtimeplans
from validators import enforcement
from webhook.loading import inputs, yamlloading

SCOPE_KEYS = ("dataplaneVersion", "gatewayClasses", "controllerNames")
POLICY_KEYS = ("policies", "validatingAdmissionPolicies")
KEYS = (*enforcement.KEYS, "render", *SCOPE_KEYS, *POLICY_KEYS)
#: RenderSettings fields the process sets itself, never a settings file: the version comes from
#: ``dataplaneVersion`` and the binary, the CA bundle from the distribution, limits from ``limits``, the
#: admin socket from ``reconcile --stats-socket``.
NOT_CONFIGURABLE = frozenset({"haproxy_version", "system_ca_file", "limits", "stats_socket"})


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class Settings:
    enforcement: Mapping[str, Any] = field(default_factory=dict)  # for Enforcement.from_mapping
    render: Mapping[str, Any] = field(default_factory=dict)  # RenderSettings keyword arguments
    dataplane_version: tuple[int, ...] | None = None
    gateway_classes: tuple[str, ...] = ()
    controller_names: tuple[str, ...] = ()
    policies: Any = None  # the raw ``policies:`` list (webhook.gate.policyloading compiles it)
    admission_policy_files: tuple[str, ...] = ()  # ``validatingAdmissionPolicies:`` paths


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def render_keys() -> dict[str, dataclasses.Field[Any]]:
    """camelCase key -> RenderSettings field, for every field a settings file may set."""
    return {camel(f.name): f for f in dataclasses.fields(RenderSettings) if f.name not in NOT_CONFIGURABLE}


def load(path: str | None) -> Settings:
    if not path:
        return Settings()
    try:
        text = Path(path).read_text(encoding="utf-8")
        # the manifests' loader: no aliases, bounded depth (a settings file may come from a pull request)
        loaded = yaml.load(text, Loader=yamlloading.NoAliasLoader)  # noqa: S506
    except OSError as exc:
        raise SettingsError(f"--config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"--config {inputs.yaml_problem(exc, path, text)}") from None
    if loaded is None:
        return Settings()
    if not isinstance(loaded, dict):
        raise SettingsError(f"--config {path}: must be a YAML mapping with keys {', '.join(KEYS)}")
    try:
        return parse(loaded)
    except SettingsError as exc:
        raise SettingsError(f"--config {path}: {exc}") from None


def parse(data: Mapping[str, Any]) -> Settings:
    for key in data:
        if key not in KEYS:
            raise SettingsError(f"unknown key {key!r}; allowed: {', '.join(KEYS)}")
    return Settings(
        enforcement={k: v for k, v in data.items() if k in enforcement.KEYS},
        render=_render(data.get("render")),
        dataplane_version=_version(data.get("dataplaneVersion")),
        gateway_classes=_names("gatewayClasses", data.get("gatewayClasses")),
        controller_names=_names("controllerNames", data.get("controllerNames")),
        policies=data.get("policies"),
        admission_policy_files=_names("validatingAdmissionPolicies", data.get("validatingAdmissionPolicies")),
    )


def _render(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    keys = render_keys()
    if not isinstance(value, Mapping):
        raise SettingsError(f"render: expected a mapping with keys {', '.join(keys)}, got {_kind(value)}")
    hints = typing.get_type_hints(RenderSettings)
    out: dict[str, Any] = {}
    for key, item in value.items():
        spec = keys.get(key) if isinstance(key, str) else None
        if spec is None:
            raise SettingsError(f"render.{key}: unknown key; allowed: {', '.join(keys)}")
        out[spec.name] = _typed(f"render.{key}", hints[spec.name], item)
    try:
        RenderSettings(**out).check()
    except ValueError as exc:
        raise SettingsError(f"render: {exc}") from None
    return out


def _typed(key: str, hint: Any, value: Any) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise SettingsError(f"{key}: expected a whole number, got {value!r}")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SettingsError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise SettingsError(f"{key}: expected a string, got {value!r}")
        return value
    if hint == tuple[str, ...]:
        if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
            raise SettingsError(f"{key}: expected a list of strings, got {value!r}")
        return tuple(value)
    raise SettingsError(f"{key}: a {hint} setting cannot be given in a settings file")


def _version(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, str):  # YAML reads 3.10 as the number 3.1
        raise SettingsError(f"dataplaneVersion: expected a quoted version such as \"3.2\", got {value!r}")
    try:
        return runtimeplans.parse_version(value)
    except ValueError as exc:
        raise SettingsError(f"dataplaneVersion: {exc}") from None


_NAME = re.compile(r"[^\s]{1,253}")


def _names(key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and _NAME.fullmatch(v) for v in value):
        raise SettingsError(f"{key}: expected a list of names, got {value!r}")
    return tuple(value)


def _kind(value: Any) -> str:
    return type(value).__name__
