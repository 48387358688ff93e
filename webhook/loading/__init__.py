"""Inputs read from files: manifests with their line and column, YAML and JSON, the settings file; below the
Gate, which loads states with it."""
