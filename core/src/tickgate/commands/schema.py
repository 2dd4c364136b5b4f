"""``tickgate schema``: the combined JSON Schema of policy files.

``schemas/policy.schema.json`` leaves each plugin's ``options`` open because
plugins are installed separately. This command closes it for *this*
environment: ``scheduler``, ``admission``, ``kv_allocator`` and ``timing`` become a
``oneOf`` over the installed plugins of that kind (the name as a ``const``,
with that plugin's own ``options_schema``; ``timing`` also takes the short
spelling, the ``linear`` model's options directly), and ``gate`` becomes the gate
section's schema with each signal's options. Editors (YAML language server,
``# yaml-language-server: $schema=...``) then complete and check policy files.
Output is deterministic: plugins sorted by name, keys sorted.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click


def _options(info: Any) -> Mapping[str, Any]:
    schema = getattr(info.obj, "options_schema", None)
    return schema if isinstance(schema, Mapping) and schema else {"type": "object"}


def _choice(info: Any, extra: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {"name": {"const": info.name}, **extra, "options": dict(_options(info))}
    description = f"{info.description} ({info.distribution} {info.version})".strip()
    return {
        "type": "object",
        "description": description,
        "required": required,
        "additionalProperties": False,
        "properties": properties,
    }


def policy_schema(registry: Any = None) -> dict[str, Any]:
    """The policy schema with every installed plugin's options in place."""
    from ..host.policy import DEFAULT_TIMING, SECTIONS, TIMING_KIND
    from ..host.registry import get_registry
    from ..util.schemas import load_schema

    registry = registry or get_registry()
    schema = copy.deepcopy(load_schema("policy.schema.json"))
    schema["$id"] = "https://tickgate.dev/schemas/policy.combined.schema.json"
    schema["description"] = (
        "tickgate policy file, with the options of every plugin installed when `tickgate schema` ran."
    )
    for section, kind in SECTIONS.items():
        choices = [_choice(info, {}, ["name"]) for info in registry.of_kind(kind)]
        section_schema: dict[str, Any] = {"oneOf": choices} if choices else {"not": {}}
        schema["properties"][section] = section_schema
    models = registry.of_kind(TIMING_KIND)
    choices = [_choice(info, {}, ["name"]) for info in models]
    short = [
        dict(
            _options(info),
            description=f"the options of {info.name!r} directly (no name): "
            f"the spelling from before timing models were plugins",
        )
        for info in models
        if info.name == DEFAULT_TIMING
    ]
    timing_schema: dict[str, Any] = {"oneOf": choices + short} if choices else {"not": {}}
    schema["properties"]["timing"] = timing_schema
    gate = copy.deepcopy(load_schema("gate-section.schema.json"))
    gate.pop("$schema", None)
    gate.pop("$id", None)
    entry = gate["properties"]["signals"]["items"]
    extra = {key: value for key, value in entry["properties"].items() if key not in ("name", "options")}
    signals = [_choice(info, extra, ["name"]) for info in registry.of_kind("gate_signal")]
    items: dict[str, Any] = {"oneOf": signals} if signals else {"not": {}}
    gate["properties"]["signals"]["items"] = items
    schema["properties"]["gate"] = gate
    return schema


@click.command("schema")
@click.option(
    "--output",
    "output_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the schema to this file (atomically) instead of standard output.",
)
def schema_command(output_path: Path | None) -> None:
    """Print the JSON Schema of policy files, including every installed plugin's options."""
    text = json.dumps(policy_schema(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    if output_path is None:
        click.echo(text, nl=False)
        return
    from ..util.atomic import atomic_writer

    with atomic_writer(output_path) as fh:
        fh.write(text)
    click.echo(f"policy schema -> {output_path}")
