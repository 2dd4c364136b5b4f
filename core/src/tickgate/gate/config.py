"""The ``gate:`` section of a policy: validated against
``schemas/gate-section.schema.json`` and each signal's own ``options_schema``,
with errors located in the policy file, then built through the registry (a
built-in signal is looked up exactly like a third party's)."""

from __future__ import annotations

from typing import Any

import attrs

from ..host.policy import Policy
from ..host.registry import PluginInfo, Registry, get_registry
from ..util.errors import InputError, PluginError, TickgateError
from ..util.schemas import load_schema, validate


@attrs.frozen
class ConfiguredSignal:
    id: str
    info: PluginInfo
    signal: Any
    dry_run: bool
    options: dict[str, Any]
    #: a result of ``not_evaluated`` (no side has the evidence) holds instead of standing aside
    required: bool = False


@attrs.frozen
class GateConfig:
    policy_path: str  # as reports name it (``bundled:<file>`` for a shipped policy)
    seed: int
    segments: list[str] | None
    signals: list[ConfiguredSignal]
    #: the decision an inconclusive signal leads to: inconclusive, hold or promote
    inconclusive: str = "inconclusive"


def load_gate_config(policy: Policy, registry: Registry | None = None) -> GateConfig:
    path = policy.path
    if "gate" not in policy.data:
        raise InputError(path, "the policy has no 'gate' section; see policies/gate-default.yaml", line=1)
    section = policy.data["gate"]
    validate(
        section,
        load_schema("gate-section.schema.json"),
        file=path,
        locations=policy.locations,
        prefix=("gate",),
    )
    registry = registry or get_registry()
    signals: list[ConfiguredSignal] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(section["signals"]):
        try:
            info = registry.get("gate_signal", entry["name"])
        except PluginError as exc:
            raise InputError(path, str(exc), **policy.locate("gate", "signals", i, "name")) from None
        sid = entry.get("id", entry["name"])
        if sid in seen:
            raise InputError(
                path,
                f"signal id {sid!r} is used twice (also gate.signals[{seen[sid]}]); give one an 'id'",
                **policy.locate("gate", "signals", i),
            )
        seen[sid] = i
        options = dict(entry.get("options", {}))
        schema = getattr(info.obj, "options_schema", None)
        if schema:
            validate(
                options,
                schema,
                file=path,
                locations=policy.locations,
                prefix=("gate", "signals", i, "options"),
            )
        try:
            signal = info.obj.build(options)
        except (ValueError, TypeError) as exc:
            raise InputError(
                path, f"{info.name}: {exc}", **policy.locate("gate", "signals", i, "options")
            ) from None
        except TickgateError:
            raise
        except Exception as exc:
            raise PluginError(
                f"{info.label('gate signal')} failed to build: {type(exc).__name__}: {exc}"
            ) from exc
        signals.append(
            ConfiguredSignal(
                sid,
                info,
                signal,
                bool(entry.get("dry_run", False)),
                options,
                bool(entry.get("required", False)),
            )
        )
    return GateConfig(
        policy.source or path,
        int(section.get("seed", 0)),
        section.get("segments"),
        signals,
        section.get("inconclusive", "inconclusive"),
    )
