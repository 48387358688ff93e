"""A small in-process Kubernetes API server (aiohttp) for the certificate tests.

It speaks the real REST paths kubernetes-asyncio calls for Secrets, Leases and
ValidatingWebhookConfigurations, with resourceVersion conflicts (409), 404 Status bodies, label selectors
on lists and RFC 6902 JSON patches. Every request is logged so tests can assert what was touched.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Key = tuple[str, str, str]  # (resource, namespace, name)


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return web.json_response(body, status=code)


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """add / replace / remove / test, enough for what the code under test sends."""
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = _pointer(op["path"])
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "test":
            actual = target[int(last)] if isinstance(target, list) else target.get(last)
            if actual != op["value"]:
                raise ValueError(f"test failed at {op['path']}: {actual!r} != {op['value']!r}")
        elif op["op"] in ("add", "replace"):
            if isinstance(target, list):
                target.insert(int(last), op["value"]) if op["op"] == "add" else target.__setitem__(
                    int(last), op["value"])
            else:
                if op["op"] == "replace" and last not in target:
                    raise ValueError(f"replace of missing {op['path']}")
                target[last] = op["value"]
        elif op["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise ValueError(f"unsupported op {op['op']}")
    return doc


@dataclass
class FakeKube:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- helpers for tests ------------------------------------------------------------------------------

    def put(self, resource: str, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(next(self._rv))
        if namespace:
            meta["namespace"] = namespace
        self.objects[(resource, namespace, meta["name"])] = obj
        return obj

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource, namespace, name))

    def app(self) -> web.Application:
        app = web.Application()
        core = "/api/v1/namespaces/{ns}/{resource:secrets}"
        coord = "/apis/coordination.k8s.io/v1/namespaces/{ns}/{resource:leases}"
        adm = "/apis/admissionregistration.k8s.io/v1/{resource:validatingwebhookconfigurations}"
        for base in (core, coord, adm):
            app.router.add_route("GET", base + "/{name}", self._get)
            app.router.add_route("PUT", base + "/{name}", self._put)
            app.router.add_route("DELETE", base + "/{name}", self._delete)
            app.router.add_route("PATCH", base + "/{name}", self._patch)
            app.router.add_route("GET", base, self._list)
            app.router.add_route("POST", base, self._create)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        app.middlewares.append(self._log)
        return app

    # -- handlers ---------------------------------------------------------------------------------------

    @web.middleware
    async def _log(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs))
        resp: web.StreamResponse = await handler(request)
        return resp

    @staticmethod
    def _key(request: web.Request) -> Key:
        m = request.match_info
        return (m["resource"], m.get("ns", ""), m.get("name", ""))

    async def _unknown(self, request: web.Request) -> web.Response:
        return _status(404, "NotFound", f"fake apiserver does not serve {request.method} {request.path}")

    async def _get(self, request: web.Request) -> web.Response:
        key = self._key(request)
        if key not in self.objects:
            return _status(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        return web.json_response(self.objects[key])

    async def _list(self, request: web.Request) -> web.Response:
        resource, ns, _ = self._key(request)
        selector = request.query.get("labelSelector", "")
        wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
        items = [o for (r, n, _), o in sorted(self.objects.items()) if r == resource and n == ns
                 and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]
        return web.json_response({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                  "items": items})

    async def _create(self, request: web.Request) -> web.Response:
        resource, ns, _ = self._key(request)
        obj = await request.json()
        name = obj.get("metadata", {}).get("name", "")
        if (resource, ns, name) in self.objects:
            return _status(409, "AlreadyExists", f'{resource} "{name}" already exists')
        return web.json_response(self.put(resource, ns, obj), status=201)

    async def _put(self, request: web.Request) -> web.Response:
        key = self._key(request)
        obj = await request.json()
        current = self.objects.get(key)
        if current is None:
            return _status(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        sent = obj.get("metadata", {}).get("resourceVersion")
        if sent and sent != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified; please apply your changes "
                                             "to the latest version and try again")
        return web.json_response(self.put(key[0], key[1], obj))

    async def _delete(self, request: web.Request) -> web.Response:
        key = self._key(request)
        if self.objects.pop(key, None) is None:
            return _status(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success"})

    async def _patch(self, request: web.Request) -> web.Response:
        key = self._key(request)
        if request.content_type != "application/json-patch+json":
            return _status(415, "UnsupportedMediaType", f"json-patch only, got {request.content_type}")
        current = self.objects.get(key)
        if current is None:
            return _status(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        try:
            patched = json_patch(current, json.loads(await request.read()))
        except (ValueError, KeyError, IndexError) as e:
            return _status(422, "Invalid", str(e))
        return web.json_response(self.put(key[0], key[1], patched))
