"""The jinja2 sandbox every template renders in, with its attribute verdicts remembered per type.

``ImmutableSandboxedEnvironment`` asks ``is_safe_attribute`` on every ``x.y`` a template reads: a dozen
``isinstance`` checks (function, method, code, frame, generator, ... and the mutable ABCs), about a
fifth of a review's closure render, on a review's path twice (the proposed render and the baseline's).
Its answer depends only on the attribute's name and the object's type (``isinstance`` of the type,
never of the value: jinja2's ``is_internal_attribute`` and ``modifies_known_mutable``), so it is asked
once per (type, name) and remembered. The objects templates see are the render's own (dicts, lists,
strings, the helpers' records); none changes its ``__class__`` per instance. Every refusal stays a
refusal: the remembered answer is jinja2's own, for the same type and name.

Templates compile once per process, not once per environment (``CompiledTemplates``, jinja2's bytecode
cache hook, holding the code objects in memory): each Renderer has an environment of its own, and
compiling the ~40 built-in templates costs ten times a small render (a check per file, a gate rebuilt
on a settings change, the test suite's thousands of Renderers). jinja2 hands over the compiled code
only for the same template file with the same source (its SHA-1) and, here, the same compile options,
so an edited user template compiles again.
"""

from __future__ import annotations

from collections.abc import Hashable
from types import CodeType
from typing import Any

from jinja2 import BytecodeCache, Environment
from jinja2.bccache import Bucket
from jinja2.sandbox import ImmutableSandboxedEnvironment

REMEMBERED = 4096  # (type, attribute) answers kept; templates name few attributes, so this is never reached
COMPILED_KEPT = 4096  # compiled templates kept: the built-in ones and a few user directories' worth


def _compiles_as(env: Environment) -> Hashable:
    """What the generated code depends on besides the source: the environment's class (its code generator,
    sandboxing), syntax and whitespace options, extensions, autoescape, finalize, async, intercepted ops,
    and the names of its filters and tests (the compiler turns an unknown one into code that raises)."""
    return (type(env), env.block_start_string, env.block_end_string, env.variable_start_string,
            env.variable_end_string, env.comment_start_string, env.comment_end_string, env.line_statement_prefix,
            env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks, env.newline_sequence,
            env.keep_trailing_newline, tuple(sorted(env.extensions)), env.optimized, env.autoescape, env.finalize,
            env.is_async, frozenset(getattr(env, "intercepted_binops", ())),
            frozenset(getattr(env, "intercepted_unops", ())), frozenset(env.filters), frozenset(env.tests))


class CompiledTemplates(BytecodeCache):
    """Compiled template code shared by environments: keyed by jinja2's (name, file) key, the source's
    checksum and the compile options. Code objects are immutable; each environment runs its own copy of
    the module namespace (``Template.from_code``), so nothing else is shared."""

    def __init__(self) -> None:
        self._codes: dict[tuple[Hashable, str, str], CodeType] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        bucket.code = self._codes.get((_compiles_as(bucket.environment), bucket.key, bucket.checksum))

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is None:
            return
        if len(self._codes) >= COMPILED_KEPT:
            self._codes.clear()
        self._codes[(_compiles_as(bucket.environment), bucket.key, bucket.checksum)] = bucket.code


COMPILED = CompiledTemplates()


class TemplateSandbox(ImmutableSandboxedEnvironment):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("bytecode_cache", COMPILED)
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
