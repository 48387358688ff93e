"""Cut API objects down to what rendering and the rules read, before they enter a store.

A watched HTTPRoute carries managedFields and a last-applied-configuration annotation that together
are often larger than its spec; status is written by the controller and changes on every
reconcile. Keeping them would cost memory and, worse, change the state version (and invalidate
cached baselines) on every status write. ``slim`` keeps identity, the generation, labels, the creation time (route
precedence), selected annotations and the content fields; the rest is dropped.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from validators.objects import Obj

# generation changes with the spec only (never on a status write): it names the version of an object that
# reconcile holds back (webhook.reconcile.isolating) and the one a status describes (observedGeneration).
KEPT_METADATA = ("name", "namespace", "uid", "generation", "labels", "creationTimestamp", "deletionTimestamp")
# Annotations the renderer may read; everything else (last-applied, tool bookkeeping) is dropped.
KEPT_ANNOTATION_PREFIXES = ("routegate.io/", "haproxy.org/", "haproxy-haptic.org/")
BUNDLE_VERSION = "gateway.networking.k8s.io/bundle-version"  # kept on CRDs only
# Top-level fields dropped per kind (beyond metadata trimming); "status" is output, never input.
DROPPED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "Namespace": ("spec", "status"),
}


def slim(obj: Mapping[str, Any], *, kind: str, api_version: str) -> Obj:
    """A new, smaller dict with ``kind``/``apiVersion`` set (list items from the API lack them)."""
    dropped = DROPPED_FIELDS.get(kind, ())
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status") or key in dropped:
            continue
        out[key] = _metadata(value) if key == "metadata" else _interned(value)
    return out


def slim_crd(obj: Mapping[str, Any]) -> Obj:
    """CRDs keep their spec (the live schemas) and the Established condition, nothing else."""
    meta = obj.get("metadata")
    conditions = obj.get("status", {}).get("conditions") if isinstance(obj.get("status"), Mapping) else None
    out: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": _metadata(meta) if isinstance(meta, Mapping) else {},
        "spec": obj.get("spec"),
    }
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    bundle = annotations.get(BUNDLE_VERSION) if isinstance(annotations, Mapping) else None
    if isinstance(bundle, str):  # the GatewayClass status's SupportedVersion reads it
        out["metadata"].setdefault("annotations", {})[BUNDLE_VERSION] = bundle
    if isinstance(conditions, list):
        out["status"] = {
            "conditions": [
                {"type": c.get("type"), "status": c.get("status")}
                for c in conditions
                if isinstance(c, Mapping)
            ]
        }
    return out


def _metadata(meta: Any) -> dict[str, Any]:
    if not isinstance(meta, Mapping):
        return {}
    out = {k: _interned(meta[k]) for k in KEPT_METADATA if k in meta and meta[k] is not None}
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        kept = {
            k: v
            for k, v in annotations.items()
            if isinstance(k, str) and k.startswith(KEPT_ANNOTATION_PREFIXES)
        }
        if kept:
            out["annotations"] = kept
    return out


def _interned(value: Any) -> Any:
    """Share dict keys and short strings between objects (each watch event is parsed on its own)."""
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    if isinstance(value, str) and len(value) <= 32:
        return sys.intern(value)
    return value
