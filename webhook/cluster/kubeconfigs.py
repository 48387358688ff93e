"""Which cluster a command talks to, found as kubectl finds it, and a first request that fails fast.

kubectl's order: ``--kubeconfig FILE``; else ``$KUBECONFIG``, a list of files (``:``-separated) merged
with the first file to set a value winning; else ``~/.kube/config``. The context is ``--context`` or the
merged ``current-context``; its ``namespace`` is where namespaced inputs without one land. The pod's
service account is used only when asked for (``--in-cluster``): a CI job that runs inside a pod must not
judge against that cluster by surprise.

The merging and the loading of credentials (tokens, client certificates, exec plugins) are
kubernetes-asyncio's (``KubeConfigMerger``, ``KubeConfigLoader``); this module only chooses the files,
keeps kubectl's "first current-context wins" (the library lets the last one win), reads nothing back
into the user's files, and turns every failure into one line that names the file and the problem.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config import kube_config

from webhook.cluster.clients import ApiError, ClusterConfigError, get_json
from webhook.cluster.kubeconfigfiles import CONNECT_SECONDS as CONNECT_SECONDS
from webhook.cluster.kubeconfigfiles import IN_CLUSTER as IN_CLUSTER
from webhook.cluster.kubeconfigfiles import SEPARATOR as SEPARATOR
from webhook.cluster.kubeconfigfiles import Source as Source
from webhook.cluster.kubeconfigfiles import default_source as default_source
from webhook.cluster.kubeconfigfiles import exists as exists
from webhook.cluster.kubeconfigfiles import flag_source as flag_source


@dataclass
class Connection:
    api: client.ApiClient
    server: str
    context: str | None
    namespace: str | None  # the context's namespace, None when it names none
    source: Source

    def where(self) -> str:
        context = f", context {self.context}" if self.context else ""
        return f"{self.server} ({self.source.label}{context})"


class _Merger(kube_config.KubeConfigMerger):
    """The library's merge, with every file's problem named by its file."""

    def load_config(self, path: str) -> None:
        try:
            super().load_config(path)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            raise ClusterConfigError(f"{path}{at}: not valid YAML: {exc.problem or exc.context}") from None
        except yaml.YAMLError as exc:
            raise ClusterConfigError(f"{path}: not valid YAML: {_one_line(exc)}") from None
        except UnicodeDecodeError:
            raise ClusterConfigError(f"{path}: not UTF-8 text") from None
        except OSError as exc:
            raise ClusterConfigError(f"{path}: {exc.strerror or exc}") from None
        except (AttributeError, TypeError, KeyError):
            raise ClusterConfigError(f"{path}: not a kubeconfig (expected a mapping with clusters, contexts "
                                     "and users, each a list of entries with a name)") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _merged(source: Source) -> tuple[kube_config.ConfigNode, str]:
    """The merged kubeconfig (kubectl's rules) and the name of the first file, for messages."""
    existing = [p for p in source.paths if os.path.exists(os.path.expanduser(p))]
    if not existing:
        if len(source.paths) == 1:
            raise ClusterConfigError(f"{source.paths[0]}: no such file")
        raise ClusterConfigError("none of these files exists")
    merger = _Merger(SEPARATOR.join(existing))
    if merger.config is None:  # pragma: no cover - every existing file was loaded or raised
        raise ClusterConfigError("no kubeconfig could be read")
    merged: dict[str, Any] = merger.config.value
    # kubectl: the first file to set current-context wins (the library keeps the last one's).
    firsts = [c.get("current-context") for p in merger.paths if isinstance(c := merger.config_files[p], dict)]
    merged["current-context"] = next((c for c in firsts if c), merged.get("current-context"))
    return merger.config, merger.paths[0]


def _entry(merged: Any, section: str, name: Any) -> Any:
    for item in merged.value.get(section) or []:
        if isinstance(item, kube_config.ConfigNode) and item.value.get("name") == name:
            return item.value
    return None


def _chosen(merged: Any, context: str | None, first: str) -> tuple[str, dict[str, Any]]:
    """The context's name and its ``context`` body, after checking what the library would assert."""
    name = context or merged.value.get("current-context")
    if not name:
        raise ClusterConfigError(f"{first}: no current-context; give --context NAME")
    entry = _entry(merged, "contexts", name)
    if not isinstance(entry, dict) or not isinstance(entry.get("context"), dict):
        known = sorted(str(c.value.get("name")) for c in merged.value.get("contexts") or []
                       if isinstance(c, kube_config.ConfigNode))
        raise ClusterConfigError(f"context {name!r} not found (known: {', '.join(known) or 'none'})")
    body: dict[str, Any] = entry["context"]
    cluster = _entry(merged, "clusters", body.get("cluster"))
    if not isinstance(cluster, dict) or not isinstance(cluster.get("cluster"), dict):
        raise ClusterConfigError(f"context {name!r}: cluster {body.get('cluster')!r} not found")
    if not cluster["cluster"].get("server"):
        raise ClusterConfigError(f"context {name!r}: cluster {body.get('cluster')!r} has no server")
    return str(name), body


async def load(source: Source, context: str | None = None) -> Connection:
    """An ApiClient for ``source`` and ``context``; ClusterConfigError (one line) when it cannot be made."""
    cfg = client.Configuration()
    try:
        if source.in_cluster:
            if context:
                raise ClusterConfigError("--context needs a kubeconfig, not --in-cluster")
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            name, namespace = None, await asyncio.to_thread(_pod_namespace)
        else:
            merged, first = await asyncio.to_thread(_merged, source)
            name, body = _chosen(merged, context, first)
            namespace = body.get("namespace") or None
            loader = kube_config.KubeConfigLoader(config_dict=merged, active_context=name, config_base_path=None)
            await loader.load_and_set(cfg)
    except ClusterConfigError as exc:
        raise ClusterConfigError(_named(source, str(exc))) from None
    except Exception as exc:  # the library raises ConfigException, KeyError, ValueError, ... for bad entries
        raise ClusterConfigError(f"{source.label}: cannot load the cluster configuration: {_one_line(exc)}") from None
    # One long-lived watch per kind and per referenced Secret/ConfigMap shares this pool.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 256)
    return Connection(client.ApiClient(cfg), str(cfg.host), name, namespace and str(namespace), source)


def _named(source: Source, problem: str) -> str:
    """``problem`` with the source in front, the file named once (``--kubeconfig FILE:3:1: ...``)."""
    if len(source.paths) == 1 and source.label.endswith(source.paths[0]) and problem.startswith(source.paths[0]):
        return source.label + problem[len(source.paths[0]):]
    return f"{source.label}: {problem}"


def _pod_namespace() -> str | None:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip() or None
    except OSError:
        return None


class Unreachable(Exception):
    """The API server did not answer the first request (one line: server and cause)."""


async def probe(conn: Connection, *, seconds: float = CONNECT_SECONDS) -> None:
    """One small request (``GET /api``) before any list or watch: an unreachable server, a certificate
    that does not verify or refused credentials fail here within ``seconds``, with the cause."""
    try:
        async with asyncio.timeout(seconds):
            await get_json(conn.api, "/api", total=seconds)
    except Exception as exc:  # every way a first request fails becomes its cause, in words
        raise Unreachable(f"cannot reach the cluster at {conn.where()}: {cause(exc, seconds)}") from None


def cause(exc: BaseException, seconds: float = CONNECT_SECONDS) -> str:
    """What went wrong, in kubectl's words where it has some ("connection refused")."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"the server's certificate does not verify: {_one_line(exc.certificate_error)}"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"no such host ({exc.host}): {exc.os_error.strerror or _one_line(exc.os_error)}".lower()
    if isinstance(exc, aiohttp.ClientConnectorError):
        errno = exc.os_error.errno
        return os.strerror(errno).lower() if errno else _one_line(exc.os_error)
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return f"no answer within {seconds:g}s"
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"TLS: {_one_line(exc)}"
    if isinstance(exc, ApiError):
        return f"HTTP {exc.status}{': ' + exc.message if exc.message else ''}"
    if isinstance(exc, aiohttp.ClientError | OSError | ValueError):
        return _one_line(exc)
    return f"{type(exc).__name__}: {_one_line(exc)}"
