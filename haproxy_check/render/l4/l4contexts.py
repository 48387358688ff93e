"""Template globals for the TLSRoute, TCPRoute and custom Route CRD snippets.

The engine (``rendering.Renderer``) merges ``template_globals(...)`` into the context of every
snippet, so the ``*-tlsroutes``/``*-tcproutes``/``*-routes-crd`` templates (and user templates) see
compiled, escaped models and only lay out lines. Models are built once per render and lazily (a
state without TLSRoutes costs nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from haproxy_check.render import endpoints, servertls
from haproxy_check.render.helpers import TemplateError, template_location
from haproxy_check.render.http import extauth
from haproxy_check.render.l4 import crdroutes, tcproutes, tlsroutes
from haproxy_check.render.l4.crdroutes import CrdModel
from haproxy_check.render.l4.tcproutes import TCPModel
from haproxy_check.render.l4.tlsroutes import TLSModel
from haproxy_check.render.servertls import FileSink, ServerTLS
from validators.findings import Finding
from validators.objects import KINDS, Obj
from validators.states import State

Build = Callable[[State, FileSink], Any]
Memo = Callable[[str, State, FileSink, Build], Any]  # (name, state, files, build) -> build(state, files)


def direct(name: str, state: State, files: FileSink, build: Build) -> Any:
    return build(state, files)


class Models:
    """Lazily built L4/CRD models of one render; their findings go to the render's findings list.

    ``memo`` builds a model: directly by default, or from a cache of models built for earlier states
    (``increments.RouteCache.model``) that replays the files the build wrote.
    """

    def __init__(self, state: State, settings: Any, files: FileSink, findings: list[Finding],
                 memo: Memo = direct) -> None:
        self._state, self._settings, self._files, self._findings = state, settings, files, findings
        self._memo = memo

    @property
    def _http_ports(self) -> tuple[int, ...]:
        """The pod ports of HTTP and HTTPS traffic (RenderSettings.http_port/https_port), which TCP
        listeners may not take."""
        return (self._settings.http_port, self._settings.https_port)

    @functools.cached_property
    def tls(self) -> TLSModel:
        shared, sockets = self._settings.share_https_with_passthrough, self._settings.internal_socket_prefix
        model: TLSModel = self._memo("tls", self._state, self._files, lambda state, files: tlsroutes.build(
            state, files, https_shared=shared, settings=self._settings, sockets=sockets,
            http_ports=self._http_ports))
        self._findings.extend(model.findings)
        return model

    @functools.cached_property
    def tcp(self) -> TCPModel:
        model: TCPModel = self._memo("tcp", self._state, self._files,
                                     lambda state, files: tcproutes.build(state, files, settings=self._settings,
                                                                          http_ports=self._http_ports))
        self._findings.extend(model.findings)
        return model

    @functools.cached_property
    def crd(self) -> CrdModel:
        model: CrdModel = self._memo("crd", self._state, self._files, lambda state, _: crdroutes.build(state))
        self._findings.extend(model.findings)
        return model

    def built(self, name: str) -> Any:
        """The ``tls``/``tcp``/``crd`` model if a template read it (what the render bound), else None."""
        return self.__dict__.get(name)

    def backend_tls(self, service: Obj, port: int) -> ServerTLS:
        return servertls.server_tls(self._state, service, port, self._files, settings=self._settings)


_BY_PLURAL = {info.plural: kind for kind, info in KINDS.items()}


def resources_of(state: State) -> Callable[[str], Sequence[Obj]]:
    """``resources("httproutes")`` (plural, as HAPTIC templates say) or ``resources("HTTPRoute")``.

    An unknown name fails the render with the template and line instead of silently listing nothing.
    """

    def resources(name: str) -> Sequence[Obj]:
        kind = name if name in KINDS else _BY_PLURAL.get(str(name).lower())
        if kind is None:
            raise TemplateError(f"resources({name!r}): unknown kind; use one of "
                                f"{', '.join(sorted(_BY_PLURAL))} (at {template_location()})")
        return state.list(kind)

    return resources


def template_globals(state: State, settings: Any, files: FileSink, findings: list[Finding],
                     memo: Memo = direct) -> dict[str, Any]:
    """``l4`` (the lazy models), ``backend_tls(service, port)``, ``extauth`` (the SPOE wiring) and
    ``resources(plural or Kind)``."""
    models = Models(state, settings, files, findings, memo)
    backend_tls: Callable[[Obj, int], ServerTLS] = models.backend_tls
    def uses_resolvers() -> bool:
        """Whether a backend rendered so far has a server resolved at run time (an ExternalName Service)."""
        backends = getattr(files, "backends", {})
        return any(endpoints.RESOLVERS in s.options for b in backends.values() for s in b.servers)

    share = tlsroutes.https_share_socket(0, settings.internal_socket_prefix).removesuffix("-0") + "-{port}"
    return {"l4": models, "backend_tls": backend_tls, "https_share_socket": share,
            "extauth": extauth.ExtAuthWiring(settings, files), "uses_resolvers": uses_resolvers,
            "resolvers_name": endpoints.RESOLVERS,
            "resources": resources_of(state)}
