"""A Gateway port's frontend client-certificate validation (``spec.tls.frontend``): which validation
block governs the port, and which of its ``caCertificateRefs`` can be used.

One reading for the renderer (``haproxy_check/render/clienttrust.py`` writes the CA file from the usable
ones and a finding per unusable one) and for the listener status (``statuses``: ResolvedRefs and, when
no CA is usable, Accepted=False ``NoValidCACertificate``: such a port accepts no traffic). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from validators.crossobject import backendpolicies, backendrefs
from validators.findings import PathPart
from validators.objects import Obj, as_list, as_map, dig, ref_of
from validators.states import State

#: The listener ResolvedRefs reasons the Gateway API names for these problems.
INVALID_KIND, NOT_PERMITTED, INVALID_REF = "InvalidCACertificateKind", "RefNotPermitted", "InvalidCACertificateRef"


@dataclass(frozen=True, slots=True)
class Problem:
    path: tuple[PathPart, ...]
    reason: str  # INVALID_KIND, NOT_PERMITTED or INVALID_REF
    message: str


def validation_of(gateway: Obj, port: int) -> tuple[dict[str, object] | None, tuple[PathPart, ...]]:
    """The validation block that governs ``port`` of ``gateway`` and its field path (None: none).
    ``perPort[]`` (by port) overrides ``default``."""
    frontend = dig(gateway, "spec", "tls", "frontend")
    for i, entry in enumerate(as_list(dig(frontend, "perPort"))):
        if dig(entry, "port") == port:
            found = dig(entry, "tls", "validation")
            return (dict(as_map(found)) if found is not None else None,
                    ("spec", "tls", "frontend", "perPort", i, "tls", "validation"))
    found = dig(frontend, "default", "validation")
    return (dict(as_map(found)) if found is not None else None, ("spec", "tls", "frontend", "default", "validation"))


def check_refs(state: State, gateway: Obj, validation: dict[str, object],
               path: tuple[PathPart, ...]) -> tuple[list[str], list[Problem]]:
    """(the PEM bundles of the usable caCertificateRefs, deduplicated in order; a problem per other one)."""
    pems: list[str] = []
    problems: list[Problem] = []
    me = ref_of(gateway)
    for i, raw in enumerate(as_list(validation.get("caCertificateRefs"))):
        at = (*path, "caCertificateRefs", i)
        group, kind = str(dig(raw, "group") or ""), str(dig(raw, "kind") or "")
        name, ns = str(dig(raw, "name") or ""), str(dig(raw, "namespace") or me.namespace)
        if group != "" or kind not in ("ConfigMap", "Secret"):
            problems.append(Problem(at, INVALID_KIND,
                                    f"caCertificateRefs kind {group or 'core'}/{kind} is not a ConfigMap or Secret"))
            continue
        if not backendrefs.grant_allows(state, from_kind="Gateway", from_namespace=me.namespace, to_kind=kind,
                                       to_namespace=ns, to_name=name):
            problems.append(Problem(at, NOT_PERMITTED, f"RefNotPermitted: {kind} {ns}/{name} is in another namespace "
                                                       f"and no ReferenceGrant in {ns!r} permits it"))
            continue
        pem, problem = backendpolicies.ca_bundle(state, kind, ns, name)
        if problem:
            problems.append(Problem(at, INVALID_REF, problem))
        elif pem not in pems:
            pems.append(pem)
    return pems, problems
