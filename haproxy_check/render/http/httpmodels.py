"""The compiled HTTP routing model the templates render: plain values, sorted, already escaped where
they are user text (map entries, quoted words), so templates only lay out lines.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import re
from dataclasses import dataclass, field

from haproxy_check import escaping
from haproxy_check.descriptions import ServerDesc
from haproxy_check.render.helpers import PlainLines
from haproxy_check.traffic.facts import ListenerFacts, Matcher

_SORT_KEY = operator.itemgetter(0)  # map entries are (sort key, entry)
_WORD = re.compile(r"[\x21-\x7e]+\Z")  # printable ASCII, no space: a plain map key or value by itself

WEIGHTED, FAIL = "@weighted", "@500"
WEIGHTED_MAP = "weighted-multi-backend.map"  # "<slot>:<rule id> <backend>": 100 slots per weighted rule
SLOTS = 100
MAX_WORDS = 64  # HAProxy truncates (and fails on) a config line with more words
LIST_CHUNK = 40  # list items per line when a list is split over several lines
MAX_CRTS = 24  # `crt <file>` pairs on one bind line before a crt-list file takes them


@dataclass(slots=True)
class BackendSpec:
    name: str
    mark: str  # source-map marker of the backendRef that produced it
    servers: tuple[ServerDesc, ...]
    grpc: bool = False
    profile: tuple[str, ...] = ()
    comments: tuple[str, ...] = ()
    service: str = ""  # "ns/name:port" of the Service it serves (the routing table names its owner)


@dataclass(frozen=True, slots=True)
class Cors:
    exact: tuple[str, ...]  # quoted origins
    regexes: tuple[str, ...]  # quoted regexes
    any_origin: bool
    methods: str  # quoted log-format words or ""
    headers: str
    expose: str
    credentials: bool
    max_age: int | None
    mark: str = ""


@dataclass(slots=True)
class RuleModel:
    rid: str
    route: str  # "ns/name"
    kind: str
    index: int
    mark: str
    target: str = FAIL  # backend name, WEIGHTED or FAIL
    slots: tuple[str, ...] = ()
    cors: Cors | None = None
    first_filter: str = ""
    frontends: frozenset[str] = frozenset()  # the frontends the rule is in


def condition_words(conditions: tuple[str, ...]) -> int:
    """How many words HAProxy makes of the ACL blocks of an advanced line, added up."""
    return sum(escaping.word_count(c) for c in conditions)


@dataclass(frozen=True, slots=True)
class Advanced:
    """A guarded rule-selection line for a match with method/header/query matchers."""

    value: str  # score|rid|plen|reason
    score: int
    vhosts: tuple[str, ...]
    conditions: tuple[str, ...]  # ACL blocks, already escaped
    comment: str
    mark: str
    # ``escaping.word_count`` of the conditions added up, when the maker counted them (once per match, for
    # all its frontends); -1: counted when asked
    words: int = -1
    # what the line matches, for the routing table: (path type, path value, method/header/query matchers)
    request: tuple[str, str, tuple[Matcher, ...]] = ("", "", ())

    @property
    def split(self) -> bool:
        """The one-line form would pass HAProxy's 64 words per line (16 hostnames, 16 headers and 16 query
        params are within the CRD limits): the template then declares named ACLs over several lines."""
        fixed = 22  # set-var, the two guards, the vhost block's own words
        words = self.words if self.words >= 0 else condition_words(self.conditions)
        return fixed + len(self.vhosts) + words > MAX_WORDS - 4

    @property
    def acl(self) -> str:
        """A frontend-unique ACL name prefix for the split form."""
        return "gwa_" + hashlib.sha256(f"{self.value}\n{self.comment}".encode()).hexdigest()[:16]

    @property
    def acl_conditions(self) -> tuple[str, ...]:
        """Each condition without its ``{ }``: the body of one ``acl`` line."""
        return tuple(c.removeprefix("{ ").removesuffix(" }") for c in self.conditions)


@dataclass(slots=True)
class FrontendModel:
    name: str
    token: str  # the port token of map keys: "80", or "unattached"
    protocol: str  # HTTP | HTTPS
    bind: str  # the bind address: ":80", "abns@routegate-unattached"
    port: int | None
    mark: str = ""
    certs: list[str] = field(default_factory=list)
    crt_list: str = ""  # a crt-list file replacing ``certs`` when they would not fit one bind line
    advanced: list[tuple[object, Advanced]] = field(default_factory=list)
    rules: list[RuleModel] = field(default_factory=list)
    misdirected: bool = False  # several HTTPS listeners with distinct hostnames
    any_host: bool = False
    client_verify: list[str] = field(default_factory=list)  # mTLS bind keywords (clienttrust)
    tls_options: list[str] = field(default_factory=list)  # listener tls.options bind keywords (unhonoured)
    reject_all: bool = False  # client validation without a usable CA: the frontend accepts no traffic
    trust_mark: str = ""  # source-map marker of the validation block, on the bind line
    gateway: str = ""  # "ns/name" of the Gateway whose listeners it serves (the routing table's owner)
    public_port: int = 0  # the port its listeners declare
    listener_facts: tuple[ListenerFacts, ...] = ()

    def advanced_lines(self) -> str:
        """The advanced matching block of the shipped ``400-http-frontends`` template (comment, then per
        line its comment and its rule-selection line, split into named ACLs when over 64 words), written
        in Python: through the sandbox every attribute of every line costs a check."""
        if not self.advanced:
            return ""
        out = ["    # Advanced route matching (in precedence order; a path-only candidate with a more specific "
               "path wins)\n"]
        for _, adv in self.advanced:
            out.append(f"    # {adv.comment}\n")
            guards = f"str({adv.value}) if !{{ var(txn.gw_sel) -m found }} !{{ var(txn.gw_cs) -m int gt {adv.score} }}"
            if adv.split:
                acl = adv.acl
                vhosts = list(adv.vhosts)
                for start in range(0, len(vhosts), LIST_CHUNK):
                    words = "".join(f" {vh}" for vh in vhosts[start:start + LIST_CHUNK])
                    out.append(f"    acl {acl}_vh var(txn.gw_vh) -m str --{words}{adv.mark}\n")
                for k, cond in enumerate(adv.acl_conditions):
                    out.append(f"    acl {acl}_{k} {cond}{adv.mark}\n")
                names = "".join(f" {acl}_{k}" for k in range(len(adv.conditions)))
                out.append(f"    http-request set-var(txn.gw_sel) {guards} {acl}_vh{names}{adv.mark}\n")
            else:
                words = "".join(f" {vh}" for vh in adv.vhosts)
                conds = "".join(f" {c}" for c in adv.conditions)
                out.append(f"    http-request set-var(txn.gw_sel) {guards} {{ var(txn.gw_vh) -m str --{words} }}"
                           f"{conds}{adv.mark}\n")
        return "".join(out)

    @property
    def cors_rules(self) -> list[RuleModel]:
        """The rules with a CORS filter, picked in Python: a template's ``for rule in fe.rules if rule.cors``
        pays the sandbox's attribute check on every rule of the frontend."""
        return [rule for rule in self.rules if rule.cors]


@dataclass(slots=True)
class HeaderOps:
    """Distinct (op, lower-case name) pairs used by header modifier filters, per level."""

    request: set[tuple[str, str]] = field(default_factory=set)
    response: set[tuple[str, str]] = field(default_factory=set)
    request_be: set[tuple[str, str]] = field(default_factory=set)
    response_be: set[tuple[str, str]] = field(default_factory=set)


@dataclass(slots=True)
class HttpModel:
    frontends: list[FrontendModel] = field(default_factory=list)
    backends: dict[str, BackendSpec] = field(default_factory=dict)
    maps: dict[str, list[tuple[object, str]]] = field(default_factory=dict)  # name -> (sort key, entry)
    ordered: set[str] = field(default_factory=set)
    headers: HeaderOps = field(default_factory=HeaderOps)
    auth_headers: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)  # feature flags: redirect, rewrite, auth, cors, ...
    session_headers: set[str] = field(default_factory=set)  # type: Header sessionPersistence names
    redirect_plens: set[int] = field(default_factory=set)  # prefix lengths ReplacePrefixMatch redirects use
    rewrite_plens: set[int] = field(default_factory=set)
    pending: dict[str, list[tuple[object, Advanced]]] = field(default_factory=dict)  # frontend -> lines
    # WEIGHTED_MAP's entries, kept as (rule id, the backend of each of its slots) instead of one (sort key,
    # entry) pair per slot in ``maps``: most of a large render's map lines, made once, in order, when read
    weighted: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def add(self, name: str, entry: str, sort: object = "", *, ordered: bool = False) -> None:
        self.maps.setdefault(name, []).append((sort, entry))
        if ordered:
            self.ordered.add(name)

    def map_entries(self, name: str) -> list[str]:
        if name == WEIGHTED_MAP and self.weighted:
            return self._weighted_entries()
        return [e for _, e in sorted(self.maps.get(name, []), key=_SORT_KEY)]

    def _weighted_entries(self) -> list[str]:
        """The weight slot entries sorted by (rule id, slot), as if each were a pair in ``maps``: with
        every rule id once, sorting the rules is sorting their slots (and the slots are in order)."""
        rids = {rid for rid, _ in self.weighted}
        if WEIGHTED_MAP not in self.maps and len(rids) == len(self.weighted):
            return _slot_lines(sorted(self.weighted, key=_SORT_KEY))
        pairs = [*self.maps.get(WEIGHTED_MAP, []),
                 *(((rid, n), f"{n}:{rid} {target}") for rid, targets in self.weighted
                   for n, target in enumerate(targets))]
        return [e for _, e in sorted(pairs, key=_SORT_KEY)]


_NUMBERS = tuple(str(n) for n in range(SLOTS))


def _slot_lines(weighted: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """``<slot>:<rule id> <backend>`` of every slot of every rule (rule ids distinct), in order. When
    every rule id and backend is one printable word, each line is a plain map line (a key of digits,
    ``:`` and the rule id, one space, the backend) and, the rule ids being distinct, no line comes
    twice: they are PlainLines, which RegisterMap need not check line by line."""
    plain = all(_WORD.match(rid) for rid, _ in weighted) and all(
        _WORD.match(target) for target in set(itertools.chain.from_iterable([targets for _, targets in weighted])))
    if plain:
        return _plain_slot_lines(weighted)
    out: list[str] = []
    for rid, targets in weighted:
        if len(targets) > len(_NUMBERS):
            out += [f"{n}:{rid} {target}" for n, target in enumerate(targets)]
            continue
        key = f":{rid} "
        out += [f"{n}{key}{target}" for n, target in zip(_NUMBERS, targets, strict=False)]  # as many numbers at least
    return out


def _plain_slot_lines(weighted: list[tuple[str, tuple[str, ...]]]) -> PlainLines:
    """``_slot_lines`` of plain words, made as one text: each run of slots with one backend is the slot
    numbers joined by ``:<rule id> <backend>\\n`` (one join, not a string per line), and the lines are
    that text split at its line breaks (none inside a line: the words are plain)."""
    parts: list[str] = []
    for rid, targets in weighted:
        numbers = _NUMBERS if len(targets) <= len(_NUMBERS) else tuple(str(n) for n in range(len(targets)))
        start = 0
        for target, run in itertools.groupby(targets):  # runs of equal backends, found in C
            end = start + len(list(run))
            tail = f":{rid} {target}\n"
            parts.append(tail.join(numbers[start:end]))
            parts.append(tail)
            start = end
    text = "".join(parts)
    return PlainLines(text[:-1].split("\n") if text else (), text if text else None)
