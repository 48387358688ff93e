"""``routegate reconcile`` (and ``serve --reconcile``): follow the state, promote what the Gate passes.

The command wires a state source (``--kubeconfig``/in-cluster watches, or ``--state DIR`` polled for
changes), the same Gate ``serve`` builds, a Promoter over ``--output-dir``, Warning Events when a
cluster is there, and a plain-HTTP port with ``/metrics``, ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Awaitable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from haproxy_check.check import binaries
from haproxy_check.runtime.promotion import Promoter
from validators.objects import dig
from webhook import logs, metrics
from webhook.gate.assembly import GateSettings, build_gate
from webhook.gate.gates import Gate
from webhook.gateflags import settings_from
from webhook.process import malloctuning
from webhook.reconcile import following, shrinkguard
from webhook.reconcile.filesources import FileSource
from webhook.reconcile.leaveouts import Treatment
from webhook.reconcile.promotedmemory import PromotedMemory
from webhook.reconcile.reconciler import OnOutcome, OnPromoted, Reconciler, Result
from webhook.reconcile.reconcileruntime import (
    PUBLISHED,
    TRIGGER_DIR,
    CommandReload,
    PidfileReload,
    Reload,
    RuntimeApplier,
    TriggerReload,
)
from webhook.reconcile.statusshapes import BUNDLE_VERSION
from webhook.reconcile.statuswriter import OutcomeStatuses, StatusWriter, together
from webhook.server import servers
from webhook.setuperrors import SetupError
from webhook.sources import StateSource

log = structlog.get_logger("routegate.reconcile")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

def gate_settings(args: argparse.Namespace) -> GateSettings:
    """The Gate's settings, rendering the global section a running data plane needs."""
    settings = settings_from(args)
    socket_path = getattr(args, "stats_socket", "") if getattr(args, "reconcile", True) else ""
    if socket_path:
        settings = replace(settings, render={**settings.render, "stats_socket": socket_path})
    return settings


def reconciler_for(gate: Gate, args: argparse.Namespace, api: Any, source: StateSource | None = None) -> Reconciler:
    if not args.output_dir:
        raise SetupError("--reconcile needs --output-dir")
    recorder = None
    if api is not None:
        from webhook.reconcile.events import EventRecorder

        recorder = EventRecorder(api, host=socket.gethostname())
    promoter = Promoter(Path(args.output_dir), keep=max(args.keep, 2))  # the previous version stays to plan from
    memory = PromotedMemory()  # what is promoted reaches the hooks in memory, not read back from the files
    applier = runtime_applier(gate, promoter, args, memory) if getattr(args, "runtime_socket", "") else None
    hooks: list[OnPromoted] = [applier] if applier is not None else []
    outcome_hooks: list[OnOutcome] = ([status_hook(gate, promoter, args, api, applier, source, memory)]
                                      if api is not None else [])
    if applier is not None:  # a deferred reload's version is Programmed once it is signalled
        applier.after_deferred += [hook.refresh for hook in outcome_hooks if isinstance(hook, OutcomeStatuses)]
    limits = shrinkguard.Limits(share=getattr(args, "shrink_limit", 50.0) / 100,
                                minimum=getattr(args, "shrink_minimum", shrinkguard.DEFAULT_MINIMUM),
                                allow=getattr(args, "allow_mass_delete", False))
    # last: once the run's transients (render, description.json, plans) are freed (webhook.process.malloctuning)
    outcome_hooks.append(_give_back)
    return Reconciler(gate, promoter, recorder=recorder, on_promoted=hooks, shrink=limits,
                      on_outcome=outcome_hooks, memory=memory)


async def _give_back(outcome: object, state: object) -> None:
    """The memory a run freed, returned to the system (in a thread of its own: the next run does not wait)."""
    malloctuning.give_back_soon()


def status_hook(gate: Gate, promoter: Promoter, args: argparse.Namespace, api: Any,
                applier: RuntimeApplier | None, source: StateSource | None = None,
                memory: PromotedMemory | None = None) -> OutcomeStatuses:
    """The Gateway API statuses of what is promoted, written by this process (the one that promotes)."""
    writer = StatusWriter(api, rate=getattr(args, "status_rate", 20))
    elector = None
    lease = getattr(args, "status_lease", "routegate-statuses")
    if lease:
        from certs.leaderelection import Elector

        namespace = getattr(args, "lease_namespace", "") or own_namespace()
        elector = Elector(api, namespace, lease, socket.gethostname())
        log.info("statuses written by the holder of a Lease", lease=f"{namespace}/{lease}",
                 identity=elector.identity)

    def dataplane(version: str) -> bool:
        if applier is None:
            return True  # promotion is the load: the reload wrapper follows the ..data link
        last = applier.last  # Programmed only once the running HAProxy has it (runtime or reloaded)
        return last is not None and last.version == version and not last.error and not last.deferred

    return OutcomeStatuses(writer, gate.scope, promoter.output, dataplane=dataplane,
                           addresses=getattr(args, "gateway_addresses", ()), elector=elector,
                           bundle_version=lambda: bundle_version(source), memory=memory)


def bundle_version(source: StateSource | None) -> str | None:
    """The bundle-version annotation of the cluster's gatewayclasses CRD (None: no cluster, no CRD access,
    or no annotation)."""
    documents = getattr(source, "crd_documents", None)
    if documents is None:
        return None
    for crd in documents():
        if dig(crd, "metadata", "name") == "gatewayclasses.gateway.networking.k8s.io":
            value = dig(crd, "metadata", "annotations", BUNDLE_VERSION)
            return value if isinstance(value, str) else None
    return None


def own_namespace() -> str:
    """The pod's namespace (POD_NAMESPACE, else the service account's), else routegate-system."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "routegate-system"
    except OSError:
        return "routegate-system"


def status_writers(reconciler: Reconciler) -> list[OutcomeStatuses]:
    """The status hooks of a reconciler (their tasks run beside its loop)."""
    return [hook for hook in reconciler.on_outcome if isinstance(hook, OutcomeStatuses)]


def runtime_applier(gate: Gate, promoter: Promoter, args: argparse.Namespace,
                    memory: PromotedMemory | None = None) -> RuntimeApplier:
    """``--runtime-socket``: plan and apply each promotion for the data plane's version (``--dataplane-version``,
    else the checker binary's); reload by ``--reload-pidfile``, ``--reload-command`` or the trigger file."""
    reload: Reload
    if getattr(args, "reload_pidfile", ""):
        reload = PidfileReload(Path(args.reload_pidfile))
    elif getattr(args, "reload_command", ""):
        try:
            reload = CommandReload.parse(args.reload_command)
        except ValueError as exc:
            raise SetupError(f"--reload-command: {exc}") from exc
    else:
        reload = TriggerReload(promoter.output)
        try:  # there before the first reload request: a wrapper may start watching it right away
            (promoter.output / TRIGGER_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SetupError(f"--output-dir {promoter.output}: {exc.strerror or exc}") from exc
    version = gate.dataplane_version or gate.binary.version_tuple
    log.info("runtime updates on", socket=args.runtime_socket, dataplane=".".join(map(str, version)),
             reload=reload.describe())
    return RuntimeApplier(promoter, args.runtime_socket, dataplane_version=version, reload=reload,
                          publish=gate.loaded.publish,  # serve --reconcile: predictions plan against it
                          memory=memory, min_reload_interval=getattr(args, "min_reload_interval", 0.0))


def alongside(gate: Gate, source: StateSource, api: Any, args: argparse.Namespace) -> Awaitable[None]:
    """The loop ``serve --reconcile`` runs next to the webhook, on the webhook's own state and Gate."""
    reconciler = reconciler_for(gate, args, api, source)
    return _with_writers(reconciler, following.follow(source, reconciler, debounce=args.debounce,
                                                      max_wait=args.max_wait))


async def _with_writers(reconciler: Reconciler, loop: Coroutine[Any, Any, None]) -> None:
    """The reconcile loop and its status writers, ended together."""
    await together(loop, *(statuses.run() for statuses in status_writers(reconciler)))


async def _source(args: argparse.Namespace, tasks: list[Awaitable[Any]]) -> tuple[StateSource, Any]:
    if args.state and not args.kubeconfig:
        files = FileSource(args.state)
        await asyncio.to_thread(files.load)
        if not files.ready:
            raise SetupError(f"--state {args.state}: {files.status().get('error', 'cannot be read')}")
        tasks.append(files.run())
        return files, None
    from webhook.statesources import state_source

    return await state_source(args, tasks)


async def first_sync(source: StateSource, timeout: float) -> str:
    """Wait until ``source`` holds a complete first sync of every watched kind: "" then, else why not."""
    wait = getattr(source, "first_sync", None)  # a cluster's watches; files are read whole before this
    if wait is not None:
        problem = await wait(timeout)
        assert isinstance(problem, str)
        return problem
    return "" if source.ready else f"state: {source.status().get('error') or 'not ready'}"


def _health_app(reconciler: Reconciler, source: StateSource) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        live = reconciler.promoter.last_known_good() if reconciler.promoter is not None else None
        last = reconciler.last
        ready = source.ready and live is not None
        body = {"ready": ready, "state": {"ready": source.ready, **source.status()},
                "live": live.version if live else None, "dataplane": reconciler.gate.dataplane_info(),
                "last": {"result": str(last.result), "stateVersion": last.state_version} if last else None}
        return web.json_response(body, status=200 if ready else 503)

    async def dataplane(request: web.Request) -> web.Response:
        """What the data plane runs (the runtime applier's dataplane.json): serve --dataplane-state URL."""
        if reconciler.promoter is None:
            return web.json_response({"version": None})
        try:
            text = await asyncio.to_thread((reconciler.promoter.output / PUBLISHED).read_text, encoding="utf-8")
        except OSError:
            return web.json_response({"version": None})
        return web.Response(text=text, content_type="application/json")

    app = web.Application()
    app.router.add_get("/dataplane", dataplane)
    app.router.add_get("/metrics", servers.serve_metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def reconcile(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    # before any thread starts and any state is read (webhook.process.malloctuning)
    malloctuning.limit_arenas()
    malloctuning.return_large_blocks()
    from webhook.process.lifecycle import split_listen

    host, port = split_listen(args.metrics_listen, "--metrics-listen")
    binary = await binaries.detect(args.haproxy)
    metrics.haproxy_info(binary)
    tasks: list[Awaitable[Any]] = []
    source, api = await _source(args, tasks)
    gate = build_gate(binary, gate_settings(args))
    log.info("gateway scope", judging=gate.scope.describe())
    reconciler = reconciler_for(gate, args, api, source)
    if args.once:
        from webhook.process.lifecycle import cancel_all

        running = [asyncio.ensure_future(t) for t in tasks]  # the watches fill the state being waited for
        try:
            problem = await first_sync(source, args.sync_timeout)
            if problem:  # judging a state that is not all there would publish its gaps as deletions
                print(f"routegate: could not sync: {problem}", file=sys.stderr)
                return 2
            outcome = await reconciler.reconcile(source.snapshot())
            for statuses in status_writers(reconciler):
                said = await statuses.flush_once()
                if said:
                    print(f"routegate: {said}", file=sys.stderr)
        finally:
            await cancel_all(running)
            if api is not None:
                await api.close()
        print(f"routegate: {outcome.result}"
              + (f" {outcome.promoted.version}" if outcome.promoted else ""), file=sys.stderr)
        for line in outcome.rejection:
            print(f"    {line}", file=sys.stderr)
        for item in outcome.left_out:
            if item.treatment is not Treatment.PARTLY:  # isolated: its stored version broke haproxy -c
                print(f"    {item.ref}: {item.what}", file=sys.stderr)
        return 0 if outcome.result in (Result.PROMOTED, Result.UNCHANGED) else 1
    tasks.append(following.follow(source, reconciler, debounce=args.debounce, max_wait=args.max_wait))
    tasks.extend(statuses.run() for statuses in status_writers(reconciler))
    runner = web.AppRunner(_health_app(reconciler, source), access_log=None)
    await runner.setup()
    background = [asyncio.ensure_future(t) for t in tasks]
    from webhook.process.lifecycle import cancel_all, on_stop_signals, until_stopped

    stop = on_stop_signals()  # the same signals as serve, SIGUSR1 included
    try:
        await web.TCPSite(runner, host, port).start()
        print(f"routegate: reconciling into {args.output_dir}; metrics on http://{host}:{port}/metrics",
              file=sys.stderr, flush=True)
        if await until_stopped(stop, background):
            return 1
    except OSError as exc:
        log.error("cannot listen", error=str(exc))
        return 2
    finally:
        await cancel_all(background)
        await runner.cleanup()
        if api is not None:
            await api.close()
    return 0
