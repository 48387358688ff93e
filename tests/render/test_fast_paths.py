"""The render's fast paths give what the ways they replace gave, byte for byte.

Differential tests: each faster step (named in its test) is compared with the plain computation it
stands for, on hypothesis-drawn states from every render fixture (``test_incremental``'s pool) and on
drawn texts, so a fast path that ever differs fails here rather than in a review.
"""

from __future__ import annotations

import copy
import gc
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haproxy_check import escaping
from haproxy_check.render import endpoints, fastsnippets, gcpause, helpers, routelines
from haproxy_check.render.rendering import BUILTIN, Renderer, RenderError, RenderSettings
from haproxy_check.render.sourcemaps import SourceMap
from haproxy_check.results import Origin
from tests.render.test_incremental import DATA, REFS, ROUTE_KINDS, VARIANTS, assert_same, outcome
from tests.render.test_line_words import GW, SVC, maximal_route
from validators import codes
from validators.crossobject import backendrefs
from validators.findings import Finding, PathPart, Severity, format_path
from validators.limits import Limits
from validators.objects import Ref, as_list, dig, name_of, namespace_of
from validators.states import MemoryState

_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def fixture_states(draw: st.DrawFn) -> MemoryState:
    refs = draw(st.lists(st.sampled_from(REFS), min_size=5, max_size=60, unique=True))
    return MemoryState([copy.deepcopy(draw(st.sampled_from(VARIANTS[ref]))) for ref in refs])


# ---------------------------------------------------------------- lines per route from marker counts

# stray marker characters and a broken marker, but no digits outside markers (every number has an origin)
_PIECES = st.sampled_from(["a", " ", "x y", "\n", "\x1e", "\x1f", "\x1ex\x1f", "\x1e1x\x1f"])


@st.composite
def marked_texts(draw: st.DrawFn, marks: list[str]) -> str:
    parts = draw(st.lists(st.one_of(_PIECES, st.sampled_from(marks)), max_size=40))
    return "".join(parts)


@_SETTINGS
@given(data=st.data(), files=st.lists(st.sampled_from(["haproxy.cfg", "maps/a.map", "maps/b.map"]), max_size=4))
def test_line_counts_are_the_origins_of_the_lines(data: st.DataObject, files: list[str]) -> None:
    """``SourceMap.line_counts`` (counted while stripping) is ``Counter(origins().values())``, in the same
    order (the order decides which field a RG0408 finding names on a tie); a file stripped twice too."""
    sources = SourceMap()
    refs = [Ref("HTTPRoute", "ns", f"r{i}") for i in range(3)]
    marks = [sources.mark(ref, ("spec", "rules", k)) for ref in refs for k in range(2)]
    for file in files:
        sources.strip(file, data.draw(marked_texts(marks)))
    assert list(sources.line_counts().items()) == list(Counter(sources.origins().values()).items())


def _oversized_by_lines(lines: Mapping[tuple[str, int], Origin], limit: int, subject: Ref | None) -> list[Finding]:
    """``routelines.oversized`` as it was: a Counter per route and field over every line's origin."""
    per_route: Counter[Ref] = Counter()
    per_field: dict[Ref, Counter[tuple[PathPart, ...]]] = {}
    for origin in lines.values():
        if origin.ref.kind in routelines.ROUTE_KINDS:
            per_route[origin.ref] += 1
            per_field.setdefault(origin.ref, Counter())[origin.path[:3]] += 1
    found = []
    for ref, count in sorted(per_route.items(), key=lambda item: str(item[0])):
        if count <= limit:
            continue
        (field, most), = per_field[ref].most_common(1)
        found.append(Finding(
            codes.RENDER_ROUTE_TOO_LARGE, f"the route renders {count} configuration lines and map entries; the "
            f"limit is {limit} (limits.linesPerRoute); {most} of them come from {format_path(field) or 'the route'}:"
            " split the route or use fewer matches, hostnames or parentRefs",
            field, Severity.DENY, subject=ref == subject, about=str(ref)))
    return found


def _oversized(findings: tuple[Finding, ...]) -> list[Finding]:
    return [f for f in findings if f.code == codes.RENDER_ROUTE_TOO_LARGE]


@_SETTINGS
@given(state=fixture_states(), limit=st.integers(1, 12), data=st.data())
def test_route_size_findings_from_counts_are_those_from_the_lines(state: MemoryState, limit: int,
                                                                  data: st.DataObject) -> None:
    """A render's RG0408 findings (from marker counts) are ``routelines.oversized`` of its source map."""
    routes = sorted(r for r in REFS if r.kind in ("HTTPRoute", "GRPCRoute") and state.get(r.kind, r.namespace, r.name))
    subject = data.draw(st.none() | st.sampled_from(routes)) if routes else None
    renderer = Renderer(settings=RenderSettings(limits=Limits(lines_per_route=limit)), incremental=False)
    try:
        result = renderer.render(state, subject=subject)
    except RenderError:
        return
    assert _oversized(result.findings) == sorted(
        _oversized_by_lines(result.origins, limit, subject), key=lambda f: (f.about, f.field, f.code, f.message))


# ---------------------------------------------------------------- endpoint addresses parsed once


def _addresses_by_ipaddress(state: MemoryState, service: dict[str, Any], port: int,
                            limit: int | None) -> list[tuple[str, int]]:
    """``endpoints.endpoint_addresses`` as it was: ipaddress objects in the set, sorted by ``__lt__``."""
    sp = backendrefs.service_port(service, port)
    if sp is None:
        return []
    port_name = dig(sp, "name", default="")
    found: set[tuple[int, Any, int]] = set()
    for eps in endpoints.slices_of(state, namespace_of(service), name_of(service)):
        target = next((endpoints._int(dig(p, "port")) for p in as_list(dig(eps, "ports"))
                       if dig(p, "name", default="") == port_name), None)
        if target is None or not 0 < target < 65536:
            continue
        for ep in as_list(dig(eps, "endpoints")):
            if not endpoints._ready(ep):
                continue
            for addr in as_list(dig(ep, "addresses")):
                ip = endpoints._ip(addr)
                if ip is not None:
                    found.add((ip.version, ip, target))
            if limit is not None and len(found) > limit:
                break
        if limit is not None and len(found) > limit:
            break
    return [(str(ip), target) for _, ip, target in sorted(found)]


_ADDRESSES = st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.10", "9.255.255.255", "010.0.0.1", "fd00::1",
                              "FD00:0::1", "fd00::2", "::ffff:10.0.0.1", "::", "fe80::1%eth0", "2001:db8::",
                              "host.example", "", " 10.0.0.1", 7, None, ["10.0.0.1"]])


@st.composite
def endpoint_slices(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for k in range(draw(st.integers(0, 3))):
        out.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": f"s-{k}", "namespace": "default",
                                 "labels": {"kubernetes.io/service-name": "s"}},
                    "ports": [{"name": draw(st.sampled_from(["http", "other"])),
                               "port": draw(st.sampled_from([8080, 0, 70000, "x"]))}],
                    "endpoints": [{"addresses": draw(st.lists(_ADDRESSES, max_size=4)),
                                   "conditions": {"ready": draw(st.sampled_from([True, False, None]))}}
                                  for _ in range(draw(st.integers(0, 4)))]})
    return out


@_SETTINGS
@given(slices=endpoint_slices(), limit=st.none() | st.integers(0, 5))
def test_endpoint_addresses_are_those_ipaddress_sorted(slices: list[dict[str, Any]], limit: int | None) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"},
               "spec": {"ports": [{"name": "http", "port": 80}]}}
    state = MemoryState([service, *slices])
    assert endpoints.endpoint_addresses(state, service, 80, limit=limit) == _addresses_by_ipaddress(
        state, service, 80, limit)


# ---------------------------------------------------------------- collection paused while rendering


def test_collection_is_paused_while_renders_run_and_resumed_after() -> None:
    assert gc.isenabled()
    with gcpause.paused():
        assert not gc.isenabled()
        with gcpause.paused():  # a second render (another thread) ending first keeps the pause
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gcpause.paused():
        raise RuntimeError("a failed render resumes collection too")
    assert gc.isenabled()


def test_collection_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    try:
        with gcpause.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_concurrent_renders_resume_collection_when_the_last_ends() -> None:
    barrier = threading.Barrier(3)
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS[:30]])

    def render() -> None:
        barrier.wait()
        Renderer(pause_collection=True).render(state)

    threads = [threading.Thread(target=render) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled()


def test_only_renderers_of_one_shot_processes_pause_collection() -> None:
    """The serving process's renders (the default) keep collecting; check/render and the background
    full check's worker ask for the pause."""
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS[:5]])
    seen: list[bool] = []

    class Watching(Renderer):
        def _render(self, *args: Any) -> Any:
            seen.append(gc.isenabled())
            return super()._render(*args)

    Watching().render(state)
    Watching(pause_collection=True).render(state)
    assert seen == [True, False] and gc.isenabled()


# ---------------------------------------------------------------- map entries checked in one pass


def _register_each(recorder: helpers.Recorder, sources: SourceMap, name: str, entries: list[Any]) -> str:
    """``Recorder.register_map``'s check as it was: every entry, markers stripped, through map_entry."""
    bucket = recorder.maps.setdefault(f"maps/{name}", (True, []))[1]
    for entry in entries:
        if not isinstance(entry, str):
            raise helpers._fail(f"RegisterMap({name!r}) entries must be strings")
        escaping.map_entry(sources.strip_line(entry)[0])
        bucket.append(entry)
    return f"maps/{name}"


_ENTRY_PIECES = st.sampled_from(["a", "b/c", " ", "  ", "#", "\n", "\t", "é", "\x1e", "\x1f", "\x7f", "x y z",
                                 "%", "'"])


@_SETTINGS
@given(data=st.data())
def test_map_entries_checked_together_pass_and_fail_as_one_by_one(data: st.DataObject) -> None:
    sources = SourceMap()
    marks = [sources.mark(Ref("HTTPRoute", "ns", "r"), ("spec", "rules", k)) for k in range(3)]
    piece = st.one_of(_ENTRY_PIECES, st.sampled_from(marks))
    entry = st.lists(piece, max_size=8).map("".join)
    entries = data.draw(st.lists(st.one_of(entry, entry, entry, st.sampled_from([7, None])), max_size=6))

    def outcome(register: Any) -> tuple[str, list[str]]:
        recorder = helpers.Recorder(base_lines=(), sources=sources)
        try:
            register(recorder, entries)
        except (helpers.TemplateError, escaping.Unsafe) as exc:
            return f"{type(exc).__name__}: {exc}", []
        return "ok", recorder.maps["maps/m.map"][1]

    assert outcome(lambda rec, items: rec.register_map("m.map", items)) == outcome(
        lambda rec, items: _register_each(rec, sources, "m.map", items))


# ---------------------------------------------------------------- shipped snippets written in Python


def _jinja_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastsnippets, "SHIPPED", {})


@_SETTINGS
@given(state=fixture_states(), data=st.data())
def test_python_snippets_render_the_bytes_of_their_templates(state: MemoryState, data: st.DataObject) -> None:
    routes = sorted(r for r in REFS if r.kind in ROUTE_KINDS and state.get(r.kind, r.namespace, r.name))
    subject = data.draw(st.none() | st.sampled_from(routes)) if routes else None
    fast = outcome(Renderer(incremental=data.draw(st.booleans())), state, subject)
    previous = fast.description if not isinstance(fast, str) and data.draw(st.booleans()) else None
    if previous is not None:  # the data plane's servers keep their slots: Backend() renames them
        fast = outcome(Renderer(), state, subject, previous)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _jinja_only(monkeypatch)
        assert fastsnippets.for_template("600-http-backends.cfg.j2", str(BUILTIN / "600-http-backends.cfg.j2")) is None
        want = outcome(Renderer(incremental=False), state, subject, previous)
    assert_same(fast, want)


def test_every_python_snippet_is_for_the_shipped_text() -> None:
    """A shipped template edited without its Python version would silently render through jinja2."""
    for name in fastsnippets.SHIPPED:
        assert fastsnippets.for_template(name, str(BUILTIN / name), lambda n: str(BUILTIN / n)) is not None, name


def test_a_user_template_overriding_a_python_snippet_is_rendered(tmp_path: Path) -> None:
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS])
    shipped = Renderer().render(state).files["haproxy.cfg"]
    assert b"\nbackend gw_h_" in shipped
    (tmp_path / "600-http-backends.cfg.j2").write_text("# no HTTP backends here\n")
    mine = Renderer(template_dirs=[tmp_path]).render(state).files["haproxy.cfg"]
    assert b"# no HTTP backends here\n" in mine and b"\nbackend gw_h_" not in mine


def test_a_failing_python_snippet_gives_way_to_its_template(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Python version recorded before it failed is undone; the template's output stands."""
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS])
    want = Renderer(incremental=False).render(state)
    digest, write = fastsnippets.SHIPPED["600-http-backends.cfg.j2"]

    def half(context: Any) -> str:
        write(context)
        raise ValueError("late")

    monkeypatch.setattr(fastsnippets, "SHIPPED", {"600-http-backends.cfg.j2": (digest, half)})
    assert_same(Renderer(incremental=False).render(state), want)


def test_map_entries_a_failing_python_snippet_registered_are_taken_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A maps snippet that fails halfway (an entry RegisterMap refuses, a bug) leaves no entry behind:
    the template registers every map again, and the maps hold each entry once, as jinja2 alone gives."""
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS])
    want = Renderer(incremental=False).render(state)
    digest, write = fastsnippets.SHIPPED["900-http-maps.cfg.j2"]

    def half(context: Any) -> str:
        write(context)
        context["RegisterMap"]("extra.map", ["a b"], {})
        raise ValueError("late")

    monkeypatch.setattr(fastsnippets, "SHIPPED", {"900-http-maps.cfg.j2": (digest, half)})
    got = Renderer(incremental=False).render(state)
    assert any(got.files[path] for path in got.files if path.startswith("maps/"))
    assert_same(got, want)


_EMPTY_MOSTLY = ("450-tls-frontends.cfg.j2", "460-tcp-frontends.cfg.j2", "500-route-crd-frontends.cfg.j2",
                 "650-tls-backends.cfg.j2", "660-tcp-backends.cfg.j2", "670-route-crd-backends.cfg.j2",
                 "680-spoa-backends.cfg.j2", "990-resolvers.cfg.j2")


def _jinja_renders(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the templates rendered through jinja2 (by name) from now on."""
    import jinja2

    seen: Counter[str] = Counter()
    render = jinja2.Template.render

    def counted(self: jinja2.Template, *args: Any, **kwargs: Any) -> str:
        seen[str(self.name)] += 1
        return render(self, *args, **kwargs)

    monkeypatch.setattr(jinja2.Template, "render", counted)
    return seen


def test_an_http_only_state_renders_no_l4_crd_spoe_or_resolver_template(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's closure of an HTTPRoute: the snippets that would write nothing are not sandboxed renders."""
    http_only = MemoryState([o for o in yaml.safe_load_all((DATA / "render" / "basic.yaml").read_text()) if o])
    seen = _jinja_renders(monkeypatch)
    fast = Renderer(incremental=False).render(http_only)
    assert not {name: seen[name] for name in (*_EMPTY_MOSTLY, "400-http-frontends.cfg.j2") if seen[name]}
    assert seen["000-base.cfg.j2"] == 1  # the counter sees jinja2's renders
    _jinja_only(monkeypatch)
    assert_same(fast, Renderer(incremental=False).render(http_only))


@pytest.mark.parametrize("kind", ["TLSRoute", "TCPRoute", "Route", None])
def test_snippets_written_for_the_empty_case_render_the_template_otherwise(kind: str | None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fixture of one L4 kind (all of them: None) with what it needs: the Python versions give way
    to their templates, and the render is the template's, byte for byte."""
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS
                         if kind is None or ref.kind == kind or ref.kind not in ROUTE_KINDS])
    seen = _jinja_renders(monkeypatch)
    fast = Renderer(incremental=False).render(state)
    assert any(seen[name] for name in _EMPTY_MOSTLY)  # a template wrote this kind's lines
    _jinja_only(monkeypatch)
    assert_same(fast, Renderer(incremental=False).render(state))


@pytest.mark.parametrize("override", ["http-frontend/600-header-modifiers.cfg.j2", "http-frontend/700-mine.cfg.j2",
                                      "http-frontend-select/100-mine.cfg.j2"])
def test_a_user_snippet_included_by_the_frontends_renders_them_through_jinja2(override: str, tmp_path: Path) -> None:
    """The Python frontends write the shipped included snippets: one a user directory overrides or adds
    makes the frontends render through the template, which includes it."""
    state = MemoryState([o for o in yaml.safe_load_all((DATA / "render" / "basic.yaml").read_text()) if o])
    (tmp_path / override).parent.mkdir(parents=True)
    (tmp_path / override).write_text("    # mine {{ fe.name }}\n")
    mine = Renderer(template_dirs=[tmp_path]).render(state).files["haproxy.cfg"]
    assert b"    # mine " in mine


@pytest.mark.parametrize("options", [{"access_log": "stdout format raw local0"}, {"debug_headers": True}])
@given(state=fixture_states())
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                               HealthCheck.function_scoped_fixture])
def test_python_frontends_under_other_settings_render_the_templates_bytes(options: dict[str, Any],
                                                                         state: MemoryState) -> None:
    render_settings = RenderSettings(**options)
    fast = outcome(Renderer(settings=render_settings), state, None)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _jinja_only(monkeypatch)
        want = outcome(Renderer(settings=render_settings, incremental=False), state, None)
    assert_same(fast, want)


_HTTP_VARIANTS = [(ref, k) for ref in REFS if ref.kind in ("HTTPRoute", "GRPCRoute") for k in range(len(VARIANTS[ref]))]


def test_each_http_route_alone_renders_the_templates_bytes_through_the_python_frontends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTP route variant of the fixtures as a review's closure has it (alone with every other
    kind): the frontends written in Python for most of them, byte for byte the template's."""
    others = [copy.deepcopy(VARIANTS[ref][0]) for ref in REFS if ref.kind not in ROUTE_KINDS]
    fast_written = 0
    for ref, k in _HTTP_VARIANTS:
        state = MemoryState([*others, copy.deepcopy(VARIANTS[ref][k])])
        with pytest.MonkeyPatch.context() as patched:
            seen = _jinja_renders(patched)
            fast = outcome(Renderer(), state, ref)
        fast_written += not seen["400-http-frontends.cfg.j2"]
        with pytest.MonkeyPatch.context() as patched:
            _jinja_only(patched)
            assert_same(fast, outcome(Renderer(incremental=False), state, ref))
    assert fast_written >= len(_HTTP_VARIANTS) // 2, (fast_written, len(_HTTP_VARIANTS))


def test_a_renderer_asks_for_each_templates_python_version_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a snippet has a Python version (a stat and, once, a digest of its file) is asked once per
    template a Renderer loaded, not on every render (12 stats per render, two renders per review)."""
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS])
    asked: Counter[str] = Counter()
    for_template = fastsnippets.for_template

    def counted(name: str, filename: str | None, file_of: Any = None) -> fastsnippets.Snippet | None:
        asked[name] += 1
        return for_template(name, filename, file_of)

    monkeypatch.setattr(fastsnippets, "for_template", counted)
    renderer = Renderer()
    first = renderer.render(state)
    assert asked and set(asked.values()) == {1}
    assert_same(renderer.render(state), first)
    assert set(asked.values()) == {1}


# ---------------------------------------------------------------- shipped templates that loop less


_CORS = "http-frontend/200-cors.cfg.j2"


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(state=fixture_states())
def test_cors_rules_picked_in_python_render_what_the_filtered_loop_did(state: MemoryState, tmp_path_factory: Any,
                                                                      ) -> None:
    """``fe.cors_rules`` in the shipped CORS snippet gives the bytes of its old ``fe.rules if rule.cors`` loop
    (run here as a user template)."""
    shipped = (BUILTIN / _CORS).read_text()
    first, rest = shipped.split("\n", 1)
    assert first == "{% for rule in fe.cors_rules %}"
    old = tmp_path_factory.mktemp("old")
    (old / "http-frontend").mkdir()
    (old / _CORS).write_text("{% for rule in fe.rules if rule.cors %}\n" + rest)
    assert_same(outcome(Renderer(incremental=False), state, None),
                outcome(Renderer(incremental=False, template_dirs=[old]), state, None))


def test_cors_rules_of_every_fixture_render_as_the_filtered_loop_did(tmp_path: Path) -> None:
    state = MemoryState([copy.deepcopy(VARIANTS[ref][0]) for ref in REFS])
    rest = (BUILTIN / _CORS).read_text().split("\n", 1)[1]
    (tmp_path / "http-frontend").mkdir()
    (tmp_path / _CORS).write_text("{% for rule in fe.rules if rule.cors %}\n" + rest)
    new = Renderer(incremental=False).render(state)
    assert b"    # CORS " in new.files["haproxy.cfg"]
    assert_same(new, Renderer(incremental=False, template_dirs=[tmp_path]).render(state))


# the advanced matching block of 400-http-frontends as the jinja2 loop it was before fe.advanced_lines()
_ADVANCED_LOOP = (Path(__file__).resolve().parents[1] / "data" / "render" / "advanced-loop-400.j2.txt").read_text()
_FRONTENDS = "400-http-frontends.cfg.j2"


def _old_frontends(directory: Path) -> Path:
    shipped = (BUILTIN / _FRONTENDS).read_text()
    assert shipped.count("{{ fe.advanced_lines() }}") == 1
    (directory / _FRONTENDS).write_text(shipped.replace("{{ fe.advanced_lines() }}", _ADVANCED_LOOP))
    return directory


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(state=fixture_states())
def test_advanced_lines_in_python_render_what_the_template_loop_did(state: MemoryState, tmp_path_factory: Any,
                                                                    ) -> None:
    old = _old_frontends(tmp_path_factory.mktemp("old"))
    assert_same(outcome(Renderer(incremental=False), state, None),
                outcome(Renderer(incremental=False, template_dirs=[old]), state, None))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(regex=st.booleans(), hosts=st.integers(1, 90), headers=st.integers(0, 16), method=st.booleans())
def test_split_advanced_lines_render_what_the_template_loop_did(regex: bool, hosts: int, headers: int, method: bool,
                                                                tmp_path_factory: Any) -> None:
    """Lines over 64 words (named ACLs, hostnames 40 to a line) as well as one-line ones."""
    route = maximal_route(regex=regex)
    route["spec"]["hostnames"] = [f"h{i}.example.com" for i in range(hosts)]
    for match in route["spec"]["rules"][0]["matches"]:
        match["headers"] = match["headers"][:headers]
        if not method:
            del match["method"]
    state = MemoryState([copy.deepcopy(GW), copy.deepcopy(SVC), route])
    old = _old_frontends(tmp_path_factory.mktemp("old"))
    new = outcome(Renderer(incremental=False), state, None)
    assert_same(new, outcome(Renderer(incremental=False, template_dirs=[old]), state, None))
    assert not isinstance(new, str) and b"# Advanced route matching" in new.files["haproxy.cfg"]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "b", " ", "  ", "\t", "'", '"', "\\", "#", "{", "}", "-m", "\n", "é"]),
                     max_size=30).map("".join))
def test_word_count_without_double_quotes_escapes_or_comments_is_the_character_loop(text: str) -> None:
    assert escaping.word_count(text) == escaping._word_count(text)
