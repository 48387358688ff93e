"""Pod ports are stable: no newer object (a listener declaring a pod port, a Gateway whose name hashes to an
older Gateway's slot, a ListenerSet on an older Gateway) moves an existing Gateway's address; an update
that would is denied (RG0127). Proven in the render, at admission, and with traffic through a real HAProxy."""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import socket
from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.render.conftest import lines, map_lines, render
from tests.render.test_live import echo_server
from tests.render_l4.livegw import running
from validators import codes
from validators.changes import Change, Operation
from validators.checks import Checks
from validators.objects import Obj, Ref
from validators.states import MemoryState
from validators.views import attachments, podports
from validators.views.podports import PodRange

GW = "gateway.networking.k8s.io/v1"
LS = "gateway.networking.k8s.io/v1"


def gateway(name: str, ns: str, created: str, *ports: int) -> Obj:
    return {"apiVersion": GW, "kind": "Gateway",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "spec": {"gatewayClassName": "haptic", "allowedListeners": {"namespaces": {"from": "All"}},
                     "listeners": [{"name": f"http-{p}", "protocol": "HTTP", "port": p,
                                    "allowedRoutes": {"namespaces": {"from": "All"}}} for p in ports]}}


def listener_set(name: str, ns: str, created: str, parent: Ref, *ports: int) -> Obj:
    return {"apiVersion": LS, "kind": "ListenerSet",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
            "spec": {"parentRef": {"name": parent.name, "namespace": parent.namespace},
                     "listeners": [{"name": f"http-{p}", "protocol": "HTTP", "port": p} for p in ports]}}


def backend(name: str, ns: str, port: int) -> list[Obj]:
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
             "spec": {"ports": [{"port": port}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
             "addressType": "IPv4", "ports": [{"name": "", "port": port}], "endpoints": [{"addresses": ["127.0.0.1"]}]}]


def route(name: str, ns: str, parent: Ref, svc: str, port: int) -> Obj:
    kind = {"kind": "ListenerSet", "group": "gateway.networking.k8s.io"} if parent.kind == "ListenerSet" else {}
    return {"apiVersion": GW, "kind": "HTTPRoute", "metadata": {"name": name, "namespace": ns},
            "spec": {"parentRefs": [{"name": parent.name, "namespace": parent.namespace, **kind}],
                     "hostnames": ["app.example.com"], "rules": [{"backendRefs": [{"name": svc, "port": port}]}]}}


VICTIM = Ref("Gateway", "team-v", "victim")


def named_into(slot: int, port: int, span: int, ns: str = "evil") -> str:
    """A Gateway name whose hash slot on ``port`` is ``slot`` (what an attacker computes in milliseconds)."""
    for k in range(100000):
        if podports.slot(Ref("Gateway", ns, f"g{k}"), port, span) == slot:
            return f"g{k}"
    raise AssertionError("no preimage")


def base_state(port: int, other: int, ports: dict[str, int]) -> list[Obj]:
    """An old primary on ``port``, the victim beside it (a pod port), an old primary on ``other``."""
    return [gateway("first", "infra", "2024-01-01T00:00:00Z", port),
            gateway("victim", "team-v", "2024-02-01T00:00:00Z", port),
            gateway("other", "infra", "2024-01-01T00:00:00Z", other),
            *backend("first", "infra", ports["first"]), *backend("victim", "team-v", ports["victim"]),
            route("first", "infra", Ref("Gateway", "infra", "first"), "first", ports["first"]),
            route("victim", "team-v", VICTIM, "victim", ports["victim"])]


def attacks(port: int, other: int, pods: PodRange, ports: dict[str, int]) -> list[Obj]:
    """Newer objects aimed at the victim's pod port: a Gateway declaring it, and a Gateway on a lower port
    whose name hashes to the victim's slot (the old order took lower ports first)."""
    victim_pod = pods.base + podports.slot(VICTIM, port, pods.span)
    hashed = named_into(podports.slot(VICTIM, port, pods.span), other, pods.span)
    return [gateway("declares", "evil", "2025-01-01T00:00:00Z", victim_pod),
            gateway(hashed, "evil", "2025-01-01T00:00:00Z", other),
            *backend("evil", "evil", ports["evil"]),
            route("declares", "evil", Ref("Gateway", "evil", "declares"), "evil", ports["evil"]),
            route("hashed", "evil", Ref("Gateway", "evil", hashed), "evil", ports["evil"])]


def settings(pods: PodRange) -> dict[str, Any]:
    return {"isolation_pod_port_base": pods.base, "isolation_pod_port_span": pods.span}


def binds(objs: list[Obj], pods: PodRange) -> list[str]:
    return [x for x in lines(render(objs, **settings(pods))) if x.startswith("bind :")]


def test_newer_objects_do_not_move_the_victims_pod_port() -> None:
    pods = PodRange(20000, 16)
    ports = {"first": 9001, "victim": 9002, "evil": 9003}
    port, other = 8080, 80  # the attacker's port sorts first
    victim_pod = pods.base + podports.slot(VICTIM, port, pods.span)
    before = base_state(port, other, ports)
    assert f"bind :{victim_pod}" in binds(before, pods)
    after = [*before, *attacks(port, other, pods, ports)]
    result = render(after, **settings(pods))
    cfg = lines(result)
    # the victim's routes are still on its pod port (the one its Service targets), bound once
    assert cfg.count(f"bind :{victim_pod}") == 1
    assert f"app.example.com:{victim_pod}/ 100000|team-v_victim_0|0|path" in map_lines(result, "path-prefix.map")
    # the listener declaring a pod port is not bound, and says why
    refused = [f for f in result.findings if f.code == codes.POD_PORT_RESERVED]
    assert [(f.about, f.field) for f in refused] == [("Gateway evil/declares", "spec.listeners[0].port")]


def test_a_listener_set_on_an_older_gateway_is_a_new_pair() -> None:
    """A tenant's new ListenerSet adding the victim's port to an old Gateway does not make that Gateway
    the port's oldest pair: the victim keeps ``:<port>``."""
    pods = PodRange(20000, 16)
    objs = [gateway("old", "infra", "2023-01-01T00:00:00Z", 9443),
            gateway("victim", "team-v", "2024-02-01T00:00:00Z", 8080),
            *backend("victim", "team-v", 9002), route("victim", "team-v", VICTIM, "victim", 9002)]
    assert "bind :8080" in binds(objs, pods)
    ls = listener_set("grab", "evil", "2025-01-01T00:00:00Z", Ref("Gateway", "infra", "old"), 8080)
    grab = route("grab", "evil", Ref("ListenerSet", "evil", "grab"), "evil", 9003)
    result = render([*objs, ls, grab, *backend("evil", "evil", 9003)], **settings(pods))
    prefixes = map_lines(result, "path-prefix.map")
    assert "app.example.com:8080/ 100000|team-v_victim_0|0|path" in prefixes, prefixes
    assert [x for x in prefixes if "evil_grab" in x and x.split("/")[0].split(":")[1] in
            {str(p) for p in range(pods.base, pods.base + pods.span)}], prefixes
    state = MemoryState([*objs, ls])
    addresses = podports.addresses(state, attachments.listeners(state), base=pods.base, span=pods.span)
    assert addresses[(VICTIM, 8080)] == 8080


def review(state: list[Obj], change: Change, pods: PodRange) -> list[tuple[str, str, str]]:
    found = Checks(schemas=None, pod_ports=pods).check(change, MemoryState(state))
    return [(f.code, str(f.severity), f.field) for f in found if f.code in (
        codes.POD_PORT_RESERVED, codes.ADDRESS_MOVED)]


def test_admission_denies_a_pod_port_listener_and_an_update_that_moves_another_gateway() -> None:
    pods = PodRange(20000, 16)
    ports = {"first": 9001, "victim": 9002, "evil": 9003}
    port, other = 8080, 80
    state = base_state(port, other, ports)
    victim_pod = pods.base + podports.slot(VICTIM, port, pods.span)
    declares = gateway("declares", "evil", "2025-01-01T00:00:00Z", victim_pod)
    assert review(state, Change(Operation.CREATE, declares), pods) == [
        (codes.POD_PORT_RESERVED, "deny", "spec.listeners[0].port")]
    # An update to an older Gateway (2023) adding a port whose pod port is the victim's slot: the only
    # move left to a change, denied, naming the victim and its owner.
    older = gateway("older", "evil", "2023-01-01T00:00:00Z", 81)
    added = named_port(older, victim_pod, pods)
    state = [*state, older, gateway("p", "infra", "2022-01-01T00:00:00Z", added)]
    new = gateway("older", "evil", "2023-01-01T00:00:00Z", 81, added)
    found = Checks(schemas=None, pod_ports=pods).check(Change(Operation.UPDATE, new, older), MemoryState(state))
    moved = [f for f in found if f.code == codes.ADDRESS_MOVED]
    assert [(str(f.severity), f.field) for f in moved] == [("deny", "spec.listeners[1].port")], found
    assert "Gateway team-v/victim" in moved[0].message and "'team-v'" in moved[0].message
    assert f"from pod port {victim_pod}" in moved[0].message
    # the reverse update frees the address: the victim moves back down into it, a warning naming it (one's
    # own listeners can always be removed; the victim's Service must follow)
    pushed = [x if x is not older else new for x in state]
    freed = Checks(schemas=None, pod_ports=pods).check(Change(Operation.UPDATE, older, new), MemoryState(pushed))
    assert [(str(f.severity), f.about) for f in freed if f.code == codes.ADDRESS_MOVED] == [
        ("warn", "Gateway team-v/victim")], freed
    # a change elsewhere is quiet
    assert review(state, Change(Operation.UPDATE, gateway("older", "evil", "2023-01-01T00:00:00Z", 81, 82), older),
                  pods) == []


def named_port(gw: Obj, target: int, pods: PodRange) -> int:
    """A port (outside the range) on which ``gw``'s pair hashes to ``target``."""
    ref = Ref("Gateway", gw["metadata"]["namespace"], gw["metadata"]["name"])
    for p in range(1000, 20000):
        if pods.base + podports.slot(ref, p, pods.span) == target:
            return p
    raise AssertionError("no port")


def free_range(span: int) -> PodRange:
    """``span`` consecutive loopback ports nobody listens on now."""
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(32000, 60000 - span)
        with contextlib.ExitStack() as stack:
            try:
                for p in range(base, base + span):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", p))
            except OSError:
                continue
        return PodRange(base, span)
    raise AssertionError("no free port range")


def get(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/", headers={"Host": "app.example.com"})
        resp = conn.getresponse()
        body = resp.read()
        return str(json.loads(body)["server"]) if resp.status == 200 else f"status {resp.status}"
    finally:
        conn.close()


def test_pod_ports_live(haproxy_paths: list[str], tmp_path: Path) -> None:
    """Through a real HAProxy: after the newer objects arrive, the victim's pod port (the one its Service
    targets) still reaches the victim's backend, and the port's primary its own."""
    servers = {name: echo_server(name) for name in ("first", "victim", "evil")}
    ports = {name: port for name, (_, port) in servers.items()}
    try:
        for k, binary in enumerate(haproxy_paths):
            pods = free_range(16)
            other, port = sorted((free_port(), free_port()))  # the attacker's port sorts first
            victim_pod = pods.base + podports.slot(VICTIM, port, pods.span)
            objs = [*base_state(port, other, ports), *attacks(port, other, pods, ports)]
            with running(binary, objs, tmp_path / f"r{k}", victim_pod, **settings(pods)):
                assert get(victim_pod) == "victim", binary
                assert get(port) == "first", binary
    finally:
        for server, _ in servers.values():
            server.shutdown()


def test_the_reviews_shortcut_equals_the_whole_assignment() -> None:
    """RG0127 redoes only the changed object's pairs (``addressmoves._proposed_sources``); on random states
    and changes its addresses equal those of the whole proposed state."""
    from validators.crossobject import addressmoves
    from validators.states import Overlay

    pods = PodRange(20000, 32)  # small: many collisions
    ports = (80, 443)
    rng = random.Random(29)
    for case in range(150):
        objs: list[Obj] = []
        for i in range(rng.randint(2, 7)):
            objs.append(gateway(f"g{i}", "n", f"2024-01-{rng.randint(1, 9):02d}T00:00:00Z",
                                *rng.sample([80, 81, 82, 83], rng.randint(1, 2))))
        for j in range(rng.randint(0, 3)):
            objs.append(listener_set(f"s{j}", "t", f"2024-01-{rng.randint(1, 9):02d}T00:00:00Z",
                                     Ref("Gateway", "n", f"g{rng.randrange(len(objs))}"), rng.choice([80, 81, 84])))
        state = MemoryState(objs, version=f"c{case}")
        old = rng.choice(objs)
        new = json.loads(json.dumps(old))
        if rng.random() < 0.5:
            new["spec"]["listeners"].append({"name": "x", "protocol": "HTTP", "port": rng.choice([80, 81, 85])})
        elif new["spec"]["listeners"]:
            new["spec"]["listeners"].pop(0)
        change = (Change(Operation.DELETE, None, old) if rng.random() < 0.2 and old["kind"] == "ListenerSet"
                  else Change(Operation.UPDATE, new, old))
        proposed = Overlay(state, change)
        ref = Ref(old["kind"], old["metadata"]["namespace"], old["metadata"]["name"])
        before = addressmoves._sources(state, ports, pods)
        short = addressmoves._proposed_sources(before, ref, change.obj, proposed, ports, pods)
        whole = addressmoves._sources(proposed, ports, pods)
        assert addressmoves._addresses(short, pods) == addressmoves._addresses(whole, pods), (case, change)


def test_the_incremental_assignment_equals_the_from_scratch_one() -> None:
    """RG0127 patches the base state's assignment with the change's pairs (``podassignments``: O(the pairs
    that move), not O(pairs)); on random states and changes (ports added and removed, ListenerSets, objects
    deleted, small pod ranges: long collision chains) every address and every move equals the whole
    proposed state's from-scratch assignment."""
    from validators.crossobject import addressmoves
    from validators.states import Overlay
    from validators.views import podassignments

    ports = (80, 443)
    rng = random.Random(2929)
    checked = 0
    for case in range(400):
        pods = PodRange(20000, rng.choice([6, 8, 16]))
        objs: list[Obj] = []
        for i in range(rng.randint(2, 9)):
            objs.append(gateway(f"g{i}", rng.choice(["n", "m"]), f"2024-01-{rng.randint(1, 9):02d}T00:00:00Z",
                                *rng.sample([80, 81, 82, 83], rng.randint(1, 3))))
        for j in range(rng.randint(0, 3)):
            objs.append(listener_set(f"s{j}", "t", f"2024-01-{rng.randint(1, 9):02d}T00:00:00Z",
                                     Ref("Gateway", objs[0]["metadata"]["namespace"], "g0"), rng.choice([80, 81, 84])))
        state = MemoryState(objs, version=f"i{case}")
        old = rng.choice(objs)
        new = json.loads(json.dumps(old))
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.6:
                new["spec"]["listeners"].append({"name": f"x{rng.random()}", "protocol": "HTTP",
                                                 "port": rng.choice([80, 81, 82, 85])})
            elif new["spec"]["listeners"]:
                new["spec"]["listeners"].pop(rng.randrange(len(new["spec"]["listeners"])))
        change = (Change(Operation.DELETE, None, old) if rng.random() < 0.15 else Change(Operation.UPDATE, new, old))
        proposed = Overlay(state, change)
        ref = Ref(old["kind"], old["metadata"]["namespace"], old["metadata"]["name"])
        before = addressmoves._sources(state, ports, pods)
        whole = addressmoves._sources(proposed, ports, pods)
        try:
            want_after = addressmoves._addresses(whole, pods)
            want_before = addressmoves._addresses(before, pods)
        except ValueError:  # more pairs than pod ports: the render refuses it too
            continue
        mine = [pair for pair, by in before.items() if ref in by]
        if change.operation is Operation.DELETE and ref.kind == "Gateway":
            changed = {pair: whole.get(pair, {}) for pair in {*before, *whole} if whole.get(pair) != before.get(pair)}
        else:
            changed = addressmoves._changed_sources(ref, change.obj, proposed, before, mine, pods)
        assert {p: by for p, by in changed.items() if by != before.get(p)} == {
            p: whole.get(p, {}) for p in {*before, *whole} if whole.get(p) != before.get(p)}, (case, change)
        patched = addressmoves._patched(podassignments.Assignment(
            {pair: min(by.values()) for pair, by in before.items()}, base=pods.base, span=pods.span), before, changed)
        assert {p: patched.address(p) for p in whole} == want_after, (case, change)
        assert patched.moved() == {p: (a, want_after.get(p)) for p, a in want_before.items()
                                   if want_after.get(p) != a}, (case, change)
        checked += 1
    assert checked > 250


def test_patched_assignments_equal_from_scratch_on_dense_ranges() -> None:
    """``podassignments.Patched`` alone, on dense pod ranges (long probe chains, primaries changing
    hands): pairs inserted, removed and re-aged in any order give ``podports.assign_ages``'s addresses."""
    from validators.views import podassignments

    rng = random.Random(290)
    checked = 0
    for _ in range(3000):
        span = rng.choice([5, 8, 12])
        gws = [Ref("Gateway", "n", f"g{i}") for i in range(rng.randint(2, 14))]
        ages = {(g, port): (f"2024-01-{rng.randint(1, 28):02d}", g.namespace, g.name)
                for g in gws for port in rng.sample([80, 81], rng.randint(1, 2))}
        try:
            base = podassignments.Assignment(ages, base=1000, span=span)
        except ValueError:
            continue
        after = dict(ages)
        removed: list[podports.Pair] = []
        inserted: dict[podports.Pair, podports.Age] = {}
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.5 and after:
                pair = rng.choice(sorted(after, key=str))
                del after[pair]
                inserted.pop(pair, None)
            else:
                g = rng.choice(gws)
                pair = (g, rng.choice([80, 81, 82]))
                after[pair] = inserted[pair] = (f"2024-01-{rng.randint(1, 28):02d}", g.namespace, g.name)
            if pair in ages and pair not in removed:
                removed.append(pair)
        try:
            want = podports.assign_ages(after, base=1000, span=span)
        except ValueError:
            continue
        patched = podassignments.Patched(base)
        patched.apply(removed, inserted)
        assert {p: patched.address(p) for p in after} == {p: want.get(p, p[1]) for p in after}
        checked += 1
    assert checked > 1000
