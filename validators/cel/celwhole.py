"""Every rule of a new object in one CEL call: the fast path of ``celchecks`` for objects that pass.

The per-node walk binds each rule-bearing node on its own, and the engine converts the bound Python
value anew each time (the conversion is lazy but whole: a list of route rules is converted at
``spec.rules``, again at each ``spec.rules[i]``, again at each match...), so the walk costs about
depth x size conversions plus one engine call per node. :func:`compile_whole` instead writes one
program that walks the object inside CEL, the way ``CelValidator._walk`` walks it in Python:

- a null node has no rules run, nor its children (``type(v) == null_type || ...``);
- an object node runs its properties' programs for the keys it has, a map node (additionalProperties,
  no properties) every value, a list node every item; a node of another type runs only its own rules;
- a node's own rules see it as ``self`` (``cel.bind(self, v, rule)``), joined by ``&&``.

It is written for a new object (CREATE, and offline checks), where no rule ratchets and transition
rules without ``optionalOldSelf`` do not run; it also serves an UPDATE when no rule of the schema can
see the old object (no transition rule), since ratcheting only removes rules. CEL's ``&&`` is true
only when every side is true, so a true result means the walk would find nothing; ``celchecks`` then
returns no findings and judges anything else with the walk. Schemas the program cannot mirror get no
program: a rule under the root ``metadata`` (CEL sees only its name and generateName), a property
whose name CEL cannot reach, a rule that does not compile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from validators.cel import celengines, celfunctions, celprograms
from validators.cel.celprograms import Site

__all__ = ["Whole", "compile_whole"]


_OLD_NAMES = re.compile(r"\b(oldSelf|__old|__hasOld)\b")  # the bindings that carry the old node


@dataclass(frozen=True, slots=True)
class Whole:
    program: celengines.Conjunction
    depth: int  # the deepest macro nesting of any rule (at least 1), for the cost bound
    old_blind: bool  # no rule of the schema names the old node: an UPDATE judges like a CREATE

    def cost_bound(self, size: int) -> int:
        """An upper bound of every rule's cost estimate: no node is larger or wider than the object."""
        return int(size**self.depth)


class _Unmirrorable(Exception):
    """The walk does something the program cannot say (see the module docstring)."""


def compile_whole(root: Site, engine: celengines.Engine) -> Whole | None:
    """The one-call program for a new object against ``root``; None when there is none."""
    writer = _Writer(engine)
    try:
        text = writer.node(root, "self", root=True)
    except _Unmirrorable:
        return None
    if text is None:
        return None
    program = engine.compile_holds(text)
    if program is None:
        return None
    rules = [r for site in root.walk() for r in site.rules]
    # optionalOldSelf wraps a rule in a binding of the old node even where the rule does not read it
    old_blind = not any(r.transition or r.optional_old_self or _OLD_NAMES.search(celfunctions.strip_strings(r.rule))
                        for r in rules)
    return Whole(program, writer.depth, old_blind)


class _Writer:
    """Writes the program with as little nesting as it can: the C++ parser refuses expressions nested
    more than 32 deep, so map levels are reached by selection (``v.spec.rules``), not by binding, and
    only list items (``.all``) and a node's own rules (``cel.bind(self, ...)``) open a level."""

    def __init__(self, engine: celengines.Engine) -> None:
        self._engine = engine
        self._names = 0
        self.depth = 1

    def _name(self) -> str:
        self._names += 1
        return f"__rgNode{self._names}"

    def node(self, site: Site, var: str, *, root: bool = False) -> str | None:
        """True when every rule at ``var`` (a node of ``site``) and below holds; None: nothing runs.

        The result is an ``||`` of guards ending in an ``&&`` chain, so it needs parentheses when it
        is itself one side of an ``&&``."""
        if not site.live:
            return None
        parts = []
        rules = [r for r in site.rules if celprograms.applies(r, has_old=False, ratchet=False)]
        if rules:
            if any(r.program is None for r in rules):
                raise _Unmirrorable
            self.depth = max(self.depth, *(r.depth for r in rules))
            own = " && ".join(celprograms.holds_text(r, self._engine) for r in rules)
            parts.append(own if var == "self" else f"cel.bind(self, {var}, {own})")
        if site.properties:
            for name, child in site.properties.items():
                if not child.live:
                    continue
                cel_name = celprograms.escape(name)
                if cel_name is None or (root and name == "metadata"):
                    raise _Unmirrorable
                below = self.node(child, f"{var}.{cel_name}")
                if below is not None:
                    parts.append(f"(type({var}) != map || !has({var}.{cel_name}) || {below})")
        elif site.additional is not None and site.additional.live:
            key = self._name()
            below = self.node(site.additional, f"{var}[{key}]")
            if below is not None:
                parts.append(f"(type({var}) != map || {var}.all({key}, {below}))")
        if site.items is not None and site.items.live:
            item = self._name()
            below = self.node(site.items, item)
            if below is not None:
                parts.append(f"(type({var}) != list || {var}.all({item}, {below}))")
        if not parts:
            return None
        return f"type({var}) == null_type || {' && '.join(parts)}"
