"""Views derived from a State: indexes, attachments, the closure of a change, the GatewayClass scope."""
