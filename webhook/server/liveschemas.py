"""Live CRD schemas: in a cluster the served CRDs replace ``--crds`` files, and an upgrade takes
effect without a restart.

The checks object keeps one ``SchemaSet`` reference; a new set is built off the event loop and swapped
in whole, so a review in flight sees either the old schemas or the new ones, never a mix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import structlog

from validators.objects import Obj
from validators.schema.crds import SchemaSet

log = structlog.get_logger("routegate")


class CrdSource(Protocol):
    @property
    def crd_version(self) -> int: ...

    def crd_documents(self) -> list[Obj]: ...


class HasSchemas(Protocol):
    schemas: SchemaSet | None


def merged(live: Sequence[Obj], files: Sequence[Obj]) -> list[Obj]:
    """Served CRDs win over files of the same name; file CRDs the cluster lacks stay in force."""
    names = {str(d.get("metadata", {}).get("name", "")) for d in live}
    return [*live, *(d for d in files if str(d.get("metadata", {}).get("name", "")) not in names)]


async def follow(source: CrdSource, checks: HasSchemas, *, files: Sequence[Obj] = (),
                 interval: float = 1.0) -> None:
    """Run until cancelled: rebuild the schemas whenever the served CRDs change."""
    seen = -1
    while True:
        version = source.crd_version
        if version != seen:
            docs = merged(source.crd_documents(), files)
            if docs:
                try:
                    checks.schemas = await asyncio.to_thread(SchemaSet.from_documents, docs)
                    log.info("schemas loaded", crds=len(docs), version=version)
                except Exception as exc:  # a broken CRD must not stop the webhook; keep the last good set
                    log.error("schemas not reloaded", error=repr(exc))
            seen = version
        await asyncio.sleep(interval)

