"""One-line builders for Gateway API objects in table tests."""

from __future__ import annotations

from typing import Any

from validators.objects import Obj

GW = "gateway.networking.k8s.io/v1"


def meta(name: str, ns: str = "default", ts: str = "2026-01-01T00:00:00Z", **labels: str) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "namespace": ns, "creationTimestamp": ts}
    if labels:
        m["labels"] = dict(labels)
    return m


def listener(name: str, port: int, protocol: str = "HTTP", *, hostname: str | None = None,
             mode: str | None = None, frm: str | None = None, selector: dict[str, str] | None = None,
             kinds: list[str] | None = None, certs: list[dict[str, str]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": port, "protocol": protocol}
    if hostname:
        out["hostname"] = hostname
    tls: dict[str, Any] = {}
    if mode:
        tls["mode"] = mode
    if certs is not None:
        tls["certificateRefs"] = certs
    if tls:
        out["tls"] = tls
    allowed: dict[str, Any] = {}
    if frm:
        allowed["namespaces"] = {"from": frm}
        if selector is not None:
            allowed["namespaces"]["selector"] = {"matchLabels": selector}
    if kinds is not None:
        allowed["kinds"] = [{"kind": k} for k in kinds]
    if allowed:
        out["allowedRoutes"] = allowed
    return out


def gateway(name: str, *listeners: dict[str, Any], ns: str = "default",
            allowed_listeners: str | None = None, ls_selector: dict[str, str] | None = None) -> Obj:
    spec: dict[str, Any] = {"gatewayClassName": "haptic", "listeners": list(listeners)}
    if allowed_listeners:
        spec["allowedListeners"] = {"namespaces": {"from": allowed_listeners}}
        if ls_selector is not None:
            spec["allowedListeners"]["namespaces"]["selector"] = {"matchLabels": ls_selector}
    return {"apiVersion": GW, "kind": "Gateway", "metadata": meta(name, ns), "spec": spec}


def listener_set(name: str, parent: str, *listeners: dict[str, Any], ns: str = "default",
                 parent_ns: str | None = None) -> Obj:
    parent_ref: dict[str, Any] = {"name": parent}
    if parent_ns:
        parent_ref["namespace"] = parent_ns
    return {"apiVersion": GW, "kind": "ListenerSet", "metadata": meta(name, ns),
            "spec": {"parentRef": parent_ref, "listeners": list(listeners)}}


def parent(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, **kw}


def route(kind: str, name: str, *parents: dict[str, Any], ns: str = "default", hosts: list[str] | None = None,
          rules: list[dict[str, Any]] | None = None, ts: str = "2026-01-01T00:00:00Z") -> Obj:
    spec: dict[str, Any] = {"parentRefs": list(parents)}
    if hosts is not None:
        spec["hostnames"] = hosts
    spec["rules"] = rules if rules is not None else [{"backendRefs": [{"name": "svc", "port": 80}]}]
    return {"apiVersion": GW, "kind": kind, "metadata": meta(name, ns, ts), "spec": spec}


def namespace(name: str, **labels: str) -> Obj:
    m: dict[str, Any] = {"name": name}
    if labels:
        m["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": m}


def service(name: str, ns: str = "default", *ports: tuple[str, int]) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": n, "port": p, "targetPort": p} for n, p in (ports or (("", 80),))]}}


def grant(ns: str, from_kind: str, from_ns: str, to_kind: str = "Service", to_name: str | None = None) -> Obj:
    to: dict[str, Any] = {"group": "", "kind": to_kind}
    if to_name:
        to["name"] = to_name
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": f"g-{from_kind.lower()}-{from_ns}", "namespace": ns},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": from_kind, "namespace": from_ns}],
                     "to": [to]}}


def endpoint_slice(name: str, svc: str, ns: str, ports: list[tuple[str, int]],
                   endpoints: list[tuple[str, bool | None]]) -> Obj:
    eps = []
    for addr, ready in endpoints:
        ep: dict[str, Any] = {"addresses": [addr]}
        if ready is not None:
            ep["conditions"] = {"ready": ready}
        eps.append(ep)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4", "ports": [{"name": n, "port": p} for n, p in ports], "endpoints": eps}
