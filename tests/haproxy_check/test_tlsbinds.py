"""Proven TLS binds: the checked copy binds TLS only where something the bind reads is new.

The unit tests pin what the key covers (every input a TLS bind line's judgement depends on) and what
the module refuses to reason about. The checker tests run the real binaries: a stripped check judges
exactly as a check of the configuration as rendered, and nothing new (a broken certificate behind the
same words, a warning during the proof) is ever taken as proven.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from certs import generation
from haproxy_check.check import tlsbinds
from haproxy_check.check.checker import Checker
from haproxy_check.results import CheckResult, HAProxyBinary, RenderResult

GLOBAL = b"global\n    tune.ssl.default-dh-param 2048\n"
DEFAULTS = b"defaults base\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n"
FRONTEND = (b"frontend gw-https-443 from base\n    mode http\n"
            b"    bind :18443 ssl crt certs/a.pem alpn h2,http/1.1\n"
            b"    http-request set-var(txn.x) str(a)\n    default_backend b\n")
BACKEND = b"backend b from base\n    server s 127.0.0.1:1\n"


def pem() -> bytes:
    now = datetime.now(UTC)
    leaf = generation.new_leaf(generation.new_ca(now=now), now=now, dns_names=["app.example.com"])
    return leaf.cert_pem() + leaf.key_pem()


CERT = pem()


def config(*, global_: bytes = GLOBAL, defaults: bytes = DEFAULTS, frontend: bytes = FRONTEND,
           extra: bytes = b"") -> bytes:
    return global_ + b"\n" + defaults + b"\n" + frontend + extra + b"\n" + BACKEND


def files_of(cfg: bytes, **more: bytes) -> dict[str, bytes]:
    return {"haproxy.cfg": cfg, "certs/a.pem": CERT, **more}


def proven(cfg: bytes, files: dict[str, bytes]) -> tlsbinds.ProvenBinds:
    binds = tlsbinds.ProvenBinds()
    stripped, keys = binds.prepare(cfg, files)
    assert stripped is None and keys
    binds.learn(keys)
    return binds


def test_a_proven_config_is_checked_with_its_tls_binds_reduced_to_their_addresses_on_the_same_lines() -> None:
    cfg = config()
    binds = proven(cfg, files_of(cfg))
    stripped, keys = binds.prepare(cfg, files_of(cfg))
    assert stripped is not None and keys == ()
    before, after = cfg.split(b"\n"), stripped.split(b"\n")
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [(b"    bind :18443 ssl crt certs/a.pem alpn h2,http/1.1", b"    bind :18443")]


@pytest.mark.parametrize("later", [
    pytest.param(lambda c, f: (c, {**f, "certs/a.pem": pem()}), id="another certificate behind the same words"),
    pytest.param(lambda c, f: (c.replace(b"default-dh-param 2048", b"default-dh-param 4096"), f), id="global"),
    pytest.param(lambda c, f: (c.replace(b"timeout client 5s", b"timeout client 6s"), f), id="defaults"),
    pytest.param(lambda c, f: (c.replace(b"    mode http\n    bind", b"    mode tcp\n    bind"), f),
                 id="the frontend's mode"),
    pytest.param(lambda c, f: (c.replace(b"frontend gw-https-443 from base", b"frontend gw-https-443"), f),
                 id="the frontend's header"),
    pytest.param(lambda c, f: (c.replace(b"alpn h2,http/1.1", b"alpn h2"), f), id="the bind's words"),
    pytest.param(lambda c, f: (c + b"\nresolvers dns\n    nameserver a 127.0.0.1:53\n", f),
                 id="a section that is not a proxy"),
])
def test_a_bind_with_any_new_input_is_checked_as_rendered(later: object) -> None:
    cfg = config()
    binds = proven(cfg, files_of(cfg))
    new_cfg, new_files = later(cfg, files_of(cfg))  # type: ignore[operator]
    stripped, keys = binds.prepare(new_cfg, {**new_files, "haproxy.cfg": new_cfg})
    assert stripped is None and keys


def test_the_rest_of_the_configuration_does_not_unprove_a_bind() -> None:
    cfg = config()
    binds = proven(cfg, files_of(cfg))
    other = (config(extra=b"    http-request set-var(txn.y) str(b)\n")
             + b"backend c from base\n    server t 10.0.0.1:80\n")
    assert binds.prepare(other, files_of(other))[0] is not None


def test_every_file_a_crt_list_names_is_part_of_the_key() -> None:
    frontend = FRONTEND.replace(b"ssl crt certs/a.pem", b"ssl crt-list certs/f.crt-list")
    cfg = config(frontend=frontend)
    files = files_of(cfg, **{"certs/f.crt-list": b"certs/a.pem\ncerts/b.pem [alpn h2]\n", "certs/b.pem": CERT})
    binds = proven(cfg, files)
    assert binds.prepare(cfg, files)[0] is not None
    assert binds.prepare(cfg, {**files, "certs/b.pem": pem()})[0] is None
    assert binds.prepare(cfg, {**files, "certs/f.crt-list": b"certs/a.pem\n"})[0] is None


@pytest.mark.parametrize("cfg,files", [
    pytest.param(config(frontend=FRONTEND.replace(b"certs/a.pem", b"/etc/ssl/a.pem")), None,
                 id="a file outside the render"),
    pytest.param(config(frontend=FRONTEND.replace(b"certs/a.pem", b"certs/missing.pem")), None,
                 id="a file the render lacks"),
    pytest.param(config(frontend=FRONTEND.replace(b"alpn h2,http/1.1", b'alpn "h2"')), None, id="quoting"),
    pytest.param(config(frontend=FRONTEND.replace(b"alpn h2,http/1.1", b"alpn ${ALPN}")), None, id="a variable"),
    pytest.param(config(frontend=FRONTEND.replace(b"alpn h2,http/1.1", b"alpn h2 # comment")), None,
                 id="a comment"),
    pytest.param(config(frontend=FRONTEND.replace(b"bind :18443", b"bind quic4@:18443")), None, id="QUIC"),
    pytest.param(config(extra=b".if defined(X)\n    bind :18444 ssl crt certs/a.pem\n.endif\n"), None,
                 id="a conditional block"),
])
def test_configurations_the_module_cannot_read_literally_are_never_stripped(cfg: bytes, files: object) -> None:
    binds = tlsbinds.ProvenBinds()
    assert binds.prepare(cfg, files_of(cfg)) == (None, ())


def test_a_configuration_without_tls_has_nothing_to_prove_and_a_huge_one_is_left_alone() -> None:
    assert tlsbinds.ProvenBinds().prepare(b"", {"haproxy.cfg": b""}) == (None, ())
    assert tlsbinds.ProvenBinds().prepare(b"    # indented only\n", {}) == (None, ())
    plain = config(frontend=FRONTEND.replace(b" ssl crt certs/a.pem alpn h2,http/1.1", b""))
    assert tlsbinds.ProvenBinds().prepare(plain, files_of(plain)) == (None, ())
    huge = config(extra=b"    # " + b"x" * tlsbinds.MAX_CONFIG + b"\n")
    assert tlsbinds.ProvenBinds().prepare(huge, files_of(huge)) == (None, ())


def test_the_proven_keys_are_bounded_least_recently_used_first() -> None:
    binds = tlsbinds.ProvenBinds(remembered=2)
    # The address stays on the stripped line (HAProxy still judges it), so it is no part of the key.
    configs = [config(frontend=FRONTEND.replace(b"alpn h2,http/1.1", alpn)) for alpn in (b"alpn h2", b"alpn http/1.1",
                                                                                      b"alpn h2,http/1.1")]
    for cfg in configs:
        binds.learn(binds.prepare(cfg, files_of(cfg))[1])
    assert len(binds) == 2
    assert binds.prepare(configs[0], files_of(configs[0]))[0] is None
    assert binds.prepare(configs[2], files_of(configs[2]))[0] is not None


# ---------------------------------------------------------------------------- with the real haproxy


def judged(result: CheckResult) -> tuple[object, ...]:
    return (result.ok, result.decided, result.exit_code,
            tuple((a.line, a.message) for a in result.alerts), tuple((w.line, w.message) for w in result.warnings))


BROKEN_LINES = [
    pytest.param(b"", id="valid"),
    pytest.param(b"    http-request set-header X %[nosuchfetch]\n", id="a broken rule"),
    pytest.param(b"    http-request set-var(txn.z) path,map_reg(maps/bad.map)\n", id="a broken map entry"),
    pytest.param(b"    use_backend nosuchbackend\n", id="a missing backend"),
]


@pytest.mark.parametrize("broken", BROKEN_LINES)
def test_a_stripped_check_judges_as_the_check_of_the_rendered_configuration(
        haproxy_paths: list[str], tmp_path: Path, broken: bytes) -> None:
    async def run() -> None:
        for binary in haproxy_paths:
            good = config()
            learner = Checker(HAProxyBinary(binary, "x"), scratch_base=tmp_path)
            assert (await learner.check(RenderResult(files=files_of(good)))).ok
            assert len(learner.proven_tls) == 1
            cfg = config(extra=broken)
            files = files_of(cfg, **{"maps/bad.map": b"/a{2,1} x\n"})
            assert learner.proven_tls.prepare(cfg, files)[0] is not None  # this check is stripped
            stripped = await learner.check(RenderResult(files=files))
            as_rendered = await Checker(HAProxyBinary(binary, "x"), scratch_base=tmp_path).check(
                RenderResult(files=files))
            assert judged(stripped) == judged(as_rendered), binary
            assert stripped.ok == (not broken)

    asyncio.run(run())


@pytest.mark.parametrize("certificate", [
    pytest.param(b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n", id="garbage"),
    pytest.param(CERT.split(b"-----BEGIN PRIVATE KEY-----")[0], id="no key"),
    pytest.param(b"", id="empty"),
])
def test_a_broken_certificate_behind_proven_words_still_fails(
        haproxy_paths: list[str], tmp_path: Path, certificate: bytes) -> None:
    async def run() -> None:
        for binary in haproxy_paths:
            checker = Checker(HAProxyBinary(binary, "x"), scratch_base=tmp_path)
            good = config()
            assert (await checker.check(RenderResult(files=files_of(good)))).ok
            result = await checker.check(RenderResult(files={**files_of(good), "certs/a.pem": certificate}))
            assert not result.ok and result.decided and result.alerts, (binary, result)
            assert len(checker.proven_tls) == 1  # the failure proves nothing

    asyncio.run(run())


def test_a_check_that_warned_proves_nothing(haproxy_paths: list[str], tmp_path: Path) -> None:
    # No timeouts in the frontend's defaults: haproxy warns (and the configuration stays valid).
    warns = config(defaults=b"defaults base\n    mode http\n")

    async def run() -> None:
        for binary in haproxy_paths:
            checker = Checker(HAProxyBinary(binary, "x"), scratch_base=tmp_path)
            result = await checker.check(RenderResult(files=files_of(warns)))
            assert result.ok and result.warnings, (binary, result)
            assert len(checker.proven_tls) == 0

    asyncio.run(run())
