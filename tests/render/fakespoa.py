"""A tiny SPOP v2 agent on loopback standing in for the SPOA hub's external-auth plugin: it answers
HAPROXY-HELLO, and each NOTIFY with ``allowed`` (true when the request's Authorization is the expected
one) and ``hdr_x_auth_user``, set in the transaction scope (haproxy adds the engine's var-prefix)."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

HAPROXY_HELLO, HAPROXY_DISCONNECT, NOTIFY = 1, 2, 3
AGENT_HELLO, AGENT_DISCONNECT, ACK = 101, 102, 103
T_NULL, T_BOOL, T_INT32, T_UINT32, T_INT64, T_UINT64, T_IPV4, T_IPV6, T_STRING, T_BINARY = range(10)
FIN = 1
SCOPE_TXN = 2


def encode_varint(i: int) -> bytes:
    if i < 240:
        return bytes([i])
    out = bytearray([(i | 240) & 0xFF])
    i = (i - 240) >> 4
    while i >= 128:
        out.append((i | 128) & 0xFF)
        i = (i - 128) >> 7
    out.append(i)
    return bytes(out)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    i = buf[pos]
    pos += 1
    if i < 240:
        return i, pos
    shift = 4
    while True:
        b = buf[pos]
        pos += 1
        i += b << shift
        shift += 7
        if b < 128:
            return i, pos


def _string(s: str | bytes) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return encode_varint(len(raw)) + raw


def _typed(value: Any) -> bytes:
    if isinstance(value, bool):
        return bytes([T_BOOL | (0x10 if value else 0)])
    if isinstance(value, int):
        return bytes([T_UINT32]) + encode_varint(value)
    return bytes([T_STRING]) + _string(str(value))


def _read_typed(buf: bytes, pos: int) -> tuple[Any, int]:
    kind = buf[pos] & 0x0F
    flags = buf[pos] & 0xF0
    pos += 1
    if kind == T_NULL:
        return None, pos
    if kind == T_BOOL:
        return bool(flags & 0x10), pos
    if kind in (T_INT32, T_UINT32, T_INT64, T_UINT64):
        return decode_varint(buf, pos)
    if kind == T_IPV4:
        return socket.inet_ntop(socket.AF_INET, buf[pos:pos + 4]), pos + 4
    if kind == T_IPV6:
        return socket.inet_ntop(socket.AF_INET6, buf[pos:pos + 16]), pos + 16
    size, pos = decode_varint(buf, pos)
    data = buf[pos:pos + size]
    return (data.decode(errors="replace") if kind == T_STRING else data), pos + size


def _frame(kind: int, stream: int, frame: int, payload: bytes) -> bytes:
    body = bytes([kind]) + struct.pack(">I", FIN) + encode_varint(stream) + encode_varint(frame) + payload
    return struct.pack(">I", len(body)) + body


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class FakeAgent:
    def __init__(self, expected_authorization: str) -> None:
        self.expected = expected_authorization
        self.seen: list[dict[str, Any]] = []  # the args of every check-request message
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                (size,) = struct.unpack(">I", _recv_exact(conn, 4))
                frame = _recv_exact(conn, size)
                kind = frame[0]
                stream, pos = decode_varint(frame, 5)
                fid, pos = decode_varint(frame, pos)
                if kind == HAPROXY_HELLO:
                    hello = _string("version") + _typed("2.0") + _string("max-frame-size") + _typed(16380) + \
                        _string("capabilities") + _typed("")
                    conn.sendall(_frame(AGENT_HELLO, 0, 0, hello))
                elif kind == NOTIFY:
                    conn.sendall(_frame(ACK, stream, fid, self._actions(frame, pos)))
                elif kind == HAPROXY_DISCONNECT:
                    return
        except (ConnectionError, OSError, IndexError, struct.error):
            return
        finally:
            conn.close()

    def _actions(self, frame: bytes, pos: int) -> bytes:
        args: dict[str, Any] = {}
        while pos < len(frame):  # messages: name, nb-args, then (name, typed value) pairs
            size, pos = decode_varint(frame, pos)
            pos += size
            count = frame[pos]
            pos += 1
            for _ in range(count):
                size, pos = decode_varint(frame, pos)
                name = frame[pos:pos + size].decode()
                pos += size
                args[name], pos = _read_typed(frame, pos)
        self.seen.append(args)
        allowed = args.get("authorization") == self.expected

        def set_var(name: str, value: Any) -> bytes:
            return bytes([1, 3, SCOPE_TXN]) + _string(name) + _typed(value)

        out = set_var("allowed", allowed)
        if allowed:
            out += set_var("hdr_x_auth_user", "alice")
        return out
