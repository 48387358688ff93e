"""Which of the kinds the gate knows are served, and at which version.

Each kind has candidate versions, preferred first (``validators.objects.KINDS``); the gate watches
the first one the cluster serves. Built-in kinds come from API discovery. Kinds served by CRDs are
decided from the CRD objects themselves while the CRD watch works: a CRD's Established condition is
the moment its API is served, and watching CRDs is also how a CRD installed later (or upgraded to a
new version) is picked up without a restart. Discovery is the fallback when CRDs cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes_asyncio import client

from validators.objects import KindInfo, Obj
from webhook.cluster import clients

BUILTIN_GROUPS = frozenset({"", "discovery.k8s.io"})  # served by the apiserver, never by a CRD
CRD_INFO = KindInfo(
    "CustomResourceDefinition",
    "apiextensions.k8s.io",
    "customresourcedefinitions",
    ("v1",),
    namespaced=False,
    reviewed=False,
)

Served = dict[tuple[str, str], set[str]]  # (group, plural) -> served versions


async def discover(api: client.ApiClient, groups: Iterable[str]) -> Served:
    """API discovery for the given groups: /api/v1, /apis, then /apis/<group>/<version> of each."""
    wanted = set(groups)
    served: Served = {}

    def add(group: str, version: str, resources: Any) -> None:
        for res in resources or ():
            name = res.get("name", "") if isinstance(res, Mapping) else ""
            if name and "/" not in name:  # "/" marks subresources such as httproutes/status
                served.setdefault((group, name), set()).add(version)

    if "" in wanted:
        add("", "v1", (await clients.get_json(api, "/api/v1")).get("resources"))
    listed = await clients.get_json(api, "/apis")
    for group in listed.get("groups") or ():
        name = group.get("name", "")
        if name not in wanted:
            continue
        for version in group.get("versions") or ():
            v = version.get("version", "")
            try:
                resources = (await clients.get_json(api, f"/apis/{name}/{v}")).get("resources")
            except clients.ApiError as e:
                if e.status == 404:  # removed between the two requests
                    continue
                raise
            add(name, v, resources)
    return served


def served_by_crds(crds: Iterable[Obj]) -> Served:
    """The versions each established CRD serves."""
    served: Served = {}
    for crd in crds:
        spec = crd.get("spec")
        if not isinstance(spec, Mapping) or not _established(crd):
            continue
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        for version in spec.get("versions") or ():
            if isinstance(version, Mapping) and version.get("served", True) and version.get("name"):
                served.setdefault((group, plural), set()).add(str(version["name"]))
    return served


def _established(crd: Obj) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )


def choose(info: KindInfo, served: Served) -> str | None:
    """The first candidate version the cluster serves, or None when the kind is not served."""
    versions = served.get((info.group, info.plural), set())
    return next((v for v in info.versions if v in versions), None)


def api_version(info: KindInfo, version: str) -> str:
    return f"{info.group}/{version}" if info.group else version


def path(info: KindInfo, version: str, namespace: str | None = None) -> str:
    """The collection URL: all namespaces unless ``namespace`` is given."""
    base = f"/apis/{info.group}/{version}" if info.group else f"/api/{version}"
    return f"{base}/namespaces/{namespace}/{info.plural}" if namespace else f"{base}/{info.plural}"
