"""Rules on one object: what HAProxy can honour, and what the API server requires of names."""
