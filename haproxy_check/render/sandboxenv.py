"""The jinja2 sandbox every template renders in, with its attribute verdicts remembered per type.

``ImmutableSandboxedEnvironment`` asks ``is_safe_attribute`` on every ``x.y`` a template reads: a dozen
``isinstance`` checks (function, method, code, frame, generator, ... and the mutable ABCs), about a
fifth of a review's closure render, on a review's path twice (the proposed render and the baseline's).
Its answer depends only on the attribute's name and the object's type (``isinstance`` of the type,
never of the value: jinja2's ``is_internal_attribute`` and ``modifies_known_mutable``), so it is asked
once per (type, name) and remembered. The objects templates see are the render's own (dicts, lists,
strings, the helpers' records); none changes its ``__class__`` per instance. Every refusal stays a
refusal: the remembered answer is jinja2's own, for the same type and name.
"""

from __future__ import annotations

from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

REMEMBERED = 4096  # (type, attribute) answers kept; templates name few attributes, so this is never reached


class TemplateSandbox(ImmutableSandboxedEnvironment):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._safe: dict[tuple[type, str], bool] = {}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        key = (type(obj), attr)
        safe = self._safe.get(key)
        if safe is None:
            safe = super().is_safe_attribute(obj, attr, value)
            if len(self._safe) >= REMEMBERED:
                self._safe.clear()
            self._safe[key] = safe
        return safe
