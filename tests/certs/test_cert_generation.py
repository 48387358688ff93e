"""Certificate generation: chain, SANs, key usage, validity, files and the `certs generate` command."""

from __future__ import annotations

import argparse
import ipaddress
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import bootstrap, commands, generation

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
Pair = tuple[generation.Issued, generation.Issued]
Capture = pytest.CaptureFixture[str]


def _verify(ca: x509.Certificate, leaf: x509.Certificate, name: x509.GeneralName, at: datetime) -> None:
    subject: verification.Subject
    if isinstance(name, x509.DNSName):
        subject = x509.DNSName(name.value)
    else:
        assert isinstance(name, x509.IPAddress)
        subject = x509.IPAddress(name.value)
    verifier = (verification.PolicyBuilder().store(verification.Store([ca])).time(at)
                .build_server_verifier(subject))
    verifier.verify(leaf, [])


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="routegate")
    commands.add_parser(parser.add_subparsers(dest="command"))
    return commands.run(parser.parse_args(list(argv)))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def issued() -> Pair:
    ca = generation.new_ca(now=NOW)
    names = [*generation.service_dns_names("routegate", "routegate-system"), "hooks.example.com"]
    leaf = generation.new_leaf(ca, now=NOW, dns_names=names, ip_addresses=["10.0.0.7", "fd00::7"])
    return ca, leaf


def test_the_chain_verifies_for_every_service_name_with_webpki_rules(issued: Pair) -> None:
    ca, leaf = issued
    for name in ("routegate", "routegate.routegate-system", "routegate.routegate-system.svc",
                 "routegate.routegate-system.svc.cluster.local", "hooks.example.com"):
        _verify(ca.cert, leaf.cert, x509.DNSName(name), NOW)
    _verify(ca.cert, leaf.cert, x509.IPAddress(ipaddress.ip_address("10.0.0.7")), NOW)


def test_a_name_not_in_the_sans_is_rejected_by_the_verifier(issued: Pair) -> None:
    ca, leaf = issued
    with pytest.raises(verification.VerificationError):
        _verify(ca.cert, leaf.cert, x509.DNSName("routegate.other-ns.svc"), NOW)


def test_a_leaf_from_another_ca_does_not_verify(issued: Pair) -> None:
    _, leaf = issued
    other = generation.new_ca(now=NOW)
    with pytest.raises(verification.VerificationError):
        _verify(other.cert, leaf.cert, x509.DNSName("routegate"), NOW)


def test_sans_are_exactly_the_service_names_plus_extras(issued: Pair) -> None:
    _, leaf = issued
    san = leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "routegate", "routegate.routegate-system", "routegate.routegate-system.svc",
        "routegate.routegate-system.svc.cluster.local", "hooks.example.com"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.7"),
                                                       ipaddress.ip_address("fd00::7")]


def test_key_usage_and_constraints_fit_a_serving_leaf_and_a_ca(issued: Pair) -> None:
    ca, leaf = issued
    ext = leaf.cert.extensions
    bc = ext.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca is False
    ku = ext.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature and not ku.value.key_cert_sign
    assert list(ext.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    ca_bc = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert ca_bc.ca is True and ca_bc.path_length == 0
    assert ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert leaf.cert.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]


def test_validity_windows_are_backdated_one_hour_and_one_and_ten_years_long(issued: Pair) -> None:
    ca, leaf = issued
    assert leaf.cert.not_valid_before_utc == NOW - timedelta(hours=1)
    assert leaf.cert.not_valid_after_utc == NOW + timedelta(days=365)
    assert ca.cert.not_valid_after_utc == NOW + timedelta(days=3650)
    with pytest.raises(verification.VerificationError):
        _verify(ca.cert, leaf.cert, x509.DNSName("routegate"), NOW + timedelta(days=366))


def test_a_leaf_never_outlives_its_ca() -> None:
    ca = generation.new_ca(now=NOW, lifetime=timedelta(days=30))
    leaf = generation.new_leaf(ca, now=NOW, dns_names=["a"])
    assert leaf.cert.not_valid_after_utc == ca.cert.not_valid_after_utc


@pytest.mark.parametrize(("service", "namespace", "fragment"), [
    pytest.param("Bad_Name", "ns", "service 'Bad_Name'", id="underscore in service"),
    pytest.param("svc", "a.b", "namespace 'a.b'", id="dot in namespace"),
    pytest.param("svc", "", "namespace ''", id="empty namespace"),
])
def test_bad_service_names_are_rejected_with_the_field(service: str, namespace: str, fragment: str) -> None:
    with pytest.raises(generation.CertError, match=fragment):
        generation.service_dns_names(service, namespace)


@pytest.mark.parametrize(("dns", "ips", "fragment"), [
    pytest.param(["ok", "bad name"], [], "label 'bad name'", id="space in dns name"),
    pytest.param(["a\nb"], [], "DNS name", id="newline in dns name"),
    pytest.param([], ["300.1.1.1"], "'300.1.1.1' is not an IPv4 or IPv6", id="bad ip"),
    pytest.param([], [], "at least one", id="no names"),
])
def test_bad_extra_names_are_rejected(dns: list[str], ips: list[str], fragment: str) -> None:
    ca = generation.new_ca(now=NOW)
    with pytest.raises(generation.CertError, match=fragment):
        generation.new_leaf(ca, now=NOW, dns_names=dns, ip_addresses=ips)


def test_the_key_never_shows_in_a_repr(issued: Pair) -> None:
    _, leaf = issued
    assert "PRIVATE" not in repr(leaf) and "key=" not in repr(leaf)


# -- routegate certs generate ----------------------------------------------------------------------------


def test_certs_generate_writes_three_files_with_a_private_key(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "out"
    assert _cli("certs", "generate", "--service", "routegate", "--namespace", "rg",
                "--out", str(out), "--dns-name", "x.example", "--ip", "10.1.2.3") == 0
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert _mode(out / "tls.key") == 0o600 and _mode(out) == 0o700
    ca = generation.load_certs((out / "ca.crt").read_bytes())[0]
    leaf = generation.load_issued((out / "tls.crt").read_bytes(), (out / "tls.key").read_bytes())
    _verify(ca, leaf.cert, x509.DNSName("routegate.rg.svc"), datetime.now(UTC))
    assert generation.covers(leaf.cert, ["x.example", "routegate.rg.svc.cluster.local"], ["10.1.2.3"])
    assert str(out / "ca.crt") in capsys.readouterr().out


def test_certs_generate_refuses_to_overwrite_without_force(tmp_path: Path, capsys: Capture) -> None:
    args = ("certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path))
    assert _cli(*args) == 0
    before = (tmp_path / "tls.key").read_bytes()
    assert _cli(*args) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "tls.key").read_bytes() == before
    assert _cli(*args, "--force") == 0
    assert (tmp_path / "tls.key").read_bytes() != before


def test_certs_generate_reports_a_bad_name_and_exits_2(tmp_path: Path, capsys: Capture) -> None:
    assert _cli("certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path),
                "--dns-name", "bad..name") == 2
    assert "bad..name" in capsys.readouterr().err
    assert not (tmp_path / "tls.key").exists()


# -- ensure_self_signed ------------------------------------------------------------------------------------


def test_self_signed_is_generated_once_and_reused(tmp_path: Path) -> None:
    d = tmp_path / "certs"
    paths = bootstrap.ensure_self_signed(d, now=NOW)
    assert paths == bootstrap.CertPaths(ca=d / "ca.crt", cert=d / "tls.crt", key=d / "tls.key")
    assert _mode(paths.key) == 0o600 and _mode(d) == 0o700
    leaf = generation.load_certs(paths.cert.read_bytes())[0]
    assert generation.covers(leaf, ["localhost"], ["127.0.0.1"])
    first = paths.cert.read_bytes()
    bootstrap.ensure_self_signed(d, now=NOW + timedelta(days=30))
    assert paths.cert.read_bytes() == first


def test_self_signed_reissues_under_the_same_ca_when_names_change(tmp_path: Path) -> None:
    paths = bootstrap.ensure_self_signed(tmp_path, now=NOW)
    ca_before, leaf_before = paths.ca.read_bytes(), paths.cert.read_bytes()
    bootstrap.ensure_self_signed(tmp_path, dns_names=["dev.local"], ip_addresses=["::1"], now=NOW)
    assert paths.ca.read_bytes() == ca_before
    leaf = generation.load_certs(paths.cert.read_bytes())[0]
    assert paths.cert.read_bytes() != leaf_before
    assert generation.covers(leaf, ["localhost", "dev.local"], ["127.0.0.1", "::1"])


@pytest.mark.parametrize(("damage", "days_later"), [
    pytest.param("expire", 300, id="leaf past two thirds of its life"),
    pytest.param("garbage", 0, id="tls.crt is not PEM"),
    pytest.param("delete-key", 0, id="tls.key missing"),
    pytest.param("swap-key", 0, id="tls.key belongs to another certificate"),
])
def test_self_signed_regenerates_what_cannot_be_served(tmp_path: Path, damage: str, days_later: int) -> None:
    paths = bootstrap.ensure_self_signed(tmp_path, now=NOW)
    before = paths.cert.read_bytes()
    if damage == "garbage":
        paths.cert.write_bytes(b"not a certificate")
    elif damage == "delete-key":
        paths.key.unlink()
    elif damage == "swap-key":
        paths.key.write_bytes(generation.new_ca(now=NOW).key_pem())
    later = NOW + timedelta(days=days_later)
    bootstrap.ensure_self_signed(tmp_path, now=later)
    leaf = generation.load_issued(paths.cert.read_bytes(), paths.key.read_bytes())
    assert paths.cert.read_bytes() != before
    assert generation.valid_at(leaf.cert, later)
    assert generation.signed_by(leaf.cert, generation.load_certs(paths.ca.read_bytes())[0])


def test_default_cert_dir_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert bootstrap.default_cert_dir() == tmp_path / "routegate" / "certs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert bootstrap.default_cert_dir() == tmp_path / "home" / ".cache" / "routegate" / "certs"


def test_routegate_certs_generate_through_the_real_cli(tmp_path: Path, capsys: Capture) -> None:
    from webhook.cli import routegate as cli

    out = tmp_path / "real"
    assert cli.main(["certs", "generate", "--service", "routegate", "--namespace", "routegate-system",
                     "--out", str(out)]) == 0
    leaf = generation.load_certs((out / "tls.crt").read_bytes())[0]
    assert generation.covers(leaf, generation.service_dns_names("routegate", "routegate-system"))
    assert _mode(out / "tls.key") == 0o600
    assert cli.main(["certs", "generate", "--service", "x_y", "--namespace", "n", "--out", str(out),
                     "--force"]) == 2
    assert "service 'x_y'" in capsys.readouterr().err


def test_an_existing_out_dir_keeps_its_mode(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    assert _cli("certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path)) == 0
    assert _mode(tmp_path) == 0o755 and _mode(tmp_path / "tls.key") == 0o600
