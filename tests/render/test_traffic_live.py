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
from haproxy_check.traffic.tables import BACKEND, NO_LISTENER, NOT_FOUND, Destination, Request
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


def probes_of(*both: tables.RoutingTable) -> list[Request]:
    """Every row's sample of both tables, every request the diff of the two moves, and requests that
    should match nothing, on every port."""
    out: dict[Request, None] = {m.request: None for m in diffs.diff(*both).moves if m.request is not None}
    ports: set[int] = set()
    for table in both:
        ports |= set(table.ports())
        for row in table.rows():
            if row.sample is not None:
                out[row.sample] = None
    for port in sorted(ports):
        out[Request(port, "nothing.invalid", "/rg-nothing")] = None
        out[Request(port, "y.b.example.com", "/api/v1/deep", "POST", (("X-Env", "canary"),))] = None
        out[Request(port, "a.example.com", "/api/v12/x", "GET", (("X-Env", "canaries"),), "v=2&v=3")] = None
    return list(out)


def expected(dest: Destination) -> tuple[int, str]:
    if dest.outcome == BACKEND:
        assert len(dest.backends) == 1, dest
        return 200, dest.backends[0].service.rsplit(":", 1)[0]
    if dest.outcome == NOT_FOUND:
        return 404, ""
    if dest.outcome == NO_LISTENER:
        return 0, ""
    raise AssertionError(f"the scenario makes no {dest.outcome}")


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
    moving = {selects(r) for r in requests if diffs.moved(both[0].resolve(r), both[1].resolve(r))}
    assert moving <= named, f"moved, not in the diff: {sorted(moving - named, key=str)}"
    runs = []
    for n, (render, table) in enumerate(zip(renders, both, strict=True)):
        target = where / f"run{n}"
        target.mkdir(parents=True, exist_ok=True)
        write(render, target)
        runs.append({"dir": str(target), "ports": table.ports(),
                     "probes": [{"port": r.port, "host": r.host, "target": r.target, "method": r.method,
                                 "headers": [list(h) for h in r.headers]} for r in requests]})
    answers = probe({"binary": binary, "echo": {str(p): who for p, who in ECHO.items()}, "runs": runs}, where)
    wrong = []
    for table, got in zip(both, answers, strict=True):
        for request, answer in zip(requests, got, strict=True):
            want = expected(table.resolve(request))
            if (answer["status"], answer["server"]) != want:
                wrong.append(f"{request}: table says {want}, haproxy answered {answer}")
    assert not wrong, "\n".join(wrong)
    return {"requests": len(requests), "classes": sum(len(t.rows()) for t in both)}


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
