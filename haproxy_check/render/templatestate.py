"""What templates may read: every object of the state except Secret data, which only reaches a file.

Templates (built-in and ``--templates``) render in jinja2's ``ImmutableSandboxedEnvironment``
(``rendering``): no ``__class__``/``__globals__``, no ``os.environ``, no file access, no mutation of
the objects the gate shares between reviews. On top of that, the state they see is a
:class:`TemplateState`: Secrets come back as :class:`RedactedSecret` (metadata and type, no
``data``/``stringData``), so a template cannot write a key into haproxy.cfg, where ``haproxy -c``
output, ``render --out`` and the review's messages would show it. A template that needs a Secret's
bytes calls ``SecretFile(namespace, name, key)``: the decoded value is written as a file of the
render (the scratch directory of the check, mode 0600) and the template gets its relative path.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from haproxy_check.render.helpers import TemplateError, template_location
from validators.objects import Obj, dig
from validators.states import State

SECRET_FIELDS = ("data", "stringData")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class RedactedSecret(Mapping[str, Any]):
    """A Secret without its data; reading ``data`` or ``stringData`` fails the render with the way out."""

    def __init__(self, secret: Obj) -> None:
        self._shown = {k: v for k, v in secret.items() if k not in SECRET_FIELDS}
        meta = secret.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
            # `kubectl apply` keeps the whole object, data included, in this annotation
            kept = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            self._shown["metadata"] = {**meta, "annotations": kept}
        self._what = f"Secret {meta.get('namespace', '')}/{meta.get('name', '')}"

    def __getitem__(self, key: str) -> Any:
        if key in SECRET_FIELDS:
            raise TemplateError(f"{self._what}: templates cannot read Secret {key}; use SecretFile(namespace, "
                                f"name, key), which writes the value to a file and returns its path "
                                f"(at {template_location()})")
        return self._shown[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._shown)

    def __len__(self) -> int:
        return len(self._shown)

    def __repr__(self) -> str:
        return f"<{self._what}, data hidden>"


class TemplateState:
    """A read-only view of the state for templates: Secrets redacted, everything else as stored."""

    def __init__(self, state: State) -> None:
        self._state = state

    @property
    def version(self) -> str:
        return self._state.version

    def list(self, kind: str) -> Sequence[Any]:
        found = self._state.list(kind)
        return [RedactedSecret(o) for o in found] if kind == "Secret" else found

    def get(self, kind: str, namespace: str, name: str) -> Any:
        found = self._state.get(kind, namespace, name)
        return RedactedSecret(found) if kind == "Secret" and found is not None else found


def secret_file(state: State, add_file: Callable[..., str]) -> Callable[[str, str, str], str]:
    """``SecretFile(namespace, name, key)`` -> ``"secrets/<namespace>_<name>_<key>"``, a file of the render
    holding the decoded ``data[key]`` (the template gets the path, never the bytes)."""

    def write(namespace: str, name: str, key: str) -> str:
        secret = state.get("Secret", str(namespace), str(name))
        if secret is None:
            raise TemplateError(f"SecretFile({namespace!r}, {name!r}, {key!r}): no such Secret "
                                f"(at {template_location()})")
        raw = dig(secret, "data", str(key))
        try:
            content = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
        except (binascii.Error, ValueError):
            content = None
        if content is None:
            raise TemplateError(f"SecretFile({namespace!r}, {name!r}, {key!r}): the Secret has no base64 data "
                                f"under that key (at {template_location()})")
        return add_file(f"secrets/{namespace}_{name}_{key}", content, "cert")  # key material: 0600 everywhere

    return write
