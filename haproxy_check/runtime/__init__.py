"""From one render to the next on a running data plane: reload or Runtime API, stable slots, promotion."""
