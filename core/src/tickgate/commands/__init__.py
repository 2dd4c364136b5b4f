"""The command line: :mod:`.cli` is the ``tickgate`` group (errors as one line, exit 2), and each
subcommand is one module here, imported only when it runs (``LAZY_COMMANDS``)."""
