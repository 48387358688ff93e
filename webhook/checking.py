"""``routegate check`` and ``routegate render``: the Gate offline, on manifests, for CI.

All inputs are applied together on top of the state (``--state`` files, or a live cluster with
``--kubeconfig``), as ``kubectl apply -f DIR`` would, and each input object is judged as the
admission subject against the state holding all the others. An AdmissionReview file is a replay of
one admission request: its ``request.object`` is judged against that state plus its ``oldObject``.

The run keeps going past bad inputs (an unparseable file, a non-Kubernetes document, the same object
twice) and exits 2 at the end: input errors outrank denials.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from haproxy_check.check import binaries, scratches
from haproxy_check.render import gcpause
from haproxy_check.render.rendering import Renderer
from validators.changes import Change, Operation
from validators.findings import Severity, denies
from validators.objects import KINDS, REVIEWED_KINDS, Obj, Ref, ref_of
from validators.states import MemoryState, Overlay, State
from webhook import inputs, plans, reports, ruleworkers
from webhook.assembly import GateSettings, SetupError, build_gate, load_state, with_namespace
from webhook.gates import HAPROXY_REJECTED, Gate
from webhook.positions import Positions
from webhook.verdicts import Decision, Verdict

EXIT_OK, EXIT_DENIED, EXIT_INPUT = 0, 1, 2
COMBINED_CHECK_SECONDS_PER_OBJECT = 0.002  # the least haproxy -c deadline per input object
CLUSTER = "<cluster>"


def settings_from(args: argparse.Namespace) -> GateSettings:
    return GateSettings(
        crds=args.crds, config=args.config, strict=args.strict, templates=args.templates,
        scratch_dir=args.scratch_dir, check_timeout=args.check_timeout,
        check_concurrency=args.check_concurrency, note_budget=args.reload_note_budget,
        dataplane_version=plans.dataplane_version(getattr(args, "dataplane_version", None)),
        gateway_classes=getattr(args, "gateway_classes", ()), controller_names=getattr(args, "controller_names", ()),
    )


def _combine(base: list[Obj], located: list[tuple[Ref, inputs.Located]]) -> dict[Ref, Obj]:
    combined: dict[Ref, Obj] = {ref_of(o): o for o in base}
    for ref, item in located:
        combined[ref] = item.obj
    return combined


def _read_inputs(args: argparse.Namespace) -> inputs.Loaded:
    loaded = inputs.read(args.files or [], keep_texts=True, follow_symlinks=args.follow_symlinks)
    # Copied only where a namespace is filled in: replacing 20,000 records that stay the same took a tenth
    # of a second of a large check's start.
    loaded.objects = [i if (obj := with_namespace(i.obj)) is i.obj else replace(i, obj=obj) for i in loaded.objects]
    return loaded


def _one_shot(gate: Gate) -> Gate:
    """The gate of a run that renders big states and exits: its renders pause cyclic collection."""
    if isinstance(gate.renderer, Renderer):
        gate.renderer.pause_collection = True
    return gate


def _is_review(item: inputs.Located) -> bool:
    return item.prefix[:2] == ("request", "object")


def _duplicates(manifests: list[inputs.Located], positions: Positions) -> list[inputs.Problem]:
    """Every copy after the first of one kind/namespace/name: kubectl would apply only the last, so a
    per-file deploy could ship a copy that nobody judged. Each copy is still judged."""
    first: dict[Ref, inputs.Located] = {}
    problems: list[inputs.Problem] = []
    for item in manifests:
        ref = item.ref
        if ref in first:
            seen = first[ref]
            line, column = positions.of(item)
            seen_line, seen_column = positions.of(seen)
            problems.append(inputs.Problem(item.file, line, column, (
                f"{ref} is also defined at {seen.file}:{seen_line}:{seen_column}: the same object twice "
                "(kubectl applies only the last copy); each copy is judged")))
        else:
            first[ref] = item
    return problems


async def _live_state(args: argparse.Namespace) -> tuple[State, list[Obj]]:
    """The cluster's current objects, listed once (read-only), then the watches are closed."""
    from webhook.cluster import ClusterConfigError, ClusterState, load_api_client

    try:
        api = await load_api_client(args.kubeconfig, context=args.context)
    except ClusterConfigError as exc:
        raise SetupError(f"--kubeconfig {args.kubeconfig}: {exc}") from None
    if api is None:  # pragma: no cover - a kubeconfig path always gives a client or an error
        raise SetupError(f"--kubeconfig {args.kubeconfig}: no usable cluster configuration")
    cluster = ClusterState(api)
    task = asyncio.ensure_future(cluster.run())
    try:
        async with asyncio.timeout(args.sync_timeout):
            while not cluster.ready:
                if task.done():
                    raise SetupError(f"--kubeconfig {args.kubeconfig}: cannot read the cluster: "
                                     f"{task.exception() or 'stopped'}")
                await asyncio.sleep(0.05)
    except TimeoutError:
        problems = {k: v.get("lastError") for k, v in cluster.status()["kinds"].items() if v.get("lastError")}
        raise SetupError(f"--kubeconfig {args.kubeconfig}: the cluster's objects could not be listed within "
                         f"{args.sync_timeout:g}s{': ' + str(problems) if problems else ''}") from None
    finally:
        snapshot = cluster.snapshot()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await api.close()
    objects = [o for kind in KINDS for o in snapshot.list(kind)]
    return MemoryState(objects, version="cluster"), objects


async def _base_state(args: argparse.Namespace) -> tuple[State, list[Obj]]:
    if getattr(args, "kubeconfig", None):
        if args.state:
            raise SetupError("--state and --kubeconfig are two sources of the cluster state: give one")
        return await _live_state(args)
    return load_state(args.state)


@contextlib.asynccontextmanager
async def _progress(count: int) -> AsyncIterator[None]:
    """``judging N objects... 12s`` on stderr, refreshed every second, only on a terminal."""
    if not sys.stderr.isatty() or count < 2:
        yield
        return
    started = time.monotonic()

    async def tick() -> None:
        while True:
            print(f"\rroutegate: judging {count} objects... {time.monotonic() - started:.0f}s",
                  end="", file=sys.stderr, flush=True)
            await asyncio.sleep(1)

    ticker = asyncio.ensure_future(tick())
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        print("\r\x1b[K", end="", file=sys.stderr, flush=True)


async def judge(gate: Gate, base: State, base_objects: list[Obj], located: Sequence[inputs.Located],
                skip: frozenset[str] = frozenset(), *, workers: int = 0,
                with_status: bool = True, traffic: bool = True) -> list[tuple[inputs.Located, Verdict]]:
    """Each input's verdict, in input order. Manifests are applied together (the last copy of a
    duplicate wins the state, earlier copies are judged one by one); reviews are judged alone.
    ``with_status``: False when the report shows no statuses (the batch then computes none).
    ``workers``: processes for the per-object rules of the inputs applied together (``Gate.review_all``).
    ``traffic``: whether the inputs applied together get their traffic diff when the base state is
    empty (every request they serve is then a gain, which only --traffic and json/yaml show); against
    stored objects they always do."""
    refs = [i.ref for i in located]
    manifests = [(ref, i) for ref, i in zip(refs, located, strict=True) if not _is_review(i)]
    everything = MemoryState.keyed(_combine(base_objects, manifests), version="check")
    last = dict(manifests)
    batch: list[tuple[int, Change, State]] = []
    alone: list[tuple[int, Change, State]] = []
    stored: list[tuple[int, inputs.Located]] = []
    for n, (ref, item) in enumerate(zip(refs, located, strict=True)):
        if item.obj.get("kind") in skip:
            continue
        if item.file == CLUSTER:
            stored.append((n, item))  # --all: audited the way the reconcile loop audits (below)
            continue
        if _is_review(item):
            state: State = everything
            if item.old is not None:
                state = Overlay(everything, Change(Operation.UPDATE, with_namespace(item.old), None))
            elif everything.get(ref.kind, ref.namespace, ref.name) is not None:
                state = Overlay(everything, Change(Operation.DELETE, None, item.obj))
            change = Change(Operation.UPDATE if item.old is not None else Operation.CREATE, item.obj,
                            with_namespace(item.old) if item.old is not None else None, dry_run=True)
            alone.append((n, change, state))
            continue
        old = base.get(ref.kind, ref.namespace, ref.name)
        change = Change.of(ref, Operation.UPDATE if old is not None else Operation.CREATE, item.obj, old,
                           dry_run=True)
        # Indexed once; each input is judged against all the others: that state with the input taken out
        # (an Overlay splices one object out of the sorted lists instead of re-indexing every object).
        target = batch if last[ref] is item else alone
        target.append((n, change, Overlay(everything, Change.of(ref, Operation.DELETE, None, item.obj))))
    verdicts: dict[int, Verdict] = {}
    async with _progress(len(batch) + len(alone)):
        if batch:
            # The batch's render leaves millions of acyclic values behind (the renderer's per-route cache,
            # the verdicts) that live until the run ends: collecting while they pile up, and the full
            # collections after, rescanned them for nothing (about three seconds of a 10,000-route check).
            # They go out of the collector's sight as the loaded state did (``_check``).
            with gcpause.paused():
                judged = await gate.review_all([(c, s) for _, c, s in batch], combined=everything,
                                               workers=workers, with_status=with_status,
                                               before=base if traffic or base_objects else None)
                gcpause.keep_lifelong()
            verdicts.update((n, v) for (n, _, _), v in zip(batch, judged, strict=True))
        for n, change, state in alone:
            verdicts[n] = await gate.review(change, state=state, reload_note=False)
        if stored:
            verdicts.update(await _audited(gate, everything, stored))
    return _attributed([(located[n], verdicts[n]) for n in sorted(verdicts)])


async def _audited(gate: Gate, everything: State, stored: list[tuple[int, inputs.Located]]) -> dict[int, Verdict]:
    """``--all``: the stored objects judged by the reconcile loop's own steps (``Reconciler.judge``: the
    audit of every object with the admission rules, the seed's leave-outs, one render of the whole state
    and its haproxy -c, alerts attributed to their objects), so both report the same findings."""
    from webhook.reconcile import Reconciler

    outcome = await Reconciler(gate, None).judge(everything)
    faults = {f.ref: f.findings for f in outcome.faults}
    out: dict[int, Verdict] = {}
    for n, item in stored:
        ref = item.ref
        found = faults.get(ref, ())
        decision = Decision.DENY if denies(found) else Decision.ALLOW
        out[n] = Verdict(decision, ref, findings=found, haproxy=gate.binary)
    return out


def _attributed(results: list[tuple[inputs.Located, Verdict]]) -> list[tuple[inputs.Located, Verdict]]:
    """Inputs applied together fail together: a Gateway that lets a broken route attach fails
    ``haproxy -c`` on the route's line. When every reason an input is denied is a rejected line that
    comes from another input that is itself denied, the fault (and the fix) is that one: this input is
    reported allowed, with a note naming it, so that CI points at one object, not at everything near it."""
    denied = {v.ref for _, v in results if v.decision is Decision.DENY}
    out: list[tuple[inputs.Located, Verdict]] = []
    for item, v in results:
        owners = {a.origin.ref for a in v.alerts if a.origin is not None}
        if (v.decision is Decision.DENY and v.alerts and all(a.origin is not None for a in v.alerts)
                and v.ref not in owners and owners <= denied
                and all(f.code == HAPROXY_REJECTED for f in v.denials)):
            names = ", ".join(sorted(str(o) for o in owners))
            kept = tuple(f for f in v.findings if f.severity is not Severity.DENY)
            v = replace(v, decision=Decision.ALLOW, findings=kept, alerts=(),
                        notes=(*v.notes, f"haproxy -c fails on a line of {names}, denied in this run; "
                                         "this object is allowed once that one is fixed"))
        out.append((item, v))
    return out


def _cluster_items(base_objects: list[Obj], files: list[inputs.Located]) -> list[inputs.Located]:
    """``--all``: every stored object of a reviewed kind that no input file replaces."""
    replaced = {ref_of(i.obj) for i in files}
    return [inputs.Located(dict(o), CLUSTER, 0, 0) for o in base_objects
            if o.get("kind") in REVIEWED_KINDS and ref_of(o) not in replaced]


async def check(args: argparse.Namespace) -> int:
    import structlog

    from webhook import logs

    # stdout is the report: library logs go to stderr, and only problems. Scoped to this run, so a
    # caller in the same process (tests, a tool embedding the CLI) keeps its own logging set-up.
    previous = structlog.get_config()
    logs.configure("warning")
    try:
        return await _check(args)
    finally:
        gcpause.release_lifelong()  # a caller in the same process gets its objects collected again
        structlog.configure(**previous)


async def _check(args: argparse.Namespace) -> int:
    if not args.files and not args.all:
        raise SetupError("check needs -f PATH (files, directories or - for stdin), or --kubeconfig --all")
    if (args.all or args.context) and not args.kubeconfig:
        raise SetupError(f"{'--all' if args.all else '--context'} needs --kubeconfig")
    binary = await binaries.detect(args.haproxy)
    # Loading allocates the objects that live until the run ends, and no cycles to find: collections while
    # they pile up rescan them over and over (a fifth of the load of 10,000 routes), so there are none.
    with gcpause.paused():
        loaded = _read_inputs(args)
        positions = Positions(loaded.texts, loaded.members)
        manifests = [i for i in loaded.objects if not _is_review(i)]
        problems = [*loaded.problems, *_duplicates(manifests, positions)]
        base, base_objects = await _base_state(args)
        # The state lives until the run ends: out of the collector's sight, later collections stop
        # rescanning it (a few % of a 1,000-route check, more with more objects), and forked rule workers
        # share its pages instead of copying them as the collector touches them.
        gcpause.keep_lifelong()
    located = [*loaded.objects, *(_cluster_items(base_objects, loaded.objects) if args.all else [])]
    skip = frozenset().union(*args.skip_kinds)
    if not located and not problems:
        problems.append(inputs.Problem(" ".join(args.files or [CLUSTER]), 0, 0,
                                       "no Kubernetes objects found (empty input)"))
    # The inputs are checked together first, in one haproxy -c of a configuration that grows with them
    # (3-4 s for 10,000 routes on 2 cores). Under a review's deadline that check times out on a busy
    # machine, and N one-by-one reviews follow: the deadline grows with the inputs instead.
    timeout = max(args.check_timeout, COMBINED_CHECK_SECONDS_PER_OBJECT * len(located))
    gate = _one_shot(build_gate(binary, replace(settings_from(args), check_timeout=timeout)))
    workers = ruleworkers.worker_count() if args.jobs is None else args.jobs
    # Only the json and yaml reports show each object's status.
    with_status = args.output in reports.WITH_STATUS
    traffic = bool(getattr(args, "traffic", False)) or args.output in reports.WITH_STATUS
    results = (await judge(gate, base, base_objects, located, skip, workers=workers, with_status=with_status,
                           traffic=traffic) if located else [])
    report = reports.Report(problems=sorted(problems, key=lambda p: (p.file, p.line, p.column)),
                            warnings=[*loaded.warnings, *_cel_warning()], haproxy=binary, version=_version(),
                            traffic=bool(getattr(args, "traffic", False)))
    for item, verdict in results:
        line, column = positions.of(item) if item.file != CLUSTER else (0, 0)

        def where(path: tuple[Any, ...], item: inputs.Located = item) -> tuple[int, int]:
            return positions.of(item, path) if item.file != CLUSTER else (0, 0)

        report.results.append(reports.Judged(item, verdict, line, column, reports.placed(verdict.findings, where)))
    from validators import rules

    sys.stdout.write(reports.render(report, args.output, colour=_colour(), rule_infos=rules.table()))
    code = EXIT_INPUT if report.problems else EXIT_OK if all(v.allowed for _, v in results) else EXIT_DENIED
    if getattr(args, "exit_when_done", False):
        exit_now(code)
    return code


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once its output is out, its rule workers have ended and its scratch
    directories are gone, without tearing down what the run built: freeing the state, its indexes and
    the render object by object, and the interpreter's last collection over all of them, took about a
    second of a 10,000-route check, for a process about to end anyway. Only for the console entry point
    (``cli.main(exit_when_done=True)``): a caller in the same process gets the code returned."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `routegate check | head`: the reader is gone, which is not an error
        code = EXIT_OK
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    ruleworkers.end_all()
    scratches.wait_for_removals()
    os._exit(code)


def _cel_warning() -> list[str]:
    from validators.cel import celchecks

    if celchecks.engine_name() != "none":
        return []
    return ["no CEL engine could be loaded, so the CRDs' x-kubernetes-validations rules are not checked "
            "(each is a RG0301 warning): install common-expression-language or cel-expr-python"]


def _colour() -> bool:
    from webhook.flags import colour_wanted

    return colour_wanted(sys.stdout)


def _version() -> str:
    from webhook.cli import routegate_version

    return routegate_version()


async def render(args: argparse.Namespace) -> int:
    from validators.crossobject import statuses
    from webhook import outdirs

    binary = await binaries.detect(args.haproxy)
    outdir = outdirs.prepare(args.out, force=args.force)
    loaded = _read_inputs(args)
    for warning in loaded.warnings:
        print(f"warning: {reports.clean(warning)}", file=sys.stderr)
    if loaded.problems:
        for problem in loaded.problems:
            print(f"{reports.clean(problem)}", file=sys.stderr)
        return EXIT_INPUT
    _, base_objects = load_state(args.state)
    gate = _one_shot(build_gate(binary, settings_from(args)))
    keyed = [(i.ref, i) for i in loaded.objects]
    state = gate.scope.view(MemoryState.keyed(_combine(base_objects, keyed), version="render"))
    previous = plans.load_description(args.previous) if args.previous else None
    result = gate.renderer.render(state, subject=None, previous=previous)
    import json

    files = {**result.files,
             "description.json": (json.dumps(result.description.as_dict(), indent=2) + "\n").encode(),
             "statuses.json": (json.dumps(statuses.all_statuses(state), indent=2, sort_keys=True) + "\n").encode()}
    await asyncio.to_thread(outdirs.write, outdir, files, force=args.force)
    for finding in result.findings:
        print(f"warning: {reports.clean(finding.about) + ': ' if finding.about else ''}"
              f"{reports.clean(finding.field) + ': ' if finding.field else ''}{reports.clean(finding.message)}",
              file=sys.stderr)
    print(f"wrote {len(files)} files to {reports.clean(args.out)}")
    return EXIT_OK
