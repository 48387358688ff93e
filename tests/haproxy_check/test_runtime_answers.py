"""Every Runtime API answer the planner takes for success, checked against the real binaries 2.8, 3.2, 3.4.

A hand-written configuration (two named defaults profiles, backends with servers, an unordered and an
ordered map, a certificate and a CA file) runs master-worker with an admin stats socket. A sequence of
descriptions of it is planned step by step (``runtimeplans.plan``) and each plan is applied over the
socket (``runtimeapi.apply``, which checks every answer against the command's ``expect``). Every kind
of command the planner can emit for the binary's version is sent at least once (the list is checked
against the planner's source, so a new kind of command cannot go untested), the worker never changes
(nothing reloaded), and each answer is recorded in the failure message.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from haproxy_check.descriptions import BackendDesc, Description, FileDesc, MapDesc, ProfileDesc, ServerDesc
from haproxy_check.results import RenderResult
from haproxy_check.runtime import runtimeapi, runtimeplans
from tests.haproxy_check import dataplanes as dp
from tests.render_l4.conftest import key_and_cert

PLAIN = ProfileDesc("haptic-be-plain", ("mode http", "timeout connect 1s", "timeout server 5s"))
CHECKED = ProfileDesc("haptic-be-checked", ("mode http", "timeout connect 1s", "timeout server 5s",
                                            "default-server check inter 1s"))
# Kinds of command: the verb and what it acts on ("set server" by what it sets, "wait" by what it waits for).
ALL_KINDS = {"add map", "set map", "del map", "prepare map", "commit map", "set server addr", "set server state",
             "set weight", "add server", "enable server", "enable health", "del server", "wait srv-removable",
             "set ssl cert", "commit ssl cert", "set ssl ca-file", "commit ssl ca-file",
             "add backend", "publish backend", "unpublish backend", "wait be-removable", "del backend"}
BACKEND_KINDS = {"add backend", "publish backend", "unpublish backend", "wait be-removable", "del backend"}


def kind(line: str) -> str:
    words = line.split()
    if words[0] == "wait":
        return f"wait {words[2]}"
    if words[:2] == ["set", "server"]:
        return f"set server {words[3]}"
    if words[:2] == ["set", "ssl"] or words[:2] == ["commit", "ssl"]:
        return " ".join(words[:3])
    return " ".join(words[:2])


def test_the_kinds_are_every_command_the_planner_builds() -> None:
    """The planner's source builds no command this file does not know (and so does not send live)."""
    source = Path(runtimeplans.__file__).read_text()
    built = set()
    # a command's line is written in the Command(...) call or just before it (``line = f"..."``)
    for match in re.finditer(r'(?:Command\(\s*|line = )f?"([^"]*)"', source):
        line = re.sub(r"\{REMOVABLE_WAIT\}", "5s", match.group(1))
        built.add(kind(re.sub(r"\{[^}]*\}", "X", line)))
    # f"set ssl {store} ..." stands for both stores
    built = {k for k in built if "X" not in k} | {"set ssl cert", "set ssl ca-file", "commit ssl cert",
                                                 "commit ssl ca-file"}
    assert built == ALL_KINDS


def config(port: int, tls_port: int, backend_port: int) -> str:
    return f"""global
    maxconn 256

defaults base
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s

defaults {PLAIN.name}
{"".join(f"    {line}{chr(10)}" for line in PLAIN.lines)}
defaults {CHECKED.name}
{"".join(f"    {line}{chr(10)}" for line in CHECKED.lines)}
frontend fe from base
    bind :{port}
    bind :{tls_port} ssl crt certs/site.pem ca-file certs/ca.pem verify optional
    use_backend %[path,map_reg(maps/path-regex.map)] if {{ path,map_reg(maps/path-regex.map) -m found }}
    use_backend %[req.hdr(host),lower,map(maps/host.map,be_web)]

backend be_web from {PLAIN.name}
    server s1 127.0.0.1:{backend_port} weight 1
    server s2 127.0.0.2:{backend_port} weight 1

backend be_chk from {CHECKED.name}
    server s1 127.0.0.3:{backend_port} weight 1
"""


def start(port: int, tls_port: int, backend_port: int) -> tuple[RenderResult, Description]:
    key, cert = key_and_cert("site.example.com")
    _, ca = key_and_cert("routegate answers CA", ca=True)
    maps = (MapDesc("maps/host.map", False, ("a.example.com be_web", "c.example.com be_chk")),
            MapDesc("maps/path-regex.map", True, ("^/chk be_chk",)))
    desc = Description(
        backends=(BackendDesc("be_web", profile=PLAIN.name, servers=(ServerDesc("s1", "127.0.0.1", backend_port),
                                                                     ServerDesc("s2", "127.0.0.2", backend_port))),
                  BackendDesc("be_chk", profile=CHECKED.name,
                              servers=(ServerDesc("s1", "127.0.0.3", backend_port),))),
        profiles=(PLAIN, CHECKED), maps=maps,
        files=(FileDesc("certs/site.pem", "cert", "1"), FileDesc("certs/ca.pem", "ca", "1")), frame="frame")
    files = {"haproxy.cfg": config(port, tls_port, backend_port).encode(), "certs/site.pem": cert + key,
             "certs/ca.pem": ca, **{m.path: "".join(e + "\n" for e in m.entries).encode() for m in maps}}
    return RenderResult(files=files, description=desc), desc


def servers(desc: Description, backend: str, *items: ServerDesc) -> Description:
    return replace(desc, backends=tuple(replace(b, servers=items) if b.name == backend else b
                                        for b in desc.backends))


def steps(desc: Description, backend_port: int, other_port: int, runtime_backends: bool,
          ) -> Iterator[tuple[str, Description, dict[str, bytes]]]:
    """(what, the next description, certificate payloads) in order, each a runtime plan from the last."""
    web = {s.name: s for s in desc.backends[0].servers}
    hosts, regex = desc.maps
    desc = replace(desc, maps=(replace(hosts, entries=("a.example.com be_chk", "b.example.com be_web")), regex))
    yield "map entries added, set and deleted", desc, {}
    desc = replace(desc, maps=(desc.maps[0], replace(regex, entries=("^/web be_web", "^/chk be_chk"))))
    yield "an ordered map replaced", desc, {}
    desc = servers(desc, "be_web", replace(web["s1"], address="127.0.0.4"), replace(web["s2"], port=other_port))
    yield "a server's address; another's port only", desc, {}
    desc = servers(desc, "be_chk", ServerDesc("s1", "127.0.0.1", other_port))
    yield "a server's address and port", desc, {}
    desc = servers(desc, "be_web", replace(web["s1"], address="127.0.0.4", weight=3),
                   replace(web["s2"], port=other_port, options=("disabled",)))
    yield "a weight; a server into maintenance", desc, {}
    desc = servers(desc, "be_web", replace(web["s1"], address="127.0.0.4", weight=3),
                   replace(web["s2"], port=other_port), ServerDesc("s3", "127.0.0.3", backend_port))
    desc = servers(desc, "be_chk", ServerDesc("s1", "127.0.0.1", other_port),
                   ServerDesc("s2", "127.0.0.2", backend_port))
    yield "out of maintenance; servers added (one with health checks)", desc, {}
    desc = servers(desc, "be_web", replace(web["s1"], address="127.0.0.4", weight=3),
                   replace(web["s2"], port=other_port))
    yield "a server removed", desc, {}
    key, cert = key_and_cert("renewed.site.example.com")
    _, ca = key_and_cert("routegate answers CA 2", ca=True)
    desc = replace(desc, files=(FileDesc("certs/site.pem", "cert", "2"), FileDesc("certs/ca.pem", "ca", "2")))
    yield "a certificate and a CA file", desc, {"certs/site.pem": cert + key, "certs/ca.pem": ca}
    if runtime_backends:
        api = BackendDesc("be_api", profile=CHECKED.name, servers=(ServerDesc("s1", "127.0.0.2", backend_port),))
        desc = replace(desc, backends=(*desc.backends, api))
        yield "a backend created from a loaded profile", desc, {}
        desc = replace(desc, backends=desc.backends[:-1])
        yield "a backend deleted", desc, {}


@pytest.mark.parametrize("version", ["2.8", "3.2", "3.4"])
def test_every_success_answer_the_planner_expects_is_the_binarys(haproxy_path: str, version: str) -> None:
    binary = haproxy_path if version == "2.8" else dp.binary_of(version)
    numbers = runtimeplans.parse_version(version)
    backend_port, other_port, port, tls_port = dp.free_port(), dp.free_port(), dp.free_port(), dp.free_port()
    render, desc = start(port, tls_port, backend_port)
    sent: set[str] = set()
    recorded: list[tuple[str, str]] = []
    with dp.backend_servers(["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"], backend_port), \
            dp.backend_servers(["127.0.0.1", "127.0.0.2"], other_port), dp.dataplane(binary, render) as live:
        pid = live.worker_pid()
        for what, nxt, files in steps(desc, backend_port, other_port, numbers >= runtimeplans.RUNTIME_BACKENDS):
            plan = runtimeplans.plan(desc, nxt, dataplane_version=numbers, files=files or None)
            assert plan.action is runtimeplans.Action.RUNTIME, (what, plan.text())
            result = asyncio.run(runtimeapi.apply(plan, live.socket))
            recorded += [(a.command, a.answer) for a in result.answers]
            assert result.ok, (what, result.error, recorded)
            sent |= {kind(c.line) for c in plan.commands}
            desc = nxt
        assert live.worker_pid() == pid, "the worker changed: something reloaded"
        # the last state is what the data plane runs: a port-only move reached its new port
        assert "127.0.0.2" in live.ask("show servers state be_web") and f" {other_port} " in \
            next(line for line in live.ask("show servers state be_web").splitlines() if " s2 " in line)
    want = ALL_KINDS - (set() if numbers >= runtimeplans.RUNTIME_BACKENDS else BACKEND_KINDS)
    if numbers < runtimeplans.WAIT_COMMAND:
        want -= {"wait srv-removable"}  # before 3.0 the delete is repeated until the server is removable
    assert sent == want, (sorted(want - sent), recorded)
    print(version, *(f"{c!r} -> {a!r}" for c, a in recorded), sep="\n  ")  # the record (pytest -s)
