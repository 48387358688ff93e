"""Findings and facts that need more than one object: backend references, claims, policies, route status."""
