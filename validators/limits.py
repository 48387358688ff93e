"""Limits on the cost one object can add to every check: the ``limits`` key of ``--config``.

A tenant who may only create objects in their own namespace can still make every other tenant's
review slow: each server, map entry and config line of their objects is parsed by every ``haproxy -c``
that includes them. These limits bound what one object contributes (what a namespace contributes is
the number of its objects times that; bound the count with a Kubernetes ResourceQuota, e.g.
``count/httproutes.gateway.networking.k8s.io``)::

    limits:
      serversPerBackend: 500            # RG0407: more ready endpoints are not rendered (warning)
      matchesTimesHostnamesPerRule: 512  # RG0121: a rule's matches x the route's hostnames (denial)
      linesPerRoute: 4000               # RG0408: config lines + map entries one route renders (denial)

EndpointSlices are written by controllers, not users: a Service over ``serversPerBackend`` is never
denied, the backend is rendered with the first endpoints in EndpointSlice order and the routes using it get
a warning. Routes are written by users, so a route over a limit is denied with a finding on its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

SERVERS_PER_BACKEND = 500
MATCHES_TIMES_HOSTNAMES_PER_RULE = 512
LINES_PER_ROUTE = 4000

_KEYS = {"serversPerBackend": "servers_per_backend",
         "matchesTimesHostnamesPerRule": "matches_hostnames_per_rule",
         "linesPerRoute": "lines_per_route"}


@dataclass(frozen=True, slots=True)
class Limits:
    servers_per_backend: int = SERVERS_PER_BACKEND
    matches_hostnames_per_rule: int = MATCHES_TIMES_HOSTNAMES_PER_RULE
    lines_per_route: int = LINES_PER_ROUTE

    @classmethod
    def from_mapping(cls, cfg: Any) -> Limits:
        """Parse the ``limits`` mapping; a typo or a non-positive value raises ValueError naming the key."""
        if cfg is None:
            return cls()
        if not isinstance(cfg, Mapping):
            raise ValueError(f"enforcement config: 'limits' must be a mapping with keys {', '.join(_KEYS)}")
        values: dict[str, int] = {}
        for key, value in cfg.items():
            if key not in _KEYS:
                raise ValueError(f"enforcement config: limits.{key}: unknown limit; allowed: {', '.join(_KEYS)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"enforcement config: limits.{key}: {value!r} is not a positive integer")
            values[_KEYS[key]] = value
        return cls(**values)

    def as_config(self) -> dict[str, int]:
        names = {v: k for k, v in _KEYS.items()}
        return {names[f.name]: getattr(self, f.name) for f in fields(self)}
