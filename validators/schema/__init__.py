"""The schema engine: prune, default and validate a custom object against its CRD's structural schema."""
