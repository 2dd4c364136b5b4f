"""Policy files: load, validate (the file's schema, then each plugin's own
options schema) and resolve plugin names through the registry.

Every error is located: ``policies/x.yaml:12:5: $.scheduler.options.page_size:
0 is less than the minimum of 1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..interfaces import TimingModel
from ..util.errors import ConfigError, InputError, PluginError, TickgateError
from ..util.locations import Locations, load_yaml
from ..util.schemas import data_file, load_schema, validate
from .registry import PluginInfo, Registry, get_registry

#: policy section -> the kind of plugin it names (``tickgate schema`` closes the same sections)
SECTIONS = {"scheduler": "scheduler", "admission": "admission", "kv_allocator": "kv_allocator"}
#: the kind of plugin the ``timing`` section names, and the model its short spelling
#: (the coefficients directly under ``timing:``, no ``name``) means
TIMING_KIND = "timing_model"
DEFAULT_TIMING = "linear"


@attrs.frozen
class Selection:
    """A plugin chosen by a policy section, with its validated options."""

    plugin: PluginInfo
    options: Mapping[str, Any]


@attrs.frozen
class Policy:
    path: str
    data: Mapping[str, Any]
    locations: Locations
    selections: Mapping[str, Selection]
    #: the timing model the ``timing`` section selected, built (None: untimed)
    timing: TimingModel | None
    max_ticks: int | None
    #: how reports name it: ``bundled:<file>`` for a policy shipped with
    #: tickgate (the same on every machine and install), else the path given
    source: str = ""
    #: where the selected scheduler section is in the file: a fleet pool with
    #: a scheduler of its own builds from a copy with its path here
    scheduler_at: tuple[Any, ...] = ("scheduler",)

    def selection(self, section: str) -> Selection | None:
        return self.selections.get(section)

    def locate(self, *parts: Any) -> dict[str, Any]:
        """Keyword arguments for an InputError pointing at a policy location."""
        from ..util.locations import json_path

        path = json_path(parts)
        line, col = self.locations.get(path, (None, None))
        return {"line": line, "column": col, "json_path": path}

    def build_plugin(self, info: PluginInfo, build: Any, *where: Any) -> Any:
        """``build()`` a plugin this policy selected: a refused configuration
        (:class:`ConfigError`) is located at ``where`` in the file (``"scheduler",
        "name"``), any other failure names the plugin."""
        try:
            return build()
        except ConfigError as exc:
            at = self.locate(*where)
            if exc.option and where:
                section = where[:-1] if len(where) > 1 and where[-1] == "name" else where
                for parts in ((*section, "options", exc.option), (*section, exc.option)):
                    found = self.locate(*parts)
                    if found["line"] is not None:
                        at = found
                        break
            raise InputError(self.path, str(exc), **at) from None
        except TickgateError:
            raise
        except Exception as exc:
            raise PluginError(f"{info.label()} failed: {type(exc).__name__}: {exc}") from exc


def default_policy_path() -> Path:
    return data_file("policies", "default.yaml")


def load_policy(path: Path | str | None = None, *, registry: Registry | None = None) -> Policy:
    path = Path(path) if path is not None else default_policy_path()
    data, locs = load_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "a policy file must be a mapping with 'version: 1'", line=1)
    validate(data, load_schema("policy.schema.json"), file=path, locations=locs)
    check_requires(data.get("requires", ()), path, locs)
    registry = registry or get_registry()
    selections: dict[str, Selection] = {}
    for section, kind in SECTIONS.items():
        if section in data:
            block = data[section]
            selections[section] = _select(
                registry,
                kind,
                block["name"],
                block.get("options", {}),
                path,
                locs,
                (section, "name"),
                (section, "options"),
            )
    block = data.get("timing")
    named = block is not None and "name" in block
    if block is not None:
        name, options = (block["name"], block.get("options", {})) if named else (DEFAULT_TIMING, block)
        at = ("timing", "name") if named else ("timing",)
        selections["timing"] = _select(
            registry,
            TIMING_KIND,
            name,
            options,
            path,
            locs,
            at,
            ("timing", "options") if named else ("timing",),
        )
    limits = data.get("limits", {})
    policy = Policy(str(path), data, locs, selections, None, limits.get("max_ticks"), policy_source(path))
    chosen = selections.get("timing")
    if chosen is None:
        return policy
    model = policy.build_plugin(chosen.plugin, lambda: chosen.plugin.obj.build(chosen.options), *at)
    return attrs.evolve(policy, timing=model)


def _select(
    registry: Registry,
    kind: str,
    name: str,
    options: Any,
    path: Path | str,
    locs: Locations,
    name_at: tuple[str, ...],
    options_at: tuple[str, ...],
) -> Selection:
    """The plugin a section names, its options validated by its own schema; errors located."""
    try:
        info = registry.get(kind, name)
    except PluginError as exc:
        where = "$." + ".".join(name_at)
        line, col = locs.get(where, (None, None))
        raise InputError(path, str(exc), line=line, column=col, json_path=where) from None
    schema = getattr(info.obj, "options_schema", None)
    if schema:
        validate(options, schema, file=path, locations=locs, prefix=options_at)
    return Selection(info, options)


def policy_source(path: Path | str) -> str:
    """``bundled:<file>`` when ``path`` is one of the policies shipped with
    tickgate (wherever it is installed), else ``path`` as given: reports then
    do not depend on where site-packages is."""
    path = Path(path)
    try:
        if data_file("policies", path.name).resolve() == path.resolve():
            return f"bundled:{path.name}"
    except (FileNotFoundError, OSError):
        pass
    return str(path)


def check_requires(requirements: Any, path: Path, locs: Locations) -> None:
    """Refuse to run a policy whose required distributions are missing or too old."""
    import importlib.metadata as md

    from packaging.requirements import InvalidRequirement, Requirement

    for i, text in enumerate(requirements):
        line, col = locs.get(f"$.requires[{i}]", (None, None))
        where: dict[str, Any] = {"line": line, "column": col, "json_path": f"$.requires[{i}]"}
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0] if str(exc) else "unparsable"  # packaging adds a caret diagram
            raise InputError(path, f"not a valid requirement {text!r}: {first}", **where) from None
        try:
            version = md.version(req.name)
        except md.PackageNotFoundError:
            raise InputError(
                path, f"this policy requires {text}, which is not installed (pip install '{text}')", **where
            ) from None
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            raise InputError(
                path, f"this policy requires {text}, but {req.name} {version} is installed", **where
            )


def require_section(policy: Policy, section: str) -> Selection:
    selection = policy.selection(section)
    if selection is None:
        raise TickgateError(f"{policy.path}: the policy has no '{section}' section")
    return selection
