"""A review's scratch tree is written with string paths (``scratches.relative_parts``, ``write_tree``):
the same names refused and the same files written as through ``pathlib`` (``safe_relative``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haproxy_check.check import scratches

_PIECES = st.sampled_from(["a", "b.map", "maps", "certs", ".", "..", "", "/", "//", "\x00", "x y", "é", "..."])
names = st.lists(_PIECES, max_size=8).map("".join) | st.lists(_PIECES, max_size=5).map("/".join)


def _refused_or_parts(check: object, name: str) -> object:
    try:
        return check(name)  # type: ignore[operator]
    except scratches.UnsafePath as exc:
        return ("refused", str(exc))


@settings(max_examples=500, deadline=None)
@given(name=names)
def test_relative_parts_are_pathlibs(name: str) -> None:
    via_pathlib = _refused_or_parts(lambda n: scratches.safe_relative(n).parts, name)
    assert _refused_or_parts(scratches.relative_parts, name) == via_pathlib


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../up", "maps/../../up", "a\x00b", "//x"])
def test_names_leaving_the_directory_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(scratches.UnsafePath):
        scratches.write_tree(tmp_path, {name: b"x"})
    assert not any(tmp_path.iterdir())


def test_the_tree_written_holds_every_file_and_only_them(tmp_path: Path) -> None:
    files = {"haproxy.cfg": b"global\n", "maps/host.map": b"a b\n", "maps/empty.map": b"",
             "certs/x.pem": os.urandom(200_000), "./maps//dot.map": b"d\n", "deep/er/file": b"z"}
    scratches.write_tree(tmp_path, files)
    written = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {str(scratches.safe_relative(k)): v for k, v in files.items()}
    assert all((p.stat().st_mode & 0o777) in (0o600, 0o700) for p in tmp_path.rglob("*"))


def test_an_existing_file_or_link_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "host.map").symlink_to(tmp_path / "outside")
    with pytest.raises(FileExistsError):
        scratches.write_tree(tmp_path, {"maps/host.map": b"a b\n"})
    assert not (tmp_path / "outside").exists()
