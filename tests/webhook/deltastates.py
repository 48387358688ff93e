"""Hypothesis strategies for the delta-check differential test: small random clusters (Gateways and
ListenerSets sharing ports and hostnames, every route kind, Services, EndpointSlices, certificates,
ReferenceGrants, BackendTLSPolicies) and random single changes of every reviewed kind, with values
drawn from pools that include what breaks HAProxy (bad regexes, odd header values, timeouts, weights,
unusable certificates and CAs)."""

from __future__ import annotations

import base64
import copy
from typing import Any

from hypothesis import strategies as st

from tests.render.conftest import tls_secret
from validators.changes import Change, Operation
from validators.objects import Obj, ref_of

GW = "gateway.networking.k8s.io/v1"
NAMESPACES = ("a", "b")
PORTS = (80, 443, 8443, 9000)
HOSTS = ("a.example.com", "b.example.com", "*.example.com", "x.a.example.com")
LISTENER_HOSTS = (None, None, "a.example.com", "*.example.com")
TIMES = ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z")
PATHS = ("/", "/api", "/api/v1", "/a")
REGEXES = ("/items/[0-9]+", "/a{2,1}", "/(x", "/[z-a]", "/ok.*", "/\\d+")
HEADER_NAMES = ("X-Team", "x-team", "X-Other", "Set-Cookie", "X-A$B", "X'#|`%")
HEADER_VALUES = ("blue", "a b", "%[req.hdr(host)]", "\\", "\"q\"", "x%", "{}", "a\\tb")
TIMEOUTS = ("1s", "500ms", "10m", "1h", "0s", "99999h", "2147483648ms")
SERVICES = ("web", "api", "gone")

GOOD_PAIR: dict[str, str] = tls_secret("pair", "a", "a.example.com")["data"]  # type: ignore[assignment]


def _meta(name: str, ns: str, ts: str) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "creationTimestamp": ts}


def secrets() -> list[Obj]:
    out: list[Obj] = []
    for ns in NAMESPACES:
        out.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "good", "namespace": ns},
                    "type": "kubernetes.io/tls", "data": dict(GOOD_PAIR)})
        out.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "junk", "namespace": ns},
                    "type": "kubernetes.io/tls",
                    "data": {"tls.crt": base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAAAA\n"
                                                         b"-----END CERTIFICATE-----\n").decode(),
                             "tls.key": GOOD_PAIR["tls.key"]}})
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": ns},
                    "data": {"ca.crt": base64.b64decode(GOOD_PAIR["tls.crt"]).decode()}})
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca-junk", "namespace": ns},
                    "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}})
        for svc in SERVICES[:2]:
            out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": ns},
                        "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080},
                                           {"name": "tls", "port": 443, "targetPort": 8443}]}})
    return out


@st.composite
def listener(draw: st.DrawFn, index: int) -> dict[str, Any]:
    protocol = draw(st.sampled_from(("HTTP", "HTTP", "HTTPS", "TLS", "TCP")))
    out: dict[str, Any] = {"name": f"l{index}", "port": draw(st.sampled_from(PORTS)), "protocol": protocol}
    host = draw(st.sampled_from(LISTENER_HOSTS))
    if host and protocol != "TCP":
        out["hostname"] = host
    if protocol in ("HTTPS", "TLS"):
        mode = "Terminate" if protocol == "HTTPS" else draw(st.sampled_from(("Passthrough", "Terminate")))
        tls: dict[str, Any] = {"mode": mode}
        if mode == "Terminate":
            cert = draw(st.sampled_from(("good", "good", "junk", "missing")))
            ref: dict[str, Any] = {"kind": "Secret", "name": cert}
            if draw(st.booleans()):
                ref["namespace"] = draw(st.sampled_from(NAMESPACES))
            tls["certificateRefs"] = [ref]
        out["tls"] = tls
    out["allowedRoutes"] = {"namespaces": {"from": draw(st.sampled_from(("Same", "All", "All")))}}
    return out


@st.composite
def gateway(draw: st.DrawFn, name: str) -> Obj:
    count = draw(st.integers(1, 3))
    spec: dict[str, Any] = {"gatewayClassName": "haproxy",
                            "listeners": [draw(listener(i)) for i in range(count)]}
    if draw(st.booleans()):
        spec["allowedListeners"] = {"namespaces": {"from": draw(st.sampled_from(("All", "Same", "None")))}}
    return {"apiVersion": GW, "kind": "Gateway", "metadata": _meta(name, draw(st.sampled_from(NAMESPACES)),
                                                                     draw(st.sampled_from(TIMES))), "spec": spec}


@st.composite
def listener_set(draw: st.DrawFn, name: str, gateways: list[Obj]) -> Obj:
    parent = draw(st.sampled_from(gateways))
    return {"apiVersion": GW, "kind": "ListenerSet",
            "metadata": _meta(name, draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(TIMES))),
            "spec": {"parentRef": {"name": parent["metadata"]["name"],
                                   "namespace": parent["metadata"]["namespace"]},
                     "listeners": [draw(listener(i)) for i in range(draw(st.integers(1, 2)))]}}


@st.composite
def backend_ref(draw: st.DrawFn, port: int = 8080) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": draw(st.sampled_from(SERVICES)), "port": draw(st.sampled_from((port, port, 9)))}
    if draw(st.integers(0, 3)) == 0:
        ref["namespace"] = draw(st.sampled_from(NAMESPACES))
    if draw(st.booleans()):
        ref["weight"] = draw(st.sampled_from((0, 1, 50, 1000000)))
    return ref


@st.composite
def http_filter(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(("RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect",
                                 "URLRewrite", "RequestMirror")))
    if kind in ("RequestHeaderModifier", "ResponseHeaderModifier"):
        body: dict[str, Any] = {draw(st.sampled_from(("set", "add"))): [
            {"name": draw(st.sampled_from(HEADER_NAMES)), "value": draw(st.sampled_from(HEADER_VALUES))}]}
        if draw(st.booleans()):
            body["remove"] = [draw(st.sampled_from(HEADER_NAMES))]
        field = kind[0].lower() + kind[1:]
        return {"type": kind, field: body}
    if kind == "RequestRedirect":
        redirect: dict[str, Any] = {"statusCode": draw(st.sampled_from((301, 302)))}
        if draw(st.booleans()):
            redirect["hostname"] = draw(st.sampled_from(("a.example.com", "b.example.com")))
        if draw(st.booleans()):
            redirect["path"] = {"type": "ReplacePrefixMatch", "replacePrefixMatch": draw(st.sampled_from(PATHS))}
        return {"type": kind, "requestRedirect": redirect}
    if kind == "URLRewrite":
        return {"type": kind, "urlRewrite": {"path": {"type": "ReplaceFullPath",
                                                       "replaceFullPath": draw(st.sampled_from(PATHS))}}}
    return {"type": kind, "requestMirror": {"backendRef": draw(backend_ref())}}


@st.composite
def match(draw: st.DrawFn, grpc: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if grpc:
        if draw(st.booleans()):
            out["method"] = {"service": draw(st.sampled_from(("pkg.Svc", "pkg.Other"))), "method": "Get"}
    else:
        ptype = draw(st.sampled_from(("PathPrefix", "Exact", "RegularExpression")))
        value = draw(st.sampled_from(REGEXES if ptype == "RegularExpression" else PATHS))
        out["path"] = {"type": ptype, "value": value}
    if draw(st.integers(0, 3)) == 0:
        rtype = draw(st.sampled_from(("Exact", "RegularExpression")))
        out["headers"] = [{"name": draw(st.sampled_from(HEADER_NAMES)), "type": rtype,
                           "value": draw(st.sampled_from(REGEXES if rtype == "RegularExpression" else HEADER_VALUES))}]
    return out


def _parents(draw: st.DrawFn, sources: list[Obj]) -> list[dict[str, Any]]:
    out = []
    for source in draw(st.lists(st.sampled_from(sources), min_size=1, max_size=2, unique_by=id)) if sources else []:
        ref: dict[str, Any] = {"name": source["metadata"]["name"], "namespace": source["metadata"]["namespace"]}
        if source["kind"] == "ListenerSet":
            ref["kind"] = "ListenerSet"
        if draw(st.integers(0, 3)) == 0:
            ref["sectionName"] = draw(st.sampled_from(("l0", "l1")))
        out.append(ref)
    if not out or draw(st.integers(0, 7)) == 0:
        out.append({"name": "nowhere"})
    return out


@st.composite
def route(draw: st.DrawFn, kind: str, name: str, ns: str, sources: list[Obj]) -> Obj:
    meta = _meta(name, ns, draw(st.sampled_from(TIMES)))
    if kind == "Route":
        spec: dict[str, Any] = {"backend": {"address": draw(st.sampled_from(("10.0.0.1", "web.a.svc", "bad addr"))),
                                            "port": draw(st.sampled_from((80, 8080)))}}
        spec["hostnames"] = draw(st.lists(st.sampled_from(HOSTS[:2]), max_size=1))
        spec["paths"] = draw(st.lists(st.sampled_from(PATHS), max_size=2, unique=True))
        if draw(st.booleans()):
            spec["requestHeaders"] = [{"name": draw(st.sampled_from(HEADER_NAMES)),
                                       "value": draw(st.sampled_from(HEADER_VALUES))}]
        return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route", "metadata": meta, "spec": spec}
    spec = {"parentRefs": _parents(draw, sources)}
    if kind in ("HTTPRoute", "GRPCRoute", "TLSRoute"):
        hosts = draw(st.lists(st.sampled_from(HOSTS), max_size=2, unique=True, min_size=1 if kind == "TLSRoute" else 0))
        if hosts:
            spec["hostnames"] = hosts
    rules = []
    for _ in range(draw(st.integers(1, 2))):
        port = 443 if kind == "TLSRoute" else 8080
        rule: dict[str, Any] = {"backendRefs": draw(st.lists(backend_ref(port), min_size=1, max_size=2))}
        if kind in ("HTTPRoute", "GRPCRoute"):
            rule["matches"] = draw(st.lists(match(kind == "GRPCRoute"), max_size=2))
            if kind == "HTTPRoute":
                rule["filters"] = draw(st.lists(http_filter(), max_size=2))
                if draw(st.integers(0, 3)) == 0:
                    rule["timeouts"] = {"request": draw(st.sampled_from(TIMEOUTS))}
            if draw(st.integers(0, 5)) == 0:
                rule["sessionPersistence"] = {"type": "Cookie",
                                              "sessionName": draw(st.sampled_from(("s", "a b", "x;y")))}
        rules.append(rule)
    spec["rules"] = rules
    return {"apiVersion": GW, "kind": kind, "metadata": meta, "spec": spec}


@st.composite
def reference_grant(draw: st.DrawFn, name: str) -> Obj:
    ns = draw(st.sampled_from(NAMESPACES))
    other = "b" if ns == "a" else "a"
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": _meta(name, ns, TIMES[0]),
            "spec": {"from": [{"group": "gateway.networking.k8s.io",
                               "kind": draw(st.sampled_from(("HTTPRoute", "Gateway", "TLSRoute"))),
                               "namespace": other}],
                     "to": [{"group": "", "kind": draw(st.sampled_from(("Service", "Secret")))}]}}


@st.composite
def backend_tls_policy(draw: st.DrawFn, name: str) -> Obj:
    ns = draw(st.sampled_from(NAMESPACES))
    return {"apiVersion": GW, "kind": "BackendTLSPolicy", "metadata": _meta(name, ns, draw(st.sampled_from(TIMES))),
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": draw(st.sampled_from(SERVICES))}],
                     "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap",
                                                           "name": draw(st.sampled_from(("ca", "ca-junk", "ca-junk",
                                                                                         "none")))}],
                                    "hostname": draw(st.sampled_from(("web.example.com", "bad host")))}}}


def endpoint_slices() -> list[Obj]:
    return [{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": f"{svc}-1", "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
             "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}, {"name": "tls", "port": 8443}],
             "endpoints": [{"addresses": ["10.1.0.11"], "conditions": {"ready": True}}]}
            for ns in NAMESPACES for svc in SERVICES[:2]]


ROUTE_KINDS = ("HTTPRoute", "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Route")
CHANGE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Route", "Gateway", "ListenerSet",
                "ReferenceGrant", "BackendTLSPolicy")


@st.composite
def new_object(draw: st.DrawFn, kind: str, name: str, gateways: list[Obj], sources: list[Obj]) -> Obj:
    if kind == "Gateway":
        return draw(gateway(name))
    if kind == "ListenerSet":
        return draw(listener_set(name, gateways))
    if kind == "ReferenceGrant":
        return draw(reference_grant(name))
    if kind == "BackendTLSPolicy":
        return draw(backend_tls_policy(name))
    return draw(route(kind, name, draw(st.sampled_from(NAMESPACES)), sources))


@st.composite
def cluster_and_change(draw: st.DrawFn) -> tuple[list[Obj], Change]:
    gateways = [draw(gateway(f"gw{i}")) for i in range(draw(st.integers(1, 3)))]
    sets = [draw(listener_set(f"ls{i}", gateways)) for i in range(draw(st.integers(0, 1)))]
    sources = [*gateways, *sets]
    objects: list[Obj] = [*gateways, *sets, *secrets(), *endpoint_slices()]
    for i in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(ROUTE_KINDS))
        objects.append(draw(route(kind, f"r{i}", draw(st.sampled_from(NAMESPACES)), sources)))
    for i in range(draw(st.integers(0, 1))):
        objects.append(draw(reference_grant(f"grant{i}")))
    for i in range(draw(st.integers(0, 2))):  # an unloadable CA is what HAProxy rejects after the validators
        objects.append(draw(backend_tls_policy(f"btls{i}")))
    reviewed = [o for o in objects if o["kind"] in CHANGE_KINDS]
    operation = draw(st.sampled_from((Operation.CREATE, Operation.UPDATE, Operation.UPDATE, Operation.DELETE)))
    if operation is Operation.CREATE:
        kind = draw(st.sampled_from((*CHANGE_KINDS, "BackendTLSPolicy", "HTTPRoute")))
        obj = draw(new_object(kind, "new", gateways, sources))
        return objects, Change(operation, obj)
    old = draw(st.sampled_from(reviewed))
    if operation is Operation.DELETE:
        return objects, Change(operation, None, old)
    obj = copy.deepcopy(draw(new_object(old["kind"], old["metadata"]["name"], gateways, sources)))
    obj["metadata"]["namespace"] = old["metadata"]["namespace"]
    obj["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
    assert ref_of(obj) == ref_of(old)
    return objects, Change(operation, obj, old)
