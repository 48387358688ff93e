"""The render engine: a State in, haproxy.cfg, map files, certificates and a source map out."""
