"""An in-process fake Kubernetes API server that speaks the HTTP protocol kubernetes-asyncio uses.

No real API server is available in tests, and mocking the client would test nothing: this fake serves
discovery, paged lists with a monotonic ``resourceVersion``, watches as chunked streams of JSON lines
(with bookmarks), 410 Gone for compacted history, and CRDs that add their API to discovery when
installed. Tests change objects with ``create``/``update``/``delete`` and inject failures with
``compact``, ``drop_watches``, ``fail_next``, ``forbid`` (RBAC's 403) and ``bookmark``.

Objects are read one by one (GET .../NAME), and kinds whose CRD declares ``subresources.status`` serve
the status subresource as a real apiserver does: GET, PUT and merge-PATCH on .../NAME/status change
only ``status`` (and bump ``resourceVersion``, never ``generation``); a body carrying a
``metadata.resourceVersion`` that is no longer current is refused with 409 Conflict; a write of the
object itself keeps the stored status and bumps ``generation`` only when something other than
metadata and status changed. ``forbid("httproutes/status")`` refuses status writes, as RBAC does
without the subresource's verbs.

Usage::

    async with FakeKube() as kube:
        path = kube.write_kubeconfig(tmp_path / "kubeconfig")
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import pickle
import ssl
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from aiohttp import web

Obj = dict[str, Any]
TOKEN = "fake-token"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False  # serves the status subresource

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTINS = (
    Resource("", "v1", "namespaces", "Namespace", False),
    Resource("", "v1", "services", "Service", True),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    Resource("", "v1", "events", "Event", True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
    Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
             "ValidatingAdmissionPolicyBinding", False),
)
# POST (create), merge PATCH and PUT (replace, resourceVersion-checked) served for these only
WRITABLE = frozenset({("", "events"), ("coordination.k8s.io", "leases")})
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


@dataclass
class _Event:
    rv: int
    type: str
    group: str
    plural: str
    obj: Obj


@dataclass
class _Watcher:
    group: str
    plural: str
    namespace: str | None
    name: str | None
    queue: asyncio.Queue[_Event | str] = field(default_factory=asyncio.Queue)


class FakeKube:
    """The fake API server. All state lives in this object; the aiohttp app only reads and streams it."""

    def __init__(self, *, page_limit_max: int = 500, token: str = TOKEN, tls: bool = False) -> None:
        self.token = token
        self.tls = tls
        self.ca_pem = b""
        self.page_limit_max = page_limit_max
        self.rv = 100
        self.resources: dict[tuple[str, str, str], Resource] = {}
        self.objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self.history: list[_Event] = []
        self.compacted_rv = 0
        self.watchers: list[_Watcher] = []
        self.failures: list[tuple[str, str, int]] = []  # (verb, plural, status) for the next requests
        self.gone_as_http = False  # 410 on watch as an HTTP status instead of an ERROR event
        self.requests: list[str] = []  # "VERB path?query" of every request, for assertions
        self.forbidden: set[tuple[str, str | None, str | None]] = set()  # (plural, namespace, name)
        self.user = "system:serviceaccount:routegate-system:routegate"
        self._continues: dict[str, tuple[int, list[Obj]]] = {}
        for res in BUILTINS:
            self._register(res)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ---- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeKube:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        app.router.add_post("/{tail:.*}", self._write)
        app.router.add_patch("/{tail:.*}", self._write)
        app.router.add_put("/{tail:.*}", self._write)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1, handler_cancellation=True)
        await self._runner.setup()
        context = None
        if self.tls:
            context, self.ca_pem = _server_tls()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        server = site._server
        assert server is not None
        port = cast(asyncio.Server, server).sockets[0].getsockname()[1]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    def write_kubeconfig(self, path: Path) -> str:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "fake",
            "clusters": [
                {
                    "name": "fake",
                    "cluster": {
                        "server": self.url,
                        **({"certificate-authority-data": base64.b64encode(self.ca_pem).decode()} if self.tls else {}),
                    },
                }
            ],
            "users": [{"name": "fake", "user": {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }
        path.write_text(json.dumps(config))
        return str(path)

    # ---- test helpers: objects -----------------------------------------------------------------

    def _register(self, res: Resource) -> None:
        self.resources[(res.group, res.version, res.plural)] = res
        self.objects.setdefault((res.group, res.plural), {})

    def _resource_for(self, obj: Mapping[str, Any]) -> Resource:
        api_version, kind = obj["apiVersion"], obj["kind"]
        group, _, version = api_version.rpartition("/")
        for res in self.resources.values():
            if res.group == group and res.version == version and res.kind == kind:
                return res
        raise KeyError(f"no resource serves {api_version} {kind}")

    def _emit(self, type_: str, res: Resource, obj: Obj) -> None:
        event = _Event(self.rv, type_, res.group, res.plural, copy.deepcopy(obj))
        self.history.append(event)
        for w in self.watchers:
            if (w.group, w.plural) == (res.group, res.plural):
                w.queue.put_nowait(event)

    def create(self, obj: Mapping[str, Any]) -> Obj:
        res = self._resource_for(obj)
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        if not res.namespaced:
            meta.pop("namespace", None)
        key = (meta.get("namespace", ""), meta["name"])
        bucket = self.objects[(res.group, res.plural)]
        if key in bucket:
            raise KeyError(f"{res.kind} {key} exists")
        self.rv += 1
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", "2026-11-29T14:00:00Z")
        meta["resourceVersion"] = str(self.rv)
        meta["generation"] = 1
        if (res.group, res.plural) == CRD_KEY:
            self._install_crd(stored)
        bucket[key] = stored
        self._emit("ADDED", res, stored)
        return copy.deepcopy(stored)

    def preload(self, objs: Iterable[Mapping[str, Any]]) -> int:
        """Store objects that exist before anyone watches (a cluster's existing state), without an event each:
        lists and watches from no resourceVersion see them, as they see objects older than the history.
        ``create`` per object deep-copies three times and records an event; at 20,000 objects that took
        12.6 s, nearly all of it in ``copy.deepcopy``. Returns the number stored."""
        count = 0
        for obj in pickle.loads(pickle.dumps(list(objs), protocol=5)):  # one copy, the fastest way
            res = self._resource_for(obj)
            meta = obj.setdefault("metadata", {})
            if not res.namespaced:
                meta.pop("namespace", None)
            key = (meta.get("namespace", ""), meta["name"])
            bucket = self.objects[(res.group, res.plural)]
            if key in bucket:
                raise KeyError(f"{res.kind} {key} exists")
            if (res.group, res.plural) == CRD_KEY:
                raise ValueError("preload stores plain objects; create CRDs with create()")
            self.rv += 1
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2026-11-29T14:00:00Z")
            meta["resourceVersion"] = str(self.rv)
            meta["generation"] = 1
            bucket[key] = obj
            count += 1
        return count

    def update(self, obj: Mapping[str, Any]) -> Obj:
        res = self._resource_for(obj)
        stored = copy.deepcopy(dict(obj))
        meta = stored["metadata"]
        key = (meta.get("namespace", "") if res.namespaced else "", meta["name"])
        bucket = self.objects[(res.group, res.plural)]
        old = bucket[key]
        self.rv += 1
        meta["uid"] = old["metadata"]["uid"]
        meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        meta["resourceVersion"] = str(self.rv)
        if res.status:  # the status subresource owns status: a write of the object keeps the stored one
            stored.pop("status", None)
            if "status" in old:
                stored["status"] = copy.deepcopy(old["status"])
        generation = old["metadata"].get("generation", 1)
        meta["generation"] = generation + 1 if _spec_of(stored) != _spec_of(old) else generation
        if (res.group, res.plural) == CRD_KEY:
            self._uninstall_crd(old, keep_objects=True)
            self._install_crd(stored)
        bucket[key] = stored
        self._emit("MODIFIED", res, stored)
        return copy.deepcopy(stored)

    def apply(self, obj: Mapping[str, Any]) -> Obj:
        """Create or update, like ``kubectl apply`` without the three-way merge."""
        res = self._resource_for(obj)
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", "") if res.namespaced else "", meta.get("name", ""))
        exists = key in self.objects[(res.group, res.plural)]
        return self.update(obj) if exists else self.create(obj)

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        res = self._resource_for({"apiVersion": api_version, "kind": kind})
        bucket = self.objects[(res.group, res.plural)]
        old = bucket.pop((namespace if res.namespaced else "", name))
        self.rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        if (res.group, res.plural) == CRD_KEY:
            self._uninstall_crd(old, keep_objects=False)
        self._emit("DELETED", res, gone)

    def get(self, group: str, plural: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((group, plural), {}).get((namespace, name))

    def write_status(self, group: str, plural: str, namespace: str, name: str, status: Obj | None, *,
                     resource_version: str = "") -> Obj:
        """Replace an object's status as PUT .../status does (a test standing for another controller).

        Raises KeyError for an unknown object, ValueError for a stale ``resource_version``."""
        res = next(r for r in self.resources.values() if (r.group, r.plural) == (group, plural))
        bucket = self.objects[(group, plural)]
        old = bucket[(namespace if res.namespaced else "", name)]
        if resource_version and resource_version != old["metadata"]["resourceVersion"]:
            raise ValueError(f"the object has been modified; resourceVersion {resource_version} is not "
                             f"{old['metadata']['resourceVersion']}")
        stored = copy.deepcopy(old)
        if status is None:
            stored.pop("status", None)
        else:
            stored["status"] = copy.deepcopy(status)
        self.rv += 1
        stored["metadata"]["resourceVersion"] = str(self.rv)
        bucket[(namespace if res.namespaced else "", name)] = stored
        self._emit("MODIFIED", res, stored)
        return copy.deepcopy(stored)

    # ---- CRDs ----------------------------------------------------------------------------------

    def _install_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            if version.get("served", True):
                self._register(
                    Resource(
                        spec["group"],
                        version["name"],
                        names["plural"],
                        names["kind"],
                        spec.get("scope", "Namespaced") == "Namespaced",
                        "status" in (version.get("subresources") or {}),
                    )
                )
        crd["status"] = {
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True"},
                {"type": "Established", "status": "True"},
            ],
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
        }

    def _uninstall_crd(self, crd: Obj, *, keep_objects: bool) -> None:
        spec = crd["spec"]
        plural = spec["names"]["plural"]
        for key in [k for k in self.resources if k[0] == spec["group"] and k[2] == plural]:
            del self.resources[key]
        if keep_objects:
            return
        res = Resource(spec["group"], "", plural, spec["names"]["kind"], True)
        for obj in self.objects.pop((spec["group"], plural), {}).values():
            self.rv += 1
            self._emit("DELETED", res, obj)

    # ---- test helpers: failures ----------------------------------------------------------------

    def compact(self) -> None:
        """Forget the event history: watches from an older resourceVersion now get 410 Gone."""
        self.history.clear()
        self.compacted_rv = self.rv

    def drop_watches(self) -> None:
        """Abort every open watch stream mid-way (the TCP connection closes without the last chunk)."""
        for w in self.watchers:
            w.queue.put_nowait("drop")

    def end_watches(self) -> None:
        """End every open watch stream cleanly, as the server does when timeoutSeconds expires."""
        for w in self.watchers:
            w.queue.put_nowait("end")

    def expire_watches(self) -> None:
        """Send an ERROR 410 event on every open watch (what etcd compaction does to a slow watcher)."""
        for w in self.watchers:
            w.queue.put_nowait("expire")

    def bookmark(self) -> None:
        for w in self.watchers:
            w.queue.put_nowait("bookmark")

    def fail_next(self, verb: str, status: int = 500, times: int = 1, plural: str = "") -> None:
        """Answer the next ``times`` requests of ``verb`` ("list" or "watch") with an HTTP error.

        With ``plural``, only requests for that resource fail.
        """
        self.failures.extend([(verb, plural, status)] * times)

    def forbid(self, plural: str, namespace: str | None = None, name: str | None = None) -> None:
        """Answer 403 Forbidden to lists and watches of ``plural`` (in ``namespace``, for ``name``).

        As RBAC does: a role with ``resourceNames: [a]`` authorizes a list/watch whose field selector
        is ``metadata.name=a`` and refuses the same request for any other name. None matches all.
        """
        self.forbidden.add((plural, namespace, name))

    def allow(self, plural: str, namespace: str | None = None, name: str | None = None) -> None:
        self.forbidden.discard((plural, namespace, name))

    def _refused(self, verb: str, res: Resource, namespace: str | None, name: str | None, *,
                 subresource: str = "") -> web.Response | None:
        resource = f"{res.plural}/{subresource}" if subresource else res.plural
        for plural, ns, nm in self.forbidden:
            if plural == resource and ns in (None, namespace) and nm in (None, name):
                where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
                return _status(403, "Forbidden", f'{resource} is forbidden: User "{self.user}" cannot {verb} '
                               f'resource "{resource}" in API group "{res.group}"{where}')
        return None

    def watch_count(self, plural: str | None = None) -> int:
        return sum(1 for w in self.watchers if plural is None or w.plural == plural)

    # ---- HTTP -----------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(f"GET {request.path_qs}")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _status(401, "Unauthorized", "missing or wrong bearer token")
        parts = [p for p in request.path.split("/") if p]
        if parts == ["api"]:
            return web.json_response({"kind": "APIVersions", "versions": ["v1"]})
        if parts == ["apis"]:
            return web.json_response(self._groups())
        if parts[:1] == ["api"] and len(parts) == 2:
            return self._resource_list("", parts[1])
        if parts[:1] == ["apis"] and len(parts) == 3:
            return self._resource_list(parts[1], parts[2])
        group, version, rest = ("", parts[1], parts[2:]) if parts[:1] == ["api"] else (parts[1], parts[2], parts[3:])
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or (group, version, rest[0]) not in self.resources:
            return _status(404, "NotFound", f"the server could not find the requested resource {request.path}")
        res = self.resources[(group, version, rest[0])]
        if len(rest) > 1:
            return self._get_one(res, namespace or "", rest[1:])
        refused = self._refused("watch" if _truthy(request.query.get("watch")) else "list", res, namespace,
                                _name_selector(request.query.get("fieldSelector", "")))
        if refused is not None:
            return refused
        if _truthy(request.query.get("watch")):
            return await self._watch(request, res, namespace)
        return self._list(request, res, namespace)

    async def _write(self, request: web.Request) -> web.Response:
        """Create (POST on a collection), merge-patch (PATCH) or replace (PUT) an object of a writable kind
        (Events, Leases), or write a status subresource."""
        self.requests.append(f"{request.method} {request.path_qs}")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _status(401, "Unauthorized", "missing or wrong bearer token")
        parts = [p for p in request.path.split("/") if p]
        group, version, rest = ("", parts[1], parts[2:]) if parts[:1] == ["api"] else (parts[1], parts[2], parts[3:])
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        res = self.resources.get((group, version, rest[0])) if rest else None
        if res is not None and len(rest) == 3 and rest[2] == "status" and request.method in ("PUT", "PATCH"):
            return await self._write_status(request, res, namespace, rest[1])
        if res is None or (group, res.plural) not in WRITABLE:
            return _status(405, "MethodNotAllowed", f"{request.method} is not served for {request.path}")
        body = await request.json()
        status = self._take_failure(request.method.lower(), res.plural)
        if status is not None:
            return _status(status, "Failure", "injected failure")
        if request.method == "POST" and len(rest) == 1:
            body.setdefault("metadata", {})["namespace"] = namespace
            body.setdefault("apiVersion", res.api_version)  # the client may send a bare dict
            body.setdefault("kind", res.kind)
            try:
                return web.json_response(self.create(body), status=201)
            except KeyError:
                return _status(409, "AlreadyExists", f"{res.kind} {body['metadata'].get('name')} already exists")
        if request.method == "PATCH" and len(rest) == 2:
            stored = self.get(group, res.plural, namespace, rest[1])
            if stored is None:
                return _status(404, "NotFound", f"{res.plural} {rest[1]} not found")
            return web.json_response(self.update(_merge(stored, body)))
        if request.method == "PUT" and len(rest) == 2:
            stored = self.get(group, res.plural, namespace, rest[1])
            if stored is None:
                return _status(404, "NotFound", f"{res.plural} {rest[1]} not found")
            wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
            if wanted and wanted != stored["metadata"]["resourceVersion"]:
                return _conflict(f"{res.plural} {rest[1]!r}")
            body["metadata"] = {**body.get("metadata", {}), "name": rest[1], "namespace": namespace}
            body["apiVersion"], body["kind"] = res.api_version, res.kind
            return web.json_response(self.update(body))
        return _status(405, "MethodNotAllowed", f"{request.method} is not served for {request.path}")

    def _get_one(self, res: Resource, namespace: str, rest: list[str]) -> web.Response:
        """GET .../NAME and GET .../NAME/status (the whole object either way, as the apiserver answers)."""
        if len(rest) > 2 or (len(rest) == 2 and (rest[1] != "status" or not res.status)):
            return _status(404, "NotFound", f"the server could not find the requested resource {'/'.join(rest)}")
        refused = self._refused("get", res, namespace or None, rest[0], subresource=rest[1] if len(rest) == 2 else "")
        if refused is not None:
            return refused
        failure = self._take_failure("get", res.plural)
        if failure is not None:
            return _status(failure, "InternalError", "injected failure")
        stored = self.get(res.group, res.plural, namespace if res.namespaced else "", rest[0])
        if stored is None:
            return _status(404, "NotFound", f'{res.plural}.{res.group} "{rest[0]}" not found')
        return web.json_response(self._served(res, stored, in_list=False))

    async def _write_status(self, request: web.Request, res: Resource, namespace: str, name: str) -> web.Response:
        """PUT (replace) or merge-PATCH of .../NAME/status: only ``status`` changes, ``generation`` stays."""
        if not res.status:
            return _status(404, "NotFound", f"{res.plural} has no status subresource")
        refused = self._refused("update" if request.method == "PUT" else "patch", res, namespace or None, name,
                                subresource="status")
        if refused is not None:
            return refused
        if request.method == "PATCH" and request.content_type != "application/merge-patch+json":
            return _status(415, "UnsupportedMediaType",
                           f"the fake serves merge patches only, not {request.content_type}")
        try:
            body = await request.json()
        except ValueError:
            return _status(400, "BadRequest", "the body is not JSON")
        if not isinstance(body, dict):
            return _status(400, "BadRequest", "the body is not an object")
        failure = self._take_failure("update" if request.method == "PUT" else "patch", f"{res.plural}/status")
        if failure is not None:
            return _status(failure, "Conflict" if failure == 409 else "InternalError", "injected failure")
        key = namespace if res.namespaced else ""
        stored = self.get(res.group, res.plural, key, name)
        if stored is None:
            return _status(404, "NotFound", f'{res.plural}.{res.group} "{name}" not found')
        wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if wanted and wanted != stored["metadata"]["resourceVersion"]:
            return _conflict(f"{res.plural}.{res.group} {name!r}")
        if request.method == "PUT":
            status = body.get("status")
        else:
            patched = _merge(stored, {"status": body["status"]} if "status" in body else {})
            status = patched.get("status")
        written = self.write_status(res.group, res.plural, key, name, status)
        return web.json_response(self._served(res, written, in_list=False))

    def _groups(self) -> Obj:
        versions: dict[str, list[str]] = {}
        for group, version, _ in sorted(self.resources):
            if group and version not in versions.setdefault(group, []):
                versions[group].append(version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in versions.items()
            ],
        }

    def _resource_list(self, group: str, version: str) -> web.Response:
        served = [r for (g, v, _), r in sorted(self.resources.items()) if (g, v) == (group, version)]
        if not served:
            return _status(404, "NotFound", "the server could not find the requested resource")
        gv = f"{group}/{version}" if group else version
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": gv,
                "resources": [
                    {
                        "name": r.plural,
                        "singularName": r.kind.lower(),
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                    }
                    for r in served
                ],
            }
        )

    def _take_failure(self, verb: str, plural: str) -> int | None:
        for i, (v, p, status) in enumerate(self.failures):
            if v == verb and p in ("", plural):
                del self.failures[i]
                return status
        return None

    def _matching(self, res: Resource, obj: Obj, namespace: str | None, name: str | None) -> bool:
        meta = obj["metadata"]
        return (namespace is None or meta.get("namespace") == namespace) and (name is None or meta["name"] == name)

    def _served(self, res: Resource, obj: Obj, *, in_list: bool) -> Obj:
        # a top-level copy is enough: stored objects are never changed in place (every write stores a new
        # deep copy), and only top-level keys are set here. A deep copy per item made a 10,000-route list
        # cost seconds of this (shared) event loop.
        out = dict(obj)
        if in_list and res.group in ("", "discovery.k8s.io", "apiextensions.k8s.io"):
            # built-in list items carry no kind/apiVersion, as on a real apiserver
            out.pop("kind", None)
            out.pop("apiVersion", None)
        else:
            out["kind"], out["apiVersion"] = res.kind, res.api_version
        return out

    def _list(self, request: web.Request, res: Resource, namespace: str | None) -> web.Response:
        status = self._take_failure("list", res.plural)
        if status is not None:
            return _status(status, "InternalError", "injected failure")
        name = _name_selector(request.query.get("fieldSelector", ""))
        limit = min(int(request.query.get("limit", "0") or 0) or 10**9, self.page_limit_max)
        token = request.query.get("continue")
        if token:
            if token not in self._continues:
                return _status(410, "Expired", "The provided continue parameter is too old")
            rv, items = self._continues.pop(token)
        else:
            rv = self.rv
            bucket = self.objects.get((res.group, res.plural), {})
            items = [
                self._served(res, o, in_list=True)
                for _, o in sorted(bucket.items())
                if self._matching(res, o, namespace, name)
            ]
        page, rest = items[:limit], items[limit:]
        meta: Obj = {"resourceVersion": str(rv)}
        if rest:
            new_token = base64.b64encode(uuid.uuid4().bytes).decode()
            self._continues[new_token] = (rv, rest)
            meta["continue"] = new_token
        return web.json_response(
            {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": page}
        )

    async def _watch(self, request: web.Request, res: Resource, namespace: str | None) -> web.StreamResponse:
        status = self._take_failure("watch", res.plural)
        if status is not None:
            return _status(status, "InternalError", "injected failure")
        name = _name_selector(request.query.get("fieldSelector", ""))
        since = int(request.query.get("resourceVersion", "0") or 0)
        bookmarks = _truthy(request.query.get("allowWatchBookmarks"))
        timeout = float(request.query.get("timeoutSeconds", "0") or 0) or None
        if since and since < self.compacted_rv and self.gone_as_http:
            return _status(410, "Expired", f"too old resource version: {since} ({self.compacted_rv})")
        watcher = _Watcher(res.group, res.plural, namespace, name)
        self.watchers.append(watcher)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            if since and since < self.compacted_rv:
                await _send(resp, _gone(since, self.compacted_rv))
                return resp
            sent = since
            if not since:  # no resourceVersion: synthetic ADDED for everything, then live
                for obj in sorted(
                    self.objects.get((res.group, res.plural), {}).values(),
                    key=lambda o: int(o["metadata"]["resourceVersion"]),
                ):
                    if self._matching(res, obj, namespace, name):
                        await _send(resp, {"type": "ADDED", "object": self._served(res, obj, in_list=False)})
                sent = self.rv
            for event in list(self._replay(res, sent)):
                if self._matching(res, event.obj, namespace, name):
                    await _send(resp, {"type": event.type, "object": self._served(res, event.obj, in_list=False)})
                sent = max(sent, event.rv)
            async with asyncio.timeout(timeout):
                while True:
                    item = await watcher.queue.get()
                    if item == "drop":
                        if request.transport is not None:
                            request.transport.abort()
                        return resp
                    if item == "end":
                        return resp
                    if item == "expire":
                        await _send(resp, _gone(sent, self.rv))
                        return resp
                    if item == "bookmark":
                        if bookmarks:
                            await _send(
                                resp,
                                {
                                    "type": "BOOKMARK",
                                    "object": {
                                        "kind": res.kind,
                                        "apiVersion": res.api_version,
                                        "metadata": {"resourceVersion": str(self.rv)},
                                    },
                                },
                            )
                        continue
                    assert isinstance(item, _Event)
                    if item.rv > sent and self._matching(res, item.obj, namespace, name):
                        await _send(resp, {"type": item.type, "object": self._served(res, item.obj, in_list=False)})
                        sent = item.rv
        except (TimeoutError, ConnectionResetError):
            return resp
        finally:
            self.watchers.remove(watcher)
        return resp

    def _replay(self, res: Resource, since: int) -> Iterator[_Event]:
        for event in self.history:
            if event.rv > since and (event.group, event.plural) == (res.group, res.plural):
                yield event


def _server_tls() -> tuple[ssl.SSLContext, bytes]:
    """A throwaway self-signed certificate for 127.0.0.1, and its PEM (the kubeconfig's CA)."""
    import datetime
    import ipaddress
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-kube-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "tls.crt").write_bytes(cert_pem)
        Path(tmp, "tls.key").write_bytes(key_pem)
        context.load_cert_chain(Path(tmp, "tls.crt"), Path(tmp, "tls.key"))
    return context, cert_pem


def _conflict(what: str) -> web.Response:
    return _status(409, "Conflict", f"Operation cannot be fulfilled on {what}: the object has been modified; "
                   "please apply your changes to the latest version and try again")


def _spec_of(obj: Obj) -> Obj:
    """What a change of bumps ``generation``: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _merge(target: Obj, patch: Obj) -> Obj:
    """RFC 7386 JSON merge patch."""
    out = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _truthy(value: str | None) -> bool:
    """Go's strconv.ParseBool, which the apiserver uses for query flags."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _name_selector(selector: str) -> str | None:
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if key == "metadata.name":
            return value.lstrip("=")
    return None


def _gone(since: int, now: int) -> Obj:
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {since} ({now})",
            "reason": "Expired",
            "code": 410,
        },
    }


async def _send(resp: web.StreamResponse, event: Obj) -> None:
    await resp.write(json.dumps(event).encode() + b"\n")


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
        status=code,
    )


def crd(group: str, kind: str, plural: str, versions: tuple[str, ...], *, scope: str = "Namespaced") -> Obj:
    """A minimal CustomResourceDefinition serving ``versions`` (the first is the storage version)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
                for i, v in enumerate(versions)
            ],
        },
    }
