"""Entry point ``readers = tickgate.readers.plugin``: built-in readers plugins, registered
through the same hooks and entry-point group as a third party's."""

from __future__ import annotations

from ..hookspecs import hookimpl  # noqa: F401
