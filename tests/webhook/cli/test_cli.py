"""``routegate check`` / ``render`` / ``rules`` through the console entry point (in process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.webhook.conftest import CRDS, INPUTS, STATE_DIR
from webhook.cli.routegate import main

pytestmark = pytest.mark.haproxy


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", "--state", str(STATE_DIR), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_good_routes_exit_0(capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    code, out, _ = check(capsys, "-f", str(INPUTS / "good.yaml"), "-v")
    assert code == 0, out
    assert out.splitlines()[0] == f"{INPUTS / 'good.yaml'}:1:1: HTTPRoute capture/shop: allowed"


def test_a_denied_object_exits_1_and_names_file_line_and_field(capsys: pytest.CaptureFixture[str],
                                                               haproxy_path: str) -> None:
    code, out, _ = check(capsys, "-f", str(INPUTS), "-v")
    assert code == 1
    lines = out.splitlines()
    broken = lines.index(f"{INPUTS / 'bad-regex.yaml'}:2:1: HTTPRoute capture/broken: denied")
    assert " spec.rules[1].matches[0].path.value: " in lines[broken + 1]
    assert lines[broken + 1].lstrip().startswith(f"{INPUTS / 'bad-regex.yaml'}:")
    assert f"{INPUTS / 'good.yaml'}:1:1: HTTPRoute capture/shop: allowed" in lines
    sticky = next(i for i, line in enumerate(lines) if line.endswith("sticky: denied"))
    assert "RG0101 spec.rules[0].sessionPersistence.sessionName" in lines[sticky + 1]


def test_json_output_has_the_documented_shape(capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    code, out, _ = check(capsys, "-f", str(INPUTS / "bad-regex.yaml"), "-f", str(INPUTS / "good.yaml"),
                         "--output", "json")
    assert code == 1
    report = json.loads(out)
    assert set(report["haproxy"]) >= {"path", "version"}
    by_name = {r["name"]: r for r in report["results"]}
    assert set(by_name) == {"broken", "shop"}
    broken = by_name["broken"]
    assert broken["allowed"] is False and broken["line"] == 2 and broken["kind"] == "HTTPRoute"
    assert {"file", "line", "apiVersion", "kind", "namespace", "name", "allowed", "message", "warnings",
            "findings"} <= set(broken)
    assert any(f["path"] == "spec.rules[1].matches[0].path.value" and f["severity"] == "deny"
               for f in broken["findings"])
    assert by_name["shop"]["allowed"] is True
    conditions = by_name["shop"]["status"]["parents"][0]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [("Accepted", "True"), ("ResolvedRefs", "True")]


def test_stdin_is_read_with_dash(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                 haproxy_path: str) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO((INPUTS / "good.yaml").read_text()))
    code, out, _ = check(capsys, "-f", "-", "-v")
    assert code == 0 and out.startswith("<stdin>:1:1: HTTPRoute capture/shop: allowed")


def test_unparseable_yaml_exits_2_naming_file_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: [unclosed\n")
    code, out, _ = check(capsys, "-f", str(bad))
    assert code == 2 and f"{bad}:5:1: error: invalid YAML" in out


def test_a_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = check(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such file" in out


def test_no_haproxy_binary_exits_2_saying_how_to_get_one(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_HAPROXY", "/nonexistent/haproxy")
    code, _, err = check(capsys, "-f", str(INPUTS / "good.yaml"))
    assert code == 2 and "/nonexistent/haproxy" in err


def test_crds_enable_schema_checks(capsys: pytest.CaptureFixture[str], tmp_path: Path, haproxy_path: str) -> None:
    if CRDS is None or not CRDS.exists():
        pytest.skip("Gateway API CRDs are not beside this checkout")
    bad = tmp_path / "bad.yaml"
    bad.write_text((INPUTS / "good.yaml").read_text().replace("type: Exact, value: /healthz",
                                                              "type: Exactly, value: /healthz"))
    for extra in (["--crds", str(CRDS)], []):  # given files, or the bundled schemas
        code, out, _ = check(capsys, "-f", str(bad), *extra, "-o", "json")
        result = json.loads(out)["results"][0]
        assert code == 1
        assert any(f["path"] == "spec.rules[1].matches[0].path.type" for f in result["findings"]), result


def test_render_writes_the_config_the_gate_checks(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  haproxy_path: str) -> None:
    out_dir = tmp_path / "out"
    code = main(["render", "--state", str(STATE_DIR), "-f", str(INPUTS / "good.yaml"), "--out", str(out_dir)])
    assert code == 0
    config = (out_dir / "haproxy.cfg").read_text()
    assert "gw_h_capture_shop_web_8080" in config
    assert json.loads((out_dir / "description.json").read_text())["backends"]
    assert "HTTPRoute capture/shop" in json.loads((out_dir / "statuses.json").read_text())
    result = subprocess.run([haproxy_path, "-dr", "-c", "-f", "haproxy.cfg"], cwd=out_dir, capture_output=True,
                            text=True, env={"PATH": os.environ.get("PATH", "")}, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_lists_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert "RG0800" in out or "RG01" in out


def test_python_dash_m_webhook_is_the_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "webhook", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "check" in result.stdout and "serve" in result.stdout


def test_check_leaves_the_callers_logging_as_it_was(capsys: pytest.CaptureFixture[str], haproxy_path: str) -> None:
    import structlog

    before = structlog.get_config()
    check(capsys, "-f", str(INPUTS / "good.yaml"))
    assert structlog.get_config() == before


def test_check_gives_the_combined_haproxy_check_a_deadline_that_grows_with_the_inputs(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, haproxy_path: str) -> None:
    # All inputs are checked together first; a review's 5 s deadline on that one big check sent a busy
    # machine into N one-by-one reviews (10,000 routes: minutes).
    from webhook.cli import checking

    routes = "".join(f"""---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r{i}, namespace: default}}
spec: {{parentRefs: [{{name: none}}]}}
""" for i in range(3000))
    (tmp_path / "routes.yaml").write_text(routes)
    from webhook.gate import assembly

    seen: list[float] = []

    def build(binary: Any, settings: assembly.GateSettings) -> Any:
        seen.append(settings.check_timeout)
        return assembly.build_gate(binary, settings)

    monkeypatch.setattr(checking, "build_gate", build)
    monkeypatch.setattr(checking, "judge", lambda *args, **kwargs: _no_results())
    main(["check", "-f", str(tmp_path / "routes.yaml"), "--check-timeout", "1"])
    capsys.readouterr()
    assert seen == [pytest.approx(3000 * checking.COMBINED_CHECK_SECONDS_PER_OBJECT)]


async def _no_results() -> list[object]:
    return []
