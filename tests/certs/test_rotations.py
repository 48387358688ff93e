"""rotations.plan_rotation as a table: one line per case, ids cite the rule numbers in its docstring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509

from certs import generation, rotations
from certs.rotations import Action

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
YEAR = 365 * DAY
NAMES = generation.service_dns_names("routegate", "routegate-system")

OLD_CA = generation.new_ca(now=T0)                   # the CA issued at T0
NEW_CA = generation.new_ca(now=T0 + 7 * YEAR)       # what a rollover at ~2/3 of OLD_CA's life makes
LEAF = generation.new_leaf(OLD_CA, now=T0, dns_names=NAMES)
NEW_LEAF = generation.new_leaf(NEW_CA, now=T0 + 7 * YEAR, dns_names=NAMES)
OTHER_CA = generation.new_ca(now=T0)


def leaf(ca: generation.Issued = OLD_CA, *, at: datetime = T0,
         names: tuple[str, ...] = NAMES) -> x509.Certificate:
    return generation.new_leaf(ca, now=at, dns_names=names).cert


def fp(cert: x509.Certificate) -> str:
    return generation.fingerprint(cert)


def case(ca: generation.Issued | None, lf: x509.Certificate | None, now: datetime, *,
         bundle: tuple[generation.Issued, ...] | None = None, serving: tuple[str, ...] = (),
         trusts: bool = True) -> dict[str, object]:
    return {"ca": ca.cert if ca else None, "leaf": lf, "now": now,
            "bundle": [c.cert for c in (bundle if bundle is not None else ((ca,) if ca else ()))],
            "serving": serving, "trusts": trusts}


CASES = [
    pytest.param(case(None, None, T0), Action.CREATE, 1, id="rule 1: nothing yet creates CA and leaf"),
    pytest.param(case(OLD_CA, LEAF.cert, T0 + 11 * YEAR), Action.CREATE, 1,
                 id="rule 1: an expired CA cannot be rolled over, start again"),
    pytest.param(case(OLD_CA, LEAF.cert, T0, bundle=(OTHER_CA,)), Action.REPAIR_BUNDLE, 2,
                 id="rule 2: CA missing from the bundle is put back"),
    pytest.param(case(OLD_CA, None, T0), Action.RENEW_LEAF, 3, id="rule 3: no leaf gets one"),
    pytest.param(case(OLD_CA, LEAF.cert, T0 + 366 * DAY), Action.RENEW_LEAF, 3,
                 id="rule 3: an expired leaf is renewed"),
    pytest.param(case(OLD_CA, leaf(OTHER_CA), T0), Action.RENEW_LEAF, 3,
                 id="rule 3: a leaf no bundle CA signed is renewed"),
    pytest.param(case(OLD_CA, leaf(names=("routegate",)), T0), Action.RENEW_LEAF, 4,
                 id="rule 4: a leaf missing a service name is renewed"),
    pytest.param(case(OLD_CA, LEAF.cert, T0 + 242 * DAY), Action.KEEP, 10,
                 id="rule 5: just before two thirds of the leaf's life nothing happens"),
    pytest.param(case(OLD_CA, LEAF.cert, T0 + 244 * DAY), Action.RENEW_LEAF, 5,
                 id="rule 5: just after two thirds of the leaf's life it is renewed"),
    pytest.param(case(NEW_CA, leaf(OLD_CA, at=T0 + 7 * YEAR), T0 + 7 * YEAR, bundle=(NEW_CA, OLD_CA)),
                 Action.RENEW_LEAF, 6, id="rule 6: rollover issues the leaf from the new CA once trusted"),
    pytest.param(case(NEW_CA, leaf(OLD_CA, at=T0 + 7 * YEAR), T0 + 7 * YEAR, bundle=(NEW_CA, OLD_CA),
                      trusts=False), Action.KEEP, 6,
                 id="rule 6: rollover waits while the webhook caBundle lacks the new CA"),
    pytest.param(case(NEW_CA, leaf(NEW_CA, at=T0 + 11 * YEAR), T0 + 11 * YEAR, bundle=(NEW_CA, OLD_CA)),
                 Action.TRIM_BUNDLE, 7, id="rule 7: an expired CA leaves the bundle"),
    pytest.param(case(NEW_CA, NEW_LEAF.cert, T0 + 7 * YEAR, bundle=(NEW_CA, OLD_CA),
                      serving=(fp(NEW_LEAF.cert), fp(NEW_LEAF.cert))), Action.TRIM_BUNDLE, 8,
                 id="rule 8: every replica serves the new leaf, drop the old CA"),
    pytest.param(case(NEW_CA, NEW_LEAF.cert, T0 + 7 * YEAR, bundle=(NEW_CA, OLD_CA),
                      serving=(fp(NEW_LEAF.cert), fp(LEAF.cert))), Action.KEEP, 8,
                 id="rule 8: one replica still serves the old leaf, keep both CAs"),
    pytest.param(case(NEW_CA, NEW_LEAF.cert, T0 + 7 * YEAR, bundle=(NEW_CA, OLD_CA)), Action.KEEP, 8,
                 id="rule 8: no reports at all is not proof, keep both CAs"),
    pytest.param(case(OLD_CA, leaf(at=T0 + 6 * YEAR), T0 + 6 * YEAR + 240 * DAY), Action.KEEP, 10,
                 id="rule 9: CA just before two thirds of its life is kept"),
    pytest.param(case(OLD_CA, leaf(at=T0 + 6 * YEAR + 300 * DAY), T0 + 6 * YEAR + 300 * DAY),
                 Action.ROLL_CA, 9, id="rule 9: CA past two thirds of its life is rolled"),
    pytest.param(case(OLD_CA, LEAF.cert, T0 + 30 * DAY), Action.KEEP, 10, id="rule 10: all good, keep"),
]


@pytest.mark.parametrize(("inputs", "action", "rule"), CASES)
def test_plan_rotation(inputs: dict[str, object], action: Action, rule: int) -> None:
    plan = rotations.plan_rotation(
        inputs["ca"], inputs["leaf"], inputs["now"],  # type: ignore[arg-type]
        bundle=inputs["bundle"], serving=inputs["serving"],  # type: ignore[arg-type]
        webhook_trusts_ca=bool(inputs["trusts"]), dns_names=NAMES)
    assert (plan.action, plan.rule) == (action, rule), plan.reason


def test_trim_keeps_only_the_current_ca_when_the_rollover_is_done() -> None:
    now = T0 + 7 * YEAR
    bundle = [NEW_CA.cert, OLD_CA.cert]
    assert rotations.trimmed(NEW_CA.cert, bundle, now, rollover_done=True) == [NEW_CA.cert]


def test_trim_of_expired_cas_keeps_the_valid_previous_one() -> None:
    expired = generation.new_ca(now=T0, lifetime=30 * DAY)
    bundle = [NEW_CA.cert, OLD_CA.cert, expired.cert]
    assert rotations.trimmed(NEW_CA.cert, bundle, T0 + 7 * YEAR, rollover_done=False) == [
        NEW_CA.cert, OLD_CA.cert]
