"""Everyday mistakes end in one line naming the flag or file and the fix, exit 2: never a traceback
or a hang. The cases about what a command says run the CLI's ``main`` in process (the same parser and
error handling); the console script's own exit 2 is proven by a real process (the unknown haproxy path),
and ``serve``'s cases stay processes (a serve that failed to fail would serve for ever)."""

from __future__ import annotations

import socket
import stat
import subprocess
from pathlib import Path

import pytest

from tests.webhook.clirun import in_process, routegate
from tests.webhook.conftest import INPUTS, STATE_DIR


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    code, err = result.returncode, result.stderr
    assert code == 2, err
    assert "Traceback" not in err, err
    # JSON log lines and the certificate notice are progress, not errors
    lines = [line for line in err.splitlines()
             if line.strip() and not line.startswith("{") and "serving certificate signed" not in line]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return str(lines[0])


@pytest.mark.parametrize(("flags", "needles"), [
    (["check", "--check-concurrency", "0"], ["--check-concurrency", "at least 1"]),
    (["check", "--check-concurrency", "-3"], ["--check-concurrency", "at least 1"]),
    (["check", "--check-timeout", "0"], ["--check-timeout", "above 0"]),
    (["check", "--check-timeout", "-1"], ["--check-timeout", "above 0"]),
    (["check", "--check-timeout", "nan"], ["--check-timeout"]),
    (["check", "--reload-note-budget", "-1"], ["--reload-note-budget"]),
    (["check", "--templates", "/nope"], ["--templates", "/nope", "no such directory"]),
    (["check", "--config", "/nope.yaml"], ["--config", "/nope.yaml"]),
    (["serve", "--review-timeout", "0"], ["--review-timeout", "above 0"]),
    (["serve", "--listen", "localhost"], ["--listen", "HOST:PORT"]),
    (["serve", "--metrics-listen", "1.2.3.4:99999"], ["--metrics-listen"]),
    (["serve", "--dns-name", "bad name!"], ["--dns-name", "bad name!"]),
    (["serve", "--tls-cert", "/nope.crt", "--tls-key", "/nope.key"], ["--tls-cert", "/nope.crt"]),
])
def test_the_parser_refuses_out_of_range_flags(flags: list[str], needles: list[str]) -> None:
    result = in_process(*flags, *(["-f", str(INPUTS / "good.yaml")] if flags[0] == "check" else []), timeout=30)
    one_line_error(result, *needles)


def test_an_unknown_haproxy_path_says_how_to_fix_it() -> None:
    result = routegate("check", "-f", str(INPUTS / "good.yaml"), ROUTEGATE_HAPROXY="/nonexistent")
    line = one_line_error(result, "$ROUTEGATE_HAPROXY", "/nonexistent")
    assert "unset it" in line and "pip install" in line


def test_render_out_under_a_file_names_the_flag(tmp_path: Path, haproxy_path: str) -> None:
    (tmp_path / "file").write_text("x")
    result = in_process("render", "-f", str(INPUTS / "good.yaml"), "--out", str(tmp_path / "file" / "out"))
    one_line_error(result, "--out", "cannot create")


def serve_until_exit(tmp_path: Path, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    return routegate("serve", "--state", str(STATE_DIR), *flags, timeout=60, **{"HOME": str(tmp_path), **env})


def test_an_unwritable_cert_dir_names_the_flag(tmp_path: Path, haproxy_path: str) -> None:
    (tmp_path / "file").write_text("x")
    result = serve_until_exit(tmp_path, "--cert-dir", str(tmp_path / "file" / "certs"),
                              "--listen", "127.0.0.1:1", "--metrics-listen", "127.0.0.1:2")
    one_line_error(result, "--cert-dir", "--tls-cert")


def test_an_unwritable_home_without_flags_says_what_to_pass(tmp_path: Path, haproxy_path: str) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("x")  # what HOME=/nonexistent is for a non-root user: nothing can be created under it
    result = serve_until_exit(tmp_path, "--listen", "127.0.0.1:1", "--metrics-listen", "127.0.0.1:2",
                              HOME=str(home), XDG_CACHE_HOME="")
    one_line_error(result, "default certificate directory", "--cert-dir")


@pytest.mark.parametrize("flag", ["--listen", "--metrics-listen"])
def test_a_port_in_use_names_its_flag(tmp_path: Path, flag: str, haproxy_path: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = f"127.0.0.1:{busy.getsockname()[1]}"
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            free = f"127.0.0.1:{spare.getsockname()[1]}"
        other = "--metrics-listen" if flag == "--listen" else "--listen"
        result = serve_until_exit(tmp_path, "--cert-dir", str(tmp_path / "certs"), flag, taken, other, free)
    one_line_error(result, flag, taken, "cannot listen")


def test_private_dirs_stay_private(tmp_path: Path, haproxy_path: str) -> None:
    """The generated certificate directory is still 0700 (the error path did not change the happy one)."""
    result = in_process("certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((tmp_path / "c" / "tls.key").stat().st_mode) == 0o600


def test_check_without_inputs_and_bad_state_files(tmp_path: Path) -> None:
    one_line_error(in_process("check"), "-f PATH")
    (tmp_path / "state.yaml").write_text("apiVersion: v1\x00\n")
    result = in_process("check", "--state", str(tmp_path / "state.yaml"), "-f", str(INPUTS / "good.yaml"))
    one_line_error(result, "--state", f"{tmp_path / 'state.yaml'}:1:1", "NUL")
    (tmp_path / "crds.yaml").write_text("a: " + "[" * 100_000 + "]" * 100_000)
    result = in_process("check", "--crds", str(tmp_path / "crds.yaml"), "-f", str(INPUTS / "good.yaml"))
    one_line_error(result, "--crds", "nesting deeper")


def test_a_settings_file_with_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text("rules: &a {RG0113: off}\nexemptNamespaces: *a\n")
    result = in_process("check", "--config", str(tmp_path / "rules.yaml"), "-f", str(INPUTS / "good.yaml"))
    one_line_error(result, f"--config {tmp_path / 'rules.yaml'}:1:8", "aliases")


def _setup_case(tmp_path: Path, case: str) -> list[str]:
    """The flags of one broken set-up (each file made under ``tmp_path``)."""
    route = str(INPUTS / "good.yaml")
    if case == "template-syntax":
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / "990-user.cfg.j2").write_text("# ok\n{{ foo(\n")
        return ["render", "-f", route, "--templates", str(tmp_path / "t"), "--out", str(tmp_path / "out")]
    if case == "template-runtime":
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / "990-user.cfg.j2").write_text("# ok\n# ok\n{{ 'a' + 1 }}\n")
        return ["render", "-f", route, "--templates", str(tmp_path / "t"), "--out", str(tmp_path / "out")]
    if case == "haproxy-without-version":
        fake = tmp_path / "haproxy"
        fake.write_text("#!/bin/sh\necho hello\n")
        fake.chmod(0o755)
        return ["check", "-f", route, "--haproxy", str(fake)]
    if case == "config":
        (tmp_path / "c.yaml").write_text("render:\n  httpPort: -5\n")
        return ["check", "-f", route, "--config", str(tmp_path / "c.yaml")]
    if case == "crds":
        (tmp_path / "c.yaml").write_text("kind: [\n")
        return ["check", "-f", route, "--crds", str(tmp_path / "c.yaml")]
    if case == "state":
        (tmp_path / "s.yaml").write_text("kind: [\n")
        return ["check", "-f", route, "--state", str(tmp_path / "s.yaml")]
    if case == "kubeconfig":
        (tmp_path / "kc").write_text("clusters: [\n  - a\n  b: c\n")
        return ["check", "-f", route, "--kubeconfig", str(tmp_path / "kc")]
    assert case == "dataplane-version"
    return ["check", "-f", route, "--dataplane-version", "two.eight"]


@pytest.mark.parametrize(("case", "needles"), [
    ("template-syntax", ["--templates", "990-user.cfg.j2:2:", "unexpected"]),
    ("template-runtime", ["--templates", "990-user.cfg.j2:3:", "TypeError"]),
    ("haproxy-without-version", ["--haproxy", "could not read a version"]),
    ("config", ["--config", "c.yaml"]),
    ("crds", ["--crds", "c.yaml:"]),
    ("state", ["--state", "s.yaml:"]),
    ("kubeconfig", ["--kubeconfig", "kc:", "not valid YAML"]),
    ("dataplane-version", ["--dataplane-version", "two.eight"]),
])
def test_every_setup_error_is_one_line_naming_its_flag(tmp_path: Path, case: str, needles: list[str],
                                                       haproxy_path: str) -> None:
    flags = _setup_case(tmp_path, case)
    line = one_line_error(in_process(*flags, ROUTEGATE_HAPROXY=haproxy_path, HOME=str(tmp_path)), *needles)
    if case.startswith("template"):  # the template's file, not only its name
        assert str(tmp_path / "t" / "990-user.cfg.j2") in line, line
