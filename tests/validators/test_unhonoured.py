"""What HAProxy cannot honour is said at admission (validators.objectrules.unhonoured): RequestMirror (RG0123),
an ExtensionRef to a HAProxyRoutePolicy (RG0124) and listener tls.options routegate does not apply (RG0125)."""

from __future__ import annotations

from typing import Any

from validatorbuilders import R0, backend, gateway, hits, listener, route, run

from validators import codes
from validators.objectrules import unhonoured

W = "warn"
MIRROR = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow", "port": 80}}}
POLICY = {"type": "ExtensionRef",
          "extensionRef": {"group": "haproxy.org", "kind": "HAProxyRoutePolicy", "name": "limits"}}


def tls_listener(options: dict[str, Any], *, protocol: str = "HTTPS", mode: str = "Terminate") -> dict[str, Any]:
    lst: dict[str, Any] = listener("l", protocol, 443, mode)
    lst["tls"]["options"] = options
    return lst


def test_a_mirror_at_rule_level_warns_that_its_rule_serves_without_it() -> None:
    o = route({"filters": [MIRROR, MIRROR], "backendRefs": [backend()]}, {"backendRefs": [backend()]})
    assert hits(o, codes.REQUEST_MIRROR) == [(W, f"{R0}.filters[0].type")]  # once per rule
    (finding,) = [f for f in run(o) if f.code == codes.REQUEST_MIRROR]
    assert "rule 0 serves without the mirror" in finding.message and "SPOE" in finding.message
    assert hits(route({"backendRefs": [backend()]}), codes.REQUEST_MIRROR) == []


def test_a_mirror_on_a_backend_ref_stays_rg0116() -> None:
    o = route({"backendRefs": [backend(filters=[MIRROR])]})
    assert hits(o, codes.REQUEST_MIRROR) == []
    assert hits(o, codes.BACKEND_FILTER) == [(W, f"{R0}.backendRefs[0].filters[0].type")]


def test_a_route_policy_warns_that_the_rule_answers_500() -> None:
    o = route({"filters": [POLICY], "backendRefs": [backend()]}, kind="GRPCRoute")
    assert hits(o, codes.ROUTE_POLICY) == [(W, f"{R0}.filters[0].extensionRef")]
    (finding,) = [f for f in run(o) if f.code == codes.ROUTE_POLICY]
    assert '"limits"' in finding.message and "answers 500" in finding.message


def test_tls_options_not_applied_are_reported_and_known_ones_are_not() -> None:
    known = {"routegate.io/ssl-min-ver": "TLSv1.2", "routegate.io/ciphers": "ECDHE+AESGCM:!aNULL"}
    assert hits(gateway(tls_listener(known)), codes.TLS_OPTION) == []
    bad = {"example.com/hsts": "on", "routegate.io/ssl-max-ver": "TLSv9", "routegate.io/ciphersuites": "A B"}
    at = "spec.listeners[0].tls.options"
    assert hits(gateway(tls_listener(bad)), codes.TLS_OPTION) == [
        (W, f"{at}.example.com/hsts"), (W, f"{at}.routegate.io/ciphersuites"), (W, f"{at}.routegate.io/ssl-max-ver")]
    assert hits(gateway(tls_listener(known, protocol="TLS")), codes.TLS_OPTION) == [
        (W, f"{at}.routegate.io/ciphers"), (W, f"{at}.routegate.io/ssl-min-ver")]


def test_tls_option_words() -> None:
    assert unhonoured.tls_option_words("routegate.io/ssl-min-ver", "TLSv1.3") == ("ssl-min-ver", "TLSv1.3")
    assert "is not applied" in str(unhonoured.tls_option_words("routegate.io/ciphers", "A#B"))
    assert "is not applied" in str(unhonoured.tls_option_words("routegate.io/ssl-min-ver", 12))
