"""JSON Schemas shipped with tickgate and schema validation with located errors."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import InputError
from .locations import Locations, json_path

_REPO_ROOT = Path(__file__).resolve().parents[4]


def data_file(folder: str, name: str) -> Path:
    """A file shipped in the wheel under ``tickgate/<folder>/`` (schemas, policies).

    The wheel carries copies of the repository's top-level ``schemas/`` and
    ``policies/``; an editable install reads the repository's folders directly.
    """
    packaged = resources.files("tickgate").joinpath(folder, name)
    if packaged.is_file():
        return Path(str(packaged))
    candidate = _REPO_ROOT / folder / name
    if candidate.is_file():
        return candidate
    raise FileNotFoundError(f"tickgate data file {folder}/{name} is not installed")


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    return json.loads(data_file("schemas", name).read_text(encoding="utf-8"))


@functools.cache
def _validator(schema_json: str) -> Any:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    # JSON Schema counts 16.0 as an integer; Python code does not (range(16.0)
    # fails, and 16.0 pages would print as 16.0 in every record and change the
    # fingerprint), so a value the schema calls an integer must be one
    strict = cls.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return jsonschema.validators.extend(cls, type_checker=strict)(schema)


def validate(
    data: Any,
    schema: Mapping[str, Any],
    *,
    file: Any,
    locations: Locations | None = None,
    prefix: tuple[Any, ...] = (),
    line: int | None = None,
) -> None:
    """Raise :class:`InputError` for the most relevant violation, located."""
    import jsonschema

    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = list(validator.iter_errors(data))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    parts = (*prefix, *best.absolute_path)
    path = json_path(parts)
    col = None
    if locations:
        probe = list(parts)
        while True:
            loc = locations.get(json_path(probe))
            if loc is not None:
                line, col = loc
                break
            if not probe:
                break
            probe.pop()
    raise InputError(file, _describe(best), line=line, column=col, json_path=path)


def _describe(error: Any) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        if extra and not allowed:
            return f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}; none are allowed here"
        if extra:
            return (
                f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}; "
                f"expected one of: {', '.join(allowed)}"
            )
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    if error.validator in ("anyOf", "oneOf"):
        branches = [_expected(sub) for sub in error.validator_value]
        named = [b for b in branches if b]
        if len(named) == len(branches):  # every branch said
            return f"{error.instance!r} is not {' or '.join(named)}"
    return error.message


_ARTICLE = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "object": "a mapping",
    "array": "a list",
    "boolean": "true or false",
    "null": "null",
}


def _expected(schema: Any) -> str | None:
    """A short phrase for what one branch of an anyOf / oneOf accepts (None: too rich to say)."""
    if not isinstance(schema, Mapping):
        return None
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    kind = _ARTICLE.get(schema.get("type", ""))  # no type: no article, as for an unknown one
    if kind is None:
        return None
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"{kind} from {low} to {high}"
    if low is not None:
        return f"{kind} >= {low}"
    return kind
