"""``routegate rules [CODE]`` and ``routegate explain CODE``: the rule table and one rule explained.

The explanation of a code is its summary from the rule table plus :mod:`webhook.cli.explanations`;
:func:`markdown_section` writes the same text for docs/RULES.md (one anchor per code).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from webhook.cli.explanations import EXPLANATIONS
from webhook.cli.reports import anchor

EXIT_OK, EXIT_USAGE = 0, 2


def _table() -> list[Any]:
    from validators import rules

    return rules.table()


def entry(info: Any) -> dict[str, Any]:
    found = EXPLANATIONS.get(info.code)
    return {
        "code": info.code, "severity": str(info.default_severity), "name": info.name, "checks": info.summary,
        "configurable": info.configurable, "why": found.why if found else "", "example": found.example if found else "",
        "fix": found.fix if found else "", "docs": anchor(info.code),
    }


def text_of(e: dict[str, Any]) -> str:
    example = "\n".join(f"    {line}" for line in e["example"].splitlines())
    name = f" ({e['name']})" if e["name"] else ""
    return (f"{e['code']}{name}, default {e['severity']}\n\n"
            f"What it checks: {e['checks']}\n\nWhy: {e['why']}\n\nFails:\n{example}\n\nFix: {e['fix']}\n\n"
            f"Docs: {e['docs']}\n")


def markdown_section() -> str:
    """One ``### RG0101`` section per code (GitHub anchors are the lower-cased heading: #rg0101)."""
    parts = []
    for info in _table():
        e = entry(info)
        name = f" ({e['name']})" if e["name"] else ""
        parts.append(f"### {e['code']}\n\n**{e['checks']}**{name} Default: {e['severity']}.\n\n{e['why']}\n\n"
                     f"Fails:\n\n```yaml\n{e['example']}\n```\n\nFix: {e['fix']}\n")
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    table = _table()
    if args.code:
        wanted = args.code.upper()
        info = next((i for i in table if i.code == wanted), None)
        if info is None:
            print(f"routegate {args.command}: no rule {args.code!r}; `routegate rules` lists them", file=sys.stderr)
            return EXIT_USAGE
        e = entry(info)
        if args.output == "json":
            print(json.dumps(e, indent=2))
        elif args.output == "markdown":
            print(next(s for s in markdown_section().split("### ") if s.startswith(wanted + "\n")).join(("### ", "")))
        else:
            print(text_of(e), end="")
        return EXIT_OK
    if args.output == "json":
        print(json.dumps([entry(i) for i in table], indent=2))
    elif args.output == "markdown":
        from validators import rules

        print(rules.markdown())
    else:
        width = max(len(r.code) for r in table)
        for r in table:
            print(f"{r.code:<{width}}  {r.default_severity!s:<4}  {r.summary}")
        print("\n`routegate explain CODE` explains one rule (why HAProxy needs it, an example, the fix).")
    return EXIT_OK
