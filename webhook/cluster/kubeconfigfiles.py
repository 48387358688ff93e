"""Which kubeconfig files a command reads, found as kubectl finds them, and whether their server is up.

Standard library and PyYAML only: ``check`` asks ``unreachable`` before it imports the gate and
kubernetes-asyncio (well over a second on a busy machine), so that a cluster that is down fails the
command within seconds, as ``kubectl`` does. Everything else about a kubeconfig (credentials, TLS, exec
plugins, every error in a file) is left to ``kubeconfigs.load``, which runs next when the port answers:
here anything unclear means "go on", never an error of its own.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

#: A cluster that does not answer fails within this (kubectl answers "connection refused" at once; a
#: black-holed address must not hold a CI job for a minute).
CONNECT_SECONDS = 4.0
SEPARATOR = os.pathsep  # kubectl's $KUBECONFIG list separator (":" here, ";" on Windows)


@dataclass(frozen=True)
class Source:
    """Where the configuration comes from, as errors name it (``--kubeconfig FILE``, ``$KUBECONFIG``)."""

    label: str
    paths: tuple[str, ...] = ()  # kubeconfig files in kubectl's order; () for the pod's service account

    @property
    def in_cluster(self) -> bool:
        return not self.paths


IN_CLUSTER = Source("--in-cluster")


def default_source(environ: dict[str, str] | None = None) -> Source:
    """``$KUBECONFIG`` when set (and not empty), else ``~/.kube/config`` (kubectl's order after the flag)."""
    env = os.environ if environ is None else environ
    listed = env.get("KUBECONFIG", "")
    if listed:
        return Source(f"$KUBECONFIG ({listed})", tuple(p for p in listed.split(SEPARATOR) if p))
    home = os.path.expanduser("~/.kube/config")
    return Source(f"kubeconfig {home}", (home,))


def flag_source(path: str) -> Source:
    return Source(f"--kubeconfig {path}", (path,))


def exists(source: Source) -> bool:
    """Whether any of the source's files exists (kubectl skips missing files of a ``$KUBECONFIG`` list)."""
    return source.in_cluster or any(os.path.exists(os.path.expanduser(p)) for p in source.paths)


@dataclass(frozen=True)
class Endpoint:
    """The API server a source and context lead to, as far as plain files tell."""

    server: str
    context: str | None

    def where(self, source: Source) -> str:
        context = f", context {self.context}" if self.context else ""
        return f"{self.server} ({source.label}{context})"


def endpoint(source: Source, context: str | None = None) -> Endpoint | None:
    """The server of ``context`` (or the current one) under kubectl's merge, or None when the files do not
    say it plainly (unreadable, no such context, a proxy in between): the full loader judges those."""
    if source.in_cluster:
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port or context:
            return None
        return Endpoint(f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}", None)
    files: list[dict[str, Any]] = []
    for path in source.paths:
        path = os.path.expanduser(path)
        if not os.path.exists(path):
            continue  # kubectl skips missing files of a list
        try:
            with open(path, encoding="utf-8") as f:
                loaded = yaml.safe_load(f)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None
        if not isinstance(loaded, dict):
            return None
        files.append(loaded)
    name = context or next((f["current-context"] for f in files if f.get("current-context")), None)
    body = _first(files, "contexts", name).get("context")
    if not isinstance(body, dict):
        return None
    cluster = _first(files, "clusters", body.get("cluster")).get("cluster")
    if not isinstance(cluster, dict) or cluster.get("proxy-url"):
        return None
    server = cluster.get("server")
    return Endpoint(server, str(name)) if isinstance(server, str) and server else None


def _first(files: list[dict[str, Any]], section: str, name: Any) -> dict[str, Any]:
    """The first file's entry ``name`` of ``section``: kubectl's merge lets the first definition win."""
    if name is None:
        return {}
    for loaded in files:
        entries = loaded.get(section)
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry
    return {}


def unreachable(server: str, seconds: float = CONNECT_SECONDS) -> str | None:
    """Why a TCP connection to ``server`` cannot be made within ``seconds`` (kubectl's words), or None
    when it can, or when the address is not one to judge here.

    Blocking, on purpose: it runs before the command has an event loop, and asyncio alone is a third of a
    second of imports on a busy machine."""
    try:
        parts = urlsplit(server)
        host, port = parts.hostname, parts.port or (80 if parts.scheme == "http" else 443)
    except ValueError:
        return None
    if not host:
        return None
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except TimeoutError:
        return f"no answer within {seconds:g}s"
    except socket.gaierror as exc:
        return f"no such host ({host}): {exc.strerror or exc}".lower()
    except OSError as exc:
        return os.strerror(exc.errno).lower() if exc.errno else " ".join(str(exc).split())
    return None
