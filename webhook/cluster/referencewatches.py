"""Which Secrets and ConfigMaps the gate needs: those that Gateways, ListenerSets and BackendTLSPolicies name.

Watching every Secret in the cluster would put every credential in the webhook's memory and needs
cluster-wide read access to Secrets. Instead each referenced object gets its own reflector: a list
and watch of ``/api/v1/namespaces/<ns>/secrets?fieldSelector=metadata.name=<name>``. That follows
certificate rotation live (a GET would not) and is the request shape that RBAC ``resourceNames``
can authorize, so the gate's role can be limited to exactly these objects. The cost is one watch
connection per referenced object, which is small next to the number of routes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from validators.objects import Obj, namespace_of

REFERRING_KINDS = ("Gateway", "ListenerSet", "BackendTLSPolicy")
# The field names that hold object references to TLS material anywhere under spec, with the kind a
# reference of that field defaults to when it names none.
REF_FIELDS: Mapping[str, str] = {
    "certificateRefs": "Secret",  # Gateway/ListenerSet listeners[].tls
    "caCertificateRefs": "ConfigMap",  # BackendTLSPolicy validation, Gateway frontend validation
    "clientCertificateRef": "Secret",  # Gateway spec.tls.backend
}
WANTED_KINDS = frozenset({"Secret", "ConfigMap"})

Target = tuple[str, str, str]  # (kind, namespace, name)


def referenced(objects: Iterable[Obj]) -> set[Target]:
    """Every core Secret/ConfigMap named by the given objects (namespace defaulted to the referrer's)."""
    found: set[Target] = set()
    for obj in objects:
        found.update(_refs(obj.get("spec"), namespace_of(obj)))
    return found


def _refs(node: Any, namespace: str) -> Iterator[Target]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            default_kind = REF_FIELDS.get(key) if isinstance(key, str) else None
            if default_kind is not None:
                for ref in value if isinstance(value, list) else [value]:
                    target = _target(ref, default_kind, namespace)
                    if target is not None:
                        yield target
            else:
                yield from _refs(value, namespace)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item, namespace)


def _target(ref: Any, default_kind: str, namespace: str) -> Target | None:
    if not isinstance(ref, Mapping):
        return None
    group, kind, name = ref.get("group") or "", ref.get("kind") or default_kind, ref.get("name")
    ns = ref.get("namespace") or namespace
    if (
        group != ""
        or kind not in WANTED_KINDS
        or not isinstance(name, str)
        or not name
        or not isinstance(ns, str)
    ):
        return None
    return (kind, ns, name)
