"""What every plugin class has: ``name``, ``description``, ``options_schema``
(see :mod:`tickgate.interfaces`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["EMPTY_OPTIONS", "Plugin"]

EMPTY_OPTIONS: Mapping[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}


class Plugin:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options_schema: ClassVar[Mapping[str, Any]] = EMPTY_OPTIONS
