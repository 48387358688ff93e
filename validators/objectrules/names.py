"""Object names as the API server requires them (it validates ObjectMeta before admission).

A forged AdmissionReview, or a YAML file given to the offline CLI, never went through that check, and
names become parts of HAProxy backend and map identifiers, so the gate checks them itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from validators import codes
from validators.contexts import Context
from validators.findings import Finding
from validators.objects import Obj, as_map
from validators.texts import quote

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*\Z")
_DNS_LABEL = re.compile(rf"{_LABEL}\Z")
_SUBDOMAIN_HELP = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com')"
)
_LABEL_HELP = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name')"
)


def object_names(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """metadata.name is a DNS subdomain (<= 253); metadata.namespace, when set, a DNS label (<= 63)."""
    meta = as_map(obj.get("metadata"))
    name = meta.get("name")
    if not name:
        if not meta.get("generateName"):
            yield Finding(codes.OBJECT_NAME, "Required value: name or generateName is required",
                          ("metadata", "name"))
    elif not isinstance(name, str) or len(name) > 253 or not _SUBDOMAIN.match(name):
        yield Finding(codes.OBJECT_NAME, f"Invalid value: {quote(name)}: {_SUBDOMAIN_HELP}",
                      ("metadata", "name"))
    namespace = meta.get("namespace")
    if namespace is not None and namespace != "" and (
        not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.match(namespace)
    ):
        yield Finding(codes.OBJECT_NAME, f"Invalid value: {quote(namespace)}: {_LABEL_HELP}",
                      ("metadata", "namespace"))
