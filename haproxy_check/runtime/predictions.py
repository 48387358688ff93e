"""The prediction: how a data plane takes a change, in the words every surface uses.

One planner (``runtimeplans.plan``) decides; this module turns its plan into the answer users read: the
admission note, ``routegate check``'s verdict field, ``routegate plan``'s summary and what reconcile's
runtime applier reports. A prediction is one of

- ``runtime``: "applies at runtime (N commands)";
- ``reload``: "needs a reload: <the planner's first reasons>";
- ``none``: nothing the data plane runs changes (no note);
- ``unknown``: the answer depends on what the data plane has loaded, and that is not known here
  ("unknown: ..."): a review plans over its change's closure, whose baseline lacks the profiles and
  maps the rest of the configuration loads, so unless reconcile publishes what the data plane runs
  (``webhook.gate.loadedindex``) a plan that turns on them is not guessed;
- ``skipped``: no plan was made (a render too slow for a second one, a batch out of time).

``basis`` says what the data plane was taken to run (e.g. the version reconcile applied).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from haproxy_check.descriptions import Description
from haproxy_check.runtime import runtimeplans
from haproxy_check.runtime.runtimeplans import Loaded

SHOWN_REASONS = 3  # reasons in a note (an apiserver warning is capped at 256 characters)


class Action(StrEnum):
    NONE = "none"
    RUNTIME = "runtime"
    RELOAD = "reload"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Prediction:
    action: Action
    commands: int = 0  # runtime commands
    reasons: tuple[str, ...] = ()  # reload: the planner's reasons; unknown/skipped: why
    basis: str = ""  # what the data plane was taken to run

    @classmethod
    def of(cls, plan: runtimeplans.Plan, basis: str = "") -> Prediction:
        return cls(Action(str(plan.action)), len(plan.commands), plan.reasons, basis)

    @classmethod
    def unknown(cls, why: str, basis: str = "") -> Prediction:
        return cls(Action.UNKNOWN, reasons=(why,), basis=basis)

    @classmethod
    def skipped(cls, why: str) -> Prediction:
        return cls(Action.SKIPPED, reasons=(why,))

    @property
    def definite(self) -> bool:
        return self.action in (Action.NONE, Action.RUNTIME, Action.RELOAD)

    def note(self) -> str:
        """The line a user reads ("" when nothing changes)."""
        if self.action is Action.RUNTIME:
            return f"applies at runtime ({self.commands} command{'s' if self.commands != 1 else ''})"
        if self.action is Action.RELOAD:
            return "needs a reload: " + "; ".join(r.split(": ", 1)[-1] for r in self.reasons[:SHOWN_REASONS])
        if self.action is Action.UNKNOWN:
            return f"unknown: {self.reasons[0]}" if self.reasons else "unknown"
        if self.action is Action.SKIPPED:
            return f"reload classification skipped: {self.reasons[0]}" if self.reasons else ""
        return ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": str(self.action), "note": self.note()}
        if self.action is Action.RUNTIME:
            out["commands"] = self.commands
        if self.reasons:
            out["reasons"] = list(self.reasons)
        if self.basis:
            out["basis"] = self.basis
        return out


def predict(old: Description | None, new: Description, *, dataplane_version: tuple[int, ...],
            files: Mapping[str, bytes] | None = None, loaded: Loaded | None = None, partial: bool = False,
            basis: str = "") -> Prediction:
    """The planner's answer for a data plane running ``old`` that is given ``new``.

    ``partial``: ``old`` and ``new`` are a closure's records, the rest of the configuration unseen;
    ``loaded`` is what the data plane's whole configuration loads, when known. A partial plan without
    ``loaded`` is definite only when it does not turn on what the rest loads: planned once as if the
    rest loaded nothing and once as if it loaded every profile and map ``new`` uses, both must agree."""
    plan = runtimeplans.plan(old, new, dataplane_version=dataplane_version, files=files, loaded=loaded)
    if not partial or loaded is not None or old is None:
        return Prediction.of(plan, basis)
    hoped = runtimeplans.plan(old, new, dataplane_version=dataplane_version, files=files, loaded=Loaded.of(new))
    if (hoped.action, len(hoped.commands)) == (plan.action, len(plan.commands)):
        return Prediction.of(plan, basis)
    before = {p.name for p in old.profiles}
    mapped = {m.path for m in old.maps}
    needed = [f"profile {p.name}" for p in new.profiles if p.name not in before]
    needed += [f"map {m.path}" for m in new.maps if m.path not in mapped]
    what = ", ".join(needed[:2]) + (f" and {len(needed) - 2} more" if len(needed) > 2 else "")
    runtime = Prediction.of(hoped).note()
    return Prediction.unknown(f"{runtime} if the data plane has loaded {what or 'what this change reuses'}, else a "
                              "reload; what it runs is not published to this webhook (serve --dataplane-state)",
                              basis)
