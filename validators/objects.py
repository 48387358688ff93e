"""The shape of Kubernetes objects as the gate sees them, and the kinds it knows.

Objects stay plain mappings (``Obj``) from the edge inward: the API server's JSON is already the
canonical form, and typed wrappers would copy every object on every review.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]

GATEWAY_GROUP = "gateway.networking.k8s.io"
ROUTEGATE_GROUP = "routegate.io"


@dataclass(frozen=True, slots=True)
class KindInfo:
    kind: str
    group: str
    plural: str
    versions: tuple[str, ...]  # candidates, preferred first
    namespaced: bool = True
    reviewed: bool = True  # the webhook judges changes of this kind


KINDS: Mapping[str, KindInfo] = {
    k.kind: k
    for k in (
        KindInfo("Gateway", GATEWAY_GROUP, "gateways", ("v1", "v1beta1")),
        KindInfo("GatewayClass", GATEWAY_GROUP, "gatewayclasses", ("v1", "v1beta1"), namespaced=False,
                 reviewed=False),
        KindInfo("HTTPRoute", GATEWAY_GROUP, "httproutes", ("v1", "v1beta1")),
        KindInfo("GRPCRoute", GATEWAY_GROUP, "grpcroutes", ("v1", "v1alpha2")),
        KindInfo("TLSRoute", GATEWAY_GROUP, "tlsroutes", ("v1", "v1alpha3", "v1alpha2")),
        KindInfo("TCPRoute", GATEWAY_GROUP, "tcproutes", ("v1", "v1alpha2")),
        KindInfo("ReferenceGrant", GATEWAY_GROUP, "referencegrants", ("v1", "v1beta1")),
        KindInfo("ListenerSet", GATEWAY_GROUP, "listenersets", ("v1",)),
        KindInfo("BackendTLSPolicy", GATEWAY_GROUP, "backendtlspolicies", ("v1", "v1alpha3")),
        KindInfo("Route", ROUTEGATE_GROUP, "routes", ("v1alpha1",)),
        KindInfo("Service", "", "services", ("v1",), reviewed=False),
        KindInfo("EndpointSlice", "discovery.k8s.io", "endpointslices", ("v1",), reviewed=False),
        KindInfo("Namespace", "", "namespaces", ("v1",), namespaced=False, reviewed=False),
        KindInfo("Secret", "", "secrets", ("v1",), reviewed=False),
        KindInfo("ConfigMap", "", "configmaps", ("v1",), reviewed=False),
    )
}

REVIEWED_KINDS: frozenset[str] = frozenset(k for k, info in KINDS.items() if info.reviewed)


def dig(obj: Any, *keys: str | int, default: Any = None) -> Any:
    """Safe nested access: any missing key, wrong type or null gives ``default``."""
    cur = obj
    for key in keys:
        # plain dicts and lists (all that JSON/YAML loading gives) first: isinstance against the
        # Mapping/Sequence ABCs is the slow part of the most called function of a render
        kind = type(cur)
        if kind is dict and type(key) is str:
            cur = cur.get(key)
            if cur is None:
                return default
            continue
        if kind is list and type(key) is int:
            if not -len(cur) <= key < len(cur):
                return default
            cur = cur[key]
            if cur is None:
                return default
            continue
        if isinstance(key, int):
            if not isinstance(cur, Sequence) or isinstance(cur, str | bytes) or not -len(cur) <= key < len(cur):
                return default
            cur = cur[key]
        else:
            if not isinstance(cur, Mapping) or key not in cur:
                return default
            cur = cur[key]
        if cur is None:
            return default
    return cur


def as_list(value: Any) -> list[Any]:
    """A list field, or [] when it is missing or not a list (the schema check reports the latter)."""
    return list(value) if isinstance(value, list) else []


def as_map(value: Any) -> Mapping[str, Any]:
    # a plain dict (all JSON gives) or a missing field first: isinstance against the Mapping ABC is the
    # slow part (the rules ask it of every field they read)
    kind = type(value)
    if kind is dict:
        return value  # type: ignore[no-any-return]
    if value is None or kind is str or kind is list:
        return {}
    return value if isinstance(value, Mapping) else {}


def kind_of(obj: Obj) -> str:
    kind = obj.get("kind")
    return kind if isinstance(kind, str) else ""


def name_of(obj: Obj) -> str:
    return _meta_str(obj, "name")


def namespace_of(obj: Obj) -> str:
    return _meta_str(obj, "namespace")


def _meta_str(obj: Obj, field: str) -> str:
    """metadata.<field> when it is a string, else "" (as ``dig``, without its generic walk: the
    identity of an object is read on every lookup of every check)."""
    meta = obj.get("metadata") if type(obj) is dict else dig(obj, "metadata")
    value = meta.get(field) if type(meta) is dict else dig(meta, field)
    return value if isinstance(value, str) else ""


def group_of(obj: Obj) -> str:
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


@dataclass(frozen=True, slots=True, order=True)
class Ref:
    """Identity of an object in the state: kind, namespace (empty when cluster-scoped) and name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


# A frozen dataclass's __init__ sets each field through object.__setattr__, most of the cost of building
# one; the hot constructors below set the slots through their descriptors instead (the same instance:
# tests/validators/test_cross_fast_paths.py compares them field by field with the dataclass's own).
_new_object = object.__new__
_set_ref_kind, _set_ref_namespace, _set_ref_name = (Ref.__dict__[f].__set__ for f in ("kind", "namespace", "name"))


def new_ref(kind: str, namespace: str, name: str) -> Ref:
    """``Ref(kind, namespace, name)``, built without the dataclass's __init__ (see above)."""
    ref: Ref = _new_object(Ref)
    _set_ref_kind(ref, kind)
    _set_ref_namespace(ref, namespace)
    _set_ref_name(ref, name)
    return ref


def ref_of(obj: Obj) -> Ref:
    kind, namespace, name = identity(obj)
    return new_ref(kind, namespace, name)


def identity(obj: Obj) -> tuple[str, str, str]:
    """``ref_of(obj)`` as a plain (kind, namespace, name) tuple: for a lookup by identity that keeps no
    Ref (building the frozen dataclass is most of ``ref_of``'s cost)."""
    kind = obj.get("kind")
    meta = obj.get("metadata") if type(obj) is dict else dig(obj, "metadata")
    if type(meta) is dict:
        namespace, name = meta.get("namespace"), meta.get("name")
    else:
        namespace, name = dig(meta, "namespace"), dig(meta, "name")
    return (kind if isinstance(kind, str) else "", namespace if isinstance(namespace, str) else "",
            name if isinstance(name, str) else "")


def created_at(obj: Obj) -> str:
    """creationTimestamp as an RFC 3339 string that sorts in time order; missing sorts last."""
    ts = dig(obj, "metadata", "creationTimestamp", default="")
    return ts if isinstance(ts, str) and ts else "9999-12-31T23:59:59Z"
