"""What the single review (``gates``) and reviews judged together (``together``) share: the protocols of
the Gate's rules, renderer and checker, and the verdicts and notes both write the same way."""

from __future__ import annotations

from typing import Protocol

from haproxy_check.descriptions import Description
from haproxy_check.results import Alert, CheckResult, HAProxyBinary, RenderResult
from haproxy_check.runtime.predictions import Prediction
from validators import checks
from validators.changes import Change
from validators.enforcement import Enforcement
from validators.findings import format_path
from validators.objects import Ref
from validators.states import State
from webhook.gate.verdicts import Decision, Verdict


class RuleChecks(Protocol):
    enforcement: Enforcement

    def run(self, change: Change, state: State) -> checks.Result: ...


class Renders(Protocol):
    def render(self, state: State, *, subject: Ref | None = None,
               previous: Description | None = None) -> RenderResult: ...


class Checks(Protocol):
    binary: HAProxyBinary

    async def check(self, render: RenderResult) -> CheckResult: ...


def already_failing(first: Alert, ref: Ref) -> str:
    """The note on a change admitted because the configuration failed before it, the same way."""
    owner = str(first.origin.ref) if first.origin else "other objects"
    where = format_path(first.origin.path) if first.origin else ""
    # The culprit comes first: the apiserver caps a warning at 256 characters. HAProxy's message
    # quotes the culprit's values (another tenant's hosts, paths, regexes): only the culprit's
    # own review shows them; this one gets the object and field.
    detail = (f": {first.message}" if first.origin and first.origin.ref == ref
              else f" ({where})" if where else "")
    return (f"the HAProxy configuration already fails haproxy -c because of {owner}{detail}; "
            "this change does not alter that")


def unchecked(ref: Ref) -> Verdict:
    """The verdict on an object of a kind routegate does not review."""
    return Verdict(Decision.ALLOW, ref, handled=False,
                   notes=(f"routegate does not check {ref.kind or 'this kind'}; allowed unchecked",))

def noted(prediction: Prediction | None) -> tuple[str, ...]:
    """The prediction as the note admission shows (none when nothing changes)."""
    note = prediction.note() if prediction is not None else ""
    return (note,) if note else ()
