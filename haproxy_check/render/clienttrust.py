"""Frontend mTLS: a Gateway's ``spec.tls.frontend`` client-certificate validation -> bind keywords.

``perPort[]`` (by port) overrides ``default``. Each ``caCertificateRefs`` entry (core ConfigMap or Secret,
key ``ca.crt``; another namespace needs a ReferenceGrant from the Gateway) adds its PEM certificates to
one CA file written beside the certificates (``certs/client-ca_<ns>_<gateway>_<port>.pem``). The bind
then says ``verify required ca-file <file>`` (``AllowValidOnly``) or ``verify optional`` with the
verification errors ignored (``AllowInsecureFallback``: the connection goes on without a valid client
certificate). Validation without any usable CA leaves the port accepting no traffic: HAProxy cannot
verify against nothing, so the frontend rejects every connection and a finding names the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from haproxy_check import escaping
from haproxy_check.render.servertls import FileSink
from validators import codes
from validators.crossobject import frontendtrust
from validators.crossobject.frontendtrust import validation_of
from validators.findings import Finding, PathPart, Severity
from validators.objects import Ref, ref_of
from validators.states import State

UNUSABLE_CLIENT_CA = codes.RENDER_CLIENT_CA
ALLOW_VALID_ONLY, ALLOW_INSECURE_FALLBACK = "AllowValidOnly", "AllowInsecureFallback"


@dataclass(frozen=True, slots=True)
class ClientTrust:
    """What the bind of one Gateway port does with client certificates."""
    ca_file: str = ""  # "" with validated False: no client-certificate validation
    mode: str = ALLOW_VALID_ONLY
    validated: bool = False  # spec.tls.frontend asks for validation on this port
    findings: tuple[Finding, ...] = field(default=())
    path: tuple[PathPart, ...] = ()  # the governing validation block (the bind line's source)

    @property
    def reject_all(self) -> bool:
        """Validation is asked for but no CA is usable: the port accepts no traffic."""
        return self.validated and not self.ca_file

    def bind_options(self) -> tuple[str, ...]:
        if not self.ca_file:
            return ()
        if self.mode == ALLOW_INSECURE_FALLBACK:
            return ("verify", "optional", "ca-file", self.ca_file, "ca-ignore-err", "all", "crt-ignore-err", "all")
        return ("verify", "required", "ca-file", self.ca_file)


def _warn(message: str, path: Sequence[PathPart], about: Ref) -> Finding:
    return Finding(UNUSABLE_CLIENT_CA, message, tuple(path), Severity.WARN, subject=False, about=str(about))


def ca_path(gateway: Ref, port: int) -> str:
    return f"certs/client-ca_{gateway.namespace}_{gateway.name}_{port}.pem"


def resolve(state: State, gateway: Ref, port: int, files: FileSink) -> ClientTrust:
    """The client trust of ``port`` of ``gateway``; writes its CA file when any CA is usable."""
    obj = state.get("Gateway", gateway.namespace, gateway.name)
    if obj is None:
        return ClientTrust()
    validation, path = validation_of(obj, port)
    if validation is None:
        return ClientTrust()
    mode = str(validation.get("mode") or ALLOW_VALID_ONLY)
    me = ref_of(obj)
    pems, found = frontendtrust.check_refs(state, obj, validation, path)
    problems: list[tuple[tuple[PathPart, ...], str]] = [(p.path, p.message) for p in found]
    ca_file = ""
    if pems:
        try:
            ca_file = files.add_file(ca_path(me, port), "".join(pems).encode(), "ca")
        except escaping.Unsafe as exc:  # a Gateway name the API server would refuse: never a render crash
            problems.append((path, f"the client CA file cannot be named ({exc})"))
    outcome = "this CA is ignored" if ca_file else f"no usable client CA: port {port} accepts no traffic"
    findings = tuple(_warn(f"{message}; {outcome}", at, me) for at, message in problems)
    if not problems and not ca_file:
        findings = (_warn(f"client certificate validation names no CA: port {port} accepts no traffic",
                          path, me),)
    return ClientTrust(ca_file, mode, True, findings, path)
