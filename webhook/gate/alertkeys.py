"""When two ``haproxy -c`` alerts are the same failure, across renders whose line numbers and proxy names
differ, and which objects a failing check blames.

The baseline rule, the isolation rounds and the batches' settling all compare alerts this way.
"""

from __future__ import annotations

import re

from haproxy_check.results import Alert, CheckResult
from validators.changes import Change
from validators.objects import Ref

LINE_NUMBERS = re.compile(r"\[[^\]]*:\d+\]|\bline \d+\b|:\d+\b")


# HAProxy reports a bad map entry from the first proxy that loads the map: a new frontend sorted before
# the old one renames a failure that did not change.
_PROXY_NAMES = re.compile(r"\b(frontend|backend|proxy|listen) '[^']*'", re.IGNORECASE)


def alert_key(alert: Alert) -> tuple[str, str]:
    """What makes two alerts 'the same failure' across renders whose line numbers and proxies differ."""
    owner = str(alert.origin.ref) if alert.origin else ""
    return owner, _PROXY_NAMES.sub(r"\1", LINE_NUMBERS.sub("", alert.message))


def culprits(baseline: CheckResult, change: Change, *, own: bool = False) -> frozenset[Ref]:
    """The objects a failing baseline's alerts blame; the change's own object only with ``own``."""
    return frozenset(a.origin.ref for a in baseline.alerts if a.origin and (own or a.origin.ref != change.ref))
