"""Gateways routegate rejects as the Gateway API says an implementation must, and does not serve.

- ``spec.infrastructure.parametersRef`` (``InvalidParameters``): routegate takes no parameters, so any
  referent is of "an unsupported kind"; the Gateway API: such a Gateway "SHOULD be rejected with the
  Accepted status condition set to False and an InvalidParameters reason" (conformance:
  GatewayInvalidParametersRef). A GatewayClass's parametersRef is another matter: the class stays
  Accepted and says the reference is ignored (``webhook.reconcile.statusshapes``).
- ``spec.addresses`` of a type routegate cannot bind (``UnsupportedAddress``): the data plane listens on
  its own addresses, which are IP addresses or a hostname; ``NamedAddress`` and implementation-specific
  types (``example.com/pool``) are not understood (conformance: GatewayStaticAddresses, Accepted=False
  with UnsupportedAddress).

One source of truth for the rule (RG0130, an admission warning on the Gateway), the renderer (the Gateway
is hidden: its listeners are not bound, its ListenerSets have no parent, routes attached only to it are
not served: ``haproxy_check.render.rendering``), the statuses (``Accepted=False`` with the reason:
``validators.crossobject.statuses``) and reconcile, which holds a Gateway the data plane runs back at
its last promoted version rather than dropping it on such an edit (``webhook.reconcile.leaveouts``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from validators import codes
from validators.contexts import Context
from validators.findings import Finding, PathPart, Severity
from validators.objects import Obj, Ref, as_list, as_map, dig, kind_of, ref_of
from validators.states import State
from validators.texts import quote

SUPPORTED_ADDRESS_TYPES = ("IPAddress", "Hostname")
INVALID_PARAMETERS = "InvalidParameters"
UNSUPPORTED_ADDRESS = "UnsupportedAddress"


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # the Gateway API reason of Accepted=False
    path: tuple[PathPart, ...]
    message: str

    def finding(self) -> Finding:
        return Finding(codes.GATEWAY_REFUSED, self.message, self.path, Severity.WARN)


def refusal(gateway: Obj) -> Refusal | None:
    """Why ``gateway`` is not accepted (module docstring); None when nothing here refuses it."""
    ref = dig(gateway, "spec", "infrastructure", "parametersRef")
    if ref is not None:
        named = as_map(ref)
        what = f"{named.get('kind') or '?'} {named.get('name') or '?'}"
        return Refusal(INVALID_PARAMETERS, ("spec", "infrastructure", "parametersRef"),
                       f"parametersRef ({what}) cannot be honoured: routegate takes no Gateway parameters; the "
                       "Gateway is not accepted and not served")
    for i, address in enumerate(as_list(dig(gateway, "spec", "addresses"))):
        kind = as_map(address).get("type") or "IPAddress"
        if kind not in SUPPORTED_ADDRESS_TYPES:
            return Refusal(UNSUPPORTED_ADDRESS, ("spec", "addresses", i, "type"),
                           f"address type {quote(str(kind))} is not supported (only "
                           f"{' and '.join(SUPPORTED_ADDRESS_TYPES)}); the Gateway is not accepted and not served")
    return None


def refused(state: State) -> dict[Ref, Refusal]:
    """The Gateways of ``state`` that are refused, with why."""
    out: dict[Ref, Refusal] = {}
    for gateway in state.list("Gateway"):
        if kind_of(gateway) != "Gateway":
            continue
        found = refusal(gateway)
        if found is not None:
            out[ref_of(gateway)] = found
    return out


def refused_gateway(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """RG0130: a Gateway the Gateway API says to reject (parametersRef, an unsupported address type)."""
    found = refusal(obj)
    if found is not None:
        yield found.finding()
