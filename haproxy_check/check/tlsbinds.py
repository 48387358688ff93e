"""TLS binds the checker has already seen ``haproxy -c`` accept: the checked copy binds them without TLS.

Setting up TLS is most of what ``haproxy -c`` spends on a review's small configuration: the first
``bind ... ssl`` costs OpenSSL's initialisation and a DH key generation (about 8 ms on 2.8), every
further one a new SSL_CTX (2-3 ms): more than the rest of the configuration. What a TLS bind line can
make haproxy report depends only on its own words, the files those words name (certificates, crt-lists
and the files they list, CA and CRL files), the sections that are not proxies (``global`` holds the
``ssl-default-bind-*`` and ``tune.ssl.*`` settings), the ``defaults`` sections, and its frontend's
header and ``mode`` lines. Most reviews change none of these: an HTTPRoute does not reach a bind line.

So once a check of a configuration ended in a clean judgement (exit 0, no ALERT and no WARNING at
all) every TLS bind in it is *proven*: its key (a digest of everything above) is remembered. A later
check whose every TLS bind has a proven key gets a copy in which those binds keep only their address
(``bind :443``): the line keeps its number, the frontend its rules, and nothing that could fail on
those lines is left out, because the same words with the same files were accepted before. A bind
with any new input (a changed certificate, a new CA, a changed global section) is not proven and the
check binds TLS as rendered; so does every configuration this module does not fully understand
(conditional blocks, quoting, variables, a file that is not part of the render, a QUIC bind). Only
the checked copy is rewritten, never what is promoted (docs/SANDBOX.md).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

# Configurations larger than this (a whole cluster's) are checked as rendered: the one-time TLS set-up
# is nothing next to their own cost, and scanning them per check is not.
MAX_CONFIG = 1024 * 1024
REMEMBERED = 4096  # proven keys kept (least recently used dropped first)

_SECTION = re.compile(rb"^(\S+)", re.MULTILINE)
_PROXY_SECTIONS = frozenset({b"frontend", b"backend", b"listen", b"defaults"})
_BIND = re.compile(rb"^([ \t]*bind[ \t]+)(\S+)((?:[ \t]+\S+)*)[ \t]*$")
# Words the module reads literally: no quotes, escapes, variables or comments, whose meaning would
# depend on HAProxy's tokenizer.
_PLAIN = re.compile(rb"^[A-Za-z0-9_./:,@=+%-]+$")
# Options whose argument names a file the bind loads.
_FILE_OPTIONS = frozenset({b"crt", b"crt-list", b"ca-file", b"crl-file", b"ca-verify-file", b"ca-sign-file",
                           b"ssl-dh-param-file", b"issuers-chain-path"})


@dataclass(frozen=True, slots=True)
class _Bind:
    index: int  # of the line in the configuration (0-based)
    prefix: bytes  # "    bind "
    address: bytes
    key: bytes


def _sections(lines: list[bytes]) -> list[tuple[int, int]]:
    """(first line, end) of each section: a line starting in column 0 opens one."""
    starts = [i for i, line in enumerate(lines) if line[:1] not in (b"", b" ", b"\t", b"#")]
    return list(zip(starts, [*starts[1:], len(lines)], strict=False))  # none at all in a config without sections


def _referenced(words: list[bytes], files: Mapping[str, bytes]) -> list[bytes] | None:
    """The contents of every file the bind's words name (a crt-list's entries too); None when one is
    not in the render (a path we cannot hash) or a word is not plain."""
    out: list[bytes] = []
    for option, value in zip(words, [*words[1:], b""], strict=True):
        if option not in _FILE_OPTIONS:
            continue
        body = files.get(value.decode())
        if body is None:
            return None
        out += [value, body]
        if option == b"crt-list":
            for entry in body.splitlines():
                path = entry.strip().split(b" ", 1)[0] if entry.strip() else b""
                if not path:
                    continue
                listed = files.get(path.decode()) if _PLAIN.match(path) else None
                if listed is None:
                    return None
                out += [path, listed]
    return out


def _tls_binds(config: bytes, files: Mapping[str, bytes]) -> list[_Bind] | None:
    """Every TLS bind of the configuration with its key; None when the configuration is not one this
    module can reason about (then nothing is stripped and nothing is learnt)."""
    if len(config) > MAX_CONFIG or b"\n." in config or config.startswith(b"."):  # .if/.else/.notice blocks
        return None
    lines = config.split(b"\n")
    sections = _sections(lines)
    context = hashlib.sha256()
    for start, end in sections:
        head = _SECTION.match(lines[start])
        if head is None or head.group(1) not in _PROXY_SECTIONS or head.group(1) == b"defaults":
            context.update(b"\n".join(lines[start:end]) + b"\n\0")
    shared = context.digest()
    binds: list[_Bind] = []
    for start, end in sections:
        header = lines[start]
        if not (header.startswith(b"frontend") or header.startswith(b"listen")):
            continue
        body = lines[start + 1:end]
        modes = [line.strip() for line in body if line.strip().startswith(b"mode")]
        for offset, line in enumerate(body, start=start + 1):
            if b"bind" not in line:
                continue
            match = _BIND.match(line)
            if match is None:
                continue
            words = match.group(3).split()
            if b"ssl" not in words:
                continue
            if not all(_PLAIN.match(w) for w in [match.group(2), *words]) or match.group(2).startswith(b"quic"):
                return None
            contents = _referenced(words, files)
            if contents is None:
                return None
            key = hashlib.sha256(b"\0".join([shared, header, *modes, b" ".join(words), *contents])).digest()
            binds.append(_Bind(offset, match.group(1), match.group(2), key))
    return binds


class ProvenBinds:
    """The TLS binds one checker (one binary) has seen accepted, by key."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._keys: OrderedDict[bytes, None] = OrderedDict()
        self._remembered = remembered

    def __len__(self) -> int:
        return len(self._keys)

    def prepare(self, config: bytes, files: Mapping[str, bytes]) -> tuple[bytes | None, tuple[bytes, ...]]:
        """(the copy to check instead, with every TLS bind reduced to its address, when all of them are
        proven, else None; the keys a clean judgement of ``config`` as rendered proves)."""
        binds = _tls_binds(config, files)
        if not binds:
            return None, ()
        if any(b.key not in self._keys for b in binds):
            return None, tuple(b.key for b in binds)
        lines = config.split(b"\n")
        for bind in binds:
            self._keys.move_to_end(bind.key)
            lines[bind.index] = bind.prefix + bind.address
        return b"\n".join(lines), ()

    def learn(self, keys: tuple[bytes, ...]) -> None:
        """After a clean judgement of the configuration ``prepare`` returned these keys for."""
        for key in keys:
            self._keys[key] = None
            self._keys.move_to_end(key)
        while len(self._keys) > self._remembered:
            self._keys.popitem(last=False)
