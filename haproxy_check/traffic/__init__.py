"""What a rendered configuration does with a request: the routing table of a render (``tables``) and
the difference between two of them (``diffs``), derived from the render's recorded facts (``facts``)
and map files, never from haproxy.cfg text."""
