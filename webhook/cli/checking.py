"""``routegate check`` and ``routegate render``: the Gate offline, on manifests, for CI.

All inputs are applied together on top of the state (``--state`` files, or a live cluster found as
kubectl finds it: ``checktargets.cluster_source``), as ``kubectl apply -f DIR`` would, and each input
object is judged as the admission subject against the state holding all the others. With ``--each``
every file is its own apply set instead, judged against the state alone, as separate applies would be (a folder of
independent scenarios, such as the Gateway API project's examples). An AdmissionReview file is a replay of
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
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn

from haproxy_check.check import binaries, scratches
from haproxy_check.descriptions import Description
from haproxy_check.render import gcpause
from haproxy_check.render.rendering import Renderer
from haproxy_check.results import RenderError, RenderResult
from haproxy_check.runtime import predictions
from haproxy_check.runtime.predictions import Prediction
from validators.changes import Change, Operation
from validators.findings import Severity, denies
from validators.objects import KINDS, REVIEWED_KINDS, Obj, Ref, ref_of
from validators.states import MemoryState, Overlay, State
from webhook import gateflags
from webhook.cli import plans, progress, reports
from webhook.cli.checktargets import resolved
from webhook.gate import policyloading, ruleworkers
from webhook.gate.assembly import build_gate, load_state, with_namespace
from webhook.gate.gateparts import unchecked
from webhook.gate.gates import HAPROXY_REJECTED, Gate
from webhook.gate.verdicts import Decision, Verdict
from webhook.loading import inputs
from webhook.loading.positions import Positions
from webhook.setuperrors import SetupError

EXIT_OK, EXIT_DENIED, EXIT_INPUT = 0, 1, 2
# Inputs of these kinds, applied with the batch, get at once the verdict ``Gate.review_all`` gives them
# (``unchecked``: the gate reviews no other kind): without a change, a state without them and a place in
# the batch each. They are most inputs of a large check (a route's Services and EndpointSlices: 4 of 5
# objects), and building those was about a fifth of judging's own time at 10,000 routes. They stay in
# the combined state, which is rendered as before.
UNREVIEWED_AT_ONCE = frozenset(KINDS) - REVIEWED_KINDS
COMBINED_CHECK_SECONDS_PER_OBJECT = 0.002  # the least haproxy -c deadline per input object
CLUSTER = "<cluster>"


def _combine(base: list[Obj], located: list[tuple[Ref, inputs.Located]]) -> dict[Ref, Obj]:
    combined: dict[Ref, Obj] = {ref_of(o): o for o in base}
    for ref, item in located:
        combined[ref] = item.obj
    return combined


def _read_inputs(args: argparse.Namespace, namespace: str = "default") -> inputs.Loaded:
    """The inputs, namespaced objects without a namespace placed in ``namespace`` (kubectl's ``-n``, else
    the context's namespace, else ``default``)."""
    loaded = inputs.read(args.files or [], keep_texts=True, follow_symlinks=args.follow_symlinks)
    # Copied only where a namespace is filled in: replacing 20,000 records that stay the same took a tenth
    # of a second of a large check's start.
    loaded.objects = [i if (obj := with_namespace(i.obj, namespace)) is i.obj else replace(i, obj=obj)
                      for i in loaded.objects]
    return loaded


def _other_namespaces(manifests: list[inputs.Located], namespace: str, positions: Positions) -> list[inputs.Problem]:
    """``-n NAME`` and an input in another namespace: kubectl refuses to apply it, so check does too."""
    problems: list[inputs.Problem] = []
    for item in manifests:
        ns = item.ref.namespace
        if ns and ns != namespace:
            line, column = positions.of(item)
            problems.append(inputs.Problem(item.file, line, column, (
                f"{item.ref}: the namespace from the provided object {ns!r} does not match the namespace "
                f"{namespace!r} of -n (kubectl would refuse it); give -n {ns} or leave the object's namespace out")))
    return problems


def _one_shot(gate: Gate) -> Gate:
    """The gate of a run that renders big states and exits: its renders pause cyclic collection."""
    if isinstance(gate.renderer, Renderer):
        gate.renderer.pause_collection = True
    return gate


def _sharing_render_of(gate: Gate, state: State) -> None:
    """The gate's whole render of ``state`` (no subject, no previous description) is made once and shared.

    With a state to apply the inputs to (``--state``, the cluster), two steps render that state as it is:
    the batch's traffic diff (its before-state) and the prediction (the data plane's configuration now).
    Renders are deterministic, and their results are only read: the second asker gets the first one's
    (a render of the whole stored state, 10,000 routes or more, saved). Only the render of that one
    state object is kept, so nothing else outlives its step."""
    renderer = gate.renderer
    inner = renderer.render
    seen = gate.scope.view(state)  # the object both steps render (a scope view is kept per state)
    kept: list[RenderResult] = []
    lock = threading.Lock()

    def render(target: State, *, subject: Ref | None = None, previous: Description | None = None) -> RenderResult:
        if target is not seen or subject is not None or previous is not None:
            return inner(target, subject=subject, previous=previous)
        with lock:  # renders run in worker threads: one render of it, even if both asked at once
            if not kept:
                kept.append(inner(target))
            return kept[0]

    # On this gate's renderer object only (a one-shot gate: ``check``); a wrapper would hide its class from
    # the steps that ask which renderer it is (``fullchecks``, ``_one_shot``).
    renderer.render = render  # type: ignore[method-assign,assignment]


def _is_review(item: inputs.Located) -> bool:
    return item.prefix[:2] == ("request", "object")


def _duplicates(manifests: list[inputs.Located], positions: Positions, *, each: bool = False) -> list[inputs.Problem]:
    """Every copy after the first of one kind/namespace/name in one apply set: kubectl would apply only
    the last, so a per-file deploy could ship a copy that nobody judged. Each copy is still judged.
    Copies in two files may be two independent scenarios: the message says how to judge them so
    (``--each``), unless that is how this run judges them already."""
    first: dict[Ref, inputs.Located] = {}
    problems: list[inputs.Problem] = []
    for item in manifests:
        ref = item.ref
        if ref in first:
            seen = first[ref]
            line, column = positions.of(item)
            seen_line, seen_column = positions.of(seen)
            hint = ("; if these files are independent scenarios, use --each"
                    if seen.file != item.file and not each else "")
            problems.append(inputs.Problem(item.file, line, column, (
                f"{ref} appears in {seen.file}:{seen_line}:{seen_column} and {item.file}:{line}:{column}: "
                f"the same object twice in one apply (kubectl applies only the last copy); each copy is judged"
                f"{hint}")))
        else:
            first[ref] = item
    return problems


def _apply_sets(located: list[inputs.Located], *, each: bool) -> list[list[inputs.Located]]:
    """The inputs applied together: all of them, or with ``--each`` those of one file (``--all``'s
    stored objects are one set of their own), in input order."""
    if not each:
        return [located] if located else []
    sets: dict[str, list[inputs.Located]] = {}
    for item in located:
        sets.setdefault(item.file, []).append(item)
    return list(sets.values())


async def _connect(source: Any, args: argparse.Namespace) -> Any:
    """A ``kubeconfigs.Connection`` that answered one request, or SetupError naming the server and cause."""
    from webhook.cluster import ClusterConfigError, kubeconfigs

    try:
        conn = await kubeconfigs.load(source, args.context)
    except ClusterConfigError as exc:
        raise SetupError(str(exc)) from None
    try:
        await kubeconfigs.probe(conn)
    except kubeconfigs.Unreachable as exc:
        await conn.api.close()
        raise SetupError(str(exc)) from None
    return conn


async def _live_state(conn: Any, args: argparse.Namespace) -> tuple[State, list[Obj]]:
    """The cluster's current objects, listed once (read-only), then the watches are closed."""
    from webhook.cluster import ClusterState

    where = conn.where()
    cluster = ClusterState(conn.api)
    task = asyncio.ensure_future(cluster.run())
    try:
        async with asyncio.timeout(args.sync_timeout):
            while not cluster.ready:
                if task.done():
                    raise SetupError(f"cannot read the cluster at {where}: {task.exception() or 'stopped'}")
                await asyncio.sleep(0.05)
    except TimeoutError:
        problems = {k: v.get("lastError") for k, v in cluster.status()["kinds"].items() if v.get("lastError")}
        raise SetupError(f"the objects of the cluster at {where} could not be listed within "
                         f"--sync-timeout {args.sync_timeout:g}s{': ' + str(problems) if problems else ''}") from None
    finally:
        snapshot = cluster.snapshot()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await conn.api.close()
    objects = [o for kind in KINDS for o in snapshot.list(kind)]
    return MemoryState(objects, version="cluster"), objects




async def judge(gate: Gate, base: State, base_objects: list[Obj], located: Sequence[inputs.Located],
                skip: frozenset[str] = frozenset(), *, workers: int = 0, with_status: bool = True,
                tally: progress.Tally | None = None, traffic: bool = True) -> list[tuple[inputs.Located, Verdict]]:
    """Each input's verdict, in input order. Manifests are applied together (the last copy of a
    duplicate wins the state, earlier copies are judged one by one); reviews are judged alone.
    ``with_status``: False when the report shows no statuses (the batch then computes none).
    ``workers``: processes for the per-object rules of the inputs applied together (``Gate.review_all``).
    ``tally``: counts the verdicts as they are given (the progress line). ``traffic``: whether the inputs
    applied together get their traffic diff when the base state is empty (every request they serve is
    then a gain, which only --traffic and json/yaml show); against stored objects they always do."""
    tally = tally if tally is not None else progress.Tally(len(located))
    refs = [i.ref for i in located]
    manifests = [(ref, i) for ref, i in zip(refs, located, strict=True) if not _is_review(i)]
    everything = MemoryState.keyed(_combine(base_objects, manifests), version="check")
    last = dict(manifests)
    batch: list[tuple[int, Change, State]] = []
    alone: list[tuple[int, Change, State]] = []
    stored: list[tuple[int, inputs.Located]] = []
    verdicts: dict[int, Verdict] = {}
    for n, (ref, item) in enumerate(zip(refs, located, strict=True)):
        if item.obj.get("kind") in skip:
            continue
        if ref.kind in UNREVIEWED_AT_ONCE and item.file != CLUSTER and last.get(ref) is item:
            verdicts[n] = unchecked(ref)  # what the batch gives it (tests/webhook/cli/test_check_unreviewed.py)
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
    tally.add(verdicts.values())
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
        tally.add(judged)
    for n, change, state in alone:
        verdicts[n] = verdict = await gate.review(change, state=state, reload_note=False)
        tally.add([verdict])
    if stored:
        audited = await _audited(gate, everything, stored)
        verdicts.update(audited)
        tally.add(audited.values())
    return _attributed([(located[n], verdicts[n]) for n in sorted(verdicts)])


async def predicted(gate: Gate, base_objects: list[Obj], located: Sequence[inputs.Located],
                    results: Sequence[tuple[inputs.Located, Verdict]], skip: frozenset[str] = frozenset(),
                    base: State | None = None) -> Prediction | None:
    """How a data plane running the given state (``--state``/the cluster) takes the inputs, all applied:
    the runtime planner over the whole render before and after (``predictions.predict``), the plan
    reconcile's runtime applier makes when the data plane runs that state. None without manifests to
    apply, without a state to apply them to (no data plane runs an empty state: a check of files alone
    is not charged two more renders of them), when an input is not allowed (it would not reach the data
    plane) or a render is refused. ``base``: the state of ``base_objects`` as the run judged against it
    (its render is the traffic diff's before-state already: ``_sharing_render_of``)."""
    manifests = [(i.ref, i) for i in located if not _is_review(i) and i.obj.get("kind") not in skip]
    if not base_objects or not manifests or not results or not all(v.allowed for _, v in results):
        return None
    before = gate.scope.view(base if base is not None else MemoryState(base_objects, version="check-base"))
    after = gate.scope.view(MemoryState.keyed(_combine(base_objects, manifests), version="check"))
    try:
        old = await asyncio.to_thread(gate.renderer.render, before, subject=None)
        new = await asyncio.to_thread(gate.renderer.render, after, subject=None, previous=old.description)
    except RenderError:
        return None
    version = gate.dataplane_version or gate.binary.version_tuple
    return await asyncio.to_thread(predictions.predict, old.description, new.description,
                                   dataplane_version=version, files=new.files,
                                   basis="a data plane running the given state (--state or the cluster)")


async def _audited(gate: Gate, everything: State, stored: list[tuple[int, inputs.Located]]) -> dict[int, Verdict]:
    """``--all``: the stored objects judged by the reconcile loop's own steps (``Reconciler.judge``: the
    audit of every object with the admission rules, the seed's leave-outs, one render of the whole state
    and its haproxy -c, alerts attributed to their objects), so both report the same findings."""
    from webhook.reconcile.reconciler import Reconciler

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
        if v.decision is not Decision.DENY or not v.alerts:  # (most of a large run: nothing to attribute)
            out.append((item, v))
            continue
        owners = {a.origin.ref for a in v.alerts if a.origin is not None}
        if (all(a.origin is not None for a in v.alerts) and v.ref not in owners and owners <= denied
                and all(f.code == HAPROXY_REJECTED for f in v.denials)):
            names = ", ".join(sorted(str(o) for o in owners))
            kept = tuple(f for f in v.findings if f.severity is not Severity.DENY)
            v = replace(v, decision=Decision.ALLOW, findings=kept, alerts=(),
                        notes=(*v.notes, f"haproxy -c fails on a line of {names}, denied in this run; "
                                         "this object is allowed once that one is fixed"))
        out.append((item, v))
    return out


def _cluster_items(base_objects: list[Obj], files: list[inputs.Located],
                   namespace: str | None = None) -> list[inputs.Located]:
    """``--all``: every stored object of a reviewed kind that no input file replaces (in ``namespace``
    only, when given: ``-n``)."""
    replaced = {ref_of(i.obj) for i in files}
    return [inputs.Located(dict(o), CLUSTER, 0, 0) for o in base_objects
            if o.get("kind") in REVIEWED_KINDS and ref_of(o) not in replaced
            and (namespace is None or ref_of(o).namespace == namespace)]


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
    args.all = args.all or args.all_namespaces
    if not args.files and not args.all:
        raise SetupError("check needs -f PATH (files, directories or - for stdin), or --all (-A) to audit a cluster")
    if args.all_namespaces and args.namespace:
        raise SetupError("-A (every namespace) and -n NAME (one namespace) contradict each other: give one")
    source = resolved(args)
    # Connected (one request answered) before anything is read: an unreachable cluster fails in seconds.
    conn = await _connect(source, args) if source is not None else None
    live_policies, policy_warnings = await _live_policies(conn)
    binary = await binaries.detect(args.haproxy)
    namespace = args.namespace or (conn.namespace if conn is not None else None) or "default"
    # Loading allocates the objects that live until the run ends, and no cycles to find: collections while
    # they pile up rescan them over and over (a fifth of the load of 10,000 routes), so there are none.
    with gcpause.paused():
        loaded = _read_inputs(args, namespace)
        positions = Positions(loaded.texts, loaded.members)
        manifests = [i for i in loaded.objects if not _is_review(i)]
        problems = list(loaded.problems)
        for group in _apply_sets(loaded.objects, each=args.each):
            problems += _duplicates([i for i in group if not _is_review(i)], positions, each=args.each)
        if args.namespace:
            problems += _other_namespaces(manifests, args.namespace, positions)
        base, base_objects = await _live_state(conn, args) if conn is not None else load_state(args.state)
        # The state lives until the run ends: out of the collector's sight, later collections stop
        # rescanning it (a few % of a 1,000-route check, more with more objects), and forked rule workers
        # share its pages instead of copying them as the collector touches them.
        gcpause.keep_lifelong()
    # ValidatingAdmissionPolicies and bindings among the inputs are policies to apply, not changes to judge.
    vap = policyloading.vap_set([*live_policies, *base_objects, *(i.obj for i in loaded.objects)])
    loaded.objects = [i for i in loaded.objects if not policyloading.is_policy(i.obj)]
    audited = _cluster_items(base_objects, loaded.objects, args.namespace) if args.all else []
    located = [*loaded.objects, *audited]
    skip = frozenset().union(*args.skip_kinds)
    if not located and not problems:
        problems.append(inputs.Problem(" ".join(args.files or [CLUSTER]), 0, 0,
                                       "no Kubernetes objects found (empty input)"))
    # The inputs are checked together first, in one haproxy -c of a configuration that grows with them
    # (3-4 s for 10,000 routes on 2 cores). Under a review's deadline that check times out on a busy
    # machine, and N one-by-one reviews follow: the deadline grows with the inputs instead.
    timeout = max(args.check_timeout, COMBINED_CHECK_SECONDS_PER_OBJECT * len(located))
    gate = _one_shot(build_gate(binary, replace(gateflags.settings_from(args), check_timeout=timeout)))
    policyloading.install(gate, vap=vap)
    if base_objects:
        _sharing_render_of(gate, base)
    workers = ruleworkers.worker_count() if args.jobs is None else args.jobs
    # Only the json and yaml reports show each object's status.
    with_status = args.output in reports.WITH_STATUS
    traffic = bool(getattr(args, "traffic", False)) or args.output in reports.WITH_STATUS \
        or policyloading.needs_traffic(gate)
    results: list[tuple[inputs.Located, Verdict]] = []
    async with progress.shown(sum(i.obj.get("kind") not in skip for i in located)) as tally:
        for group in _apply_sets(located, each=args.each):
            results += await judge(gate, base, base_objects, group, skip, workers=workers, with_status=with_status,
                                   tally=tally, traffic=traffic)
    # --each judges scenarios, not one set applied together: no one prediction describes them
    prediction = None if args.no_prediction or args.each else \
        await predicted(gate, base_objects, [i for i in located if i.file != CLUSTER], results, skip, base=base)
    if prediction is not None and len(results) == 1:
        results = [(results[0][0], replace(results[0][1], prediction=prediction))]
    report = reports.Report(problems=sorted(problems, key=lambda p: (p.file, p.line, p.column)),
                            warnings=[*loaded.warnings, *_cel_warning(), *policyloading.warnings(vap),
                                      *policy_warnings],
                            haproxy=binary, version=_version(),
                            prediction=prediction, traffic=bool(getattr(args, "traffic", False)))
    report.results += judged_in_files(results, positions)
    from validators import rules

    detail = _detail(args)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY", "") if args.output == "github" else ""
    reports.write(sys.stdout, reports.render(report, args.output, colour=_colour(args), rule_infos=rules.table(),
                                             detail=detail, summary_file=bool(summary_file)))
    if summary_file:
        _append_job_summary(summary_file, reports.github_summary(report, detail))
    code = EXIT_INPUT if report.problems else EXIT_OK if all(v.allowed for _, v in results) else EXIT_DENIED
    if getattr(args, "exit_when_done", False):
        exit_now(code)
    return code


def judged_in_files(results: Sequence[tuple[inputs.Located, Verdict]], positions: Positions) -> list[reports.Judged]:
    """The report's entries, each placed in its file when the report shows it (``reports.Judged``)."""
    out: list[reports.Judged] = []
    for item, verdict in results:

        def where(path: tuple[Any, ...], item: inputs.Located = item) -> tuple[int, int]:
            return positions.of(item, path) if item.file != CLUSTER else (0, 0)  # --all's stored objects

        out.append(reports.Judged(item, verdict, locate=where))
    return out


async def _live_policies(conn: Any) -> tuple[list[Obj], list[str]]:
    """The cluster's ValidatingAdmissionPolicies, bindings and their params (``webhook.gate.policyloading``),
    and a warning when the credentials may not read them: a CI account that may list routes but not
    admission policies still gets its check, told that the cluster's policies were not applied."""
    if conn is None:
        return [], []
    from webhook.cluster.clients import ApiError

    try:
        return await policyloading.live_objects(conn), []
    except ApiError as exc:
        if exc.status != 403:
            raise SetupError(f"cannot list the ValidatingAdmissionPolicies of the cluster at {conn.where()}: "
                             f"HTTP {exc.status}") from None
        return [], ["the cluster's ValidatingAdmissionPolicies could not be read (HTTP 403: these credentials "
                    "may not list them): judged without them"]
    except Exception as exc:  # a cluster that cannot list them cannot say what it would enforce
        raise SetupError(f"cannot list the ValidatingAdmissionPolicies of the cluster at {conn.where()}: "
                         f"{type(exc).__name__}: {exc}") from None


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


def _colour(args: argparse.Namespace) -> bool:
    from webhook.cli.flags import colour_wanted

    return colour_wanted(sys.stdout, getattr(args, "color", "auto"))


def _detail(args: argparse.Namespace) -> reports.Detail:
    if getattr(args, "summary", False):
        return reports.Detail.SUMMARY
    return reports.Detail.EVERYTHING if getattr(args, "verbose", False) else reports.Detail.PROBLEMS


def _append_job_summary(path: str, markdown: str) -> None:
    """Append to GitHub's job summary file (each step's file is shown on the run's summary page). A file
    that cannot be written costs the summary, never the report or the exit code."""
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as out:
            out.write(markdown)
    except OSError as exc:
        print(f"routegate: warning: GITHUB_STEP_SUMMARY {reports.clean(path)}: cannot write the job summary: "
              f"{reports.clean(exc.strerror or exc)}", file=sys.stderr)


def _version() -> str:
    from webhook.cli.packageversion import routegate_version

    return routegate_version()


def _render_failure(exc: RenderError, template_dirs: Sequence[str]) -> str:
    """One line for a render that failed: the template's file and line, and ``--templates DIR`` when the
    template is one of the platform team's (a built-in one failing is a bug of routegate's, or the input's)."""
    where = exc.template_file
    if where is None:
        return f"cannot render: {exc.message}"
    message = exc.message
    if message.startswith("template ") and ":" in message:  # "template NAME:LINE: why" -> "why"
        message = message.split(": ", 1)[1] if ": " in message else message
    owner = next((d for d in template_dirs if os.path.abspath(where).startswith(os.path.abspath(d) + os.sep)), None)
    return f"{'--templates ' + owner + ': ' if owner else ''}template {where}: {message}"


async def render(args: argparse.Namespace) -> int:
    from validators.crossobject import statuses
    from webhook.cli import outdirs

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
    gate = _one_shot(build_gate(binary, gateflags.settings_from(args)))
    keyed = [(i.ref, i) for i in loaded.objects]
    state = gate.scope.view(MemoryState.keyed(_combine(base_objects, keyed), version="render"))
    previous = plans.load_description(args.previous) if args.previous else None
    try:
        result = gate.renderer.render(state, subject=None, previous=previous)
    except RenderError as exc:
        raise SetupError(_render_failure(exc, args.templates)) from None
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
