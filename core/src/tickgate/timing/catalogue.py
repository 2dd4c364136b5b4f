"""The facts file tickgate's roofline reads models and GPUs from.

``catalogue.json`` ships with the package: it is the facts file of
``realdata/measured/models_hardware.json`` (every model config and GPU peak,
each with the URL it was read from). :mod:`.models` reads models from it (or from a
Hugging Face ``config.json``), :mod:`.gpus` GPUs (or a mapping of a GPU's figures).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

__all__ = ["DTYPE_BYTES", "catalogue", "find"]

#: bytes per element of the dtypes a policy may name
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "int8": 1}


@functools.cache
def catalogue() -> dict[str, Any]:
    """The shipped facts (``catalogue.json``), parsed once."""
    text = resources.files(__package__).joinpath("catalogue.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def find(name: str, table: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    if name in table:
        return name
    if name in names:
        return names[name]
    folded = {k.casefold(): v for k, v in [*((k, k) for k in table), *names.items()]}
    return folded.get(name.casefold())
