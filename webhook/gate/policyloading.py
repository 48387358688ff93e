"""Admission policies wired into the Gate: where the policies come from and where they are judged.

- routegate's own policies: ``--config`` ``policies:`` (``validators.policies.ownpolicies``), judged by
  every Gate built from that file (``serve``, ``check``, ``reconcile`` and its audit).
- ValidatingAdmissionPolicies and their bindings: in ``check`` from the ``-f`` inputs, the ``--state``
  files or the live cluster (listed once, with the param objects their ``paramKind`` names); in
  ``serve``/``reconcile`` only from the files ``validatingAdmissionPolicies:`` of ``--config`` lists (off
  by default: the API server already evaluates the cluster's own, docs/POLICIES.md).

A policy that cannot be used is a :class:`~webhook.setuperrors.SetupError` naming it and the expression:
``check`` exits 2, ``serve`` does not start (never a silent skip). The evaluation itself is pure and
lives in ``validators.policies``; this module reads files and the cluster and installs
:class:`~validators.policies.policychecks.PolicyChecks` as the Gate's rules, plus the judge of the
policies that read ``traffic`` (``Gate.traffic_judges``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from validators.findings import denies
from validators.objects import KINDS, Obj
from validators.policies import ownpolicies, vaps
from validators.policies.expressions import SetupError as PolicySetupError
from validators.policies.policychecks import PolicyChecks
from validators.states import State
from webhook.gate.verdicts import Decision, Verdict
from webhook.loading import inputs, settingsfiles
from webhook.setuperrors import SetupError

LIVE_SECONDS = 30.0


class PolicyError(SetupError):
    """A policy that cannot be used (does not compile, an unknown variable or key): ``check`` exits 2 with
    it; ``serve`` runs not ready with it (``webhook.server.servers.UNUSABLE``)."""


def _setup_error(exc: Exception) -> Exception:
    return PolicyError(str(exc))


def is_policy(obj: Obj) -> bool:
    """A ValidatingAdmissionPolicy or binding: a policy input of ``check``, not a change to judge."""
    return obj.get("kind") in vaps.KINDS_READ and str(obj.get("apiVersion", "")).startswith(vaps.GROUP + "/")


def vap_set(objects: Iterable[Obj]) -> vaps.PolicySet:
    try:
        return vaps.PolicySet.of(objects)
    except PolicySetupError as exc:
        raise _setup_error(exc) from None


def warnings(policies: vaps.PolicySet) -> list[str]:
    """What the API server would silently not enforce: a binding to a policy that does not exist, a
    policy nothing binds (``check`` says so, so that a CI run does not pass for a policy that is off)."""
    out = [f"ValidatingAdmissionPolicyBinding {b.name}: policy {b.policy!r} does not exist: the binding "
           "enforces nothing" for b in policies.bindings if b.policy not in policies.policies]
    bound = {b.policy for b in policies.bindings}
    out += [f"ValidatingAdmissionPolicy {name}: no ValidatingAdmissionPolicyBinding names it: not enforced"
            for name in sorted(policies.policies) if name not in bound]
    return out


def own_policies(settings: settingsfiles.Settings, path: str | None) -> tuple[ownpolicies.OwnPolicy, ...]:
    try:
        return ownpolicies.parse(settings.policies)
    except PolicySetupError as exc:
        raise _setup_error(ValueError(f"--config {path}: {exc}") if path else exc) from None


def configured_vaps(settings: settingsfiles.Settings, path: str | None) -> vaps.PolicySet | None:
    """The policies of ``validatingAdmissionPolicies:`` (paths relative to the settings file), or None."""
    if not settings.admission_policy_files:
        return None
    base = Path(path).parent if path else Path()
    files = [str(p if Path(p).is_absolute() else base / p) for p in settings.admission_policy_files]
    try:
        objects = [located.obj for located in inputs.load(files)]
    except inputs.InputError as exc:
        raise _setup_error(ValueError(f"--config {path}: validatingAdmissionPolicies: {exc}")) from None
    return vap_set(objects)


def install(gate: Any, *, vap: vaps.PolicySet | None = None,
            own: Sequence[ownpolicies.OwnPolicy] | None = None) -> None:
    """Make ``gate`` judge the policies (added to what it judges already); nothing when there are none."""
    current = gate.rules
    if isinstance(current, PolicyChecks):
        vap = vap if vap else current.vap
        own = own if own is not None else (*current.own, *current.own_traffic)
        current = current.inner
    own = tuple(own or ())
    if not vap and not own:
        return
    checks = PolicyChecks(current, vap=vap, own=own)
    gate.rules = checks
    gate.traffic_judges[:] = [j for j in gate.traffic_judges if not isinstance(j, _TrafficJudge)]
    if checks.own_traffic:
        gate.traffic_judges.append(_TrafficJudge(checks))


def needs_traffic(gate: Any) -> bool:
    """Whether a policy of ``gate`` reads ``traffic`` (``check`` then computes every input's diff)."""
    return isinstance(gate.rules, PolicyChecks) and bool(gate.rules.own_traffic)


class _TrafficJudge:
    """The policies that read ``traffic``, on an allow's diff: their denials make it a deny."""

    def __init__(self, checks: PolicyChecks) -> None:
        self.checks = checks

    def __call__(self, change: Any, state: State, verdict: Verdict) -> Verdict:
        assert verdict.traffic is not None
        moves = [m.as_dict() for m in verdict.traffic.moves]
        found = self.checks.traffic_findings(change, state, moves)
        if not found:
            return verdict
        decision = Decision.DENY if denies(found) else verdict.decision
        return replace(verdict, decision=decision, findings=(*verdict.findings, *found))


async def live_objects(conn: Any) -> list[Obj]:
    """The cluster's ValidatingAdmissionPolicies, bindings and the param objects their ``paramKind``
    names, listed once (``check`` against a live cluster)."""
    from webhook.cluster.clients import ApiError, get_json

    base = f"/apis/{vaps.GROUP}/v1"
    out: list[Obj] = []
    for plural, kind in (("validatingadmissionpolicies", vaps.POLICY_KIND),
                         ("validatingadmissionpolicybindings", vaps.BINDING_KIND)):
        try:
            listed = await get_json(conn.api, f"{base}/{plural}", total=LIVE_SECONDS)
        except ApiError as exc:
            if exc.status == 404:  # a cluster before admissionregistration/v1 policies (1.30): none enforced
                return []
            raise
        out += [{"apiVersion": f"{vaps.GROUP}/v1", "kind": kind, **item} for item in listed.get("items", ())]
    wanted = {(str(p.get("spec", {}).get("paramKind", {}).get("apiVersion", "")),
               str(p.get("spec", {}).get("paramKind", {}).get("kind", "")))
              for p in out if p.get("kind") == vaps.POLICY_KIND and isinstance(p.get("spec"), dict)
              and isinstance(p["spec"].get("paramKind"), dict)}
    for api, kind in sorted(wanted):
        served = await _plural(conn, api, kind, get_json)
        if served is None:
            continue  # a paramKind the cluster does not serve: every binding then finds no params
        path = f"/api/{api}/{served}" if "/" not in api else f"/apis/{api}/{served}"
        listed = await get_json(conn.api, path, total=LIVE_SECONDS)
        out += [{"apiVersion": api, "kind": kind, **item} for item in listed.get("items", ())]
    return out


async def _plural(conn: Any, api: str, kind: str, get_json: Any) -> str | None:
    info = KINDS.get(kind)
    if info is not None and api.rpartition("/")[0] == info.group:
        return info.plural
    path = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    try:
        listed = await get_json(conn.api, path, total=LIVE_SECONDS)
    except Exception:  # the group/version is not served: no params of that kind exist
        return None
    for resource in listed.get("resources", ()):
        if resource.get("kind") == kind and "/" not in str(resource.get("name", "")):
            return str(resource["name"])
    return None
