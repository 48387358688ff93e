"""``python -m webhook`` is ``routegate``."""

from webhook.cli.routegate import run

run()
