"""`routegate certs generate`: a CA and a serving pair for an in-cluster Service, as three files."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `certs generate` to the routegate CLI.

    Given the top-level subcommands, adds `certs` and under it `generate`; given the subcommands of an
    existing `certs` parser (its prog ends in "certs"), adds only `generate` there.
    """
    if str(getattr(subparsers, "_prog_prefix", "")).split()[-1:] == ["certs"]:
        sub = subparsers
    else:
        certs = subparsers.add_parser("certs", help="webhook serving certificates")
        sub = certs.add_subparsers(dest="certs_command", required=True, metavar="COMMAND")
    gen = sub.add_parser(
        "generate",
        help="write ca.crt, tls.crt, tls.key (0600) for a Service",
        description="Generate an ECDSA P-256 CA (10 years) and serving certificate (1 year) whose SANs "
        "are <svc>, <svc>.<ns>, <svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local plus any extra names.",
    )
    gen.add_argument("--service", required=True, help="Service name the apiserver calls")
    gen.add_argument("--namespace", required=True, help="namespace of that Service")
    gen.add_argument("--out", required=True, type=Path, help="directory to write into (created 0700)")
    gen.add_argument("--dns-name", action="append", default=[], metavar="NAME", help="extra DNS SAN")
    gen.add_argument("--ip", action="append", default=[], metavar="ADDR", help="extra IP SAN")
    gen.add_argument("--force", action="store_true", help="overwrite an existing tls.key in --out")


def run(args: argparse.Namespace) -> int:
    """Exit 0 on success, 2 on bad input (with the reason on stderr)."""
    from certs import bootstrap, generation  # cryptography: only when a certs command runs

    if getattr(args, "certs_command", None) != "generate":
        print("routegate certs: expected a subcommand: generate", file=sys.stderr)
        return 2
    out: Path = args.out
    if (out / bootstrap.KEY_FILE).exists() and not args.force:
        print(f"routegate certs generate: {out / bootstrap.KEY_FILE} exists; pass --force to replace it",
              file=sys.stderr)
        return 2
    try:
        names = [*generation.service_dns_names(args.service, args.namespace), *args.dns_name]
        now = datetime.now(UTC)
        ca = generation.new_ca(now=now, common_name=f"routegate CA for {args.service}.{args.namespace}")
        leaf = generation.new_leaf(ca, now=now, dns_names=names, ip_addresses=args.ip)
    except generation.CertError as e:
        print(f"routegate certs generate: {e}", file=sys.stderr)
        return 2
    try:
        paths = bootstrap.write_pair(out, ca, leaf)
    except OSError as e:
        print(f"routegate certs generate: cannot write {e.filename or out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"ca:   {paths.ca}\ncert: {paths.cert}\nkey:  {paths.key}")
    print(f"valid until {leaf.cert.not_valid_after_utc.isoformat()}; caBundle is base64 of {paths.ca}")
    return 0
