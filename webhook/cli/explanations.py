"""What each rule code means for a user: why HAProxy needs it, an input that fails, and the fix.

``routegate explain CODE`` prints one entry with the code's summary from the rule table; docs/RULES.md
carries the same text under an anchor per code (``docs/RULES.md#rg0101``), kept equal by a test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Explanation:
    why: str  # why the API server or HAProxy needs the rule
    example: str  # a fragment that fails
    fix: str  # what to change


E = Explanation

EXPLANATIONS: dict[str, Explanation] = {
    "RG0001": E("Without the CRD's schema, routegate cannot tell a typo from a field; the API server would "
                "reject or prune what routegate let through.",
                "apiVersion: gateway.networking.k8s.io/v9\nkind: HTTPRoute",
                "Use a served apiVersion, or pass the CRDs your cluster runs with --crds FILE."),
    "RG0002": E("The API server validates every object against its CRD's OpenAPI schema before admission; an "
                "object that violates it is rejected at apply time, so CI should fail first.",
                "rules:\n- matches:\n  - path: {type: Exactly, value: /}",
                "Use a value the schema allows (here: Exact, PathPrefix or RegularExpression)."),
    "RG0003": E("The API server silently drops fields its schema does not declare: a misspelt field "
                "(sessionPersistance) is configuration that never reaches HAProxy.",
                "rules:\n- sessionPersistance: {sessionName: s}",
                "Fix the spelling, or remove the field. With strict: true the field denies."),
    "RG0004": E("Lists declared as sets or maps (x-kubernetes-list-type) must not repeat a key; the API "
                "server rejects the object.",
                "listeners:\n- {name: http, port: 80, protocol: HTTP}\n- {name: http, port: 8080, protocol: HTTP}",
                "Give every entry its own key (here: a distinct listener name)."),
    "RG0005": E("A pattern or CEL rule routegate cannot evaluate offline is reported instead of being "
                "silently treated as passing.",
                "(a CRD pattern using a construct the regex engine lacks)",
                "Nothing in the object; run the check against the cluster, or report the CRD construct."),
    "RG0006": E("Object names become parts of HAProxy backend and map names; the API server only accepts DNS "
                "names, and a forged review or an offline file may not have been through it.",
                "metadata:\n  name: My_Route",
                "Use a DNS subdomain: lower-case letters, digits, '-' and '.'."),
    "RG0007": E("Validation of one object has a CPU budget so that one crafted object cannot stall every "
                "other review; an object that needs more is denied instead of being checked for minutes.",
                "(a route with hundreds of thousands of characters in its values)",
                "Split the object, or shorten the values named in the message."),
    "RG0101": E("The cookie or header name goes into HAProxy's `cookie` / `stick` lines as a bare word; "
                "a space or separator would split the line or change its meaning.",
                "sessionPersistence:\n  sessionName: \"my session\"",
                "Use a token: letters, digits and !$&*+.^_~- (for example my-session)."),
    "RG0102": E("HAProxy verifies the backend certificate against one name (verifyhost, sent as SNI); "
                "several subjectAltNames cannot all be enforced.",
                "subjectAltNames:\n- {type: Hostname, hostname: a.example}\n- {type: Hostname, hostname: b.example}",
                "Keep one subjectAltName equal to validation.hostname."),
    "RG0103": E("HAProxy can only verify a DNS name (verifyhost), not a URI SAN; the policy would not be "
                "enforced.",
                "subjectAltNames:\n- {type: URI, uri: spiffe://cluster/ns/x}",
                "Use a Hostname subjectAltName equal to validation.hostname."),
    "RG0104": E("HAProxy verifies one name; a SAN different from validation.hostname would be ignored.",
                "validation:\n  hostname: api.internal\n  subjectAltNames: [{type: Hostname, hostname: other}]",
                "Make the subjectAltName equal to validation.hostname, or drop it."),
    "RG0105": E("A `verify required` server line needs a CA file; without one HAProxy refuses the "
                "configuration or would not verify.",
                "validation:\n  hostname: api.internal",
                "Add caCertificateRefs (a ConfigMap with ca.crt) or wellKnownCACertificates: System."),
    "RG0106": E("Regular expressions are written into HAProxy map files and combined with the route's host "
                "prefix; an unclosed group or a top-level '|' would escape that anchoring or fail to "
                "compile.",
                "path: {type: RegularExpression, value: \"/a(b\"}",
                "Close every group and class; wrap alternatives in a group: /(a|b)."),
    "RG0107": E("Header and query parameter names are words in HAProxy ACLs and http-request rules; "
                "a space or colon changes the rule. Every HTTP token is honoured (routegate quotes the "
                "characters HAProxy's parsers read), except a query parameter name with '#' or '%': "
                "urlp() compares names undecoded, so it could never match.",
                "set:\n- {name: \"X Api\", value: v}",
                "Use an HTTP token: letters, digits and !#$%&'*+-.^_`|~ (no '#' or '%' in a query "
                "parameter name)."),
    "RG0108": E("A control character in a header value would end the HAProxy line or inject another "
                "header.",
                "set:\n- {name: X-Api, value: \"a\\r\\nX-Admin: 1\"}",
                "Remove control characters from the value."),
    "RG0109": E("ReplacePrefixMatch replaces the matched prefix; without a PathPrefix match there is no "
                "prefix length to replace.",
                "matches: [{path: {type: Exact, value: /a}}]\nfilters: [{type: URLRewrite, urlRewrite: "
                "{path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}}]",
                "Use a PathPrefix match, or ReplaceFullPath."),
    "RG0110": E("HAProxy's `redirect` only emits 301, 302, 303, 307 and 308.",
                "requestRedirect: {statusCode: 305}",
                "Use one of 301, 302, 303, 307, 308."),
    "RG0111": E("HAProxy's retry-on knows a fixed set of status codes; others are dropped from the rule.",
                "retry: {codes: [418]}",
                "Keep codes HAProxy can retry on (401, 403, 404, 408, 425, 429, 500-504; 421 from 3.1)."),
    "RG0112": E("HAProxy retries immediately; a backoff is not applied.",
                "retry: {attempts: 3, backoff: 1s}",
                "Drop backoff, or accept immediate retries."),
    "RG0113": E("Only timeouts.backendRequest maps to an HAProxy timeout; timeouts.request is not applied.",
                "timeouts: {request: 10s}",
                "Use timeouts.backendRequest."),
    "RG0114": E("The ExternalAuth filter is rendered as an HTTP subrequest; settings the gateway cannot "
                "enforce make the rule answer 500 instead of silently skipping authentication.",
                "externalAuth: {protocol: GRPC, backendRef: {name: auth, port: 9000}}",
                "Use protocol HTTP and the supported settings."),
    "RG0115": E("Only HAProxyRoutePolicy and SSLPassthrough extensions are understood; others are ignored.",
                "filters:\n- type: ExtensionRef\n  extensionRef: {group: x.io, kind: Other, name: p}",
                "Use a supported extension kind, or remove the filter."),
    "RG0116": E("HAProxy applies mirrors and extensions per rule, not per backend; on a backendRef they are "
                "ignored.",
                "backendRefs:\n- name: web\n  port: 80\n  filters: [{type: RequestMirror, requestMirror: "
                "{backendRef: {name: shadow, port: 80}}}]",
                "Move the filter to the rule's filters."),
    "RG0123": E("HAProxy sends no copy of a request by itself (mirroring needs an SPOE agent routegate does not "
                "configure). The rule keeps serving exactly as it would without its RequestMirror filters (its "
                "other filters and backends apply; no copy is sent), rather than being dropped, so an upgrade takes "
                "no live traffic down. Admission warns, reconcile writes a Warning Event, and the route's status "
                "has routegate.io/NotApplied=True (UnsupportedValue) naming the rule and the filter (not "
                "PartiallyInvalid, which means a dropped rule or the route's last known good state); Accepted is "
                "unchanged.",
                "filters:\n- type: RequestMirror\n  requestMirror: {backendRef: {name: shadow, port: 80}}",
                "Remove the filter; mirror outside the gateway (e.g. in the service mesh) if you need copies."),
    "RG0124": E("routegate renders no HAProxyRoutePolicy. The Gateway API says a custom filter is never "
                "skipped: the requests it would process get an error, so the rule answers 500.",
                "filters:\n- type: ExtensionRef\n  extensionRef: {group: haproxy.org, kind: HAProxyRoutePolicy, "
                "name: p}",
                "Remove the filter, or express the policy with Gateway API filters routegate renders."),
    "RG0125": E("Listener tls.options (GEP-2907) are implementation-specific. routegate applies "
                "routegate.io/ssl-min-ver, routegate.io/ssl-max-ver, routegate.io/ciphers and "
                "routegate.io/ciphersuites as bind keywords; any other key or value is not applied.",
                "tls:\n  mode: Terminate\n  options: {example.com/hsts: on}",
                "Use one of the routegate.io/ keys with a value HAProxy takes, or remove the option."),
    "RG0117": E("TLS routing is by SNI: a TLSRoute with no hostnames matches no server name.",
                "kind: TLSRoute\nspec: {parentRefs: [{name: edge}], rules: [...]}",
                "Add spec.hostnames."),
    "RG0118": E("The HTTP engine owns the HTTP and HTTPS ports; a TCP listener there is not rendered.",
                "listeners:\n- {name: tcp, port: 80, protocol: TCP}",
                "Use another port for TCP listeners."),
    "RG0119": E("One port carries both TLS modes by splitting on the client's server name (SNI); a name "
                "both a passthrough and a terminating listener could take has no single owner.",
                "listeners:\n- {name: a, port: 443, protocol: TLS, tls: {mode: Passthrough}}\n"
                "- {name: b, port: 443, protocol: TLS, tls: {mode: Terminate}}",
                "Give the listeners distinct, non-overlapping hostnames, or put them on different ports."),
    "RG0120": E("Every value reaches haproxy.cfg, a map or a file; a control character or whitespace in a "
                "key would change the configuration's structure.",
                "hostnames: [\"a.example\\nbackend evil\"]",
                "Remove control characters (and whitespace in names, hostnames and paths)."),
    "RG0121": E("Every match is combined with every hostname in HAProxy's maps; the product is bounded so "
                "that one route cannot make every check of the gateway slow.",
                "(a rule with 100 matches on a route with 10 hostnames)",
                "Split the rule or the route, or raise limits.matchesTimesHostnamesPerRule in --config."),
    "RG0122": E("HAProxy counts a timeout in milliseconds in a signed 32-bit number: at most 2147483647 ms "
                "(about 24.8 days). The Gateway API allows up to 99999h; a longer backendRequest is cut to "
                "HAProxy's longest timeout, as 0 is.",
                "timeouts:\n  backendRequest: 1000h",
                "Use at most 596h (24.8 days), or 0 for the longest."),
    "RG0126": E("A Gateway that shares an HTTP/HTTPS port with an older one is reached on a dedicated pod "
                "port, which its own Service targets (docs/ISOLATION.md). Pod ports come from a range no "
                "listener may declare, so that no new listener can bind the port another Gateway's traffic "
                "arrives on.",
                "listeners:\n- {name: web, port: 20411, protocol: HTTP}   # within 20000-29999",
                "Choose a port outside the pod-port range (render settings isolation_pod_port_base/_span)."),
    "RG0127": E("Each Gateway keeps the address its Service targets: its port, or its pod port. Pairs "
                "(a Gateway's listeners on one port) are placed oldest first, so a newer object cannot take "
                "an address; a change to an older Gateway or ListenerSet that adds a port can, and would send "
                "another owner's traffic to its own frontend.",
                "# Gateway team-a/old (2024) adds a listener on port 8443 whose pod port\n"
                "# is the one Gateway team-b/new (2025) is reached on",
                "Use another port (or another Gateway), or have the other Gateway's owner move first."),
    "RG0128": E("Gateway API gives a request to the most specific listener hostname: an exact name before "
                "a wildcard, a longer wildcard before a shorter. A passthrough TLSRoute on a wildcard "
                "listener must not take a name a more specific HTTPS listener on the same port terminates; "
                "the render keeps that name with the HTTPS listener.",
                "# Gateway edge, port 443: HTTPS secure.example.com; TLS Passthrough (no hostname)\n"
                "kind: TLSRoute\nspec: {parentRefs: [{name: edge, sectionName: pt}], "
                "hostnames: [secure.example.com]}",
                "Remove the hostname from the route, or ask the HTTPS listener's owner to remove theirs."),
    "RG0129": E("The most specific listener hostname wins, so an HTTPS listener added on a port where "
                "passthrough routes serve names takes the names it is more specific for: their TLS connections "
                "are decrypted by it instead of passed through. Where they enter through another owner's "
                "passthrough listener and are served by another owner's route, the change is denied; through "
                "the changer's own listener, it is allowed with a warning.",
                "# team-a's ListenerSet pt, port 443: TLS Passthrough *.example.com, TLSRoute team-a/shop\n"
                "# team-b's ListenerSet adds on the same Gateway:\n"
                "listeners:\n- {name: web, port: 443, protocol: HTTPS, hostname: pay.example.com}",
                "Use another hostname or port, or ask the route's owner to remove the name first."),
    "RG0130": E("The Gateway API says a Gateway whose infrastructure.parametersRef cannot be honoured is not "
                "accepted (InvalidParameters), and neither is one asking for an address type the "
                "implementation does not support (UnsupportedAddress). routegate takes no Gateway parameters "
                "and binds IP addresses and hostnames only: such a Gateway is not served (its listeners, "
                "ListenerSets and the routes attached only to it), and its status says Accepted=False with "
                "the reason. A Gateway the data plane already runs keeps its last promoted version.",
                "kind: Gateway\nspec:\n  infrastructure: {parametersRef: {group: '', kind: ConfigMap, "
                "name: params}}",
                "Remove spec.infrastructure.parametersRef, or use addresses of type IPAddress or Hostname."),
    "RG0300": E("The CRD's x-kubernetes-validations (CEL) rules run in the API server; a false rule rejects "
                "the object at apply time.",
                "(a Gateway listener with protocol HTTPS and no tls section)",
                "Change the object as the rule's message says."),
    "RG0301": E("A CEL rule routegate cannot compile or evaluate offline is reported, not silently passed.",
                "(a CEL function the offline engine lacks)",
                "Nothing in the object; check it against the cluster."),
    "RG0302": E("The API server bounds CEL evaluation cost; an object that exceeds the budget is rejected.",
                "(a route with thousands of matches)",
                "Split the object into smaller ones."),
    "RG0303": E("A rule that fails at run time because of the object (a missing key) rejects it in the API "
                "server too.",
                "(a field a rule reads without has())",
                "Set the field the rule reads."),
    "RG0600": E("The cluster's ValidatingAdmissionPolicy rejects the object at apply time (validationActions "
                "Deny); check evaluates the same policy, binding and params offline so CI fails first.",
                "validations:\n- expression: \"object.spec.hostnames.all(h, h.endsWith('.corp.example'))\"\n"
                "# HTTPRoute: hostnames: [api.example.com]",
                "Change the object as the policy's message says, or the policy/binding if it is wrong."),
    "RG0601": E("A binding with validationActions Warn: the API server admits the object with a warning.",
                "validationActions: [Warn]",
                "Change the object as the message says before the policy's owner turns it to Deny."),
    "RG0602": E("A binding with validationActions Audit: the API server admits the object and records the "
                "failure in the audit log (validation.policy.admission.k8s.io/validation_failure).",
                "validationActions: [Audit]",
                "Change the object as the message says; audits find it otherwise."),
    "RG0603": E("An expression that asks the cluster's authorizers (authorizer.check(...)) cannot be answered "
                "offline; routegate reports it instead of guessing allowed or denied.",
                "validations:\n- expression: \"authorizer.group('').resource('pods').check('get').allowed()\"",
                "Nothing in the object: the API server evaluates this expression at apply time."),
    "RG0610": E("A routegate policy of the platform (--config policies, action deny) is false for the object: "
                "it can read what only routegate knows (attachments, the traffic diff, namespace and Service "
                "labels), at admission, in check and in the reconcile audit alike.",
                "policies:\n- name: hosts-from-namespace-label\n  validations:\n"
                "  - expression: \"attachments.hostnames.all(h, h in variables.allowed)\"",
                "Change the object as the policy's message says (or ask the platform team)."),
    "RG0611": E("A routegate policy with action: warn: the object is admitted with the policy's message.",
                "policies:\n- name: max-hostnames\n  action: warn",
                "Change the object as the policy's message says."),
    "RG0401": E("A route attached to no listener is not served; it was checked behind a synthetic listener "
                "so that its own configuration is still judged.",
                "parentRefs: [{name: no-such-gateway}]",
                "Point parentRefs at an existing Gateway listener that allows the route."),
    "RG0402": E("A backendRef to a missing Service gets no servers: its share of traffic fails.",
                "backendRefs: [{name: missing, port: 80}]",
                "Create the Service, or fix the name."),
    "RG0405": E("A listener whose certificate is missing is checked with a placeholder; clients would get "
                "no valid certificate.",
                "tls: {certificateRefs: [{name: missing-secret}]}",
                "Create the kubernetes.io/tls Secret."),
    "RG0406": E("One port is one HAProxy frontend; listeners with clashing protocols cannot share it.",
                "listeners:\n- {name: a, port: 8080, protocol: HTTP}\n- {name: b, port: 8080, protocol: TCP}",
                "Give each protocol its own port."),
    "RG0407": E("Each endpoint is a server line; a Service with thousands of endpoints makes haproxy -c "
                "slow for everyone, so only the first limits.serversPerBackend are rendered.",
                "(an EndpointSlice set with 20,000 ready endpoints behind one Service)",
                "Nothing in the route; raise limits.serversPerBackend in --config if the Service needs them all."),
    "RG0408": E("The lines and map entries one route adds are bounded so that one route cannot make every "
                "check of the gateway slow.",
                "(a route whose rules expand to more than 4000 lines)",
                "Split the route, or raise limits.linesPerRoute in --config."),
    "RG0409": E("HAProxy loads an expired or not-yet-valid certificate and serves it: clients that check "
                "dates refuse the connection, so routegate warns before they do.",
                "tls: {certificateRefs: [{name: tls-expired-last-month}]}",
                "Renew the certificate in the Secret (or fix its notBefore date)."),
    "RG0410": E("HAProxy verifies client certificates against the CA file on the bind; a CA that is missing, "
                "not permitted or not PEM cannot be loaded, and with no usable CA at all the listener must "
                "refuse every connection rather than accept unverified clients.",
                "tls:\n  frontend:\n    default:\n      validation:\n        caCertificateRefs:\n"
                "        - {group: \"\", kind: ConfigMap, name: missing}",
                "Create the ConfigMap (or Secret) with a PEM ca.crt; across namespaces add a ReferenceGrant."),
    "RG0501": E("The Service does not exist; its share of traffic gets no servers (BackendNotFound).",
                "backendRefs: [{name: missing, port: 80}]",
                "Create the Service or fix the name."),
    "RG0502": E("Gateway API requires a ReferenceGrant in the target namespace for cross-namespace "
                "backendRefs; without it the backend is not served (RefNotPermitted).",
                "backendRefs: [{name: web, namespace: other, port: 80}]",
                "Add a ReferenceGrant in the Service's namespace that allows the route's namespace."),
    "RG0503": E("Only core Services can be backends (InvalidKind).",
                "backendRefs: [{kind: Deployment, name: web, port: 80}]",
                "Reference a Service."),
    "RG0504": E("A parentRef that matches no listener leaves the route unattached (NoMatchingParent).",
                "parentRefs: [{name: edge, sectionName: no-such-listener}]",
                "Reference an existing Gateway/ListenerSet and listener."),
    "RG0505": E("The listener's allowedRoutes decide which namespaces and kinds may attach "
                "(NotAllowedByListeners).",
                "(a route in namespace team-a; the listener allows only Same)",
                "Allow the namespace in allowedRoutes, or move the route."),
    "RG0506": E("A route attaches only where one of its hostnames intersects the listener's "
                "(NoMatchingListenerHostname).",
                "hostnames: [a.example]  # listener hostname: *.other.example",
                "Use a hostname the listener accepts."),
    "RG0507": E("One TCP port can route to one TCPRoute; the older claim wins.",
                "(two TCPRoutes on the same listener port)",
                "Use another port or remove one route."),
    "RG0508": E("Identical host+path+matchers on one port can only go to one route; the older wins, as "
                "Gateway API specifies.",
                "(two routes with hostname a.example and PathPrefix /)",
                "Make the matches differ, or merge the routes."),
    "RG0509": E("A listener certificate Secret that does not exist leaves the listener without a "
                "certificate.",
                "tls: {certificateRefs: [{name: missing}]}",
                "Create the Secret."),
    "RG0510": E("A cross-namespace certificate reference needs a ReferenceGrant (to kind Secret).",
                "certificateRefs: [{name: cert, namespace: certs}]",
                "Add a ReferenceGrant in the Secret's namespace."),
    "RG0513": E("Passthrough and terminating listeners on one port split by server name; across Gateways "
                "too, an overlapping hostname has no single owner.",
                "(Gateway a: 443 Passthrough, no hostname; Gateway b: 443 Terminate)",
                "Give the listeners non-overlapping hostnames, or use different ports."),
    "RG0514": E("A ListenerSet attaches only when its parent Gateway's allowedListeners admits it.",
                "(a ListenerSet whose Gateway has no allowedListeners)",
                "Allow the ListenerSet's namespace in spec.allowedListeners."),
    "RG0515": E("Without a usable CA the backend cannot be verified, so its servers are blocked.",
                "caCertificateRefs: [{kind: ConfigMap, name: missing}]",
                "Provide a ConfigMap with a PEM ca.crt."),
    "RG0516": E("A backendRef port must be one of the Service's ports; otherwise no server line is written.",
                "backendRefs: [{name: web, port: 9999}]",
                "Use a port the Service declares."),
    "RG0517": E("The HTTP engine binds that port; only passthrough TLS split by server name can share it "
                "(RenderSettings.share_https_with_passthrough, on by default).",
                "(a terminating TLS listener on the HTTPS port)",
                "Move the TLS listener to another port, or turn share_https_with_passthrough back on."),
    "RG0518": E("One SNI name on one port goes to one TLSRoute; the older claim wins.",
                "(two TLSRoutes with hostname a.example on port 443)",
                "Use distinct hostnames."),
    "RG0519": E("A name or value that cannot be written safely into the configuration is skipped rather "
                "than rendered.",
                "(a custom Route whose hostname has a space)",
                "Fix the value named in the message."),
    "RG0520": E("HAProxy needs a PEM certificate and matching key; a Secret without them cannot serve TLS.",
                "(a Secret of type Opaque with only tls.crt)",
                "Store a kubernetes.io/tls Secret with tls.crt and tls.key."),
    "RG0521": E("A terminating port without a usable certificate is checked with a placeholder; clients "
                "would get no valid certificate.",
                "(an HTTPS listener whose Secret is missing)",
                "Create the certificate Secret."),
    "RG0522": E("A TCP listener on a port another protocol owns is not rendered.",
                "listeners:\n- {name: web, port: 443, protocol: HTTPS}\n- {name: raw, port: 443, protocol: TCP}",
                "Use another port for the TCP listener."),
    "RG0523": E("Two custom Routes claim the same host and path; HAProxy's map keeps one entry, so the "
                "first by namespace/name gets the traffic and the other none.",
                "- {kind: Route, metadata: {name: a}, spec: {hostnames: [shop.example.com], paths: [/]}}\n"
                "- {kind: Route, metadata: {name: b}, spec: {hostnames: [shop.example.com], paths: [/]}}",
                "Give each Route its own host or path, or delete the duplicate."),
    "RG0524": E("Listeners on one port must differ in hostname (and HTTP cannot share a port with TLS). A "
                "ListenerSet listener that repeats one of its parent Gateway's (or an older ListenerSet's) is "
                "Conflicted in the Gateway API: the parent's listener takes precedence.",
                "# Gateway edge: {name: http, port: 80, protocol: HTTP}\n"
                "kind: ListenerSet\nspec:\n  parentRef: {name: edge}\n  listeners:\n"
                "  - {name: dup, port: 80, protocol: HTTP}",
                "Give the ListenerSet listener its own hostname or port, or attach the routes to the parent's "
                "listener."),
    "RG0800": E("haproxy -c rejects the rendered configuration: applying the change would break the next "
                "reload for every route. Only alerts the change introduces count.",
                "path: {type: RegularExpression, value: \"/items/[0-9]{4,2}\"}",
                "Fix the field named in the message (HAProxy's own error is quoted with the failing line)."),
    "RG0801": E("The renderer refuses to emit a value it cannot represent safely instead of writing it.",
                "(a value with a control character in a place no rule covers)",
                "Fix the value named in the message."),
}
