"""Every row of seed 000's tables ("Reload-free route propagation"), as ``routegate plan`` prints it.

Each case names its table and row. The two descriptions are written as ``routegate render --out``
directories (description.json, certificates) and planned through the CLI (``-o json``); the test
asserts the action and the commands' verbs in order.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from haproxy_check.descriptions import BackendDesc, Description, FileDesc, MapDesc, ProfileDesc, ServerDesc
from webhook.cli import routegate as cli

PROFILE = ProfileDesc("haptic-be-aaa", ("timeout server 30s", "mode http"))
CHECKED = ProfileDesc("haptic-be-ccc", ("mode http", "default-server check inter 2s"))
WEB = BackendDesc("be_web", profile=PROFILE.name,
                  servers=(ServerDesc("s1", "10.0.0.1", 8080), ServerDesc("s2", "10.0.0.2", 8080)))
HOSTS = MapDesc("maps/host.map", ordered=False, entries=("a.example.com:80 a.example.com:80",))
REGEX = MapDesc("maps/path-regex.map", ordered=True, entries=("^a\\.example\\.com:80/x 1|r0|0|path",))
HEADERS = MapDesc("maps/gw-reqhdr.map", ordered=False, entries=("default_r_0|set|x-env one",))
CERT = FileDesc("certs/default_site.pem", "cert", "11")
CA = FileDesc("certs/default_ca.pem", "ca", "21")
BASE = Description(backends=(WEB,), profiles=(PROFILE, CHECKED), maps=(HOSTS, REGEX, HEADERS), files=(CERT, CA),
                   frame="frame-1")
NEW_BE = replace(WEB, name="be_api", servers=(ServerDesc("s1", "10.0.1.1", 8080),))
PEM = (b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n\n"
       b"-----BEGIN PRIVATE KEY-----\nMIIEfake\n-----END PRIVATE KEY-----\n")


def backends(*items: BackendDesc) -> Description:
    return replace(BASE, backends=items)


def web(**changes: Any) -> Description:
    return backends(replace(WEB, **changes))


def server(**changes: Any) -> Description:
    return web(servers=(replace(WEB.servers[0], **changes), WEB.servers[1]))


def maps(*items: MapDesc) -> Description:
    return replace(BASE, maps=items)


def verbs(plan: dict[str, Any]) -> list[str]:
    return [" ".join(c["command"].split()[:2]) for c in plan["commands"]]


RUNTIME, RELOAD = "runtime", "reload"
TABLE: list[tuple[str, Description, Description, str, str, list[str] | str]] = [
    # (case, before, after, data plane version, action, verbs in order | a reason's words)
    ("what-changes row 1: entries in an already loaded map (value)", BASE,
     maps(HOSTS, REGEX, replace(HEADERS, entries=("default_r_0|set|x-env two",))), "2.8", RUNTIME, ["set map"]),
    ("what-changes row 1: entries in an already loaded map (new and removed keys)", BASE,
     maps(replace(HOSTS, entries=("b.example.com:80 b.example.com:80",)), REGEX, HEADERS), "2.8", RUNTIME,
     ["add map", "del map"]),
    ("what-changes row 1: an ordered map is replaced atomically", BASE,
     maps(HOSTS, replace(REGEX, entries=("^b/ 2|r1|0|path", *REGEX.entries)), HEADERS), "2.8", RUNTIME,
     ["prepare map", "add map", "commit map"]),
    ("what-changes row 2: an existing server's address", BASE, server(address="10.0.0.9"), "2.8", RUNTIME,
     ["set server"]),
    ("what-changes row 2: an existing server's port", BASE, server(port=9090), "2.8", RUNTIME, ["set server"]),
    ("what-changes row 2: an existing server's weight", BASE, server(weight=5), "2.8", RUNTIME, ["set weight"]),
    ("what-changes row 2: an existing server's maintenance state", BASE, server(options=("disabled",)), "2.8",
     RUNTIME, ["set server"]),
    ("what-changes row 3: certificate contents", BASE, replace(BASE, files=(replace(CERT, sha256="12"), CA)), "2.8",
     RUNTIME, ["set ssl", "commit ssl"]),
    ("what-changes row 3: CA contents", BASE, replace(BASE, files=(CERT, replace(CA, sha256="22"))), "2.8",
     RUNTIME, ["set ssl", "commit ssl"]),
    ("what-changes row 4: a new backend with a loaded profile on 3.4", BASE, backends(WEB, NEW_BE), "3.4", RUNTIME,
     ["add backend", "add server", "enable server", "publish backend"]),
    ("what-changes row 4: a new backend with a loaded profile on 3.3 reloads", BASE, backends(WEB, NEW_BE), "3.3",
     RELOAD, "cannot add or delete backends at runtime"),
    ("what-changes row 4: ... and on 3.0", BASE, backends(WEB, NEW_BE), "3.0", RELOAD, "(3.4+)"),
    ("what-changes row 5: a listener or request-processing rule", BASE, replace(BASE, frame="frame-2"), "3.4",
     RELOAD, "frontend or global configuration changed"),
    ("what-changes row 5: a new settings profile", BASE,
     replace(BASE, profiles=(*BASE.profiles, ProfileDesc("haptic-be-bbb", ("mode tcp",)))), "3.4", RELOAD,
     "new settings profile haptic-be-bbb"),
    ("static row 1: HAProxy 3.0-3.3 deleting a backend", backends(WEB, NEW_BE), BASE, "3.2", RELOAD,
     "backend be_api deleted"),
    ("static row 2: creating a backend with a body", BASE,
     backends(WEB, replace(NEW_BE, body=("stick-table type ip size 1k",), shape="structural")), "3.4", RELOAD,
     "structural backend"),
    ("static row 2: deleting a backend with a body",
     backends(WEB, replace(NEW_BE, body=("filter compression",), shape="structural")), BASE, "3.4", RELOAD,
     "structural backend"),
    ("static row 2: changing a body", BASE, web(body=("stick-table type ip size 1k",), shape="structural"), "3.4",
     RELOAD, "body changed"),
    ("static row 3: a changed named defaults profile", BASE,
     replace(BASE, profiles=(replace(PROFILE, lines=("timeout server 60s", "mode http")), CHECKED)), "3.4", RELOAD,
     "settings profile haptic-be-aaa changed"),
    ("static row 4: mode", BASE, web(mode="tcp"), "3.4", RELOAD, "mode changed"),
    ("static row 4: profile", BASE, web(profile=CHECKED.name), "3.4", RELOAD, "profile changed"),
    ("static row 4: guid", BASE, web(guid="g-1"), "3.4", RELOAD, "guid changed"),
    ("static row 4: balance", BASE, web(balance="leastconn"), "3.4", RELOAD, "balance changed"),
    ("static row 4: hashType", BASE, web(hash_type="consistent"), "3.4", RELOAD, "hashType changed"),
    ("static row 4: defaultServer", BASE, web(default_server="check"), "3.4", RELOAD, "defaultServer changed"),
    ("static row 5: static-rr, adding a server", web(balance="static-rr"),
     web(balance="static-rr", servers=(*WEB.servers, ServerDesc("s3", "10.0.0.3", 8080))), "3.4", RELOAD,
     "static-rr"),
    ("static row 5: map-based hashing, adding a server", web(balance="source", hash_type="map-based"),
     web(balance="source", hash_type="map-based", servers=(*WEB.servers, ServerDesc("s3", "10.0.0.3", 8080))),
     "3.4", RELOAD, "map-based hashing"),
    ("static row 6: no-check on an added server", BASE,
     web(servers=(*WEB.servers, ServerDesc("s3", "10.0.0.3", 8080, options=("no-check",)))), "3.4", RELOAD,
     "keyword no-check is not supported by add server"),
    ("static row 6: resolvers in a new backend", BASE,
     backends(WEB, replace(NEW_BE, servers=(ServerDesc("s1", "api", 80, options=("resolvers", "dns")),))), "3.4",
     RELOAD, "keyword resolvers"),
    ("static row 6: init-addr", BASE,
     web(servers=(*WEB.servers, ServerDesc("s3", "10.0.0.3", 8080, options=("init-addr", "none")))), "2.8",
     RELOAD, "keyword init-addr"),
    ("static row 7: configuration outside the helpers", BASE, replace(BASE, frame="frame-3"), "2.8", RELOAD,
     "text outside Backend()"),
    ("static text: a server's address changes at runtime in a structural backend",
     web(body=("stick-table type ip size 1k",), shape="structural"),
     backends(replace(WEB, body=("stick-table type ip size 1k",), shape="structural",
                      servers=(replace(WEB.servers[0], address="10.0.0.9"), WEB.servers[1]))), "2.8", RUNTIME,
     ["set server"]),
    ("static text: another keyword on an existing server reloads", BASE, server(options=("ssl",)), "3.4", RELOAD,
     "keywords changed"),
    ("directive row 1: a backend reusing a loaded profile is created at runtime", BASE, backends(WEB, NEW_BE),
     "3.4", RUNTIME, ["add backend", "add server", "enable server", "publish backend"]),
    ("directive row 2: a map entry edited behind one static line", BASE,
     maps(HOSTS, REGEX, replace(HEADERS, entries=("default_r_0|set|x-env two",))), "3.2", RUNTIME, ["set map"]),
    ("directive row 3: default-server keywords go with add server (check: health on)", BASE,
     backends(WEB, replace(NEW_BE, profile=CHECKED.name)), "3.4", RUNTIME,
     ["add backend", "add server", "enable server", "enable health", "publish backend"]),
    ("directive row 4: body makes the backend structural", backends(WEB, NEW_BE),
     backends(WEB, replace(NEW_BE, body=("filter bwlim-out x",), shape="structural")), "3.4", RELOAD,
     "body changed"),
    ("per-object row 1: a value in an existing map (header value)", BASE,
     maps(HOSTS, REGEX, replace(HEADERS, entries=("default_r_0|set|x-env v%20w",))), "2.8", RUNTIME, ["set map"]),
    ("per-object row 2: a new literal used by a rule (first use)", BASE, replace(BASE, frame="frame-4"), "3.4",
     RELOAD, "frontend or global configuration changed"),
    ("per-object row 3: a canary header regex", BASE, replace(BASE, frame="frame-5"), "3.4", RELOAD,
     "frontend or global configuration changed"),
    ("per-object row 4: a deleted backend on 3.4", backends(WEB, NEW_BE), BASE, "3.4", RUNTIME,
     ["unpublish backend", "set server", "wait 5s", "del server", "wait 5s", "del backend"]),
    ("per-object row 4: a new backend on 2.8", BASE, backends(WEB, NEW_BE), "2.8", RELOAD, "be_api created"),
    ("per-object row 5: balance settings", BASE, web(balance="first"), "3.4", RELOAD, "balance changed"),
    ("nothing changed", BASE, BASE, "3.4", "none", []),
]


def write(where: Path, description: Description) -> str:
    where.mkdir(parents=True)
    (where / "description.json").write_text(json.dumps(description.as_dict()))
    for file in description.files:
        (where / file.path).parent.mkdir(parents=True, exist_ok=True)
        (where / file.path).write_bytes(PEM)
    return str(where)


def routegate_plan(tmp_path: Path, before: Description, after: Description, version: str) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["plan", "--from", write(tmp_path / "old", before), "--to", write(tmp_path / "new", after),
                         "--dataplane-version", version, "-o", "json"])
    assert code == 0
    plan: dict[str, Any] = json.loads(out.getvalue())
    return plan


@pytest.mark.parametrize(("before", "after", "version", "action", "want"),
                         [pytest.param(b, a, v, act, w, id=case) for case, b, a, v, act, w in TABLE])
def test_seed_000_table_row(tmp_path: Path, before: Description, after: Description, version: str, action: str,
                            want: list[str] | str) -> None:
    plan = routegate_plan(tmp_path, before, after, version)
    assert plan["action"] == action, plan
    if isinstance(want, str):
        assert any(want in reason for reason in plan["reasons"]), plan["reasons"]
        assert not plan["commands"]
    else:
        assert verbs(plan) == want, plan["commands"]


def test_the_text_output_lists_commands_and_hides_certificate_payloads(tmp_path: Path) -> None:
    out = io.StringIO()
    after = replace(BASE, files=(replace(CERT, sha256="12"), CA))
    with redirect_stdout(out):
        assert cli.main(["plan", "--from", write(tmp_path / "a", BASE), "--to", write(tmp_path / "b", after),
                         "--dataplane-version", "2.8"]) == 0
    text = out.getvalue()
    assert text.splitlines() == ["runtime (HAProxy 2.8, 2 commands):",
                                 "  set ssl cert certs/default_site.pem <<6 lines>>",
                                 "  commit ssl cert certs/default_site.pem"]
    assert "PRIVATE" not in text


def test_a_missing_or_broken_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "good", BASE)
    assert cli.main(["plan", "--from", str(tmp_path / "nope"), "--to", good, "--dataplane-version", "3.4"]) == 2
    assert "description.json: no such file" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "description.json").write_text('{"backends": 1}')
    assert cli.main(["plan", "--from", str(tmp_path / "bad"), "--to", good, "--dataplane-version", "3.4"]) == 2
    assert "not a routegate description" in capsys.readouterr().err
    assert cli.main(["plan", "--from", good, "--to", good, "--dataplane-version", "three"]) == 2
    assert "--dataplane-version" in capsys.readouterr().err
