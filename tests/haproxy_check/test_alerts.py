"""Alert parsing on output captured from real haproxy 2.8.25 and 3.2.26 runs."""

from __future__ import annotations

import pytest

from haproxy_check.check import alerts
from haproxy_check.results import Origin
from validators.objects import Ref

CONFIG = "\n".join(
    [
        "global",
        "defaults",
        "  mode http",
        "  timeout client 1s",
        "  timeout server 1s",
        "  timeout connect 1s",
        "frontend f",
        "  bind :8080",
        "  http-request deny if { path_reg ^(a }",
        "  use_backend nope",
    ]
)
ROUTE = Ref("HTTPRoute", "default", "api")
ORIGINS = {("haproxy.cfg", 9): Origin(ROUTE, ("spec", "rules", 0, "matches", 0, "path", "value"))}

OUT_28 = """[NOTICE]   (9708) : haproxy version is 2.8.25-5cf5d0683
[NOTICE]   (9708) : path to executable is /usr/lib/haproxy
[ALERT]    (9708) : config : parsing [/tmp/routegate-x1/haproxy.cfg:9] : error detected while parsing an \
'http-request deny' condition : regex '^(a' is invalid (error=missing ), erroffset=3).
[ALERT]    (9708) : config : Error(s) found in configuration file : /tmp/routegate-x1/haproxy.cfg
"""
OUT_32 = """[NOTICE]   (9893) : haproxy version is 3.2.26-1
[ALERT]    (9893) : config : parsing [haproxy.cfg:9] : error detected while parsing an 'http-request deny' \
condition : regex '^(a' is invalid (error=missing closing parenthesis, erroffset=3).
[ALERT]    (9893) : config : Error(s) found in configuration file : haproxy.cfg
"""
OUT_32_POSTPARSE = """[ALERT]    (9895) : Proxy 'f': unable to find required use_backend: 'nope'.
[ALERT]    (9895) : Fatal errors found in configuration.
"""
OUT_28_POSTPARSE = """[ALERT]    (9710) : config : Proxy 'f': unable to find required use_backend: 'nope'.
[ALERT]    (9710) : config : Fatal errors found in configuration.
"""
OUT_PARSING_COLON = "[ALERT]    (9897) : config : parsing [haproxy.cfg:9]: 'path is defined'.\n"


@pytest.mark.parametrize("output", [OUT_28, OUT_32], ids=["2.8 prints config and an absolute path", "3.2"])
def test_a_located_alert_is_traced_to_the_route_field(output: str) -> None:
    found, warned = alerts.parse(output, config=CONFIG, origins=ORIGINS, scratch="/tmp/routegate-x1")
    assert warned == []
    assert len(found) == 1, "summary lines are dropped"
    alert = found[0]
    assert (alert.file, alert.line) == ("haproxy.cfg", 9)
    assert alert.origin == ORIGINS[("haproxy.cfg", 9)]
    assert "regex '^(a' is invalid" in alert.message
    assert "/tmp/routegate-x1" not in alert.message
    assert any(line.startswith(">    9 |") and "path_reg" in line for line in alert.context)


@pytest.mark.parametrize("output", [OUT_28_POSTPARSE, OUT_32_POSTPARSE], ids=["2.8", "3.2 without config :"])
def test_a_post_parse_alert_is_placed_at_its_section(output: str) -> None:
    found, _ = alerts.parse(output, config=CONFIG)
    assert [(a.file, a.line) for a in found] == [("haproxy.cfg", 7)]
    assert found[0].message == "Proxy 'f': unable to find required use_backend: 'nope'."


class Unsplittable(str):
    """A configuration that must not be split into lines."""

    def splitlines(self, keepends: bool = False) -> list[str]:
        raise AssertionError("the configuration was split into lines")


def test_a_clean_check_summary_does_not_split_the_configuration() -> None:
    """2.8 prints a summary on a valid check: nothing in it needs the lines of a big configuration."""
    found, warned = alerts.parse("Configuration file is valid\n", config=Unsplittable(CONFIG))
    assert (found, warned) == ([], [])
    with pytest.raises(AssertionError, match="split"):  # and a message that needs them still gets them
        alerts.parse(OUT_28_POSTPARSE, config=Unsplittable(CONFIG))


def test_parsing_without_space_before_colon_is_read() -> None:
    found, _ = alerts.parse(OUT_PARSING_COLON, config=CONFIG, origins=ORIGINS)
    assert found[0].line == 9 and found[0].message == "'path is defined'."


def test_messages_are_one_clean_bounded_line() -> None:
    noisy = "[ALERT]    (1) : config : parsing [haproxy.cfg:2] : bad \x1b[31m value " + "x" * 1000 + "\n"
    found, _ = alerts.parse(noisy, config=CONFIG)
    assert "\x1b" not in found[0].message
    assert len(found[0].message) <= alerts.MAX_MESSAGE


def test_warnings_are_kept_apart_and_notices_dropped() -> None:
    out = "[WARNING]  (1) : config : parsing [haproxy.cfg:8] : a 'bind' warning\n[NOTICE] (1) : hello\n"
    found, warned = alerts.parse(out, config=CONFIG)
    assert found == [] and [w.line for w in warned] == [8]


def test_lines_that_are_not_haproxy_log_lines_are_ignored() -> None:
    out = "Configuration file is valid\nsome file content that must never be echoed\n"
    assert alerts.parse(out, config=CONFIG) == ([], [])


def test_a_rejected_map_entry_is_traced_to_the_object_behind_the_entry() -> None:
    out = ("[ALERT]    (7) : config : parsing [haproxy.cfg:9] : error detected in frontend 'f' while parsing "
           "'http-request set-var(txn.c)' rule : invalid args in converter 'map_reg' : regex '^(?:/a{2,1})' is "
           "invalid (error=numbers out of order in {} quantifier, erroffset=9) at line 2 of file "
           "'/tmp/routegate-x1/maps/path-regex.map'.\n")
    entry = Origin(Ref("HTTPRoute", "default", "broken"), ("spec", "rules", 1, "matches", 0, "path", "value"))
    origins = {**ORIGINS, ("maps/path-regex.map", 2): entry}
    found, _ = alerts.parse(out, config=CONFIG, origins=origins, scratch="/tmp/routegate-x1")
    assert found[0].origin == entry
    assert (found[0].file, found[0].line) == ("haproxy.cfg", 9)
    assert "of file 'maps/path-regex.map'" in found[0].message


class _Untouchable(dict[tuple[str, int], Origin]):
    """A source map that fails when anything reads it (a lazy one works out every line when read)."""

    def __len__(self) -> int:
        raise AssertionError("the source map was read")

    def __contains__(self, key: object) -> bool:
        raise AssertionError("the source map was read")


def test_a_clean_check_reads_neither_the_source_map_nor_the_configuration() -> None:
    class Config(str):
        def splitlines(self, keepends: bool = False) -> list[str]:
            raise AssertionError("the configuration was split")

    assert alerts.parse("", config=Config("global\n"), origins=_Untouchable()) == ([], [])
    assert alerts.parse("\n  \n", config=Config("global\n"), origins=_Untouchable()) == ([], [])
