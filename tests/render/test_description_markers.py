"""``description.json`` (``routegate render``) carries no source-map marker bytes: they are
stripped from haproxy.cfg, and a description must say what haproxy.cfg says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.render.conftest import DATA
from webhook.cli.routegate import main


@pytest.mark.parametrize("name", ["basic.yaml", "grpc-https.yaml"])
def test_description_has_no_marker_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                         haproxy_path: str) -> None:
    assert main(["render", "-f", str(DATA / name), "-O", str(tmp_path)]) == 0
    capsys.readouterr()
    text = (tmp_path / "description.json").read_text()
    assert '"comments"' in text
    assert not any(marker in text for marker in ("\x1e", "\x1f", "\\u001e", "\\u001f"))
    assert not any(marker in (tmp_path / "haproxy.cfg").read_text() for marker in ("\x1e", "\x1f"))
