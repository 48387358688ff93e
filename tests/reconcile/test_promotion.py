"""Atomic promotion: complete versions, a symlink swap readers never see half done, private keys 0600."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from haproxy_check.runtime.promotion import DATA, Promoter, content_hash

KEY = b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"


def _files(n: int) -> dict[str, bytes]:
    return {"haproxy.cfg": f"# version {n}\n".encode(), "maps/host.map": f"h{n} v{n}\n".encode(),
            "certs/gw.pem": b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n" + KEY}


def test_layout_record_and_modes(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path / "out")
    assert promoter.last_known_good() is None and promoter.live() is None
    record = promoter.promote(_files(1), state_version="v1")
    out = tmp_path / "out"
    assert os.readlink(out / DATA) == record.version and record.version.startswith("..v000001-")
    assert (out / "haproxy.cfg").read_bytes() == b"# version 1\n"  # through the stable links
    assert (out / "maps" / "host.map").read_bytes() == b"h1 v1\n"
    assert stat.S_IMODE((out / "certs" / "gw.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "maps" / "host.map").stat().st_mode) == 0o644
    assert promoter.last_known_good() == record
    assert record.content_hash == content_hash(_files(1)) and record.state_version == "v1"
    assert not [p for p in out.iterdir() if p.name.startswith((".tmp", "..data_tmp"))]


def test_keeps_the_last_versions_and_never_the_live_one_goes(tmp_path: Path) -> None:
    promoter = Promoter(tmp_path / "out", keep=2)
    (tmp_path / "out" / ".tmp..v000009-000000000000").mkdir(parents=True)  # a crashed promotion's
    records = [promoter.promote(_files(n), state_version=f"v{n}") for n in range(5)]
    kept = sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("..v"))
    assert kept == [r.version for r in records[-2:]]
    assert not list((tmp_path / "out").glob(".tmp*"))
    assert promoter.live() == tmp_path / "out" / records[-1].version


def test_a_reader_never_sees_a_mixed_or_partial_set(tmp_path: Path) -> None:
    """A reader resolving ``..data`` once reads a haproxy.cfg and a map of one and the same version,
    however often versions are swapped underneath it."""
    promoter = Promoter(tmp_path / "out", keep=3)
    promoter.promote(_files(0), state_version="v0")
    out = tmp_path / "out"
    stop = threading.Event()
    bad: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                live = out / os.readlink(out / DATA)
                cfg = (live / "haproxy.cfg").read_text()
                host = (live / "maps" / "host.map").read_text()
            except FileNotFoundError:
                continue  # pruned after we resolved it: a retry, never a wrong read
            n = cfg.split()[-1]
            reads += 1
            if host != f"h{n} v{n}\n":
                bad.append(f"{cfg!r} with {host!r}")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(1, 25):
            promoter.promote(_files(n), state_version=f"v{n}")
    finally:
        stop.set()
        thread.join()
    assert reads > 0 and bad == []
