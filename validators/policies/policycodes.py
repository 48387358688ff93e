"""The finding codes of admission policies (RG06xx): one table for ``routegate rules`` and enforcement.

A ValidatingAdmissionPolicy's own ``validationActions`` decide deny, warn or audit, as in the API
server, and no ``--config`` rule setting changes them (RG0600-RG0602 are not configurable); a routegate
policy's ``action`` does, and its codes follow ``rules:`` and ``exemptNamespaces`` like every rule.
"""

from __future__ import annotations

from validators.codes import RuleInfo
from validators.findings import Severity

VAP_DENIED = "RG0600"
VAP_WARNED = "RG0601"
VAP_AUDITED = "RG0602"
VAP_UNSUPPORTED = "RG0603"
OWN_DENIED = "RG0610"
OWN_WARNED = "RG0611"

RULE_INFOS: tuple[RuleInfo, ...] = (
    RuleInfo(VAP_DENIED, Severity.DENY,
             "A ValidatingAdmissionPolicy bound with validationActions Deny rejects the object (as the API server).",
             configurable=False),
    RuleInfo(VAP_WARNED, Severity.WARN,
             "A ValidatingAdmissionPolicy bound with validationActions Warn fails (the API server warns).",
             configurable=False),
    RuleInfo(VAP_AUDITED, Severity.WARN,
             "A ValidatingAdmissionPolicy bound with validationActions Audit fails (an audit annotation).",
             configurable=False),
    RuleInfo(VAP_UNSUPPORTED, Severity.WARN,
             "A ValidatingAdmissionPolicy expression routegate cannot judge offline (authorizer); not checked."),
    RuleInfo(OWN_DENIED, Severity.DENY, "A routegate policy (--config policies) with action deny is false."),
    RuleInfo(OWN_WARNED, Severity.WARN, "A routegate policy (--config policies) with action warn is false."),
)
