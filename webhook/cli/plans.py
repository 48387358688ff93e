"""``routegate plan --from OLD_DIR --to NEW_DIR``: the runtime plan between two renders.

Both directories are ``routegate render --out`` output (``description.json`` beside haproxy.cfg, maps
and certificates). Prints the Runtime API commands that take a data plane running OLD to NEW, or
"reload" with every reason (haproxy_check/runtime/runtimeplans.py has the rules). The data plane's HAProxy
version decides what is possible: ``--dataplane-version``, else the checker binary's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from haproxy_check.check import binaries, scratches
from haproxy_check.descriptions import Description
from haproxy_check.runtime import descriptionfiles, predictions, runtimeplans
from webhook import gateflags
from webhook.loading import inputs

EXIT_OK, EXIT_USAGE = 0, 2


class PlanInputError(inputs.InputError):
    """A render directory that cannot be read; the message names the file."""


def load_description(directory: str) -> Description:
    path = Path(directory) / "description.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise PlanInputError(f"{path}: no such file (write the directory with routegate render --out)") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanInputError(f"{path}: {exc}") from exc
    try:
        # a promoted version's description.json names its maps' files for their entries (descriptionfiles)
        return descriptionfiles.parse(data, lambda rel: Path(directory).joinpath(
            *scratches.safe_relative(rel).parts).read_bytes())
    except (ValueError, scratches.UnsafePath) as exc:
        raise PlanInputError(f"{path}: {exc}") from exc
    except OSError as exc:
        raise PlanInputError(f"{path}: a map file it names: {exc.strerror or exc}") from exc


def _certificates(directory: str, description: Description) -> dict[str, bytes]:
    """The certificate and CA files the plan sends as payloads, read from the render directory."""
    out: dict[str, bytes] = {}
    for file in description.files:
        if file.kind == "other":
            continue
        try:
            target = Path(directory).joinpath(*scratches.safe_relative(file.path).parts)
            out[file.path] = target.read_bytes()
        except scratches.UnsafePath as exc:
            raise PlanInputError(f"{directory}/description.json: {exc}") from exc
        except OSError as exc:
            raise PlanInputError(f"{directory}/{file.path}: {exc.strerror or exc}") from exc
    return out


async def _version(args: argparse.Namespace) -> tuple[int, ...]:
    given = gateflags.dataplane_version(args.dataplane_version)
    return given if given is not None else (await binaries.detect(args.haproxy)).version_tuple


def run(args: argparse.Namespace) -> int:
    try:
        old, new = load_description(args.old), load_description(args.new)
        files = _certificates(args.new, new)
        version = asyncio.run(_version(args))
    except (PlanInputError, gateflags.DataplaneVersionError) as exc:
        print(f"routegate plan: {exc}", file=sys.stderr)
        return EXIT_USAGE
    plan = runtimeplans.plan(old, new, dataplane_version=version, files=files)
    if args.output == "json":
        # "prediction": the answer in the words admission, check and reconcile use (predictions)
        print(json.dumps({**plan.as_dict(), "prediction": predictions.Prediction.of(plan).as_dict()}, indent=2))
    else:
        print(plan.text(), end="")
    return EXIT_OK
