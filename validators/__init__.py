"""Pure checks: objects (and a read-only view of the state) in, findings out. No I/O here."""
