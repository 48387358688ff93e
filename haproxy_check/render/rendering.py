"""The render engine: cluster state -> haproxy.cfg + maps + certs, deterministic and traceable.

``Renderer.render`` compiles the HTTP routing model (``httproutes``), then renders the ordered template
snippets (``templates/NNN-*.cfg.j2``, user template dirs first so they can override or add) with
jinja2 (StrictUndefined, no autoescape: every user value is escaped by ``escaping`` instead), inserts
the named ``defaults`` profiles Backend() collected, strips the source-map markers and returns a
``RenderResult``. Pure: no I/O except reading templates; safe to run in a worker thread.

A Renderer is incremental by default: each route's compiled share of the HTTP model and the L4/CRD
models are reused from earlier renders while what they read holds (``increments``); templates run on
every render. ``Renderer(incremental=False)`` is the from-scratch reference it is tested against.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError

from haproxy_check import escaping
from haproxy_check.descriptions import Description
from haproxy_check.render import fastsnippets, gcpause, increments, laterstatuses, routelines, templatestate
from haproxy_check.render.helpers import Recorder, TemplateError
from haproxy_check.render.http import frontends, httproutes
from haproxy_check.render.http.httpmodels import FrontendModel, HttpModel
from haproxy_check.render.l4 import l4contexts
from haproxy_check.render.rendersettings import RenderSettings
from haproxy_check.render.sandboxenv import TemplateSandbox
from haproxy_check.render.sourcemaps import SourceMap
from haproxy_check.results import RenderError, RenderResult
from haproxy_check.runtime import frames
from haproxy_check.traffic import facts
from validators.crossobject import statuses
from validators.findings import Finding, PathPart, Severity
from validators.objectrules import gatewayrefusals
from validators.objects import Obj, Ref, dig, ref_of
from validators.states import State, Without
from validators.views import attachments
from validators.views.reads import Recording

BUILTIN = Path(__file__).parent / "templates"
PROFILES = "\x1dPROFILES\x1d"
NOT_ATTACHED = "RG0401"
HTTP_KINDS = ("HTTPRoute", "GRPCRoute")
MAPS = ("host.map", "host-wildcard.map", "path-exact.map", "path-regex.map", "path-prefix-exact.map",
        "path-prefix.map", "rule-backend.map", "weighted-multi-backend.map", "gw-reqhdr.map", "gw-reshdr.map",
        "gw-timeouts.map", "gw-redirect.map", "gw-rewrite.map", "gw-extauth.map",
        "gw-extauth-headers.map", "gw-session-header.map", "https-listener.map",
        "https-listener-wildcard.map")


__all__ = ["RenderError", "RenderSettings", "Renderer"]

_FIRST: Any = operator.itemgetter(0)
_RID: Any = operator.attrgetter("rid")


def _statuses(state: State, subject: Ref | None, http_ports: Sequence[int] = attachments.DEFAULT_HTTP_PORTS,
              ) -> Mapping[str, Any]:
    """The Gateway API status of the subject as rendered (every object's:
    ``validators.crossobject.statuses.all_statuses``), worked out when first read (``laterstatuses``)."""
    if subject is None or subject.kind not in statuses.STATUS_KINDS:
        return {}
    return laterstatuses.Statuses(lambda: _statuses_now(state, subject, http_ports))


def _statuses_now(state: State, subject: Ref, http_ports: Sequence[int]) -> dict[str, Any]:
    obj = state.get(subject.kind, subject.namespace, subject.name)
    found = statuses.status_of(obj, state, http_ports=http_ports) if obj is not None else None
    return {str(subject): found} if found is not None else {}


def _where(name: str, exc: BaseException, *, file: bool = False) -> str:
    """``template:line`` of a template failure: the syntax error's line, or the deepest traceback frame
    that jinja2 mapped back to a template line. ``file``: the template's file path instead of its name."""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.lineno:
        return f"{(exc.filename if file else None) or exc.name or name}:{exc.lineno}"
    found = name
    tb = exc.__traceback__
    while tb is not None:
        template = tb.tb_frame.f_globals.get("__jinja_template__")
        if template is not None:
            label = (template.filename if file else None) or template.name
            found = f"{label}:{template.get_corresponding_lineno(tb.tb_lineno)}"
        elif tb.tb_frame.f_code.co_filename.endswith(".j2"):
            path = tb.tb_frame.f_code.co_filename
            found = f"{path if file else os.path.basename(path)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _template_error(message: str, name: str, exc: BaseException, filename: str | None = None) -> RenderError:
    """A RenderError naming the template (``name:line``) and, for the CLI, its file (``path:line``)."""
    where = _where(name, exc, file=True)
    if filename and where.split(":", 1)[0] == name:  # a helper's error: the template being rendered
        where = filename + where[len(name):]
    return RenderError(message, template_file=where)




class Renderer:
    """Renders States. ``incremental`` (the default) reuses what each route compiled to in earlier renders
    (``increments``): the output is byte for byte what a from-scratch render (``incremental=False``)
    gives. One Renderer may render in several threads at once."""

    def __init__(self, *, settings: RenderSettings | None = None, template_dirs: Sequence[Path] = (),
                 incremental: bool = True, pause_collection: bool = False) -> None:
        self.settings = settings or RenderSettings()
        # Pause cyclic collection during each render (``gcpause``): for processes that render big states
        # and little else (routegate check/render, the background full check's worker). Not in the
        # serving process: its renders overlap under a burst, and it would not collect while they last.
        self.pause_collection = pause_collection
        self.cache = increments.RouteCache() if incremental else None
        for value in self.settings.base_lines():
            escaping.check(value, key=False)
        self.settings.check()
        frontends.check_settings(self.settings)  # pod port range, ExternalAuth agent
        self._dirs = [Path(d) for d in template_dirs] + [BUILTIN]
        # Templates are code: built-in and user ones alike run sandboxed, with only the documented helpers
        # (haproxy_check/render/templatestate.py says what the sandbox and the state view keep out).
        self._env = TemplateSandbox(
            loader=jinja2.FileSystemLoader([str(d) for d in self._dirs]),
            # not HTML: escaping.py applies HAProxy's escaping to every user value
            undefined=jinja2.StrictUndefined, autoescape=False,
            keep_trailing_newline=True,
            trim_blocks=True, lstrip_blocks=True,
            # Templates are read once per Renderer (their names are listed once too): no stat of every
            # template file on every get_template, ~70 per render on a review's path.
            auto_reload=False)
        self._env.filters.update(
            q=escaping.quote, lfq=escaping.lf_quote, lf=escaping.lf_escape, mapkey=escaping.map_key,
            mapval=escaping.map_value, urlv=escaping.url_value, ident=escaping.ident, hostname=escaping.hostname,
            header=escaping.header_name,
            hword=escaping.header_word, hkey=escaping.header_key)
        self._listed: dict[str, list[str]] = {}
        self._fast: dict[str, tuple[jinja2.Template, fastsnippets.Snippet | None]] = {}
        self.snippets = self._snippets("")

    def _snippets(self, sub: str) -> list[str]:
        """Snippet names of a template subdirectory, listed once per Renderer (like the top level), not
        once per frontend per render."""
        listed = self._listed.get(sub)
        if listed is None:
            listed = self._listed[sub] = self._list(sub)
        return list(listed)

    def _list(self, sub: str) -> list[str]:
        names: set[str] = set()
        for d in self._dirs:
            base = d / sub if sub else d
            if base.is_dir():
                names.update(f"{sub}/{p.name}" if sub else p.name for p in base.glob("*.cfg.j2"))
        return sorted(names)

    def _fast_snippet(self, name: str, template: jinja2.Template) -> fastsnippets.Snippet | None:
        """``fastsnippets.for_template`` asked once per template jinja2 loaded (it reads the file's state),
        not once per render: the Python version stands for the text jinja2 compiled, which a Renderer does
        not load again (``auto_reload=False``)."""
        known = self._fast.get(name)
        if known is None or known[0] is not template:
            known = self._fast[name] = (template, fastsnippets.for_template(name, template.filename,
                                                                                 self._file_of))
        return known[1]

    def _file_of(self, name: str) -> str | None:
        """The file the loader reads for template ``name`` (user directories first, as it searches)."""
        return next((str(d / name) for d in self._dirs if (d / name).is_file()), None)

    def render(self, state: State, *, subject: Ref | None = None,
               previous: Description | None = None) -> RenderResult:
        """``previous``: the Description the data plane runs now; servers keep its slot names (``slots``).
        It acts after the route cache (on Backend() calls, whose memo keys on the renamed servers), so
        cached routes stay valid whatever the previous description is."""
        if not self.pause_collection:
            return self._render(state, subject, previous)
        with gcpause.paused():
            return self._render(state, subject, previous)

    def _render(self, state: State, subject: Ref | None, previous: Description | None) -> RenderResult:
        stored = state
        # A Gateway the Gateway API says to reject is not served: hidden, its listeners bind nothing, its
        # ListenerSets have no parent and routes attached only to it attach nowhere (the rule RG0130 says
        # so on the Gateway; validators.objectrules.gatewayrefusals). Its status is computed as stored.
        refused = gatewayrefusals.refused(state)
        if refused:
            state = Without(state, frozenset(refused))
        gen = self.cache.generation() if self.cache is not None else None
        sources = SourceMap(gen.origins if gen is not None else None)
        recorder = Recorder(base_lines=self.settings.base_lines(), sources=sources,
                            haproxy_version=self.settings.haproxy_version,
                            memo=gen.recorder if gen is not None else None, previous=previous)
        findings: list[Finding] = []
        model = HttpModel()
        lsts = attachments.listeners(state, http_ports=(self.settings.http_port, self.settings.https_port))
        fronts = frontends.build(state, lsts, recorder=recorder, model=model, mark=sources.mark, findings=findings,
                                 settings=self.settings)
        ctx = httproutes.Context(state, sources.mark, self.settings, recorder, servers={})
        seen: list[Ref] = []
        by_name = {fe.name: fe for fe in fronts.values()}
        indexed: dict[str, Any] = {}  # this state's indexes, as the cache checks look them up
        for kind in HTTP_KINDS:
            for route in state.list(kind):
                if gen is None:
                    self._route(route, state, fronts, model, ctx, subject, findings)
                else:
                    self._cached_route(gen, route, state, fronts, by_name, model, ctx, subject, findings, seen,
                                       indexed)
        httproutes.dedupe_path_maps(model)
        for fe in fronts.values():
            fe.advanced.sort(key=_FIRST)  # the sort key of each line (itemgetter: no Python call per item)
            fe.rules.sort(key=_RID)
        visible = templatestate.TemplateState(state)  # Secrets without data
        context: dict[str, Any] = {
            "Backend": recorder.backend, "RegisterMap": recorder.register_map, "AddFile": recorder.add_file,
            "SecretFile": templatestate.secret_file(state, recorder.add_file),
            "origin": sources.mark, "get": visible.get, "dig": dig, "state": visible,
            "settings": self.settings, "http": model, "frontends": sorted(fronts.values(), key=lambda f: f.name),
            "listeners": lsts, "subject": subject, "MAPS": MAPS, "PROFILES": PROFILES,
            "attach": lambda route: attachments.attach(route, state),
            "snippets": self._snippets, "findings": tuple(findings),
        }
        memo = l4contexts.direct if gen is None else functools.partial(increments.RouteCache.model, gen)
        context.update(l4contexts.template_globals(state, self.settings, recorder, findings, memo))
        context["resources"] = l4contexts.resources_of(visible)
        l4: l4contexts.Models = context["l4"]
        parts: list[str] = []
        for name in self.snippets:
            try:
                template = self._env.get_template(name)
                fast = self._fast_snippet(name, template)
                if fast is not None:
                    text = recorder.attempt(fast, context)
                    if text is not None:
                        parts.append(text)
                        continue
                parts.append(template.render(context))
            except SecurityError as exc:
                raise _template_error(f"template {_where(name, exc)}: not allowed in a template: {exc}",
                                      name, exc) from exc
            except (TemplateError, jinja2.TemplateError) as exc:
                # helpers' errors already end with "(at template:line)"; others get it from the traceback
                where = name if isinstance(exc, TemplateError) else _where(name, exc)
                raise _template_error(f"template {where}: {exc}", name, exc, self._file_of(name)) from exc
            except escaping.Unsafe as exc:
                raise _template_error(f"template {_where(name, exc)} wrote an unescaped value: {exc}",
                                      name, exc) from exc
            except RenderError:
                raise
            except Exception as exc:  # a template's own mistake ("a" + 1, a missing attribute's call, ...)
                raise _template_error(f"template {_where(name, exc)}: {type(exc).__name__}: {exc}",
                                      name, exc) from exc
        cfg = "".join(parts).replace(PROFILES, recorder.profile_sections())
        clean_cfg = sources.strip("haproxy.cfg", cfg)
        files: dict[str, bytes] = {"haproxy.cfg": clean_cfg.encode()}
        map_texts = {path: sources.strip(path, text, recorder.clean_texts.get(path))
                     for path, text in recorder.map_files().items()}
        files.update((p, t.encode()) for p, t in map_texts.items())
        files.update((p, data) for p, (_, data) in recorder.files.items())
        if self.cache is not None and gen is not None:
            self.cache.done(gen, seen, recorder)
        origins = sources.origins()
        findings += routelines.oversized_pairs(sources.line_pairs(), self.settings.limits.lines_per_route, subject)
        description = dataclasses.replace(
            recorder.description(map_texts, frame=frames.digest(clean_cfg, recorder.backends, recorder.profiles)),
            routing=facts.collect(fronts.values(), model.backends, tls=l4.built("tls"), tcp=l4.built("tcp"),
                                  crd=l4.built("crd"), crd_port=self._crd_port(fronts)))
        return RenderResult(files=dict(sorted(files.items())), origins=origins, description=description,
                            findings=tuple(sorted(set(findings), key=lambda f: (f.about, f.field, f.code, f.message))),
                            statuses=_statuses(stored, subject, (self.settings.http_port, self.settings.https_port)))

    def _crd_port(self, fronts: dict[tuple[str, str], Any]) -> int | None:
        """Where the custom Routes' own frontend binds: the HTTP port, when no Gateway HTTP frontend
        selects them (500-route-crd-frontends)."""
        if any(fe.protocol == "HTTP" for fe in fronts.values()):
            return None
        return int(self.settings.http_port)

    def _route(self, route: Obj, state: State, fronts: dict[tuple[str, str], Any], model: HttpModel,
               ctx: httproutes.Context, subject: Ref | None, findings: list[Finding]) -> None:
        ref = ref_of(route)
        atts, _ = attachments.attach(route, state)
        atts = [a for a in atts if a.listener.protocol in ("HTTP", "HTTPS")]
        if not atts:
            if ref != subject:
                return
            fronts.setdefault(SYNTHETIC_KEY, frontends.synthetic())
            atts = [attachments.Attachment(ref, 0, frontends.synthetic_listener(),
                                           tuple(attachments.route_hostnames(route)))]
            findings.append(_not_attached(ref))
        try:
            httproutes.compile_route(model, ctx, route, atts, fronts, findings)
        except escaping.FieldError as exc:
            findings.append(_unsafe(ref, str(exc), exc.path, subject))

    def _cached_route(self, gen: increments.Generation, route: Obj, state: State,
                      fronts: dict[tuple[str, str], FrontendModel], by_name: dict[str, FrontendModel],
                      model: HttpModel, ctx: httproutes.Context, subject: Ref | None, findings: list[Finding],
                      seen: list[Ref], indexed: dict[str, Any]) -> None:
        """``_route`` from the cache: the route's staged contribution, compiled again only when the route
        or something it read changed."""
        ref = ref_of(route)
        seen.append(ref)
        is_subject = ref == subject
        entry = gen.routes.get(ref)
        if entry is None or not entry.holds(route, is_subject, state, _with_synthetic(fronts, entry.synthetic),
                                            indexed):
            entry = gen.routes[ref] = _stage(route, ref, state, fronts, ctx, is_subject)
            assert self.cache is not None
            self.cache.stats["misses"] += 1
        else:
            assert self.cache is not None
            self.cache.stats["hits"] += 1
        if entry.staged is not None and any(be in model.backends for be, _ in entry.staged.backends):
            # another route already made a backend of this name: compile against the model, as from scratch
            self._route(route, state, fronts, model, ctx, subject, findings)
            return
        if entry.synthetic and SYNTHETIC_KEY not in fronts:
            fe = fronts[SYNTHETIC_KEY] = frontends.synthetic()
            by_name[fe.name] = fe
        findings.extend(entry.findings)
        for path, content, kind in entry.files:
            ctx.files.add_file(path, content, kind)
        if entry.staged is not None:
            httproutes.commit_route(model, entry.staged, by_name)


SYNTHETIC_KEY = ("HTTP", "0")


def _with_synthetic(fronts: dict[tuple[str, str], FrontendModel], synthetic: bool,
                    ) -> Mapping[tuple[str, str], FrontendModel]:
    if not synthetic or SYNTHETIC_KEY in fronts:
        return fronts
    return {**fronts, SYNTHETIC_KEY: frontends.synthetic()}


def _stage(route: Obj, ref: Ref, state: State, fronts: dict[tuple[str, str], FrontendModel],
           ctx: httproutes.Context, is_subject: bool) -> increments.RouteEntry:
    """Compile one route apart from the render (the cached twin of ``Renderer._route``), logging what it
    read from the state and the frontends."""
    view = Recording(state)
    files = increments.FileLog()
    found: list[Finding] = []
    atts, _ = attachments.attach(route, view)
    atts = [a for a in atts if a.listener.protocol in ("HTTP", "HTTPS")]
    synthetic = False
    if not atts:
        if not is_subject:
            return increments.RouteEntry(route, is_subject, view.reads.frozen(), {}, False, None, (), ())
        synthetic = True
        atts = [attachments.Attachment(ref, 0, frontends.synthetic_listener(),
                                       tuple(attachments.route_hostnames(route)))]
        found.append(_not_attached(ref))
    fronts_read = increments.FrontReads(_with_synthetic(fronts, synthetic))
    staged: httproutes.StagedRoute | None = None
    try:
        staged = httproutes.stage_route(httproutes.Context(view, ctx.mark, ctx.settings, files, ctx.servers), route,
                                        atts, fronts_read, found)
    except escaping.FieldError as exc:
        found.append(_unsafe(ref, str(exc), exc.path, ref if is_subject else None))
    return increments.RouteEntry(route, is_subject, view.reads.frozen(), fronts_read.seen, synthetic, staged,
                                 tuple(found), tuple(files.added))


def _not_attached(ref: Ref) -> Finding:
    return Finding(NOT_ATTACHED, f"{ref.kind} attaches to no known Gateway listener; it was checked behind a "
                   "synthetic HTTP listener", ("spec", "parentRefs"), Severity.WARN, subject=True, about=str(ref))


def _unsafe(ref: Ref, message: str, path: tuple[PathPart, ...], subject: Ref | None) -> Finding:
    return Finding(httproutes.UNSAFE, f"{message}; the route is not rendered", path, Severity.DENY,
                   subject=ref == subject, about=str(ref))
