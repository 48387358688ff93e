"""What the self-managed leader should do next with the CA, the leaf and the caBundle: a pure function.

Data in, one `Plan` out, no I/O, so every rule is table-tested (tests/certs/test_rotations.py cites the
rule numbers). The leader applies one plan per step, writes the Secret, then patches the caBundle, and
plans again on the next step; that ordering is what makes a CA rollover safe:

  step A  ROLL_CA      new CA; bundle = [new, old]; the leaf (still from the old CA) is untouched.
          (the caBundle of the webhook is patched to [new, old])
  step B  RENEW_LEAF   only once the webhook's caBundle already holds the new CA: leaf from the new CA.
  step C  TRIM_BUNDLE  only once every live replica reports serving that leaf: bundle = [new].

Rules, first match wins:
  1. no CA, or the CA is outside its validity window          -> CREATE (nothing to roll over from)
  2. the CA is missing from the bundle                        -> REPAIR_BUNDLE (put it first)
  3. no leaf, leaf outside its window, or not signed by any
     CA in the bundle (nobody could trust it)                 -> RENEW_LEAF, urgently
  4. leaf does not cover the wanted DNS names                 -> RENEW_LEAF
  5. leaf past two thirds of its life                         -> RENEW_LEAF
  6. leaf not signed by the current CA (rollover step B)      -> RENEW_LEAF if the webhook's caBundle
                                                                 already trusts the CA, else KEEP
  7. bundle holds expired CAs                                 -> TRIM_BUNDLE
  8. bundle holds other CAs and every live replica reports the
     current leaf (rollover step C)                           -> TRIM_BUNDLE, else KEEP (waiting)
  9. the CA past two thirds of its life                       -> ROLL_CA
 10. otherwise                                                -> KEEP
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from cryptography import x509

from certs import generation

RENEW_AT = 2 / 3


class Action(StrEnum):
    KEEP = "keep"
    CREATE = "create"
    REPAIR_BUNDLE = "repair-bundle"
    RENEW_LEAF = "renew-leaf"
    TRIM_BUNDLE = "trim-bundle"
    ROLL_CA = "roll-ca"


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action
    rule: int
    reason: str


def plan_rotation(
    ca: x509.Certificate | None,
    leaf: x509.Certificate | None,
    now: datetime,
    *,
    bundle: Sequence[x509.Certificate] = (),
    serving: Collection[str] = (),
    webhook_trusts_ca: bool = True,
    dns_names: Sequence[str] = (),
) -> Plan:
    """Decide the next step. `serving`: leaf fingerprints reported by live replicas; `webhook_trusts_ca`:
    whether the webhook configuration's caBundle currently includes `ca`."""
    if ca is None:
        return Plan(Action.CREATE, 1, "no CA yet")
    if not generation.valid_at(ca, now):
        return Plan(Action.CREATE, 1, f"CA not valid now (notAfter {ca.not_valid_after_utc.isoformat()})")
    ca_fp = generation.fingerprint(ca)
    prints = [generation.fingerprint(c) for c in bundle]
    if ca_fp not in prints:
        return Plan(Action.REPAIR_BUNDLE, 2, "the current CA is missing from the bundle")
    if leaf is None:
        return Plan(Action.RENEW_LEAF, 3, "no serving certificate yet")
    if not generation.valid_at(leaf, now):
        end = leaf.not_valid_after_utc.isoformat()
        return Plan(Action.RENEW_LEAF, 3, f"leaf not valid now (notAfter {end})")
    if not any(generation.signed_by(leaf, c) for c in bundle):
        return Plan(Action.RENEW_LEAF, 3, "leaf is not signed by any CA in the bundle")
    if not generation.covers(leaf, dns_names):
        return Plan(Action.RENEW_LEAF, 4, "leaf does not cover the service names")
    if generation.life_fraction(leaf, now) >= RENEW_AT:
        return Plan(Action.RENEW_LEAF, 5, "leaf past two thirds of its life")
    if not generation.signed_by(leaf, ca):
        if webhook_trusts_ca:
            return Plan(Action.RENEW_LEAF, 6, "CA rollover: issue the leaf from the new CA")
        return Plan(Action.KEEP, 6, "CA rollover: waiting for the webhook caBundle to trust the new CA")
    if any(not generation.valid_at(c, now) for c in bundle):
        return Plan(Action.TRIM_BUNDLE, 7, "bundle holds an expired CA")
    if len(bundle) > 1:
        want = generation.fingerprint(leaf)
        if serving and all(fp == want for fp in serving):
            return Plan(Action.TRIM_BUNDLE, 8, f"all {len(serving)} live replicas serve the new leaf")
        behind = sum(1 for fp in serving if fp != want)
        return Plan(Action.KEEP, 8, f"CA rollover: waiting for {behind or 'a report from'} replica(s)")
    if generation.life_fraction(ca, now) >= RENEW_AT:
        return Plan(Action.ROLL_CA, 9, "CA past two thirds of its life")
    return Plan(Action.KEEP, 10, "nothing to do")


def trimmed(ca: x509.Certificate, bundle: Sequence[x509.Certificate], now: datetime, *,
            rollover_done: bool) -> list[x509.Certificate]:
    """The bundle after TRIM_BUNDLE: the current CA first, old CAs kept only while still needed."""
    ca_fp = generation.fingerprint(ca)
    if rollover_done:
        return [ca]
    return [ca, *(c for c in bundle if generation.fingerprint(c) != ca_fp and generation.valid_at(c, now))]
