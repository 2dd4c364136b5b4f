"""One module per group of CLI subcommands (imported lazily by tickgate.cli)."""
