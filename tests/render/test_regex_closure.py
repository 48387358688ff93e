"""A route's regular expression cannot match outside its host prefix, proven with HAProxy's own PCRE.

The renderer writes a RegularExpression path as ``^<host:token>(?=/)(?:<pattern>)`` into path-regex.map.
For every pattern the allow-list parser accepts, the wrapped entry must match only keys that start with
its own host prefix. The proof asks the engine itself: the entries are loaded by a running haproxy (2.8
links PCRE 8.32, 3.2 links PCRE2) and keys are looked up with the Runtime API's ``get map``, which runs
the same ``map_reg`` match as a request does. Patterns come from a generator that mixes the subset with
hostile fragments (quoting, comments, option settings, verbs, backreferences, braces, ...).
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from haproxy_check import escaping
from haproxy_check.render.http.httproutes import pcre_escape
from tests.render.conftest import render
from tests.render.test_live import echo_server, free_port, get
from validators.objectrules.regexes import balance_problem

pytestmark = pytest.mark.haproxy

EXPLOIT = r"/\Q[\E)|.*(\Q]\E?"  # balanced for a bracket counter; PCRE closes the wrapper after '['
VICTIM = "victim.test:t1"
# Runtime API words: no space, backslash or ';' (the CLI's own syntax), printable ASCII.
PROBE_ALPHABET = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "\\;")

HOSTILE = ["\\Q", "\\E", "(?#", "(?x)", "(?i)", "(?-i)", "(*ACCEPT)", "(*FAIL)", "(*UTF8)", "\\1", "\\g1",
           "\\k<a>", "(?<=a)", "(?<!a)", "(?=a)", "(?!a)", "(?>", "(?|", "(?(1)", "(?R)", "(?1)", "\\c)", "\\c",
           "\\x{29}", "\\x29", "\\x5d", "\\o{51}", "\\051", "\\0", "\\K", "\\z", "\\Z", "\\A", "\\G", "{,3}",
           "{2,1}", "{", "}", "]", "[]", "[^]", "[]]", "[[:alpha:]]", "[[.a.]]", "[:", "*+", "++", "?+", "#",
           "\\", "\\p{L}", "\\N", "\\R", "\\X", "\\C", "\\e"]
PLAIN = ["a", "b", "/", ".", "-", "x", "0", "\\.", "\\/", "\\)", "\\(", "\\[", "\\]", "\\|", "\\d", "\\w",
         "\\s", "\\D", ".*", ".+", "[a-z]", "[^/]", "[0-9]+", "[\\]a]", "[-a]", "[a-]", "\\b", "^", "$", "|",
         "(", ")", "(?:", "*", "+", "?", "*?", "{2}", "{1,}", "{0,3}", "{1,2}?", "[(|)]", "\\x41"]


def _nested(depth: int) -> st.SearchStrategy[str]:
    """Patterns the subset accepts, built from its grammar (so the engine sees many accepted ones)."""
    atom = st.sampled_from(["a", "/", "x", "\\.", "\\)", "\\(", "[a-c]", "[^/]", "[\\]x]", ".", "\\d", "\\w",
                            "[[:digit:]]", "\\x2f", "\\|"])
    if depth > 0:
        group = st.tuples(st.sampled_from(["(", "(?:"]), st.lists(_nested(depth - 1), min_size=1, max_size=3))
        atom = st.one_of(atom, group.map(lambda g: g[0] + "|".join(g[1]) + ")"))
    quant = st.sampled_from(["", "", "*", "+", "?", "*?", "{2}", "{1,3}", "{0,}"])
    return st.lists(st.tuples(atom, quant).map("".join), min_size=1, max_size=4).map("".join)


def _spliced() -> st.SearchStrategy[str]:
    """Grammar patterns with random fragments (hostile ones among them) inserted anywhere."""
    return st.tuples(_nested(2), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(HOSTILE + PLAIN)),
                                          max_size=3)).map(_splice)


def _splice(parts: tuple[str, list[tuple[int, str]]]) -> str:
    text, inserts = parts
    for at, fragment in inserts:
        at = min(at, len(text))
        text = text[:at] + fragment + text[at:]
    return text


PATTERNS = st.one_of(_nested(2), _spliced(),
                     st.lists(st.sampled_from(HOSTILE + PLAIN), min_size=1, max_size=8).map("".join))


_REVERSED = re.compile(r"\{(\d+),(\d+)\}|(?<!\\)\[[^\]]*?([^\\])-([^\]])")


def reversed_bounds(pattern: str) -> bool:
    """``a{2,1}`` or ``[z-a]``: inside the grammar, refused by both engines at compile time (a deny)."""
    for m in _REVERSED.finditer(pattern):
        if (m.group(1) and int(m.group(1)) > int(m.group(2))) or (m.group(3) and m.group(3) > m.group(4)):
            return True
    return False


def accepted_by_renderer(pattern: str) -> bool:
    if reversed_bounds(pattern):
        return False  # PCRE's own compile error denies it; the map below must load
    try:
        escaping.regex(pattern)
    except escaping.Unsafe:
        return False
    return balance_problem(pattern) is None


def entry(host: str, pattern: str) -> str:
    """The path-regex.map key exactly as httproutes renders it."""
    body = pattern[1:] if pattern.startswith("^") else pattern
    return f"^{pcre_escape(host)}(?=/)(?:{body})"


class MapProbe:
    """A running haproxy with one reg map, asked through the Runtime API which entry a key matches."""

    def __init__(self, binary: str, where: Path, keys: list[str]) -> None:
        self.where = where
        (where / "m.map").write_text("".join(f"{k} {i}\n" for i, k in enumerate(keys)))
        self.sock = where / "s.sock"
        (where / "h.cfg").write_text(
            f"global\n    stats socket {self.sock} level admin\n"
            "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n"
            f"frontend f\n    bind unix@{where}/f.sock\n"
            "    http-request return status 200 content-type text/plain"
            " lf-string %[req.hdr(x-k),map_reg(./m.map,none)]\n")
        self.proc = subprocess.Popen([binary, "-db", "-f", "h.cfg"], cwd=where, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env={"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null"})
        for _ in range(200):
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as conn:
                conn.connect(str(self.sock))
                break
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode() if self.proc.stdout else ""
                pytest.fail(f"{binary} refused a map of accepted patterns:\n{out}")
            time.sleep(0.02)

    def lookup(self, key: str) -> int | None:
        """The index of the entry ``key`` matches, or None."""
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(self.sock))
            conn.sendall(f"get map ./m.map {key}\n".encode())
            out = b""
            while data := conn.recv(65536):
                out += data
        text = out.decode()
        if "found=no" in text or "no match" in text:
            return None
        found = re.search(r'value="(\d+)"', text)
        assert found, text
        return int(found.group(1))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@contextlib.contextmanager
def probes(binaries: list[str], where: Path, keys: list[str]) -> Iterator[list[MapProbe]]:
    started: list[MapProbe] = []
    try:
        for n, binary in enumerate(binaries):
            (where / f"b{n}").mkdir()
            started.append(MapProbe(binary, where / f"b{n}", keys))
        yield started
    finally:
        for probe in started:
            probe.close()


def samples(pattern: str, draw: Any) -> list[str]:
    """Strings the pattern matches by Python's reading of it (the subset reads the same in both)."""
    body = pattern.removesuffix("$")
    unescaped = body.replace("\\\\", "").replace("\\$", "").replace("\\^", "")
    if len(body) > 40 or body.count("(") > 2 or re.search(r"[$^]|\\[bBs]", unescaped):
        return []  # assertions, nested repeats and \\s (no space in a probe) stall the generator
    suffix = "$" if body != pattern else ""
    body = body.replace("[[:digit:]]", "[0-9]")
    if "[:" in body:
        return []  # Python reads another POSIX class as a set of its letters: no sample, no false control
    try:
        compiled = re.compile(body + suffix)
    except re.error:
        return []
    strategy = st.from_regex(compiled, fullmatch=True, alphabet=PROBE_ALPHABET)
    try:
        strategy.validate()
    except InvalidArgument:  # the pattern needs a character the Runtime API cannot carry (a backslash)
        return []
    return [draw(strategy) for _ in range(2)]


@settings(max_examples=12, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(patterns=st.lists(PATTERNS, min_size=20, max_size=40), data=st.data())
def test_accepted_patterns_match_nothing_outside_their_host(patterns: list[str], data: st.DataObject,
                                                            haproxy_paths: list[str],
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    accepted = [p for p in dict.fromkeys(patterns) if accepted_by_renderer(p)]
    if not accepted:
        return
    hosts = [f"h{i}.test:t1" for i in range(len(accepted))]
    keys = [entry(h, p) for h, p in zip(hosts, accepted, strict=True)]
    own: list[tuple[int, str]] = []  # (entry, a key it must match) positive controls
    foreign = {VICTIM, VICTIM + "/", VICTIM + "/x", "", "/", "x", "h0.test:t", "H0.test:t1/", "xh0.test:t1/"}
    for i, pattern in enumerate(accepted):
        for sample in samples(pattern.removeprefix("^"), data.draw):
            # a request's path starts with "/": text after the host prefix that does not is another
            # frontend's token (``a.com:80`` + ``80/x`` is ``a.com:8080/x``) and must not match
            if sample.startswith("/"):
                own.append((i, hosts[i] + sample))
            else:
                foreign.add(hosts[i] + sample)
            foreign |= {VICTIM + sample, sample, "." + hosts[i] + sample, VICTIM + hosts[i] + sample}
    with probes(haproxy_paths, tmp_path_factory.mktemp("reg"), keys) as running:
        for probe in running:
            for key in sorted(k for k in foreign if k and not any(c in k for c in " \\;")):
                hit = probe.lookup(key)
                assert hit is None, f"{probe.where}: {key!r} matched {keys[hit]!r} outside its host"
            for i, key in own:
                if not any(c in key for c in " \\;"):
                    assert probe.lookup(key) is not None, f"{keys[i]!r} does not match its own {key!r}"


@pytest.mark.parametrize("pattern", [EXPLOIT, r"/(?#(()x)|.*(\Q))\E", r"/[\Q]\E)|.*(]", r"/x(?x) )|.*( "])
def test_known_closure_escapes_are_refused_by_validator_and_renderer(pattern: str) -> None:
    assert balance_problem(pattern) is not None
    assert not accepted_by_renderer(pattern)


def test_the_exploit_does_escape_an_unchecked_wrapper(haproxy_paths: list[str], tmp_path: Path) -> None:
    """The engine really reads the exploit as an unanchored alternative (so refusing it matters)."""
    with probes(haproxy_paths, tmp_path, [entry("evil.test:t1", EXPLOIT)]) as running:
        for probe in running:
            assert probe.lookup(VICTIM + "/anything") == 0


def _exploit_objects() -> list[dict[str, Any]]:
    def route(name: str, host: str, match: dict[str, Any], svc: str) -> dict[str, Any]:
        return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [host],
                         "rules": [{"matches": [match], "backendRefs": [{"name": svc, "port": 80}]}]}}

    objs: list[dict[str, Any]] = [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "edge", "namespace": "ns"},
         "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "protocol": "HTTP", "port": 18080}]}}]
    for svc in ("a", "b"):
        objs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": "ns"},
                     "spec": {"ports": [{"name": "http", "port": 80}]}})
        objs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                     "metadata": {"name": svc, "namespace": "ns", "labels": {"kubernetes.io/service-name": svc}},
                     "ports": [{"name": "http", "port": 1}], "endpoints": [{"addresses": ["127.0.0.1"]}]})
    objs.append(route("attacker", "evil.test", {"path": {"type": "RegularExpression", "value": EXPLOIT}}, "a"))
    objs.append(route("victim", "victim.test", {"path": {"type": "PathPrefix", "value": "/"}}, "b"))
    return objs


def test_live_an_accepted_pattern_cannot_take_another_hosts_traffic(haproxy_paths: list[str],
                                                                    tmp_path: Path) -> None:
    """The issue's exploit, live: the attacker's route is refused and the victim's traffic stays its own."""
    objs = _exploit_objects()
    result = render(objs)
    assert any("attacker" in f.about and "quoting" in f.message for f in result.findings), result.findings
    for n, binary in enumerate(haproxy_paths):
        a, port_a = echo_server("A")
        b, port_b = echo_server("B")
        port = free_port()
        objs[0]["spec"]["listeners"][0]["port"] = port
        for obj in objs:
            if obj["kind"] == "EndpointSlice":
                obj["ports"][0]["port"] = port_a if obj["metadata"]["name"] == "a" else port_b
        where = tmp_path / f"b{n}"
        for rel, content in render(objs).files.items():
            (where / rel).parent.mkdir(parents=True, exist_ok=True)
            (where / rel).write_bytes(content)
        proc = subprocess.Popen([binary, "-dr", "-db", "-f", "haproxy.cfg"], cwd=where, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={"PATH": "/usr/bin:/bin", "LANG": "C", "OPENSSL_CONF": "/dev/null"})
        try:
            for _ in range(100):
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                time.sleep(0.05)
            for path in ("/", "/account", "/[x"):
                status, _, body = get(port, path, host="victim.test")
                assert (status, body.get("server")) == (200, "B"), (binary, path)
        finally:
            proc.kill()
            proc.wait()
            a.shutdown()
            b.shutdown()
