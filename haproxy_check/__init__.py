"""Rendering the HAProxy configuration and checking it with the real ``haproxy -c``."""
