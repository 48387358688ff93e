"""The command line: ``routegate check``, ``render``, ``plan``, ``explain``, ``rules`` and the parser that
starts ``serve`` and ``reconcile``; nothing imports it."""
