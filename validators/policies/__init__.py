"""Admission policies in CEL: Kubernetes ValidatingAdmissionPolicies and their bindings (``vaps``), and
routegate's own policies from ``--config`` (``ownpolicies``), judged offline without I/O.

The CEL engine is ``validators.cel``'s; the pieces here are the admission variables and costs
(``expressions``), which objects a policy selects (``matching``) and the finding codes (``policycodes``).
"""
