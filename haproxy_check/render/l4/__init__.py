"""L4 rendering: TLSRoute, TCPRoute and the custom Route CRD to tcp frontends and weighted backends."""
