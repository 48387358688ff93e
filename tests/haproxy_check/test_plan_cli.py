"""``routegate render --previous`` then ``routegate plan``: the endpoint that moved is one command."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import yaml

from tests.attachments import gwbuilders as gb
from webhook.cli import routegate as cli


def _write_state(where: Path, address: str) -> str:
    where.mkdir()
    objs = [gb.gateway("edge", gb.listener("http", 80, frm="All"), ns="infra"),
            gb.service("web", "default", ("http", 80)),
            gb.endpoint_slice("web-a", "web", "default", [("http", 8080)],
                              [("10.0.0.1", True), ("10.0.0.2", True), (address, True)]),
            gb.route("HTTPRoute", "r", gb.parent("edge", namespace="infra"), hosts=["a.example.com"],
                     rules=[{"backendRefs": [{"name": "web", "port": 80}]}])]
    (where / "state.yaml").write_text(yaml.safe_dump_all(objs))
    return str(where)


def _plan(old: Path, new: Path) -> dict[str, object]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["plan", "--from", str(old), "--to", str(new), "-o", "json"]) == 0  # checker's version
    result: dict[str, object] = json.loads(out.getvalue())
    return result


def test_render_with_previous_keeps_server_slots_for_plan(tmp_path: Path, haproxy_path: str) -> None:
    old_state, new_state = _write_state(tmp_path / "s1", "10.0.0.0"), _write_state(tmp_path / "s2", "10.0.0.9")
    with redirect_stdout(io.StringIO()):
        assert cli.main(["render", "--haproxy", haproxy_path, "--state", old_state, "--out", str(tmp_path / "r1")]) == 0
        assert cli.main(["render", "--haproxy", haproxy_path, "--state", new_state, "--out", str(tmp_path / "r2"),
                         "--previous", str(tmp_path / "r1")]) == 0
        assert cli.main(["render", "--haproxy", haproxy_path, "--state", new_state, "--out", str(tmp_path / "r3")]) == 0
    stable = _plan(tmp_path / "r1", tmp_path / "r2")
    assert [c["command"] for c in stable["commands"]] == [  # type: ignore[attr-defined]
        "set server gw_h_default_r_web_80/s1 addr 10.0.0.9 port 8080"]
    assert len(_plan(tmp_path / "r1", tmp_path / "r3")["commands"]) == 3  # type: ignore[arg-type]
