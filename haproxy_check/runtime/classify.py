"""Reload or runtime? The runtime planner's verdict for two renders (seed 000, HAPTIC's deployplan).

A view of ``runtimeplans.plan`` for callers that hold whole renders (description and haproxy.cfg text)
rather than descriptions with their recorded frames: the frame of each render is computed from its
text, then the planner decides. Rule numbers are the planner's (haproxy_check/runtime/runtimeplans.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from haproxy_check.descriptions import Description
from haproxy_check.runtime import frames, runtimeplans

MAX_REASONS = runtimeplans.MAX_REASONS


class ApplyClass(StrEnum):
    NONE = "none"
    RUNTIME = "runtime"
    RELOAD = "reload"


@dataclass(frozen=True, slots=True)
class Rendered:
    """What the classifier needs of one render: its description and its haproxy.cfg text."""

    description: Description
    config: str


@dataclass(frozen=True, slots=True)
class ApplyDecision:
    apply: ApplyClass
    reasons: tuple[str, ...] = ()
    runtime: tuple[str, ...] = ()  # the commands that would be applied at runtime, as printed
    plan: runtimeplans.Plan | None = None


def outside_helpers(rendered: Rendered) -> str:
    """haproxy.cfg without the sections Backend() describes (backends and their profiles)."""
    desc = rendered.description
    return frames.outside(rendered.config, (b.name for b in desc.backends), (p.name for p in desc.profiles))


def _framed(rendered: Rendered) -> Description:
    desc = rendered.description
    return replace(desc, frame=frames.digest(rendered.config, (b.name for b in desc.backends),
                                             (p.name for p in desc.profiles)))


def classify(prev: Rendered | None, nxt: Rendered | None, *, version: tuple[int, ...]) -> ApplyDecision:
    if prev is None or nxt is None:
        return ApplyDecision(ApplyClass.RELOAD, ("rule 1: no previous configuration to compare with",))
    result = runtimeplans.plan(_framed(prev), _framed(nxt), dataplane_version=version)
    return ApplyDecision(ApplyClass(str(result.action)), result.reasons,
                         tuple(c.text() for c in result.commands[:MAX_REASONS]), result)
