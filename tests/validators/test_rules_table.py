"""The rule table behind `routegate rules` and docs/RULES.md stays complete and in sync."""

from __future__ import annotations

import re
from pathlib import Path

from validators import codes, rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "RULES.md"


def test_codes_are_unique_well_formed_and_sorted() -> None:
    table = rules.table()
    assert [i.code for i in table] == sorted({i.code for i in table})
    assert all(re.fullmatch(r"RG\d{4}", i.code) and i.summary for i in table)


def test_every_code_a_rule_module_uses_is_in_the_table() -> None:
    used = {v for k, v in vars(codes).items() if k.isupper() and isinstance(v, str) and v.startswith("RG")}
    assert used <= {i.code for i in rules.table()}


def test_docs_rules_carries_the_current_table_verbatim() -> None:
    """Regenerate with: python -c 'from validators import rules; print(rules.markdown())'."""
    text = DOC.read_text()
    for info in rules.table():
        assert f"| `{info.code}` | {info.default_severity} |" in text, info.code
    assert rules.markdown() in text
