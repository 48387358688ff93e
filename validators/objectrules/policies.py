"""Per-rule policies HAProxy applies differently from the Gateway API text (seed 004, rules 1, 7, 8).

Session persistence names become cookie or header names in haproxy.cfg (rule 1). Retries and timeouts
map onto HAProxy's retry-on and server timeout, which cannot express every Gateway API setting; those
settings are accepted with a warning naming what is dropped (rules 7, 8).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from validators import codes
from validators.contexts import Context
from validators.findings import Finding, Severity
from validators.objectrules.traversals import rules_of
from validators.objects import Obj, as_list, as_map
from validators.texts import TOKEN_ALLOWED, quote, token_problem

#: Statuses HAProxy's ``retry-on`` accepts, without 421 (added in HAProxy 3.1).
RETRYABLE = frozenset({401, 403, 404, 408, 425, 429, 500, 501, 502, 503, 504})
RETRYABLE_421_SINCE = (3, 1)

_DURATION = re.compile(r"([0-9]+)(h|ms|m|s)")


def retryable(version: tuple[int, ...]) -> frozenset[int]:
    return RETRYABLE | {421} if tuple(version) >= RETRYABLE_421_SINCE else RETRYABLE


def session_names(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 1: the cookie or header name is a token of letters, digits and ``!$&*+.^_~-``."""
    for rule_path, rule in rules_of(obj):
        sp = as_map(rule.get("sessionPersistence"))
        candidates: list[tuple[tuple[str, ...], object]] = [(("sessionName",), sp.get("sessionName"))]
        candidates += [((part, "name"), as_map(sp.get(part)).get("name")) for part in ("cookie", "header")]
        for sub, name in candidates:
            if not isinstance(name, str):
                continue
            problem = token_problem(name)
            if problem:
                yield Finding(
                    codes.SESSION_NAME,
                    f"{quote(name)} {problem}; allowed: {TOKEN_ALLOWED}",
                    (*rule_path, "sessionPersistence", *sub),
                )


def retries(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 7: codes HAProxy cannot retry on are dropped; a non-zero backoff is not applied."""
    allowed = retryable(ctx.haproxy_version)
    version = ".".join(str(v) for v in ctx.haproxy_version)
    for rule_path, rule in rules_of(obj):
        retry = as_map(rule.get("retry"))
        for k, code in enumerate(as_list(retry.get("codes"))):
            if not isinstance(code, int) or isinstance(code, bool) or code in allowed:
                continue
            why = " (421 needs HAProxy 3.1 or later)" if code == 421 else ""
            yield Finding(
                codes.RETRY_CODE,
                f"{code} is not retryable by HAProxy {version}{why}; the code is dropped; "
                f"retryable: {', '.join(str(c) for c in sorted(allowed))}",
                (*rule_path, "retry", "codes", k),
                Severity.WARN,
            )
        backoff = retry.get("backoff")
        if isinstance(backoff, str) and any(int(n) for n, _ in _DURATION.findall(backoff)):
            yield Finding(
                codes.RETRY_BACKOFF,
                f"backoff {quote(backoff)} is not applied: HAProxy retries without waiting",
                (*rule_path, "retry", "backoff"),
                Severity.WARN,
            )


def timeouts(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 8: HAProxy has no overall request deadline, so ``timeouts.request`` is ignored."""
    for rule_path, rule in rules_of(obj):
        request = as_map(rule.get("timeouts")).get("request")
        if request is not None:
            yield Finding(
                codes.REQUEST_TIMEOUT,
                f"request timeout {quote(request)} is ignored: HAProxy has no overall request deadline; "
                "only timeouts.backendRequest (server inactivity) is applied",
                (*rule_path, "timeouts", "request"),
                Severity.WARN,
            )
