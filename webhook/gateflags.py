"""The Gate's settings from the flags every command that builds one shares (``check``, ``serve``,
``reconcile``), and ``--dataplane-version`` read as a version tuple.

Apart from ``checking`` (the CLI) so that ``reconciling`` builds its Gate without importing the CLI.
"""

from __future__ import annotations

import argparse

from haproxy_check.runtime import runtimeplans
from webhook.gate.assembly import GateSettings
from webhook.loading import inputs


class DataplaneVersionError(inputs.InputError):
    """``--dataplane-version`` is not a version; the message names the flag."""


def dataplane_version(text: str | None) -> tuple[int, ...] | None:
    """``--dataplane-version`` as a version tuple; None when not given."""
    if not text:
        return None
    try:
        return runtimeplans.parse_version(text)
    except ValueError as exc:
        raise DataplaneVersionError(f"--dataplane-version: {exc}") from exc


def settings_from(args: argparse.Namespace) -> GateSettings:
    return GateSettings(
        crds=args.crds, config=args.config, strict=args.strict, templates=args.templates,
        scratch_dir=args.scratch_dir, check_timeout=args.check_timeout,
        check_concurrency=args.check_concurrency, note_budget=args.reload_note_budget,
        dataplane_version=dataplane_version(getattr(args, "dataplane_version", None)),
        gateway_classes=getattr(args, "gateway_classes", ()), controller_names=getattr(args, "controller_names", ()),
    )
