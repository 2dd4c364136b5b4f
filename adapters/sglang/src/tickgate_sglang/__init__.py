"""tickgate adapter for sglang."""

__version__ = "0.1.0"
