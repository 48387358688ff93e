"""The serve process fixes glibc's mmap threshold (see webhook.process.malloctuning); elsewhere it does nothing."""

from __future__ import annotations

import ctypes
import platform
from typing import Any

import pytest

from webhook.process import malloctuning


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_accepts_the_threshold() -> None:
    assert malloctuning.return_large_blocks() is True


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoMallopt:
        def __init__(self, name: Any) -> None:
            pass

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert malloctuning.return_large_blocks() is False


def test_a_missing_c_library_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: Any) -> Any:
        raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert malloctuning.return_large_blocks() is False
