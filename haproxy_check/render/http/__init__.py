"""HTTP rendering: HTTPRoute and GRPCRoute to frontends, map entries, matcher lines and backends."""
