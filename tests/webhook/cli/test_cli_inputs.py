"""``routegate check`` on untrusted and broken inputs, through the CLI's ``main`` in process: it keeps
going, reports ``file:line:column``, exits 2 at the end, and never follows the inputs anywhere."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import yaml

from tests.conftest import REPO
from tests.render.conftest import tls_secret
from tests.webhook.clirun import in_process
from tests.webhook.conftest import INPUTS, STATE_DIR

GOOD = (INPUTS / "good.yaml").read_text()
BROKEN = (INPUTS / "bad-regex.yaml").read_text()


def check(*args: str, **kw: str) -> tuple[int, str, str]:
    result = in_process("check", "--state", str(STATE_DIR), *args, **kw)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


def test_the_examples_pass_with_the_broken_route_denied(haproxy_path: str) -> None:
    result = in_process("check", "-f", "examples/")
    assert result.returncode == 1, result.stdout + result.stderr
    heads = [line for line in result.stdout.splitlines() if not line.startswith(" ")]
    denied = [line for line in heads if line.endswith(": denied")]
    assert denied == ["examples/broken-route.yaml:1:1: HTTPRoute shop/items: denied",
                      "examples/review-broken-route.json:22:15: HTTPRoute shop/items: denied"]
    assert heads[-1] == "7 objects: 5 allowed, 2 denied, 0 with warnings, 5 with notes"


def test_one_bad_file_is_reported_and_the_rest_judged(tmp_path: Path, haproxy_path: str) -> None:
    (tmp_path / "a-syntax.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: [unclosed\n")
    (tmp_path / "b-not-k8s.yaml").write_text("just: a mapping\n---\n- a list\n")
    (tmp_path / "c-nul.yaml").write_text("apiVersion: v1\n\x00kind: Service\n")
    (tmp_path / "d-bad.json").write_text('{"apiVersion": "v1",\n "kind": }')
    (tmp_path / "e-latin1.yaml").write_bytes(b"apiVersion: v1\nkind: \xff\n")
    (tmp_path / "z-good.yaml").write_text(GOOD)
    code, out, _ = check("-f", str(tmp_path), "-v")
    assert code == 2
    assert f"{tmp_path}/a-syntax.yaml:5:1: error: invalid YAML:" in out
    assert f"{tmp_path}/b-not-k8s.yaml:1:1: error: not a Kubernetes object: it has no apiVersion" in out
    assert f"{tmp_path}/b-not-k8s.yaml:3:1: error: a document must be a mapping" in out
    assert f"{tmp_path}/c-nul.yaml:2:1: error: a NUL byte" in out
    assert f"{tmp_path}/d-bad.json:2:10: error: invalid JSON: Expecting value" in out
    assert f"{tmp_path}/e-latin1.yaml: error: cannot read: not UTF-8" in out
    assert f"{tmp_path}/z-good.yaml:1:1: HTTPRoute capture/shop: allowed" in out
    assert out.rstrip().endswith("; 6 input errors")


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: lol}", "data:", '  a: &a ["lol","lol"]']
    lines += [f"  {chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    (tmp_path / "good.yaml").write_text(GOOD)
    result = in_process("check", "--state", str(STATE_DIR), "-f", str(tmp_path), "-v", timeout=30)
    assert result.returncode == 2, result.stdout
    assert f"{bomb}:5:6: error: invalid YAML: YAML aliases" in result.stdout  # at the anchored value
    assert "HTTPRoute capture/shop: allowed" in result.stdout


def test_deep_nesting_is_an_input_error_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "deep.yaml").write_text("a: " + "[" * 200_000 + "]" * 200_000 + "\n")
    (tmp_path / "deep2.yaml").write_text("a: " + "[" * 150 + "]" * 150 + "\n")
    (tmp_path / "deep.json").write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    result = in_process("check", "-f", str(tmp_path), timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    for name in ("deep.yaml", "deep2.yaml", "deep.json"):
        assert f"{tmp_path / name}:1:" in result.stdout and "nesting deeper than 100 levels" in result.stdout


def test_empty_input_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n---\n")
    code, out, _ = check("-f", str(tmp_path))
    assert code == 2 and "no Kubernetes objects found" in out


def test_an_admission_review_is_unwrapped(haproxy_path: str) -> None:
    result = in_process("check", "--state", "examples/state", "-f", "examples/review-broken-route.json", "-o", "json")
    assert result.returncode == 1
    [judged] = json.loads(result.stdout)["results"]
    assert (judged["kind"], judged["name"], judged["allowed"]) == ("HTTPRoute", "items", False)
    assert judged["line"] == 22 and any(f["line"] == 44 for f in judged["findings"])


def test_skip_kinds(tmp_path: Path, haproxy_path: str) -> None:
    code, out, _ = check("-f", str(INPUTS / "bad-regex.yaml"), "-f", str(INPUTS / "good.yaml"),
                         "--skip-kinds", "HTTPRoute,Service")
    assert (code == 2 and "no Kubernetes objects" not in out) or code == 0
    assert "HTTPRoute" not in out.split("\n")[0]


def test_the_same_object_twice_is_an_error_and_each_copy_is_judged(tmp_path: Path, haproxy_path: str) -> None:
    broken = yaml.safe_load(BROKEN)
    benign = {**broken, "spec": {**broken["spec"], "rules": broken["spec"]["rules"][:1]}}
    (tmp_path / "1-broken.yaml").write_text(yaml.safe_dump(broken))
    (tmp_path / "2-benign.yaml").write_text(yaml.safe_dump(benign))
    code, out, _ = check("-f", str(tmp_path), "-v")
    assert code == 2, out
    assert f"{tmp_path}/2-benign.yaml:1:1: error: HTTPRoute capture/broken appears in {tmp_path}/1-broken.yaml:1:1 " \
           f"and {tmp_path}/2-benign.yaml:1:1: the same object twice in one apply" in out
    assert f"{tmp_path}/1-broken.yaml:1:1: HTTPRoute capture/broken: denied" in out
    assert f"{tmp_path}/2-benign.yaml:1:1: HTTPRoute capture/broken: allowed" in out


def test_findings_point_at_the_offending_field(haproxy_path: str) -> None:
    code, out, _ = check("-f", str(INPUTS / "bad-regex.yaml"), "-o", "json")
    assert code == 1
    [judged] = json.loads(out)["results"]
    finding = next(f for f in judged["findings"] if f["path"] == "spec.rules[1].matches[0].path.value")
    line = BROKEN.splitlines()[finding["line"] - 1]
    assert line[finding["column"] - 1:].startswith('"/a{2,1}"'), (finding, line)
    assert finding["line"] != judged["line"]
    assert finding["docs"] == f"https://github.com/routegate/routegate/blob/v0.1.0/docs/RULES.md#{finding['code'].lower()}"


def test_symlinks_out_of_a_directory_are_skipped_with_a_warning(tmp_path: Path, haproxy_path: str) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(BROKEN)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "good.yaml").write_text(GOOD)
    (tree / "evil.yaml").symlink_to(outside)
    (tree / "sub").mkdir()
    (tree / "sub" / "svc.json").write_text(json.dumps({"apiVersion": "v1", "kind": "Service",
                                                        "metadata": {"name": "linked", "namespace": "capture"}}))
    (tree / "inside.json").symlink_to(tree / "sub" / "svc.json")  # inside the tree: followed, a duplicate
    (tree / "etc").symlink_to(tmp_path)
    code, out, _ = check("-f", str(tree))
    assert code == 2, out
    assert f"{tree / 'sub' / 'svc.json'}:1:1: error: Service capture/linked appears in" in out
    assert f"warning: {tree / 'evil.yaml'}: skipped: a symlink to {outside}" in out
    assert f"warning: {tree / 'etc'}: skipped" in out
    assert "broken" not in out
    code, out, _ = check("-f", str(tree / "good.yaml"), "-f", str(tree / "evil.yaml"))  # named directly: read
    assert code == 1
    code, out, _ = check("-f", str(tree), "--follow-symlinks")
    assert code in (1, 2) and "HTTPRoute capture/broken: denied" in out


def tls_state(tmp_path: Path) -> Path:
    state = tmp_path / "state.yaml"
    gateway = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "edge", "namespace": "capture"},
               "spec": {"gatewayClassName": "c", "listeners": [
                   {"name": "https", "protocol": "HTTPS", "port": 443, "hostname": "shop.example.com",
                    "tls": {"certificateRefs": [{"name": "shop-cert"}]}}]}}
    state.write_text(yaml.safe_dump_all([gateway, tls_secret("shop-cert", "capture", "shop.example.com")]))
    return state


def test_render_out_never_follows_planted_symlinks_and_keeps_keys_private(tmp_path: Path,
                                                                          haproxy_path: str) -> None:
    state = tls_state(tmp_path)
    fresh = tmp_path / "fresh"
    result = in_process("render", "--state", str(state), "--out", str(fresh))
    assert result.returncode == 0, result.stderr
    keys = [p for p in fresh.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
    assert keys, sorted(fresh.rglob("*"))
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in keys)
    assert stat.S_IMODE((fresh / "haproxy.cfg").stat().st_mode) == 0o644

    planted = tmp_path / "planted"
    planted.mkdir()
    victim, victim_dir = tmp_path / "victim.txt", tmp_path / "victim-dir"
    victim.write_text("keep me")
    victim_dir.mkdir()
    (planted / "haproxy.cfg").symlink_to(victim)
    (planted / "maps").symlink_to(victim_dir)
    result = in_process("render", "--state", str(state), "--out", str(planted))
    assert result.returncode == 2 and "not empty" in result.stderr and "--force" in result.stderr
    result = in_process("render", "--state", str(state), "--out", str(planted), "--force")
    assert "Traceback" not in result.stderr
    assert victim.read_text() == "keep me" and not any(victim_dir.iterdir())
    if result.returncode == 0:  # the links themselves were replaced by real files
        assert not (planted / "haproxy.cfg").is_symlink()
    else:
        assert "a symlink or another file is in the way" in result.stderr


def test_control_characters_never_reach_the_reader(tmp_path: Path, haproxy_path: str) -> None:
    """Hostile kind, name and file name through every output format."""
    hostile = "evil\n/tmp/x.yaml:1:1: HTTPRoute default/ok: allowed\x1b[8m\r\u202e"
    obj = {"apiVersion": "example.com/v1", "kind": f"Kind{hostile}", "metadata": {"name": f"n{hostile}"}}
    route = yaml.safe_load(GOOD)
    route["metadata"]["name"] = "x\x1b[2Jy"
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a\x1bb.yaml").write_text(yaml.safe_dump_all([obj, route]))
    for output in ("text", "github", "junit", "json", "yaml", "sarif"):
        result = in_process("check", "--state", str(STATE_DIR), "-f", str(folder), "-o", output,
                           *(["-v"] if output == "text" else []))
        assert "Traceback" not in result.stderr, result.stderr
        out = result.stdout
        assert "\x1b" not in out and "\r" not in out and "\u202e" not in out, (output, out)
        assert not any(line.startswith("/tmp/x.yaml") for line in out.splitlines()), output
        if output == "github":
            assert all(line.startswith("::") for line in out.splitlines()), out
        if output == "text":
            assert "\\x1b[8m" in out and "\\n/tmp/x.yaml" in out
        if output == "json":
            names = {r["name"] for r in json.loads(out)["results"]}
            assert f"n{hostile}" in names  # JSON keeps the exact value, escaped by the encoder
        if output == "junit":
            import xml.etree.ElementTree as ET

            ET.fromstring(out.split("\n", 1)[1])
        if output in ("yaml", "sarif"):
            (yaml.safe_load if output == "yaml" else json.loads)(out)


def test_the_repo_examples_stay_readable_as_inputs() -> None:
    assert os.path.isdir(REPO / "examples")
