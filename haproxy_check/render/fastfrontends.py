"""``400-http-frontends.cfg.j2`` and the snippets it includes, written out in Python (``fastsnippets``).

Each HTTP frontend is a sandboxed render of the outer template plus one of every included snippet (nine
new contexts a frontend): about 0.7 ms of a one-route closure's render, which a review does twice, once
before ``haproxy -c`` can start. This writes the same bytes for the cases most frontends are in: the
included snippets whose features no rule uses write nothing, and the redirects, rewrites and header modifiers
are written as their snippets write them. Whenever a frontend needs a snippet this does not write (CORS,
ExternalAuth, custom Routes, debug or session headers), it returns None before recording
anything and the template renders as before. It stands in only while every included snippet is the
shipped file (``INCLUDED``: a user directory overriding or adding one renders through jinja2), which
``fastsnippets.for_template`` checks once per template. tests/render/test_fast_paths.py compares both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from haproxy_check import escaping

# The included snippets, as listed by ``snippets(directory)``, with the sha256 of the shipped text
# this module reproduces.
INCLUDED: dict[str, str] = {
    "http-frontend-select/500-route-crd.cfg.j2": "38f6ea8ee58d0a3588946d473351782c234174684b1409dbb0311a029e0623e8",
    "http-frontend/200-cors.cfg.j2": "229fe9e2aa562e94c578f80afacd13a20a13540d3608ad93b83b8ee4100645df",
    "http-frontend/300-redirects.cfg.j2": "c2b109199f7386590ef25497ec093f2f9043b1955a8f3322fe38566447aa1c3a",
    "http-frontend/400-external-auth.cfg.j2": "8826ffd6beba5cb460154ac7179a8b7cbaac11375c4aeb582303943266227083",
    "http-frontend/500-rewrites.cfg.j2": "e8b8ac77dddc3076138c4f72337cff0733cc418c8e569f6010cb160e990a3cb7",
    "http-frontend/600-header-modifiers.cfg.j2": "029fff0f15f5f1c4bf5539fc37c483cfb3c983b787ea384b858dcbfa836d92b3",
    "http-frontend/650-route-crd.cfg.j2": "bfae6530fee72c0451a02c2e09be0ef1dc11c6e870a27764f97e83ebd6ff783f",
    "http-frontend/800-debug-headers.cfg.j2": "5fa8f487860dd8da4139ee7ff9b496abc06d914f1d5c735fedebf457f55af744",
    "http-frontend/850-session-headers.cfg.j2": "3d57eacfde6f8a4543f82a6a86480b99e35000f0e39b3633af224aca60e4030e",
}
_SELECT = [name for name in INCLUDED if name.startswith("http-frontend-select/")]
_AFTER = [name for name in INCLUDED if name.startswith("http-frontend/")]

_ACCESS_LOG = (
    "    # structured access log; gw_route: <namespace>_<name>_<ruleIndex> of the rule that won\n"
    """    log-format '{"time":"%tr","client":"%ci:%cp","frontend":"%ft","backend":"%b","server":"%s","""
    """"status":%ST,"bytes":%B,"duration_ms":%Ta,"method":"%HM","path":"%{+E}HPO","""
    """"gw_route":"%[var(txn.gw_rule_id)]"}'\n""")
_PATHS = (
    "    # path-only candidates: Exact > Regex > Prefix-exact > Prefix\n"
    "    http-request set-var(txn.gw_path) path\n"
    "    http-request set-var(txn.gw_pk) var(txn.gw_vh),concat(,txn.gw_path)\n"
    "    http-request set-var(txn.gw_c) var(txn.gw_pk),map_str(maps/path-exact.map)\n"
    "    http-request set-var(txn.gw_c) var(txn.gw_pk),map_reg(maps/path-regex.map) if !{ var(txn.gw_c) -m found }\n"
    "    http-request set-var(txn.gw_c) var(txn.gw_pk),map_str(maps/path-prefix-exact.map) if "
    "!{ var(txn.gw_c) -m found }\n"
    "    http-request set-var(txn.gw_c) var(txn.gw_pk),map_beg(maps/path-prefix.map) if !{ var(txn.gw_c) -m found }\n"
    "    http-request set-var(txn.gw_cs) var(txn.gw_c),field(1,|) if { var(txn.gw_c) -m found }\n")
_SELECTED = (
    "    http-request set-var(txn.gw_sel) var(txn.gw_c) if !{ var(txn.gw_sel) -m found } { var(txn.gw_c) -m found }\n"
    "    http-request set-var(txn.gw_rule_id) var(txn.gw_sel),field(2,|) if { var(txn.gw_sel) -m found }\n"
    "    http-request set-var(txn.gw_plen) var(txn.gw_sel),field(3,|) if { var(txn.gw_sel) -m found }\n")
_BACKEND = (
    "    http-request deny deny_status 404 if !{ var(txn.gw_rule_id) -m found } !{ var(txn.gw_be) -m found }\n"
    "    # backend: one per rule, or a weight slot (0-99) for rules with several backends\n"
    "    http-request set-var(txn.gw_be) var(txn.gw_rule_id),map_str(maps/rule-backend.map)\n"
    "    http-request set-var(txn.gw_be) rand(100),concat(:,txn.gw_rule_id),map_str(maps/weighted-multi-backend.map) "
    "if { var(txn.gw_be) -m str @weighted }\n"
    "    http-request set-var(txn.gw_bk) var(txn.gw_rule_id),concat(~,txn.gw_be)\n")
_NO_AUTH = "    http-request return status 500 if { var(txn.gw_be) -m str @500 }\n"
_USE = "    use_backend %[var(txn.gw_be)] if { var(txn.gw_be) -m found }\n\n"


def _mods(direction: str, ops: Iterable[tuple[str, str]], var: str, mapname: str) -> str:
    """The ``mods`` macro of ``http-frontend/600-header-modifiers.cfg.j2``."""
    out: list[str] = []
    for op, name in sorted(ops):  # jinja2's ``sort`` leaves tuples as they are (no case folding)
        lookup = f"var({var}),concat(|{op}|{escaping.header_key(name)}),map_str(maps/{mapname})"
        if op == "remove":
            out.append(f"    {direction} del-header {escaping.header_word(name)} if {{ {lookup} -m found }}\n")
        else:
            out.append(f"    {direction} {op}-header {escaping.header_word(name)} %[{lookup},url_dec] "
                       f"if {{ {lookup} -m found }}\n")
    return "".join(out)


def _redirects(http: Any, fe: Any) -> str:
    """``http-frontend/300-redirects.cfg.j2``."""
    if "redirect" not in http.uses:
        return ""
    fs = "https" if fe.protocol == "HTTPS" else "http"
    out = [
        "    # RequestRedirect (gw-redirect.map)\n"
        "    http-request set-var(txn.gw_rd) var(txn.gw_rule_id),map_str(maps/gw-redirect.map)\n"
        "    http-request set-var(txn.gw_rd) var(txn.gw_bk),map_str(maps/gw-redirect.map) if !{ "
        "var(txn.gw_rd) -m found }\n"
        "    http-request set-var(txn.gw_rd_scheme) var(txn.gw_rd),field(2,|) if { var(txn.gw_rd) -m found }\n"
        f"    http-request set-var(txn.gw_rd_scheme) str({fs}) if {{ var(txn.gw_rd_scheme) -m str -- - }}\n"
        "    http-request set-var(txn.gw_rd_host) var(txn.gw_rd),field(3,|) if { var(txn.gw_rd) -m found }\n"
        "    http-request set-var(txn.gw_rd_host) var(txn.gw_host) if { var(txn.gw_rd_host) -m str -- - }\n"
        "    http-request set-var(txn.gw_rd_port) var(txn.gw_rd),field(4,|) if { var(txn.gw_rd) -m found }\n"
        f"    http-request set-var(txn.gw_rd_port) str({fe.port or 80}) if {{ var(txn.gw_rd_port) -m str -- - }} "
        "{ var(txn.gw_rd),field(2,|) -m str -- - }\n"
        "    http-request set-var(txn.gw_rd_port) str(-) if { var(txn.gw_rd_port) -m str 443 } "
        "{ var(txn.gw_rd_scheme) -m str https }\n"
        "    http-request set-var(txn.gw_rd_port) str(-) if { var(txn.gw_rd_port) -m str 80 } "
        "{ var(txn.gw_rd_scheme) -m str http }\n"
        "    http-request set-var(txn.gw_rd_hp) var(txn.gw_rd_host) if { var(txn.gw_rd) -m found }\n"
        "    http-request set-var(txn.gw_rd_hp) var(txn.gw_rd_host),concat(:,txn.gw_rd_port) if { "
        "var(txn.gw_rd) -m found } "
        "!{ var(txn.gw_rd_port) -m str -- - }\n"
        "    http-request set-var(txn.gw_rd_mode) var(txn.gw_rd),field(5,|) if { var(txn.gw_rd) -m found }\n"
        "    http-request set-var(txn.gw_rd_path) path if { var(txn.gw_rd_mode) -m str -- - }\n"
        "    http-request set-var(txn.gw_rd_path) var(txn.gw_rd),field(6,|),url_dec if { "
        "var(txn.gw_rd_mode) -m str full }\n"]
    out += _prefix_paths("gw_rd", 6, http.redirect_plens)
    for code in (301, 302, 303, 307, 308):
        out.append("    http-request redirect location "
                   "%[var(txn.gw_rd_scheme)]://%[var(txn.gw_rd_hp)]%[var(txn.gw_rd_path)]"
                   f"?%[query] code {code} if {{ var(txn.gw_rd),field(1,|) -m str {code} }} {{ query -m found }}\n"
                   "    http-request redirect location "
                   "%[var(txn.gw_rd_scheme)]://%[var(txn.gw_rd_hp)]%[var(txn.gw_rd_path)]"
                   f" code {code} if {{ var(txn.gw_rd),field(1,|) -m str {code} }} !{{ query -m found }}\n")
    return "".join(out)


def _prefix_paths(var: str, field: int, plens: Any) -> list[str]:
    """The lines both a redirect's and a rewrite's ReplacePrefixMatch write (``var``: ``gw_rd`` or
    ``gw_rw``; the new prefix is field ``field`` of its map value): the rest of the path after each
    matched prefix length in ``plens``, then the new path."""
    out = [f"    http-request set-var(txn.{var}_rest) path,bytes({plen}) if {{ var(txn.{var}_mode) -m str prefix }} "
           f"{{ var(txn.gw_plen) -m str {plen} }}\n" for plen in sorted(plens)]
    if plens:
        out.append(f"    http-request set-var(txn.{var}_path) var(txn.{var}),field({field},|),url_dec,"
                   f"concat(,txn.{var}_rest) if {{ var(txn.{var}_mode) -m str prefix }}\n"
                   f"    http-request set-var(txn.{var}_path) str(/) if {{ var(txn.{var}_mode) -m str prefix }} "
                   f"{{ var(txn.{var}_path) -m len 0 }}\n")
    return out


def _rewrites(http: Any) -> str:
    """``http-frontend/500-rewrites.cfg.j2``."""
    if "rewrite" not in http.uses:
        return ""
    out = ["    # URLRewrite (gw-rewrite.map)\n"
           "    http-request set-var(txn.gw_rw) var(txn.gw_rule_id),map_str(maps/gw-rewrite.map)\n"
           "    http-request set-var(txn.gw_rw) var(txn.gw_bk),map_str(maps/gw-rewrite.map) if !{ "
           "var(txn.gw_rw) -m found }\n"
           "    http-request set-var(txn.gw_rw_mode) var(txn.gw_rw),field(2,|) if { var(txn.gw_rw) -m found }\n"]
    out += _prefix_paths("gw_rw", 3, http.rewrite_plens)
    if http.rewrite_plens:
        out.append("    http-request set-path %[var(txn.gw_rw_path)] if { var(txn.gw_rw_mode) -m str prefix }\n")
    out.append("    http-request set-path %[var(txn.gw_rw),field(3,|),url_dec] if { var(txn.gw_rw_mode) -m str full }\n"
               "    http-request set-header Host %[var(txn.gw_rw),field(1,|)] if { var(txn.gw_rw) -m found } "
               "!{ var(txn.gw_rw),field(1,|) -m str -- - }\n")
    return "".join(out)


def _header_modifiers(http: Any) -> str:
    headers = http.headers
    return (_mods("http-request", headers.request, "txn.gw_rule_id", "gw-reqhdr.map")
            + _mods("http-request", headers.request_be, "txn.gw_bk", "gw-reqhdr.map")
            + _mods("http-response", headers.response, "txn.gw_rule_id", "gw-reshdr.map")
            + _mods("http-response", headers.response_be, "txn.gw_bk", "gw-reshdr.map"))


def _written_here(context: Mapping[str, Any], frontends: list[Any]) -> bool:
    """Whether every included snippet writes what this module writes for it (else the template renders):
    the shipped lists, and no feature whose lines only the snippet writes."""
    snippets, http, l4 = context["snippets"], context["http"], context["l4"]
    if snippets("http-frontend-select") != _SELECT or snippets("http-frontend") != _AFTER:
        return False
    if "auth" in http.uses or http.session_headers or context["settings"].debug_headers:
        return False
    if any(fe.cors_rules for fe in frontends):
        return False
    # the custom Route snippets read these in this order for the first frontend; nothing else reads them
    return not (l4.crd.routes or l4.crd.set_names)


def http_frontends(context: Mapping[str, Any]) -> str | None:
    """``400-http-frontends.cfg.j2`` with the snippets it includes, or None (see the module doc)."""
    frontends = list(context["frontends"])
    if not frontends:
        return ""
    if not _written_here(context, frontends):
        return None
    settings, http = context["settings"], context["http"]
    log = _ACCESS_LOG if settings.access_log else ""
    modifiers, rewrites = _header_modifiers(http), _rewrites(http)
    out: list[str] = []
    for fe in frontends:
        out.append(f"frontend {fe.name} from base{fe.mark}\n    mode http\n")
        if fe.protocol == "HTTPS":
            out.append(f"    bind {fe.bind} ssl" + "".join(f" crt {c}" for c in fe.certs)
                       + (f" crt-list {fe.crt_list}" if fe.crt_list else "") + " alpn h2,http/1.1"
                       + "".join(f" {w}" for w in fe.client_verify) + "".join(f" {w}" for w in fe.tls_options)
                       + f"{fe.trust_mark}\n\n")
            if fe.reject_all:
                out.append("    # client certificate validation without a usable CA (spec.tls.frontend): no traffic\n"
                           f"    tcp-request connection reject{fe.trust_mark}\n")
        else:
            out.append(f"    bind {fe.bind}\n")
        token = fe.token
        out.append(f"{log}    # host selection: exact, then wildcard suffix, then any-host\n"
                   "    http-request set-var(txn.gw_host) req.hdr(host),field(1,:),lower\n"
                   f"    http-request set-var(txn.gw_vh) var(txn.gw_host),concat(:{token}),map_str(maps/host.map)\n"
                   f"    http-request set-var(txn.gw_vh) var(txn.gw_host),concat(:{token}),"
                   "map_end(maps/host-wildcard.map) if !{ var(txn.gw_vh) -m found }\n"
                   f"    http-request set-var(txn.gw_vh) str(*:{token}) if !{{ var(txn.gw_vh) -m found }}\n")
        if fe.misdirected:
            out.append(
                "    # 421 Misdirected Request: SNI chose one HTTPS listener, Host belongs to another\n"
                f"    http-request set-var(txn.gw_sni_l) ssl_fc_sni,lower,concat(:{token}),"
                "map_str(maps/https-listener.map) if { ssl_fc_sni -m found }\n"
                f"    http-request set-var(txn.gw_sni_l) ssl_fc_sni,lower,concat(:{token}),"
                "map_end(maps/https-listener-wildcard.map) if { ssl_fc_sni -m found } !{ var(txn.gw_sni_l) -m found }\n"
                f"    http-request set-var(txn.gw_host_l) var(txn.gw_host),concat(:{token}),"
                "map_str(maps/https-listener.map)\n"
                f"    http-request set-var(txn.gw_host_l) var(txn.gw_host),concat(:{token}),"
                "map_end(maps/https-listener-wildcard.map) if !{ var(txn.gw_host_l) -m found }\n"
                "    http-request return status 421 if { var(txn.gw_sni_l) -m found } { var(txn.gw_host_l) -m found } "
                "!{ var(txn.gw_sni_l),strcmp(txn.gw_host_l) eq 0 }\n")
        out.append(_PATHS)
        out.append(str(fe.advanced_lines()))
        out.append(_SELECTED)
        out.append(_BACKEND)
        out.append(_redirects(http, fe))
        out.append(_NO_AUTH)
        out.append(rewrites)
        out.append(modifiers)
        out.append(_USE)
    return "".join(out)
