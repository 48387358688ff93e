"""``python -m webhook`` is ``routegate``."""

from webhook.cli import run

run()
