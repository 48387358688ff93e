"""BackendTLSPolicy validation HAProxy can honour (seed 004, rule 2).

HAProxy verifies an upstream certificate against the name it sends as SNI (``validation.hostname``);
it cannot check a second, different SAN, a URI SAN, or a list of alternatives. Such policies would be
accepted by the API server and silently weaken verification, so admission rejects them, each with its
own message. Trust must also come from somewhere: a CA reference or the system store.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from validators import codes
from validators.contexts import Context
from validators.findings import Finding
from validators.objects import Obj, as_list, as_map, dig
from validators.texts import quote

_SNI = "HAProxy verifies the backend certificate via SNI (validation.hostname)"


def subject_alt_names(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 2: at most one SAN, of type Hostname, equal to ``validation.hostname``."""
    validation = as_map(dig(obj, "spec", "validation"))
    sans = as_list(validation.get("subjectAltNames"))
    at = ("spec", "validation", "subjectAltNames")
    hostname = validation.get("hostname")
    if len(sans) > 1:
        yield Finding(
            codes.SAN_SEVERAL,
            f"Too many: {len(sans)}: {_SNI}, so it cannot accept alternative names; "
            f"list at most one Hostname entry equal to {quote(hostname)}",
            at,
        )
    for k, san in enumerate(sans):
        san = as_map(san)
        if san.get("type") == "URI":
            yield Finding(
                codes.SAN_URI,
                f"URI {quote(san.get('uri'))} cannot be verified: {_SNI}; use a Hostname entry equal to "
                f"{quote(hostname)} or remove subjectAltNames",
                (*at, k, "type"),
            )
        elif san.get("type") == "Hostname":
            name = san.get("hostname")
            if not isinstance(name, str) or not isinstance(hostname, str) or name.lower() != hostname.lower():
                yield Finding(
                    codes.SAN_MISMATCH,
                    f"Invalid value: {quote(name)}: {_SNI}, so the only Hostname allowed is "
                    f"{quote(hostname)}",
                    (*at, k, "hostname"),
                )


def trust(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 2: trust comes from caCertificateRefs or ``wellKnownCACertificates: System``."""
    validation = dig(obj, "spec", "validation")
    if not isinstance(validation, Mapping):
        return
    if as_list(validation.get("caCertificateRefs")) or validation.get("wellKnownCACertificates") == "System":
        return
    well_known = validation.get("wellKnownCACertificates")
    detail = f"wellKnownCACertificates {quote(well_known)} is not supported" if well_known else "none is set"
    yield Finding(
        codes.TLS_NO_TRUST,
        f"Required value: caCertificateRefs or wellKnownCACertificates: \"System\" ({detail}); "
        "without a CA the backend cannot be verified",
        ("spec", "validation"),
    )
