"""``python -m tickgate`` = the ``tickgate`` command."""

from .cli import run

run()
