"""The routing table (haproxy_check.traffic) against the real data plane: for random states and changes
(Gateways sharing a port, so isolated pod ports; a tenant's ListenerSet; wildcard and exact hosts;
listener hostnames; regex paths; header, method and query matches; cross-namespace backends through a
ReferenceGrant), the rendered configuration runs in a
real HAProxy inside a private network namespace, with one echo server per Service that says which it
is. Every request class of both tables, and requests that should match nothing, are sent before and
after the change; the Service (or the status) that answers must be the one the table names. A
disagreement is a bug in the model.

Bounded for CI (a few examples per binary, no deadline); ``bench/bench_traffic.py`` runs the long profile.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check.render.rendering import Renderer, RenderSettings
from haproxy_check.traffic import diffs, tables
from haproxy_check.traffic.connections import Connection
from haproxy_check.traffic.destinations import (
    BACKEND,
    HTTPS_ENGINE,
    NO_LISTENER,
    NOT_FOUND,
    REJECTED,
    Destination,
    Request,
)
from tests.render.conftest import write
from tests.render.trafficprobes import probe
from validators.objects import Obj
from validators.states import MemoryState

pytestmark = pytest.mark.haproxy

NAMESPACES = ("infra", "team-a", "team-b")
HOSTS = ("a.example.com", "b.example.com", "*.example.com", "x.a.example.com", "*.a.example.com")
PATHS = ("/", "/api", "/api/v1", "/x")
REGEXES = ("/x[0-9]+", "/api/v[0-9]+", "/[a-z]+/v1")
ECHO_BASE = 9100  # echo server ports inside the namespace: one per Service


def unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return done.returncode == 0


def gateway(name: str, ns: str, port: int, hostname: str | None, created: str) -> Obj:
    listener: dict[str, Any] = {"name": "http", "protocol": "HTTP", "port": port,
                                "allowedRoutes": {"namespaces": {"from": "All"}}}
    if hostname:
        listener["hostname"] = hostname
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "spec": {"gatewayClassName": "haproxy", "listeners": [listener],
                     "allowedListeners": {"namespaces": {"from": "All"}}}}


def listener_set(port: int, hostname: str | None) -> Obj:
    """A tenant's (team-a's) ListenerSet on infra's Gateway."""
    listener: dict[str, Any] = {"name": "extra", "protocol": "HTTP", "port": port,
                                "allowedRoutes": {"namespaces": {"from": "All"}}}
    if hostname:
        listener["hostname"] = hostname
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
            "metadata": {"name": "ls", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRef": {"name": "edge", "namespace": "infra"}, "listeners": [listener]}}


def service(name: str, ns: str, port: int) -> list[Obj]:
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
             "spec": {"ports": [{"name": "http", "port": 80}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
             "ports": [{"name": "http", "port": port}], "endpoints": [{"addresses": ["127.0.0.1"]}]}]


SERVICES = [(f"svc{k}", ns) for ns in NAMESPACES for k in range(2)]
ECHO = {ECHO_BASE + n: f"{ns}/{name}" for n, (name, ns) in enumerate(SERVICES)}
RAW_BASE = 9200  # raw (TCP) echo servers: the Services of TLSRoutes and TCPRoutes
L4_SERVICES = [(f"tcp{k}", ns) for ns in NAMESPACES for k in range(2)]
RAW = {RAW_BASE + n: f"{ns}/{name}" for n, (name, ns) in enumerate(L4_SERVICES)}


@st.composite
def routes(draw: st.DrawFn, count: int) -> list[Obj]:
    out: list[Obj] = []
    for n in range(count):
        ns = draw(st.sampled_from(NAMESPACES))
        gw = draw(st.sampled_from([("edge", "infra"), ("own", "team-b"), ("ls", "team-a")]))
        hosts = draw(st.lists(st.sampled_from(HOSTS), max_size=2, unique=True))
        rules = []
        for _ in range(draw(st.integers(1, 2))):
            ptype = draw(st.sampled_from(["PathPrefix", "PathPrefix", "Exact", "RegularExpression"]))
            value = draw(st.sampled_from(REGEXES if ptype == "RegularExpression" else PATHS))
            match: dict[str, Any] = {"path": {"type": ptype, "value": value}}
            extra = draw(st.sampled_from(["", "", "header", "method", "query", "header-regex"]))
            if extra == "header":
                match["headers"] = [{"name": "X-Env", "value": "canary"}]
            elif extra == "header-regex":
                match["headers"] = [{"name": "X-Env", "type": "RegularExpression", "value": "^can[a-z]+"}]
            elif extra == "query":
                match["queryParams"] = [{"name": "v", "value": "2"}]
            elif extra == "method":
                match["method"] = "POST"
            # a backend of the route's namespace, or (through the grant below) team-a's
            target_ns = draw(st.sampled_from([ns, ns, "team-a"]))
            backend: dict[str, Any] = {"name": f"svc{draw(st.integers(0, 1))}", "port": 80}
            if target_ns != ns:
                backend["namespace"] = target_ns
            rules.append({"matches": [match], "backendRefs": [backend]})
        out.append({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                    "metadata": {"name": f"r{n}", "namespace": ns,
                                 "creationTimestamp": f"2026-01-0{1 + draw(st.integers(0, 8))}T00:00:0{n}Z"},
                    "spec": {"parentRefs": [{"name": gw[0], "namespace": gw[1],
                                             **({"kind": "ListenerSet"} if gw[0] == "ls" else {})}],
                             "hostnames": hosts, "rules": rules}})
    return out


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Obj], list[Obj]]:
    """(objects before, objects after) of one change: a route added, removed or re-hosted, or a second
    Gateway on the shared port."""
    objs: list[Obj] = [gateway("edge", "infra", 80, draw(st.sampled_from([None, None, "*.example.com"])),
                               "2026-01-01T00:00:00Z")]
    own_port = draw(st.sampled_from([80, 8080]))
    second = gateway("own", "team-b", own_port, draw(st.sampled_from([None, "a.example.com"])),
                     draw(st.sampled_from(["2025-12-01T00:00:00Z", "2026-02-01T00:00:00Z"])))
    with_second = draw(st.booleans())
    if with_second:
        objs.append(second)
    tenant = listener_set(draw(st.sampled_from([80, 8080])),
                          draw(st.sampled_from([None, "b.example.com", "*.a.example.com"])))
    with_set = draw(st.booleans())
    if with_set:
        objs.append(tenant)
    for name, ns in SERVICES:
        port = next(p for p, who in ECHO.items() if who == f"{ns}/{name}")
        objs += service(name, ns, port)
    objs.append({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                 "metadata": {"name": "to-a", "namespace": "team-a"},
                 "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                    "namespace": ns} for ns in NAMESPACES if ns != "team-a"],
                          "to": [{"group": "", "kind": "Service"}]}})
    present = draw(routes(draw(st.integers(1, 4))))
    change = draw(st.sampled_from(["add", "remove", "rehost", "gateway", "listenerset"]))
    after = list(objs)
    before_routes, after_routes = list(present), list(present)
    if change == "add":
        extra = draw(routes(len(present) + 1))[-1]
        after_routes.append(extra)
    elif change == "remove":
        after_routes.pop(draw(st.integers(0, len(present) - 1)))
    elif change == "rehost":
        k = draw(st.integers(0, len(present) - 1))
        moved = {**present[k], "spec": {**present[k]["spec"],
                                        "hostnames": draw(st.lists(st.sampled_from(HOSTS), max_size=2, unique=True))}}
        after_routes[k] = moved
    elif change == "gateway" and not with_second:
        after.append(second)
    elif change == "listenerset" and not with_set:
        after.append(tenant)
    return objs + before_routes, after + after_routes


RENDERER = Renderer(settings=RenderSettings(isolation_pod_port_base=20000, isolation_pod_port_span=100),
                    incremental=False)


def probes_of(*both: tables.RoutingTable) -> list[Probe]:
    """Every row's sample of both tables, every request and connection the diff of the two moves, and
    requests and connections that should match nothing, on every port."""
    out: dict[Probe, None] = {p: None for m in diffs.diff(*both).moves for p in (m.request, m.connection)
                              if p is not None}
    ports: set[int] = set()
    l4_ports: set[int] = set()
    for table in both:
        ports |= set(table.ports())
        l4_ports |= set(table.l4.ports())
        for row in table.rows():
            for p in (row.sample, row.connection):
                if p is not None:
                    out[p] = None
    for port in sorted(ports - l4_ports):
        out[Request(port, "nothing.invalid", "/rg-nothing")] = None
        out[Request(port, "y.b.example.com", "/api/v1/deep", "POST", (("X-Env", "canary"),))] = None
        out[Request(port, "a.example.com", "/api/v12/x", "GET", (("X-Env", "canaries"),), "v=2&v=3")] = None
    for port in sorted(l4_ports):
        for name in ("nothing.invalid", "a.example.com", "deep.x.a.example.com", "B.Example.Com"):
            out[Connection(port, name)] = None
    return list(out)


def expected(dest: Destination) -> tuple[int, str]:
    if dest.outcome == BACKEND:
        assert len(dest.backends) == 1, dest
        if dest.backends[0].address:  # a custom Route's literal server: the echo on that port
            return 200, ECHO[int(dest.backends[0].address.rsplit(":", 1)[1])]
        return 200, dest.backends[0].service.rsplit(":", 1)[0]
    if dest.outcome == NOT_FOUND:
        return 404, ""
    if dest.outcome == NO_LISTENER:
        return 0, ""
    raise AssertionError(f"the scenario makes no {dest.outcome}")


Probe = Request | Connection


def expected_of(table: tables.RoutingTable, probe: Probe) -> tuple[int, str]:
    """What the table says a probe gets: an HTTP request's status and Service; a connection's raw echo
    (1), rejection (-1) or refusal (0), or, decrypted by the HTTP engine, its ``GET /`` answer. A request
    to an HTTPS entry point goes by TLS with the Host as server name, so the SNI split decides first."""
    if isinstance(probe, Request):
        if not _https(table, probe.port):
            return expected(table.resolve(probe))
        conn = Connection(probe.port, probe.host)
        request = Request(probe.port, probe.host, probe.path, query=probe.query)  # trafficprobes sends GET, Host
    else:
        conn, request = probe, Request(probe.port, probe.sni or "", "/")
    dest = table.l4.resolve(conn)
    if dest.outcome == HTTPS_ENGINE:
        return expected(table.resolve(request))
    if dest.outcome == BACKEND:
        assert len(dest.backends) == 1, dest
        return 1, dest.backends[0].service.rsplit(":", 1)[0]
    if dest.outcome in (REJECTED, NOT_FOUND):
        return -1, ""
    if dest.outcome == NO_LISTENER:
        return 0, ""
    raise AssertionError(f"the scenario makes no {dest.outcome}")


def _https(table: tables.RoutingTable, port: int) -> bool:
    fe = table.frontends.get(port)
    return port in table.l4.outer or (fe is not None and fe.facts.protocol == "HTTPS")


def wire(table: tables.RoutingTable, probe: Probe) -> dict[str, Any]:
    """The probe as trafficprobes sends it."""
    if isinstance(probe, Connection):
        if probe.sni is None:
            return {"kind": "tcp", "port": probe.port}
        return {"kind": "tls", "port": probe.port, "sni": probe.sni, "host": probe.sni, "target": "/"}
    if _https(table, probe.port):
        return {"kind": "tls", "port": probe.port, "sni": probe.host, "host": probe.host, "target": probe.target}
    return {"port": probe.port, "host": probe.host, "target": probe.target, "method": probe.method,
            "headers": [list(h) for h in probe.headers]}


def run_scenario(binary: str, before: Sequence[Obj], after: Sequence[Obj], where: Path,
                 extra: Sequence[Request] = ()) -> dict[str, int]:
    """``extra``: requests probed besides every class's and the ones that should match nothing."""
    renders = [RENDERER.render(MemoryState(list(objs))) for objs in (before, after)]
    both = [tables.table(r.description) for r in renders]
    requests = [*probes_of(*both), *extra]
    # the diff probes only what can differ (O(change)): every probe that moves selects, before and after,
    # the vhosts of a request the diff names as moved
    def selects(r: Request) -> tuple[int, str | None, str | None]:
        return r.port, both[0].vhost_of(r.port, r.host), both[1].vhost_of(r.port, r.host)

    named = {selects(m.request) for m in diffs.diff(*both).moves if m.request is not None}
    moving = {selects(r) for r in requests if isinstance(r, Request)
              and diffs.moved(both[0].resolve(r), both[1].resolve(r))}
    assert moving <= named, f"moved, not in the diff: {sorted(moving - named, key=str)}"
    conns = [c for m in diffs.diff(*both).moves if (c := m.connection) is not None]
    l4_moving = [r for r in requests if isinstance(r, Connection)
                 and diffs.moved(both[0].l4.resolve(r), both[1].l4.resolve(r))]
    assert {(c.port, both[0].l4.resolve(c), both[1].l4.resolve(c)) for c in l4_moving} <= {
        (c.port, both[0].l4.resolve(c), both[1].l4.resolve(c)) for c in conns}, "a moved connection is not in the diff"
    runs = []
    for n, (render, table) in enumerate(zip(renders, both, strict=True)):
        target = where / f"run{n}"
        target.mkdir(parents=True, exist_ok=True)
        write(render, target)
        runs.append({"dir": str(target), "ports": sorted({*table.ports(), *table.l4.ports()}),
                     "probes": [wire(table, r) for r in requests]})
    answers = probe({"binary": binary, "echo": {str(p): who for p, who in ECHO.items()},
                     "raw": {str(p): who for p, who in RAW.items()}, "runs": runs}, where)
    wrong = []
    for table, got in zip(both, answers, strict=True):
        for request, answer in zip(requests, got, strict=True):
            want = expected_of(table, request)
            if (answer["status"], answer["server"]) != want:
                wrong.append(f"{request}: table says {want}, haproxy answered {answer}")
    assert not wrong, "\n".join(wrong)
    return {"requests": len(requests), "classes": sum(len(t.rows()) for t in both),
            "connections": sum(isinstance(r, Connection) for r in requests)}


@pytest.fixture(scope="module")
def namespaced() -> None:
    if not unshare_works():
        if os.environ.get("CI") == "true":
            pytest.fail("unshare -n is needed to probe HAProxy in a private network namespace")
        pytest.skip("unshare -n is not available")


@pytest.mark.usefixtures("namespaced")
@pytest.mark.parametrize("which", [0, 1], ids=["2.8", "3.x"])
def test_the_routing_table_is_what_haproxy_does(haproxy_paths: list[str], which: int,
                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    if which >= len(haproxy_paths):
        pytest.skip("no HAProxy 3.x binary (.haproxy3/haproxy)")
    binary = haproxy_paths[which]

    @settings(max_examples=6, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(scenarios())
    def check(scenario: tuple[list[Obj], list[Obj]]) -> None:
        run_scenario(binary, *scenario, tmp_path_factory.mktemp("traffic"))

    check()


def route(name: str, ns: str, created: str, hosts: list[str], rules: list[Any], gw: str = "edge") -> Obj:
    parent = {"name": gw, "namespace": "infra" if gw == "edge" else "team-b"}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "spec": {"parentRefs": [parent], "hostnames": hosts, "rules": rules}}


def rule(ptype: str, value: str, svc: str, ns: str | None = None, **more: Any) -> dict[str, Any]:
    backend: dict[str, Any] = {"name": svc, "port": 80, **({"namespace": ns} if ns else {})}
    return {"matches": [{"path": {"type": ptype, "value": value}, **more}], "backendRefs": [backend]}


def rich() -> tuple[list[Obj], list[Obj]]:
    """Every precedence step at once: exact over prefix, longer prefix first, a header and a method
    match beating a path-only match of the same path, exact host over wildcard over any host, a second
    (newer) Gateway on the shared port on its pod port, a cross-namespace backend; the change adds a
    route that shadows some of it."""
    objs: list[Obj] = [gateway("edge", "infra", 80, None, "2026-01-01T00:00:00Z"),
                       gateway("own", "team-b", 80, None, "2026-02-01T00:00:00Z")]
    for name, ns in SERVICES:
        objs += service(name, ns, next(p for p, who in ECHO.items() if who == f"{ns}/{name}"))
    objs.append({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                 "metadata": {"name": "to-a", "namespace": "team-a"},
                 "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "team-b"}],
                          "to": [{"group": "", "kind": "Service"}]}})
    objs += [
        route("any", "infra", "2026-01-01T00:00:01Z", [], [rule("PathPrefix", "/", "svc0")]),
        route("wild", "team-a", "2026-01-01T00:00:02Z", ["*.example.com"],
              [rule("PathPrefix", "/api", "svc0"), rule("PathPrefix", "/api", "svc1", headers=[
                  {"name": "X-Env", "value": "canary"}]), rule("Exact", "/api/v1", "svc1")]),
        route("a", "team-a", "2026-01-01T00:00:03Z", ["a.example.com"],
              [rule("PathPrefix", "/api", "svc0"), rule("PathPrefix", "/api", "svc1", method="POST"),
               rule("PathPrefix", "/api/v1", "svc0", "team-a")]),
        route("b", "team-b", "2026-01-01T00:00:04Z", ["b.example.com"],
              [rule("PathPrefix", "/", "svc0", "team-a"), rule("RegularExpression", "/x[0-9]+", "svc1")], gw="own"),
    ]
    change = route("steal", "team-b", "2026-01-01T00:00:05Z", ["x.a.example.com", "*.a.example.com"],
                   [rule("PathPrefix", "/api", "svc1"), rule("Exact", "/", "svc0")])
    return objs, [*objs, change]


@pytest.mark.usefixtures("namespaced")
@pytest.mark.parametrize("which", [0, 1], ids=["2.8", "3.x"])
def test_every_precedence_step_is_what_haproxy_does(haproxy_paths: list[str], which: int, tmp_path: Path) -> None:
    if which >= len(haproxy_paths):
        pytest.skip("no HAProxy 3.x binary (.haproxy3/haproxy)")
    counts = run_scenario(haproxy_paths[which], *rich(), tmp_path)
    assert counts["classes"] >= 30, counts


@pytest.mark.usefixtures("namespaced")
def test_a_new_exact_host_takes_the_wildcard_routes_requests(haproxy_path: str, tmp_path: Path) -> None:
    """The case the diff exists for, probed: team-b's exact host shadows team-a's wildcard."""
    base: list[Obj] = [gateway("edge", "infra", 80, None, "2026-01-01T00:00:00Z")]
    for name, ns in SERVICES:
        base += service(name, ns, next(p for p, who in ECHO.items() if who == f"{ns}/{name}"))
    wild = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "shop", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRefs": [{"name": "edge", "namespace": "infra"}], "hostnames": ["*.example.com"],
                     "rules": [{"backendRefs": [{"name": "svc0", "port": 80}]}]}}
    exact = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "pay", "namespace": "team-b", "creationTimestamp": "2026-01-02T00:00:00Z"},
             "spec": {"parentRefs": [{"name": "edge", "namespace": "infra"}], "hostnames": ["a.example.com"],
                      "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                                 "backendRefs": [{"name": "svc0", "port": 80}]}]}}
    before, after = [*base, wild], [*base, wild, exact]
    moved = diffs.diff(*(tables.table(RENDERER.render(MemoryState(o)).description) for o in (before, after)))
    assert [m.line() for m in moved.moves] == [
        "HTTP :80 a.example.com /* -> gw_h_team-a_shop_svc0_80 (team-a) => no route",
        "HTTP :80 a.example.com /api (prefix) -> gw_h_team-a_shop_svc0_80 (team-a) => gw_h_team-b_pay_svc0_80 (team-b)",
        "HTTP :80 a.example.com /api/* -> gw_h_team-a_shop_svc0_80 (team-a) => gw_h_team-b_pay_svc0_80 (team-b)"]
    assert moved.affected("team-b") == ["team-a"]
    counts = run_scenario(haproxy_path, before, after, tmp_path)  # and HAProxy agrees, before and after
    assert counts["requests"] == 7


@pytest.mark.usefixtures("namespaced")
def test_a_regex_path_matches_only_on_its_own_frontend(haproxy_path: str, tmp_path: Path) -> None:
    """A path-regex.map key is anchored on its vhost's text: without the path-start anchor, team-a's
    ``[0-9]*/x`` on infra's port 80 matched ``a.example.com:8080/x``, a request to team-b's Gateway on
    8080, and HAProxy sent it to team-a (found by the routing table, confirmed here on the real thing)."""
    base: list[Obj] = [gateway("edge", "infra", 80, None, "2026-01-01T00:00:00Z"),
                       gateway("own", "team-b", 8080, None, "2026-01-01T00:00:00Z")]
    for name, ns in SERVICES:
        base += service(name, ns, next(p for p, who in ECHO.items() if who == f"{ns}/{name}"))
    owner = route("owner", "team-b", "2026-01-01T00:00:01Z", ["a.example.com"], [rule("PathPrefix", "/", "svc0")],
                  gw="own")
    thief = route("thief", "team-a", "2026-01-01T00:00:02Z", ["a.example.com"],
                  [rule("RegularExpression", "[0-9]*/x", "svc1")])
    after = tables.table(RENDERER.render(MemoryState([*base, owner, thief])).description)
    assert after.resolve(Request(8080, "a.example.com", "/x")).rule == "HTTPRoute team-b/owner rule 0"
    assert after.resolve(Request(80, "a.example.com", "/x/more")).rule == "HTTPRoute team-a/thief rule 0"
    run_scenario(haproxy_path, [*base, owner], [*base, owner, thief], tmp_path,
                 extra=[Request(8080, "a.example.com", "/x"), Request(8080, "a.example.com", "/80/x"),
                        Request(80, "a.example.com", "/x/more")])


# ---------------------------------------------------------------------- TLS by server name, TCP, custom Routes

SNI_HOSTS = ("a.example.com", "b.example.com", "*.example.com", "x.a.example.com", "*.a.example.com", "pay.example.com")


def l4_listener(name: str, protocol: str, port: int, hostname: str | None = None, mode: str | None = None,
                ) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "protocol": protocol, "port": port,
                           "allowedRoutes": {"namespaces": {"from": "All"}}}
    if hostname:
        out["hostname"] = hostname
    if mode:
        out["tls"] = {"mode": mode}
    return out


def edge(listeners: list[dict[str, Any]]) -> Obj:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "infra", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"gatewayClassName": "haproxy", "listeners": listeners,
                     "allowedListeners": {"namespaces": {"from": "All"}}}}


def tenant_passthrough(hostname: str | None) -> Obj:
    """team-a's ListenerSet: a passthrough listener of its own on infra's port 443."""
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
            "metadata": {"name": "pt", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRef": {"name": "edge", "namespace": "infra"},
                     "listeners": [l4_listener("pt-a", "TLS", 443, hostname, "Passthrough")]}}


def l4_route(kind: str, name: str, ns: str, created: str, section: str, hosts: list[str], svc: str,
             listener_set: bool = False) -> Obj:
    parent: dict[str, Any] = {"name": "pt" if listener_set else "edge",
                              "namespace": "team-a" if listener_set else "infra", "sectionName": section}
    if listener_set:
        parent["kind"] = "ListenerSet"
    spec: dict[str, Any] = {"parentRefs": [parent], "rules": [{"backendRefs": [{"name": svc, "port": 80}]}]}
    if kind == "TLSRoute":
        spec["hostnames"] = hosts
    return {"apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created}, "spec": spec}


def crd_route(name: str, ns: str, hosts: list[str], paths: list[str], echo_port: int) -> Obj:
    return {"apiVersion": "routegate.io/v1alpha1", "kind": "Route", "metadata": {"name": name, "namespace": ns},
            "spec": {"hostnames": hosts, "paths": paths, "backend": {"address": "127.0.0.1", "port": echo_port}}}


def l4_services() -> list[Obj]:
    out: list[Obj] = []
    for name, ns in SERVICES:
        out += service(name, ns, next(p for p, who in ECHO.items() if who == f"{ns}/{name}"))
    for name, ns in L4_SERVICES:
        out += service(name, ns, next(p for p, who in RAW.items() if who == f"{ns}/{name}"))
    return out


@st.composite
def l4_scenarios(draw: st.DrawFn) -> tuple[list[Obj], list[Obj]]:
    """infra's Gateway with a passthrough listener on 443 (maybe beside an HTTPS listener there, and
    team-a's own passthrough ListenerSet), a Terminate TLS port 8443, TCP ports 5000/5001 and an HTTP
    port with custom Routes; TLSRoutes/TCPRoutes/HTTPRoutes/Routes of every namespace; the change adds
    or removes a route, adds the HTTPS listener over the passthrough names, or adds a custom Route."""
    https = l4_listener("web", "HTTPS", 443, draw(st.sampled_from(["pay.example.com", "*.a.example.com", None])))
    listeners = [l4_listener("pt", "TLS", 443, draw(st.sampled_from([None, "*.example.com"])), "Passthrough"),
                 l4_listener("term", "TLS", 8443, draw(st.sampled_from([None, "*.example.com"])), "Terminate"),
                 l4_listener("tcp0", "TCP", 5000), l4_listener("tcp1", "TCP", 5001),
                 l4_listener("http", "HTTP", 80)]
    with_https = draw(st.booleans())
    with_set = draw(st.booleans())
    objs = [*l4_services(), *([tenant_passthrough(draw(st.sampled_from([None, "*.b.example.com"])))]
                              if with_set else [])]

    def one(n: int) -> Obj:
        ns = draw(st.sampled_from(NAMESPACES))
        created = f"2026-01-0{1 + draw(st.integers(0, 8))}T00:00:0{n % 10}Z"
        kind = draw(st.sampled_from(["TLSRoute", "TLSRoute", "TLSRoute", "TCPRoute", "HTTPRoute", "Route"]))
        hosts = draw(st.lists(st.sampled_from(SNI_HOSTS), min_size=1, max_size=2, unique=True))
        if kind == "TCPRoute":
            return l4_route(kind, f"c{n}", ns, created, draw(st.sampled_from(["tcp0", "tcp1"])), [],
                            f"tcp{draw(st.integers(0, 1))}")
        if kind == "Route":
            echo = draw(st.sampled_from(sorted(ECHO)))
            return crd_route(f"crd{n}", ns, [h for h in hosts if not h.startswith("*")],
                             draw(st.lists(st.sampled_from(PATHS), max_size=2, unique=True)), echo)
        if kind == "HTTPRoute":
            section = draw(st.sampled_from(["web", "http"]))
            r = route(f"h{n}", ns, created, hosts, [rule("PathPrefix", draw(st.sampled_from(PATHS)),
                                                          f"svc{draw(st.integers(0, 1))}")])
            r["spec"]["parentRefs"][0]["sectionName"] = section
            return r
        via_set = with_set and ns == "team-a" and draw(st.booleans())
        section = "pt-a" if via_set else draw(st.sampled_from(["pt", "pt", "term"]))
        return l4_route(kind, f"t{n}", ns, created, section, hosts, f"tcp{draw(st.integers(0, 1))}", via_set)

    present = [one(n) for n in range(draw(st.integers(1, 5)))]
    change = draw(st.sampled_from(["add", "add", "remove", "https"]))
    before_gw = edge([*listeners, *([https] if with_https else [])])
    after_gw, after_routes = before_gw, list(present)
    if change == "add":
        after_routes.append(one(len(present)))
    elif change == "remove":
        after_routes.pop(draw(st.integers(0, len(present) - 1)))
    elif not with_https:
        after_gw = edge([*listeners, https])
    return [*objs, before_gw, *present], [*objs, after_gw, *after_routes]


@pytest.mark.usefixtures("namespaced")
@pytest.mark.parametrize("which", [0, 1], ids=["2.8", "3.x"])
def test_tls_tcp_and_custom_routes_are_what_haproxy_does(haproxy_paths: list[str], which: int,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """Connections by server name on passthrough and Terminate ports (and names the HTTPS listeners keep),
    TCP ports and custom Routes, before and after the change: the answer is the table's."""
    if which >= len(haproxy_paths):
        pytest.skip("no HAProxy 3.x binary (.haproxy3/haproxy)")
    binary = haproxy_paths[which]

    @settings(max_examples=5, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(l4_scenarios())
    def check(scenario: tuple[list[Obj], list[Obj]]) -> None:
        run_scenario(binary, *scenario, tmp_path_factory.mktemp("traffic-l4"))

    check()


def passthrough_state(*, https: bool) -> list[Obj]:
    listeners = [l4_listener("pt", "TLS", 443, "*.example.com", "Passthrough"), l4_listener("tcp0", "TCP", 5000)]
    if https:
        listeners.append(l4_listener("web", "HTTPS", 443, "pay.example.com"))
    return [*l4_services(), edge(listeners),
            l4_route("TLSRoute", "shop", "team-a", "2026-01-02T00:00:00Z", "pt", ["*.example.com"], "tcp0"),
            l4_route("TCPRoute", "db", "team-b", "2026-01-02T00:00:00Z", "tcp0", [], "tcp1"),
            route("pay", "infra", "2026-01-02T00:00:00Z", ["pay.example.com"], [rule("PathPrefix", "/", "svc0")]),
            # a custom Route on its own frontend (no Gateway HTTP listener): :80
            crd_route("legacy", "team-b", ["a.example.com"], ["/api"], ECHO_BASE + 4)]


@pytest.mark.usefixtures("namespaced")
def test_an_https_listener_over_passthrough_names_moves_them_and_haproxy_agrees(haproxy_path: str,
                                                                                tmp_path: Path) -> None:
    """infra's new HTTPS listener for pay.example.com on the passthrough port takes that name from team-a's
    wildcard TLSRoute: the diff names the move and its owners, and HAProxy does what both tables say."""
    before, after = passthrough_state(https=False), passthrough_state(https=True)
    moved = diffs.diff(*(tables.table(RENDERER.render(MemoryState(o)).description) for o in (before, after)))
    lines = [m.line() for m in moved.moves]
    assert "TLS :443 pay.example.com -> gtw_tls_team-a_shop_0 (team-a) => HTTPS listeners of Gateway infra/edge " \
           "(infra)" in lines, lines
    assert moved.affected("infra") == ["team-a"]
    table = tables.table(RENDERER.render(MemoryState(after)).description)
    assert table.resolve(Request(80, "a.example.com", "/api/v1")).rule == "Route team-b/legacy"
    counts = run_scenario(haproxy_path, before, after, tmp_path, extra=[Request(80, "a.example.com", "/api/v1"),
                                                                     Request(80, "b.example.com", "/api")])
    assert counts["connections"] >= 5, counts
