"""Raw JSON requests through kubernetes-asyncio's ApiClient.

The generated typed APIs deserialize every object into model classes (slow for 10k objects, and
lossy for custom resources), and the library's ``Watch`` retries a 410 once from the same expired
resourceVersion. So the reflectors use the ApiClient only for what it is good at (configuration,
auth, TLS, connection pool) and read the JSON themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

JSON = Mapping[str, Any]


class ApiError(Exception):
    """The API server answered with an error status (or an ERROR watch event)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class Gone(ApiError):
    """410 Gone: the resourceVersion (or continue token) is too old; the caller must re-list."""


class ClusterConfigError(Exception):
    """The kubeconfig or in-cluster configuration cannot be loaded."""


def error_for(status: int, message: str) -> ApiError:
    return Gone(status, message) if status == 410 else ApiError(status, message)


async def _open(
    api: client.ApiClient, path: str, query: Sequence[tuple[str, str]], limits: aiohttp.ClientTimeout
) -> aiohttp.ClientResponse:
    resp: aiohttp.ClientResponse = await api.call_api(
        path,
        "GET",
        query_params=list(query),
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=limits,
    )
    if resp.status >= 400:
        body = await resp.read()
        resp.release()
        try:
            message = str(json.loads(body).get("message", ""))
        except (ValueError, AttributeError):
            message = body[:200].decode(errors="replace")
        raise error_for(resp.status, message or resp.reason or "")
    return resp


async def get_json(
    api: client.ApiClient, path: str, query: Sequence[tuple[str, str]] = (), *, total: float = 60.0
) -> JSON:
    """GET ``path`` and parse the JSON body; raise ApiError for an error status."""
    resp = await _open(api, path, query, aiohttp.ClientTimeout(total=total, sock_connect=10))
    try:
        body = await resp.read()
    finally:
        resp.release()
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ApiError(resp.status, f"expected a JSON object from {path}")
    return data


async def stream_lines(
    api: client.ApiClient, path: str, query: Sequence[tuple[str, str]], *, read_timeout: float,
    opened: Callable[[], None] = lambda: None,
) -> AsyncIterator[JSON]:
    """Open a watch and yield its events (one JSON object per line) until the server ends it.

    ``opened`` is called once the server accepted the watch (a 2xx answer), before any event.
    """
    resp = await _open(api, path, query, aiohttp.ClientTimeout(sock_connect=10, sock_read=read_timeout))
    opened()
    try:
        async for line in resp.content:
            if not line.strip():
                continue
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ApiError(0, "watch event is not a JSON object")
            yield event
    finally:
        resp.close()


async def load_api_client(kubeconfig: str | None, *, context: str | None = None) -> client.ApiClient | None:
    """An ApiClient from a kubeconfig file, else from the pod's service account, else None.

    None means "no cluster": the caller falls back to the file state.
    """
    cfg = client.Configuration()
    try:
        if kubeconfig:
            if not await asyncio.to_thread(os.path.isfile, kubeconfig):
                raise ClusterConfigError(f"kubeconfig {kubeconfig!r} does not exist")
            await config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            return None
    except ClusterConfigError:
        raise
    except Exception as e:  # the library raises ConfigException, KeyError, yaml errors, ...
        raise ClusterConfigError(f"cannot load cluster configuration: {e}") from e
    # One long-lived watch per kind and per referenced Secret/ConfigMap shares this pool.
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, 256)
    return client.ApiClient(cfg)
