"""``routegate check`` and ``routegate render``: the Gate offline, on manifests, for CI.

All inputs are applied together on top of ``--state`` (as ``kubectl apply -f DIR`` would), and each
input object is judged as the admission subject against the state holding all the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from haproxy_check import binaries, scratches
from haproxy_check.results import HAProxyBinary
from validators import statuses
from validators.changes import Change, Operation
from validators.objects import Obj, Ref, ref_of
from validators.states import MemoryState, Overlay, State
from webhook import inputs
from webhook.assembly import GateSettings, build_gate, load_state, with_namespace
from webhook.verdicts import Decision, Verdict

EXIT_OK, EXIT_DENIED = 0, 1


def settings_from(args: argparse.Namespace) -> GateSettings:
    return GateSettings(
        crds=args.crds, config=args.config, strict=args.strict, templates=args.templates,
        scratch_dir=args.scratch_dir, check_timeout=args.check_timeout,
        check_concurrency=args.check_concurrency, note_budget=args.reload_note_budget,
        gateway_classes=getattr(args, "gateway_classes", ()), controller_names=getattr(args, "controller_names", ()),
    )


def _combine(base: list[Obj], located: list[inputs.Located]) -> dict[Ref, Obj]:
    combined: dict[Ref, Obj] = {ref_of(o): o for o in base}
    for item in located:
        combined[ref_of(item.obj)] = item.obj
    return combined


async def check(args: argparse.Namespace) -> int:
    binary = await binaries.detect(args.haproxy)
    base_state, base_objects = load_state(args.state)
    located = [inputs.Located(with_namespace(i.obj), i.file, i.line) for i in inputs.load(args.files)]
    gate = build_gate(binary, settings_from(args))
    # Indexed once; each input is judged against all the others: that state with the input taken out
    # (an Overlay splices one object out of the sorted lists instead of re-indexing every object).
    everything = MemoryState(list(_combine(base_objects, located).values()), version="check")
    items: list[tuple[Change, State]] = []
    for item in located:
        ref = ref_of(item.obj)
        old = base_state.get(ref.kind, ref.namespace, ref.name)
        change = Change(Operation.UPDATE if old is not None else Operation.CREATE, item.obj, old, dry_run=True)
        items.append((change, Overlay(everything, Change(Operation.DELETE, None, item.obj))))
    verdicts = await gate.review_all(items, combined=everything)
    results = list(zip(located, verdicts, strict=True))
    if args.output == "json":
        print(json.dumps(_json_report(binary, results), indent=2))
    else:
        for item, verdict in results:
            _print_text(item, verdict)
    return EXIT_OK if all(v.allowed for _, v in results) else EXIT_DENIED


def _print_text(item: inputs.Located, verdict: Verdict) -> None:
    ref = verdict.ref
    where = f"{item.file}:{item.line} {ref.kind} {ref.namespace + '/' if ref.namespace else ''}{ref.name}"
    if verdict.decision is Decision.ALLOW:
        print(f"{where}: allowed")
    elif verdict.decision is Decision.ERROR:
        print(f"{where}: error: {verdict.error}")
    else:
        print(f"{where}: denied: {verdict.message.split(': ', 1)[-1]}")
        for alert in verdict.alerts:
            for line in alert.context:
                print(f"    {line}")
    for warning in verdict.warnings:
        print(f"    warning: {warning}")


def _json_report(binary: HAProxyBinary, results: list[tuple[inputs.Located, Verdict]]) -> Any:
    return {
        "haproxy": {"path": binary.path, "version": binary.version},
        "results": [
            {
                "file": item.file,
                "line": item.line,
                "apiVersion": item.obj.get("apiVersion"),
                "kind": verdict.ref.kind,
                "namespace": verdict.ref.namespace,
                "name": verdict.ref.name,
                "allowed": verdict.allowed,
                "decision": str(verdict.decision),
                "message": verdict.message,
                "warnings": verdict.warnings,
                "findings": [f.as_dict() for f in verdict.findings],
                "status": dict(verdict.status),
                "timings": {k: round(v, 4) for k, v in verdict.timings.items()},
            }
            for item, verdict in results
        ],
    }


async def render(args: argparse.Namespace) -> int:
    binary = await binaries.detect(args.haproxy)
    _, base_objects = load_state(args.state)
    located = [inputs.Located(with_namespace(i.obj), i.file, i.line) for i in inputs.load(args.files)]
    gate = build_gate(binary, settings_from(args))
    state = gate.scope.view(MemoryState(list(_combine(base_objects, located).values()), version="render"))
    result = gate.renderer.render(state, subject=None)
    out = Path(args.out)
    files = {**result.files,
             "description.json": (json.dumps(result.description.as_dict(), indent=2) + "\n").encode(),
             "statuses.json": (json.dumps(statuses.statuses(state), indent=2, sort_keys=True) + "\n").encode()}
    await asyncio.to_thread(_write_out, out, files)
    for finding in result.findings:
        print(f"warning: {finding.about + ': ' if finding.about else ''}"
              f"{finding.field + ': ' if finding.field else ''}{finding.message}", file=sys.stderr)
    print(f"wrote {len(files)} files to {out}")
    return EXIT_OK


def _write_out(out: Path, files: dict[str, bytes]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, content in sorted(files.items()):
        target = out.joinpath(*scratches.safe_relative(name).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
