"""``python -m tickgate`` = the ``tickgate`` command."""

from .commands.cli import run

if __name__ == "__main__":  # not when a "spawn" worker (tickgate sweep --jobs) imports it as __mp_main__
    run()
