"""Checking a render with the real haproxy -c: files and a source map in, a CheckResult out."""
