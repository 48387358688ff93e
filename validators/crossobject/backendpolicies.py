"""Which BackendTLSPolicy governs a Service port, and whether it yields a usable CA.

Pure, shared by the renderer (server TLS options, CA files) and the cross-object findings. A policy
without a usable CA blocks its backend: the gateway never falls back to plaintext.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cryptography import x509

from validators.crossobject import backendrefs
from validators.objects import Obj, Ref, as_list, dig, name_of, namespace_of, ref_of
from validators.states import State
from validators.views import indexes
from validators.views.attachments import age_key

PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----")


@dataclass(frozen=True, slots=True)
class CAProblem:
    path: tuple[str | int, ...]  # in the policy
    message: str


@dataclass(frozen=True, slots=True)
class BackendTLS:
    policy: Ref
    hostname: str
    system_ca: bool  # wellKnownCACertificates: System
    ca_pem: str  # concatenated PEM certificates from caCertificateRefs ("" when none)
    problems: tuple[CAProblem, ...] = ()

    @property
    def usable(self) -> bool:
        return bool(self.hostname) and (self.system_ca or bool(self.ca_pem))

    @property
    def blocked_reason(self) -> str:
        if not self.hostname:
            return f"{self.policy} has no validation.hostname"
        if not self.usable:
            details = "; ".join(p.message for p in self.problems) or "no CA configured"
            return f"{self.policy} has no usable CA ({details}); the backend is blocked"
        return ""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def targets(policy: Obj, service: Obj, port: int) -> int:
    """0 = the policy does not target this Service port; 1 = whole Service; 2 = this named port."""
    best = 0
    for t in as_list(dig(policy, "spec", "targetRefs")):
        if _str(dig(t, "group")) != "" or _str(dig(t, "kind")) != "Service":
            continue
        if _str(dig(t, "name")) != name_of(service):
            continue
        section = _str(dig(t, "sectionName"))
        if not section:
            best = max(best, 1)
        elif section == _str(dig(backendrefs.service_port(service, port), "name")):
            best = 2
    return best


def ca_certificates(text: str) -> list[str]:
    return PEM_CERT.findall(text.replace("\r\n", "\n"))


@lru_cache(maxsize=4096)
def _parse_error(pem: str) -> str | None:
    """Why HAProxy's OpenSSL would refuse this PEM block as a CA (None when it loads). A block that only
    looks like PEM (e.g. ``AAAA`` between the markers) makes ``haproxy -c`` fail with an alert whose text
    depends on what else the config loads, so it is judged here, on the field, before any render."""
    try:
        x509.load_pem_x509_certificate(pem.encode("ascii", "replace"))
    except ValueError as e:
        return str(e).split("\n", 1)[0] or "not a certificate"
    return None


def _ca_from_ref(state: State, policy: Obj, index: int, raw: Any) -> tuple[str, CAProblem | None]:
    path = ("spec", "validation", "caCertificateRefs", index)
    kind, group, name = _str(dig(raw, "kind")), _str(dig(raw, "group")), _str(dig(raw, "name"))
    if group != "" or kind not in ("ConfigMap", "Secret"):
        return "", CAProblem(path, f"caCertificateRefs kind {group or 'core'}/{kind} is not a ConfigMap "
                                   "or Secret")
    pem, problem = ca_bundle(state, kind, namespace_of(policy), name)
    return pem, CAProblem(path, problem) if problem else None


def ca_bundle(state: State, kind: str, ns: str, name: str) -> tuple[str, str]:
    """(the PEM certificates of a ConfigMap's/Secret's ``ca.crt``, "") or ("", why there are none)."""
    obj = state.get(kind, ns, name)
    if obj is None:
        return "", f"{kind} {ns}/{name} does not exist"
    if kind == "ConfigMap":
        text = _str(dig(obj, "data", "ca.crt"))
    else:
        text = _str(dig(obj, "stringData", "ca.crt"))
        encoded = _str(dig(obj, "data", "ca.crt"))
        if encoded and not text:
            try:
                text = base64.b64decode(encoded, validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                return "", f"{kind} {ns}/{name} key ca.crt is not valid base64"
    if not text:
        return "", f"{kind} {ns}/{name} has no key ca.crt"
    certs = ca_certificates(text)
    if not certs:
        return "", f"{kind} {ns}/{name} key ca.crt holds no PEM certificate"
    for i, cert in enumerate(certs):
        error = _parse_error(cert)
        if error is not None:
            return "", f"{kind} {ns}/{name} key ca.crt: certificate {i + 1} of {len(certs)} cannot be loaded ({error})"
    return "\n".join(certs) + "\n", ""


def resolve(state: State, policy: Obj) -> BackendTLS:
    """The CA and hostname a policy yields, with a problem per unusable caCertificateRefs entry."""
    validation = dig(policy, "spec", "validation")
    pems: list[str] = []
    problems: list[CAProblem] = []
    for i, raw in enumerate(as_list(dig(validation, "caCertificateRefs"))):
        pem, problem = _ca_from_ref(state, policy, i, raw)
        if problem is not None:
            problems.append(problem)
        elif pem not in pems:
            pems.append(pem)
    system = _str(dig(validation, "wellKnownCACertificates")) == "System" and not pems
    return BackendTLS(ref_of(policy), _str(dig(validation, "hostname")).lower(), system, "".join(pems),
                      tuple(problems))


_POLICY_KINDS = frozenset({"BackendTLSPolicy"})


def _policies_by_target(state: State) -> dict[tuple[str, str], list[Obj]]:
    """BackendTLSPolicies by (namespace, name) of each core Service they target, oldest first."""
    out: dict[tuple[str, str], list[Obj]] = {}
    for p in sorted(state.list("BackendTLSPolicy"), key=age_key):
        names = {_str(dig(t, "name")) for t in as_list(dig(p, "spec", "targetRefs"))
                 if _str(dig(t, "group")) == "" and _str(dig(t, "kind")) == "Service"}
        for name in sorted(names):
            out.setdefault((namespace_of(p), name), []).append(p)
    return out


def _target_keys(policy: Obj) -> set[tuple[str, str]]:
    """(Service name, sectionName or "") of each core Service the policy targets."""
    return {(_str(dig(t, "name")), _str(dig(t, "sectionName"))) for t in as_list(dig(policy, "spec", "targetRefs"))
            if _str(dig(t, "group")) == "" and _str(dig(t, "kind")) == "Service"}


def conflict_winner(state: State, policy: Obj) -> Obj | None:
    """The older policy that governs every target of ``policy`` in its place (GEP-713: of policies
    naming the same Service and sectionName, the oldest wins; then namespace/name), or None when
    ``policy`` governs at least one of its targets. A sectionName target and a whole-Service one do
    not conflict: the named port's policy is the more specific."""
    mine = _target_keys(policy)
    if not mine:
        return None
    by_target = indexes.index_reading(state, "backend-tls-policies", _POLICY_KINDS, _policies_by_target)
    me = ref_of(policy)
    winners: list[Obj] = []
    for name, section in sorted(mine):
        for other in by_target.get((namespace_of(policy), name), ()):  # oldest first
            if ref_of(other) == me:
                return None  # first for this target: it governs it
            if (name, section) in _target_keys(other):
                winners.append(other)
                break
        else:
            return None
    return winners[0] if winners else None


def policy_for(state: State, service: Obj, port: int) -> BackendTLS | None:
    """The governing policy of a Service port: a sectionName match beats a whole-Service one, then
    the oldest policy wins (Gateway API conflict resolution)."""
    candidates = indexes.index_reading(state, "backend-tls-policies", _POLICY_KINDS, _policies_by_target).get(
        (namespace_of(service), name_of(service)), ())
    best: tuple[int, Obj] | None = None
    for p in candidates:  # oldest first: a later policy wins only with a better score
        score = targets(p, service, port)
        if score and (best is None or score > best[0]):
            best = (score, p)
    return None if best is None else resolve(state, best[1])
