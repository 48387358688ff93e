"""Webhook serving certificates: generation, hot reload, self-managed rotation. Imports no gate code."""
