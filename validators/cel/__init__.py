"""The CEL engine: compile and run a CRD's x-kubernetes-validations rules, as the API server does.

Knows nothing of Gateway API.
"""
