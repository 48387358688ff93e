"""Request bodies with a Content-Encoding, decoded here rather than in aiohttp's HTTP parser.

aiohttp's own decoding fails in two ways a webhook cannot afford: a corrupt stream that ends with
the request is reported by the parser itself as a ``text/plain`` 400 (``deflate``) that no handler
sees, and one that fails later surfaces as an exception while reading. So the servers run with
``auto_decompress=False`` (SERVER_OPTIONS) and decode here: zlib, bounded output (a bomb stops at
``limit`` bytes, never allocating more), every failure a :class:`BodyError` with its HTTP status.
"""

from __future__ import annotations

import zlib
from typing import Any

SERVER_OPTIONS: dict[str, Any] = {"auto_decompress": False}
WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyError(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def decode(data: bytes, encoding: str, *, limit: int) -> bytes:
    """The body without its Content-Encoding (identity, gzip or deflate), at most ``limit`` bytes."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return data
    if name not in WBITS:
        raise BodyError(415, f"Content-Encoding {encoding!r} is not supported; use gzip, deflate or identity")
    inflater = zlib.decompressobj(WBITS[name])
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise BodyError(400, f"request body is not valid {name} data (Content-Encoding {name}): {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise BodyError(413, f"request body is larger than {limit} bytes once decoded (Content-Encoding {name})")
    if not inflater.eof:
        raise BodyError(400, f"request body is not valid {name} data (Content-Encoding {name}): the stream is "
                        "truncated")
    if inflater.unused_data:
        raise BodyError(400, f"request body is not valid {name} data (Content-Encoding {name}): "
                        f"{len(inflater.unused_data)} bytes after the end of the stream")
    return out
