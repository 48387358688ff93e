"""Per-rule policies HAProxy applies differently from the Gateway API text (seed 004, rules 1, 7, 8).

Session persistence names become cookie or header names in haproxy.cfg (rule 1). Retries and timeouts
map onto HAProxy's retry-on and server timeout, which cannot express every Gateway API setting; those
settings are accepted with a warning naming what is dropped (rules 7, 8).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from validators import codes, dataplanes
from validators.contexts import Context
from validators.findings import Finding, Severity
from validators.objectrules.traversals import rules_of
from validators.objects import Obj, as_list, as_map
from validators.texts import TOKEN_ALLOWED, quote, token_problem

#: Statuses ``retry-on`` accepts in every version routegate renders for (2.8 and later); 421 and 429
#: need 3.1 (``validators.dataplanes.RETRY_CODES_SINCE`` is the table).
RETRYABLE = dataplanes.retry_codes((2, 8))

_DURATION = re.compile(r"([0-9]+)(h|ms|m|s)")


def retryable(version: tuple[int, ...]) -> frozenset[int]:
    return dataplanes.retry_codes(version)


def session_names(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 1: the cookie or header name is a token of letters, digits and ``!$&*+.^_~-``."""
    for rule_path, rule in rules_of(obj):
        sp = as_map(rule.get("sessionPersistence"))
        if not sp:
            continue  # nothing named (most rules have no sessionPersistence)
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
    allowed: frozenset[int] | None = None  # read when a rule lists codes (most list none)
    version = ""
    for rule_path, rule in rules_of(obj):
        retry = as_map(rule.get("retry"))
        if not retry:
            continue
        listed = as_list(retry.get("codes"))
        if listed and allowed is None:
            allowed = retryable(ctx.haproxy_version)
            version = ".".join(str(v) for v in ctx.haproxy_version)
        for k, code in enumerate(listed):
            assert allowed is not None
            if not isinstance(code, int) or isinstance(code, bool) or code in allowed:
                continue
            yield Finding(
                codes.RETRY_CODE,
                f"RetryCodeUnsupported: {code} is not retryable by HAProxy {version}{_why(code, ctx)}; "
                f"the code is dropped; retryable: {', '.join(str(c) for c in sorted(allowed))}",
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


def _why(code: int, ctx: Context) -> str:
    """Why a status HAProxy knows in some version is not retried here: the version that added it, and
    when the data plane has it but the checker does not, that the checker decides."""
    since = dataplanes.RETRY_CODES_SINCE.get(code)
    if since is None:
        return ""
    dataplane = ctx.dataplane_version
    if dataplane is not None and code in dataplanes.retry_codes(dataplane):
        return (f" ({code} needs HAProxy {dataplanes.text(since)} or later: the data plane "
                f"{dataplanes.text(dataplanes.major_minor(dataplane))} has it, the checker does not, and a "
                "line the checker refuses cannot be checked)")
    return f" ({code} needs HAProxy {dataplanes.text(since)} or later)"


#: HAProxy's longest timeout (a signed 32-bit count of milliseconds, about 24.8 days).
MAX_TIMEOUT_MS = 2_147_483_647
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}


def timeouts(obj: Obj, ctx: Context) -> Iterator[Finding]:
    """Rule 8: HAProxy has no overall request deadline, so ``timeouts.request`` is ignored; a
    ``backendRequest`` longer than HAProxy's longest timeout is cut to it."""
    for rule_path, rule in rules_of(obj):
        backend = as_map(rule.get("timeouts")).get("backendRequest")
        if isinstance(backend, str):
            total = sum(int(n) * _UNIT_MS[u] for n, u in _DURATION.findall(backend))
            if total > MAX_TIMEOUT_MS:
                yield Finding(
                    codes.TIMEOUT_TOO_LONG,
                    f"backendRequest {quote(backend)} is {total} ms, above HAProxy's longest timeout of "
                    f"{MAX_TIMEOUT_MS} ms (24.8 days); that is used instead",
                    (*rule_path, "timeouts", "backendRequest"),
                    Severity.WARN,
                )
        request = as_map(rule.get("timeouts")).get("request")
        if request is not None:
            yield Finding(
                codes.REQUEST_TIMEOUT,
                f"request timeout {quote(request)} is ignored: HAProxy has no overall request deadline; "
                "only timeouts.backendRequest (server inactivity) is applied",
                (*rule_path, "timeouts", "request"),
                Severity.WARN,
            )
