"""The reload-vs-runtime classifier, rule by rule (ids cite the rule numbers in classify.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from haproxy_check.descriptions import BackendDesc, Description, FileDesc, MapDesc, ProfileDesc, ServerDesc
from haproxy_check.runtime.classify import ApplyClass, Rendered, classify, outside_helpers

PROFILE = ProfileDesc("haptic-be-aaa", ("mode http", "timeout server 30s"))
WEB = BackendDesc("gw_h_d_r_web_80", profile=PROFILE.name,
                  servers=(ServerDesc("s1", "10.0.0.1", 8080), ServerDesc("s2", "10.0.0.2", 8080)))
HOSTS = MapDesc("maps/host.map", ordered=False, entries=("a.example.com d_r",))
CERT = FileDesc("certs/d_tls.pem", "cert", "11")
FRONTEND = "frontend http-80\n  bind :80\n  use_backend %[var(txn.be)]\n"


def render(*, backends: tuple[BackendDesc, ...] = (WEB,), profiles: tuple[ProfileDesc, ...] = (PROFILE,),
           maps: tuple[MapDesc, ...] = (HOSTS,), files: tuple[FileDesc, ...] = (CERT,),
           frontend: str = FRONTEND) -> Rendered:
    sections = "".join(f"defaults {p.name}\n  " + "\n  ".join(p.lines) + "\n" for p in profiles)
    sections += "".join(f"backend {b.name} from {b.profile}\n" + "".join(
        f"  server {s.name} {s.address}:{s.port} weight {s.weight}\n" for s in b.servers) for b in backends)
    return Rendered(Description(backends=backends, profiles=profiles, maps=maps, files=files),
                    "global\n  maxconn 100\n" + frontend + sections)


BASE = render()
NEW_BE = replace(WEB, name="gw_h_d_r_api_80")
V28, V34 = (2, 8), (3, 4)

CASES = [
    ("rule 10: nothing changed", BASE, V28, ApplyClass.NONE),
    ("rule 2: a new frontend rule reloads", render(frontend=FRONTEND + "  http-request deny if { path /x }\n"),
     V34, ApplyClass.RELOAD),
    ("rule 3: a new profile reloads", render(profiles=(PROFILE, ProfileDesc("haptic-be-bbb", ("mode tcp",)))),
     V34, ApplyClass.RELOAD),
    ("rule 4: a new backend on 2.8 reloads", render(backends=(WEB, NEW_BE)), V28, ApplyClass.RELOAD),
    ("rule 4: a new dynamic backend on 3.4 with a loaded profile is runtime", render(backends=(WEB, NEW_BE)),
     V34, ApplyClass.RUNTIME),
    ("rule 4: a new structural backend reloads even on 3.4",
     render(backends=(WEB, replace(NEW_BE, shape="structural", body=("stick-table type ip size 1k",)))),
     V34, ApplyClass.RELOAD),
    ("rule 4: deleting a backend on 2.8 reloads", render(backends=()), V28, ApplyClass.RELOAD),
    ("rule 5: a balance change reloads", render(backends=(replace(WEB, balance="leastconn"),)), V34,
     ApplyClass.RELOAD),
    ("rule 6: adding a server is runtime",
     render(backends=(replace(WEB, servers=(*WEB.servers, ServerDesc("s3", "10.0.0.3", 8080))),)), V28,
     ApplyClass.RUNTIME),
    ("rule 6: adding a server under static-rr reloads",
     Rendered(replace(BASE.description, backends=(replace(WEB, balance="static-rr", servers=(
         *WEB.servers, ServerDesc("s3", "10.0.0.3", 8080))),)), BASE.config), V28, ApplyClass.RELOAD),
    ("rule 6: removing a server is runtime", render(backends=(replace(WEB, servers=WEB.servers[:1]),)), V28,
     ApplyClass.RUNTIME),
    ("rule 7: a new address is runtime",
     render(backends=(replace(WEB, servers=(ServerDesc("s1", "10.9.9.9", 8080), WEB.servers[1])),)), V28,
     ApplyClass.RUNTIME),
    ("rule 7: a new server keyword reloads",
     render(backends=(replace(WEB, servers=(ServerDesc("s1", "10.0.0.1", 8080, options=("ssl",)),
                                            WEB.servers[1])),)), V28, ApplyClass.RELOAD),
    ("rule 8: a changed map entry is runtime",
     render(maps=(replace(HOSTS, entries=("b.example.com d_r",)),)), V28, ApplyClass.RUNTIME),
    ("rule 9: new certificate contents are runtime", render(files=(replace(CERT, sha256="22"),)), V28,
     ApplyClass.RUNTIME),
]


@pytest.mark.parametrize(("after", "version", "want"), [pytest.param(a, v, w, id=n) for n, a, v, w in CASES])
def test_classify(after: Rendered, version: tuple[int, ...], want: ApplyClass) -> None:
    decision = classify(BASE, after, version=version)
    assert decision.apply is want, decision
    if want is ApplyClass.RELOAD:
        assert decision.reasons, "a reload always says why"


def test_rule_1_without_a_previous_render_reload_is_the_safe_answer() -> None:
    assert classify(None, BASE, version=V34).apply is ApplyClass.RELOAD


def test_backend_sections_are_not_part_of_the_outside_text() -> None:
    text = outside_helpers(BASE)
    assert "frontend http-80" in text and "server s1" not in text and "haptic-be-aaa" not in text


def test_rule_8_reordering_an_unordered_map_is_no_change_but_an_ordered_one_is() -> None:
    def with_map(entries: tuple[str, ...], ordered: bool) -> Rendered:
        return Rendered(replace(BASE.description, maps=(replace(HOSTS, entries=entries, ordered=ordered),)),
                        BASE.config)

    assert classify(with_map(("x 1", "y 2"), False), with_map(("y 2", "x 1"), False), version=V28).apply \
        is ApplyClass.NONE
    assert classify(with_map(("x 1", "y 2"), True), with_map(("y 2", "x 1"), True), version=V28).apply \
        is ApplyClass.RUNTIME
