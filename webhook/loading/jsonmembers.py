"""Where the members of a JSON container sit in its text: an object's keys -> (key offset, value
offset), an array's element offsets. ``webhook.loading.positions`` follows a finding's field path over them.

Finding them means skipping over every member's value with json's C decoder, which costs a decode
of the container. For the containers every report needs (a file's root and a List's ``items``: each
object's own position), :func:`loads` records them while the file is decoded anyway, so that placing
20,000 objects decodes nothing again.
"""

from __future__ import annotations

import json
import re
from typing import Any

Members = dict[str, tuple[int, int]] | list[int] | None

_WHITESPACE = re.compile(r"[ \t\n]*")
_decode = json.JSONDecoder().raw_decode


def _skip(text: str, at: int) -> int:
    return _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]


def read(text: str, at: int) -> Members:
    """The members of the container at offset ``at`` (first occurrence of a repeated key); None for a
    scalar. ValueError or IndexError when the text there is not JSON."""
    opening = text[at]
    if opening not in "{[":
        return None
    closing = "}" if opening == "{" else "]"
    keys: dict[str, tuple[int, int]] = {}
    items: list[int] = []
    i = _skip(text, at + 1)
    while text[i] != closing:
        if opening == "{":
            key, end = _decode(text, i)
            colon = _skip(text, end)
            if not isinstance(key, str) or text[colon] != ":":
                raise ValueError("not a JSON object")
            value = _skip(text, colon + 1)
            keys.setdefault(key, (i, value))
        else:
            value = i
            items.append(value)
        _, end = _decode(text, value)
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] != closing:
            raise ValueError("not JSON")
    return keys if opening == "{" else items


def _array(text: str, at: int) -> tuple[list[Any], list[int], int]:
    """The array at ``at`` strictly as json decodes it: (elements, their offsets, end offset)."""
    elements: list[Any] = []
    offsets: list[int] = []
    i = _skip(text, at + 1)
    if text[i] == "]":
        return elements, offsets, i + 1
    while True:
        offsets.append(i)
        element, end = _decode(text, i)
        elements.append(element)
        i = _skip(text, end)
        if text[i] == "]":
            return elements, offsets, i + 1
        if text[i] != ",":
            raise ValueError("not JSON")
        i = _skip(text, i + 1)


def _object(text: str, at: int, found: dict[int, Members]) -> tuple[dict[str, Any], int]:
    """The object at ``at`` strictly as json decodes it (a repeated key's last value wins), and its end
    offset; its members and those of its array values go to ``found``."""
    doc: dict[str, Any] = {}
    keys: dict[str, tuple[int, int]] = {}
    found[at] = keys
    i = _skip(text, at + 1)
    if text[i] == "}":
        return doc, i + 1
    while True:
        if text[i] != '"':
            raise ValueError("not a JSON object")
        key, end = _decode(text, i)
        colon = _skip(text, end)
        if text[colon] != ":":
            raise ValueError("not a JSON object")
        value = _skip(text, colon + 1)
        keys.setdefault(key, (i, value))
        if text[value] == "[":
            doc[key], found[value], end = _array(text, value)
        else:
            doc[key], end = _decode(text, value)
        i = _skip(text, end)
        if text[i] == "}":
            return doc, i + 1
        if text[i] != ",":
            raise ValueError("not JSON")
        i = _skip(text, i + 1)


def loads(text: str) -> tuple[Any, dict[int, Members]]:
    """``json.loads(text)`` (the same value, the same errors), and, by offset, the members of the root
    object and of its array values, as :func:`read` finds them."""
    root = _skip(text, 0)
    if "\r" in text or text[root:root + 1] != "{":
        return json.loads(text), {}
    found: dict[int, Members] = {}
    try:
        doc, end = _object(text, root, found)
    except (ValueError, IndexError, RecursionError):
        return json.loads(text), {}  # raises what it always raised (or decodes what this could not)
    if _skip(text, end) != len(text):
        return json.loads(text), {}
    return doc, found
