"""``routegate serve``: wire certificates, state, the Gate and the two HTTP apps, then run until told
to stop, shutting down in aiohttp's documented order.

SIGTERM (Kubernetes), SIGUSR1 (the STOPSIGNAL of the official haproxy image this one is built on) and
SIGINT all stop gracefully: the listeners close, reviews in flight finish (bounded by the review
timeout plus a margin), background tasks stop, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import structlog
from aiohttp import web

from haproxy_check.check import binaries, sandboxes
from haproxy_check.render import gcpause
from validators.checks import Checks
from webhook import logs, metrics
from webhook.gate import fullchecks, ruleworkers
from webhook.gate.assembly import build_gate, load_crd_documents
from webhook.process import malloctuning
from webhook.process.lifecycle import cancel_all, on_stop_signals, split_listen, until_stopped
from webhook.server import admission, connections, liveschemas, servers, warming
from webhook.setuperrors import SetupError
from webhook.sources import StateSource, StaticSource
from webhook.statesources import state_source

log = structlog.get_logger("routegate")
DRAIN_MARGIN = 2.0  # seconds past the review timeout that a review in flight may take to be answered


@runtime_checkable
class ClusterSource(StateSource, liveschemas.CrdSource, Protocol):
    """A state source that also serves CRDs (the watching ClusterState)."""


async def _certificates(args: argparse.Namespace, api: Any, tasks: list[Awaitable[Any]]) -> Any:
    """The serving pair: given files, a self-signed pair made once, or (self mode) the Secret's pair."""
    from certs import bootstrap, reloading

    if bool(args.tls_cert) != bool(args.tls_key):
        raise SetupError("--tls-cert and --tls-key go together")
    cert_dir = Path(args.cert_dir) if args.cert_dir else bootstrap.default_cert_dir()
    if args.tls_cert:
        cert, key = Path(args.tls_cert), Path(args.tls_key)
    elif args.cert_mode == "self":
        cert, key = cert_dir / "tls.crt", cert_dir / "tls.key"
    else:
        paths = _self_signed(cert_dir, args)
        cert, key = paths.cert, paths.key
        print(f"routegate: serving certificate signed by the CA in {paths.ca}", file=sys.stderr, flush=True)
    reloader = reloading.CertReloader(cert, key)
    if args.cert_mode == "self":
        if api is None:
            raise SetupError("--cert-mode self needs a cluster (--kubeconfig or in-cluster config)")
        from certs import selfmanaged

        manager = selfmanaged.SelfManaged(
            api, namespace=args.namespace, secret_name=f"{args.service}-tls", webhook_name=args.webhook_name,
            service=args.service, out_dir=cert.parent, identity=socket.gethostname(),
            serving=lambda: reloader.fingerprint, extra_dns_names=tuple(args.dns_name),
        )
        running = asyncio.ensure_future(manager.run())
        tasks.append(running)
        if not (cert.exists() and key.exists()):
            # The first pair comes from the Secret the leader keeps; wait for it before serving.
            async with asyncio.timeout(120):
                await manager.wait_ready()
    try:
        reloader.load()
    except reloading.CertLoadError as exc:
        flag = "--tls-cert/--tls-key" if args.tls_cert else f"--cert-dir {cert_dir}"
        raise SetupError(f"{flag}: {exc}") from None
    tasks.append(reloader.run())
    return reloader


def connection_limits(args: argparse.Namespace) -> connections.ConnectionLimits:
    for flag in ("max_connections", "header_timeout", "body_timeout", "idle_timeout"):
        if getattr(args, flag) <= 0:
            raise SetupError(f"--{flag.replace('_', '-')} must be positive")
    return connections.ConnectionLimits(max_connections=args.max_connections, header_timeout=args.header_timeout,
                                        body_timeout=args.body_timeout, idle_timeout=args.idle_timeout)


def require_client_certificates(context: ssl.SSLContext, ca_file: str) -> None:
    """Only clients with a certificate signed by ``ca_file`` complete the handshake (the apiserver,
    configured through its AdmissionConfiguration kubeconfig: docs/DEPLOY.md)."""
    try:
        context.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise SetupError(f"--client-ca {ca_file}: {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    log.info("client certificates required", ca=ca_file)


def drain_bound(args: argparse.Namespace) -> float:
    """How long shutdown waits for reviews in flight: one review's deadline plus a margin."""
    return float(args.review_timeout) + DRAIN_MARGIN


def _self_signed(cert_dir: Path, args: argparse.Namespace) -> Any:
    """The generated pair, or a SetupError naming the directory and what to do (a read-only $HOME in a
    container, a --cert-dir under a file)."""
    from certs import bootstrap, generation

    try:
        return bootstrap.ensure_self_signed(cert_dir, dns_names=args.dns_name)
    except generation.CertError as exc:
        raise SetupError(f"--dns-name: {exc}") from None
    except OSError as exc:
        where = f"--cert-dir {cert_dir}" if args.cert_dir else \
            f"the default certificate directory {cert_dir} (from $XDG_CACHE_HOME or $HOME)"
        raise SetupError(f"{where}: cannot write there ({exc.strerror or exc}); pass --cert-dir DIR with a "
                         "writable directory, or --tls-cert/--tls-key with an existing pair") from None


async def _listen(site: web.BaseSite, flag: str, value: str) -> None:
    try:
        await site.start()
    except OSError as exc:
        raise SetupError(f"{flag} {value}: cannot listen ({exc.strerror or exc}); "
                         f"choose another address with {flag} HOST:PORT") from None


def freeze_lifelong(source: StateSource) -> bool:
    """With a state that never changes (files), move everything built so far out of the collector's
    sight; whether it did. The state, its indexes and the modules live until the process ends: a full
    collection no longer rescans them (~2 million objects at 10,000 routes: half a second, on whichever
    review happens to cross its threshold), and forked rule workers share their pages instead of
    copying them as the collector touches them. A cluster's state changes version by version: objects
    of a version replaced later must stay collectable, so it is not frozen."""
    if not isinstance(source, StaticSource):
        return False
    gcpause.keep_lifelong()
    return True


async def serve(args: argparse.Namespace) -> int:
    with sandboxes.child_waits_on_the_loop():  # no thread started per haproxy -c (Python 3.11)
        return await _serve(args)


async def _serve(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    malloctuning.return_large_blocks()  # before the state's files are read: see the module
    host, port = split_listen(args.listen, "--listen")
    metrics_host, metrics_port = split_listen(args.metrics_listen, "--metrics-listen")
    binary = await binaries.detect(args.haproxy)
    metrics.haproxy_info(binary)
    log.info("haproxy", path=binary.path, version=binary.version)
    tasks: list[Awaitable[Any]] = []
    source, api = await state_source(args, tasks)
    reloader = await _certificates(args, api, tasks)
    from webhook.reconcile import reconciling

    settings = reconciling.gate_settings(args)
    # A policy that cannot be used leaves the webhook running but not ready, every review answered
    # "could not decide" (so failurePolicy applies) with the reason on /readyz, rather than a crash loop
    # whose reason only the logs hold; a rollout of the fixed --config makes it ready.
    policy_errors: list[str] = []
    # (serve --reconcile promotes too: it starts only with every policy usable, as reconcile does)
    gate = build_gate(binary, settings, policy_errors=None if getattr(args, "reconcile", False) else policy_errors)
    unusable = f"cannot judge as configured: {policy_errors[0]}" if policy_errors else ""
    if unusable:
        log.error("not ready: a policy of --config cannot be used", reason=policy_errors[0])
    # Which isolation keeps haproxy -c off the network (a network namespace, or init-addr none in the
    # checked copy where namespaces cannot be made): /readyz shows it too.
    log.info("haproxy -c isolation", isolation=getattr(gate.checker, "isolation", "unknown"))
    log.info("gateway scope", judging=gate.scope.describe())
    # the rules under any admission policies (webhook.gate.policyloading) hold the schemas
    checks = getattr(gate.rules, "inner", gate.rules)
    if isinstance(source, ClusterSource) and isinstance(checks, Checks):
        tasks.append(liveschemas.follow(source, checks, files=load_crd_documents(args.crds)))
    limits = connection_limits(args)
    # Every connection under the cap may carry a review in flight: the queue holds as many, so a
    # review is refused "busy" only past the cap (webhook.server.connections), never for want of queue room.
    queue = admission.Batcher(gate, max_waiting=max(admission.MAX_WAITING, limits.max_connections))
    gate.review_workers = ruleworkers.worker_count()  # a batch's rules off this process's GIL (see there)
    tasks.append(warming.keep_warm(queue, source))
    if getattr(args, "full_check_debounce", 0) > 0:
        full_check = fullchecks.FullChecker(gate, source, debounce=args.full_check_debounce,
                                            template_dirs=settings.templates,
                                            busy=lambda: queue.running + queue.waiting > 0)
        full_check.attach()
        tasks.append(full_check.run())
    if getattr(args, "reconcile", False):
        tasks.append(reconciling.alongside(gate, source, api, args))
    elif getattr(args, "dataplane_state", ""):
        from webhook.server.dataplanestates import DataplaneState

        tasks.append(DataplaneState(args.dataplane_state, gate.loaded).run())
    if gate.delta:  # a gate that checks the whole state, not closures, has no closure index to build
        tasks.append(warming.follow(gate, source))
    if args.client_ca:
        require_client_certificates(reloader.context, args.client_ca)
    app = servers.make_app(gate, source, certs=reloader, review_timeout=args.review_timeout, queue=queue,
                           body_timeout=args.body_timeout, unusable=unusable)
    needed, available = connections.descriptors_for(limits)
    if available < needed:
        log.warning("file descriptor limit below the connection limits: past it connections fail to open",
                    needed=needed, limit=available, max_connections=limits.max_connections)
    guards = connections.Guards(limits)
    guards.install(app)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=drain_bound(args),
                           **connections.runner_options(guards.limits), **servers.SERVER_OPTIONS)
    metrics_app = servers.make_metrics_app()
    servers.add_probes(metrics_app, app)
    metrics_runner = web.AppRunner(metrics_app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await metrics_runner.setup()
    if gate.delta and source.ready:
        # A state that is there from the start (files) is indexed before the first review can arrive,
        # so no review waits for it; a cluster's first state is warmed by the task once synced.
        await asyncio.to_thread(warming.build_index, gate, source)
    freeze_lifelong(source)
    background = [asyncio.ensure_future(t) for t in tasks]
    stop = on_stop_signals()
    try:
        await _listen(connections.GuardedSite(runner, host, port, guards=guards, ssl_context=reloader.context),
                      "--listen", args.listen)
        await _listen(web.TCPSite(metrics_runner, metrics_host, metrics_port), "--metrics-listen",
                      args.metrics_listen)
        log.info("listening", url=f"https://{host}:{port}/validate", metrics=f"http://{metrics_host}:{metrics_port}/metrics")
        print(f"routegate: listening on https://{host}:{port}/validate", file=sys.stderr, flush=True)
        if await until_stopped(stop, background):
            return 1
    except OSError as exc:
        log.error("cannot listen", error=str(exc))
        return 2
    finally:
        # Drain first (the listener closes at once, reviews in flight are answered), then stop the
        # background tasks that reviews may still read from.
        await runner.cleanup()
        await metrics_runner.cleanup()
        await cancel_all(background)
        ruleworkers.close_kept()  # the review worker kept for the last state version ends once idle
        if api is not None:
            await api.close()
    log.info("stopped")
    return 0
