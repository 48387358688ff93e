"""The flags of ``routegate reconcile`` and ``serve --reconcile``: standard library only, so building
the parser (``routegate --help``) imports nothing heavy."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from webhook.cli import flags

DEFAULT_SOCKET = "/var/run/haproxy.sock"  # haproxy-reload-wrapper's default HAPROXY_SOCKET


def add_reconcile_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The flags ``reconcile`` and ``serve --reconcile`` share."""
    parser.add_argument("--output-dir", required=required, metavar="DIR",
                        help="where versions are promoted (..data symlink, haproxy.cfg, maps/, certs/)")
    parser.add_argument("--stats-socket", default=DEFAULT_SOCKET, metavar="PATH",
                        help="the data plane's admin socket, rendered into global as 'stats socket PATH level "
                             f"admin expose-fd listeners' (default {DEFAULT_SOCKET}; '' leaves it out)")
    parser.add_argument("--runtime-socket", default="", metavar="PATH",
                        help="after each promotion, apply the runtime plan over this admin socket (unix path or "
                             "HOST:PORT) and reload only when the plan says so or a command fails")
    reload = parser.add_mutually_exclusive_group()
    reload.add_argument("--reload-pidfile", default="", metavar="FILE",
                        help="with --runtime-socket: reload by SIGUSR2 to the haproxy -W master whose pid FILE holds")
    reload.add_argument("--reload-command", default="", metavar="CMD",
                        help="with --runtime-socket: reload by running CMD (exit 0 = done; default: write "
                             "OUTPUT/reload/requested for a wrapper watching OUTPUT/reload)")
    parser.add_argument("--shrink-limit", type=_share, default=50.0, metavar="PERCENT",
                        help="hold (do not promote) a candidate that drops more than PERCENT of the live routing "
                             "entries or backends when the source cannot vouch for the drop (a short list, a "
                             "forbidden kind, a lost CRD; deletions seen as watch events always pass) (default 50)")
    parser.add_argument("--shrink-minimum", type=flags.positive_int, default=10, metavar="N",
                        help="drops of fewer than N routing entries or backends are never held (default 10)")
    parser.add_argument("--allow-mass-delete", action="store_true",
                        help="promote mass drops whatever their cause (a deliberate mass delete)")
    parser.add_argument("--keep", type=flags.positive_int, default=5, metavar="N",
                        help="promoted versions kept (default 5)")
    parser.add_argument("--debounce", type=flags.nonnegative_seconds, default=0.25, metavar="SECONDS",
                        help="a change after this long without one is reconciled at once; a change that comes "
                             "sooner (a burst) waits until the state stayed unchanged this long (default 0.25)")
    parser.add_argument("--max-wait", type=flags.positive_seconds, default=2.0, metavar="SECONDS",
                        help="a burst is reconciled at the latest this long after its first pending change, "
                             "even while changes keep coming (default 2)")
    parser.add_argument("--min-reload-interval", type=flags.nonnegative_seconds, default=2.0, metavar="SECONDS",
                        help="with --runtime-socket: a reload asked for sooner than this after the previous one "
                             "waits until then, and the reloads asked for meanwhile are one; runtime updates "
                             "never wait (default 2; 0 reloads every time)")
    parser.add_argument("--gateway-address", dest="gateway_addresses", action="append", default=[], metavar="ADDR",
                        help="with a cluster: the data plane's address (IP or hostname, e.g. its Service's load "
                             "balancer), reported in every Gateway's status.addresses (repeatable)")
    parser.add_argument("--status-lease", default="routegate-statuses", metavar="NAME",
                        help="with a cluster: statuses are written only by the holder of this Lease, so of several "
                             "promoting replicas one writes (default routegate-statuses; '' writes without election)")
    parser.add_argument("--lease-namespace", default="", metavar="NS",
                        help="the Lease's namespace (default: POD_NAMESPACE, else the service account's, else "
                             "routegate-system)")
    parser.add_argument("--status-rate", type=flags.positive_int, default=20, metavar="PER_SECOND",
                        help="with a cluster: status requests per second at most (default 20; bursts of 50)")


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"{text}: a percentage from 0 up to (not including) 100")
    return value


def add_parser(sub: Any, add_gate_options: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = sub.add_parser("reconcile", help="render and check the whole state; promote it only when valid")
    add_gate_options(parser)
    add_reconcile_options(parser, required=True)
    parser.add_argument("--state", metavar="DIR", help="YAML manifests that stand for the cluster state (watched)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="watch a cluster (in a pod: the service account)")
    parser.add_argument("--metrics-listen", default="127.0.0.1:9090", type=flags.host_port, metavar="HOST:PORT")
    parser.add_argument("--max-state-staleness", type=flags.positive_seconds, default=60.0, metavar="SECONDS",
                        help="not ready once every cluster watch has failed this long (default 60)")
    parser.add_argument("--once", action="store_true",
                        help="wait for the first complete sync of every watched kind, reconcile once and exit "
                             "(0 promoted/unchanged, 1 not promoted, 2 could not sync)")
    parser.add_argument("--sync-timeout", type=flags.positive_seconds, default=60.0, metavar="SECONDS",
                        help="with --once: give up ('could not sync', exit 2) when the first sync has not "
                             "completed this long (default 60); a list refused with 401/403/404 gives up at once")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--reconcile", action="store_true",
                       help="also run the reconcile gate in this process (needs --output-dir)")
    add_reconcile_options(serve, required=False)


