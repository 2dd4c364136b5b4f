"""Plugin discovery and the registry.

Every plugin, built-in or third-party, arrives the same way: an entry point
in the ``tickgate`` group names a module holding ``@hookimpl`` functions.
Loading is lazy (``get_registry()`` on first use) so commands that need no
plugins start fast, and defensive: a module that fails to import becomes an
error naming its distribution and version instead of a traceback.

Environment:

* ``TICKGATE_PLUGINS``: comma-separated entry-point or distribution names;
  when set, only those load (``tickgate`` itself is always loaded).
* ``TICKGATE_DISABLE_PLUGINS``: comma-separated names that must not load.
"""

from __future__ import annotations

import importlib.metadata as md
import os
from typing import Any, Iterator

import attrs
import pluggy

from . import hookspecs
from .errors import PluginError

ENTRY_POINT_GROUP = "tickgate"
CORE_DISTRIBUTION = "tickgate"


@attrs.frozen
class PluginInfo:
    kind: str
    name: str
    obj: Any
    distribution: str
    version: str
    entry_point: str
    description: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.entry_point,
            "description": self.description,
        }


@attrs.frozen
class _Source:
    entry_point: str
    distribution: str
    version: str


def _split_env(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


class Registry:
    """All registered plugins, keyed by (kind, name)."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("tickgate")
        self.pm.add_hookspecs(hookspecs)
        self._plugins: dict[tuple[str, str], PluginInfo] = {}
        self._sources: dict[int, _Source] = {}

    # -- loading -----------------------------------------------------------
    def add_module(self, module: Any, source: _Source) -> None:
        """Register one plugin module and collect what its hooks register."""
        if self.pm.is_registered(module):
            return
        self.pm.register(module, name=f"{source.distribution}:{source.entry_point}")
        self._sources[id(module)] = source
        for hook_name, kind in hookspecs.HOOK_KINDS.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin is not module:
                    continue
                try:
                    impl.function(register=lambda obj, _k=kind: self._register(_k, obj, source))
                except PluginError:
                    raise
                except Exception as exc:  # a broken plugin must not become a traceback
                    raise PluginError(
                        f'plugin "{source.entry_point}" from {source.distribution} '
                        f"{source.version} failed in {hook_name}: {type(exc).__name__}: {exc}"
                    ) from exc

    def _register(self, kind: str, obj: Any, source: _Source) -> None:
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(
                f"{source.distribution} {source.version} registered a {kind} without a name: {obj!r}"
            )
        key = (kind, name)
        if key in self._plugins:
            first = self._plugins[key]
            raise PluginError(
                f'duplicate {kind} "{name}": registered by {first.distribution} {first.version} '
                f"(entry point {first.entry_point}) and by {source.distribution} {source.version} "
                f"(entry point {source.entry_point})"
            )
        self._plugins[key] = PluginInfo(
            kind=kind,
            name=name,
            obj=obj,
            distribution=source.distribution,
            version=source.version,
            entry_point=source.entry_point,
            description=str(getattr(obj, "description", "") or ""),
        )

    def load_entry_points(self) -> None:
        only = _split_env("TICKGATE_PLUGINS")
        disabled = _split_env("TICKGATE_DISABLE_PLUGINS") or set()
        eps = sorted(
            md.entry_points(group=ENTRY_POINT_GROUP),
            key=lambda ep: ((ep.dist.name if ep.dist else ""), ep.name),
        )
        for ep in eps:
            dist = ep.dist.name if ep.dist else "<unknown distribution>"
            version = ep.dist.version if ep.dist else "?"
            names = {ep.name, dist}
            if names & disabled:
                continue
            if only is not None and dist != CORE_DISTRIBUTION and not (names & only):
                continue
            source = _Source(entry_point=ep.name, distribution=dist, version=version)
            try:
                module = ep.load()
            except Exception as exc:
                raise PluginError(
                    f'Error importing plugin "{ep.name}" from {dist} {version}: '
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            self.add_module(module, source)

    def register_module(self, module: Any, *, distribution: str = "<in-process>",
                        version: str = "0", entry_point: str | None = None) -> None:
        """Register an in-process plugin module (tests, embedding applications)."""
        self.add_module(module, _Source(entry_point or getattr(module, "__name__", "plugin"),
                                        distribution, version))

    # -- lookup ------------------------------------------------------------
    def get(self, kind: str, name: str) -> PluginInfo:
        try:
            return self._plugins[(kind, name)]
        except KeyError:
            available = ", ".join(self.names(kind)) or "none installed"
            raise PluginError(f'unknown {kind} "{name}"; available: {available}') from None

    def names(self, kind: str) -> list[str]:
        return sorted(name for (k, name) in self._plugins if k == kind)

    def of_kind(self, kind: str) -> list[PluginInfo]:
        return [self._plugins[(kind, n)] for n in self.names(kind)]

    def __iter__(self) -> Iterator[PluginInfo]:
        order = {kind: i for i, kind in enumerate(hookspecs.HOOK_KINDS.values())}
        return iter(sorted(self._plugins.values(), key=lambda p: (order[p.kind], p.name)))


_registry: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, loading entry points on first use."""
    global _registry
    if _registry is None:
        registry = Registry()
        registry.load_entry_points()
        _registry = registry
    return _registry


def reset_registry() -> None:
    """Forget loaded plugins (tests; a changed TICKGATE_PLUGINS)."""
    global _registry
    _registry = None
