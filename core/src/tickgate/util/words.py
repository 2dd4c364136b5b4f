"""Counts in messages: ``1 request``, ``2 requests``. A summary line that says "1 replicas"
reads as a bug, so every count a command prints goes through :func:`plural`."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one (``many``, or
    ``noun`` + ``s``)."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"
