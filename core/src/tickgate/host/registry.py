"""Plugin discovery and the registry.

Every plugin, built-in or third-party, arrives the same way: an entry point
in the ``tickgate`` group names a module holding ``@hookimpl`` functions.
Loading is lazy (``get_registry()`` on first use) so commands that need no
plugins start fast, and defensive: a module that fails to import, a hook
pluggy refuses (a misspelt hook name, a wrong argument name) or a hook that
raises becomes a one-line error naming its distribution and version instead
of a traceback. Such a plugin is kept as a :class:`BrokenPlugin`: listed by
``tickgate plugins``, refused by everything else.

Environment:

* ``TICKGATE_PLUGINS``: comma-separated entry-point or distribution names;
  when set, only those load (``tickgate`` itself is always loaded).
* ``TICKGATE_DISABLE_PLUGINS``: comma-separated names that must not load.
"""

from __future__ import annotations

import importlib.metadata as md
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import attrs
import pluggy

from ..util.errors import PluginError, one_line
from . import checks, hookspecs

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

    def label(self, noun: str | None = None) -> str:
        """How messages name this plugin: ``scheduler "seed" from tickgate 0.1.0``,
        with ``noun`` instead of the kind where a message says it in words
        (``"gate signal"`` for ``gate_signal``)."""
        return checks.where(self.name, self.distribution, self.version, noun or self.kind)

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


@attrs.frozen
class BrokenPlugin:
    """An entry point that could not load: ``tickgate plugins`` lists it as a
    row (kind ``broken``) so the user sees why; every other use of the
    registry refuses to run with it (:func:`get_registry`)."""

    source: _Source
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "kind": "broken",
            "name": self.source.entry_point,
            "distribution": self.source.distribution,
            "version": self.source.version,
            "entry_point": self.source.entry_point,
            "description": self.reason,
            "reason": self.reason,
        }


class Registry:
    """All registered plugins, keyed by (kind, name).

    ``specs`` is the module of hook specifications; the hook kinds are read
    from it (:func:`tickgate.host.hookspecs.hook_kinds`), so a new spec needs no
    other edit to be loaded, checked and listed.
    """

    def __init__(self, specs: ModuleType = hookspecs) -> None:
        self.pm = pluggy.PluginManager("tickgate")
        self.pm.add_hookspecs(specs)
        self.kinds: dict[str, str] = hookspecs.hook_kinds(specs)
        self._plugins: dict[tuple[str, str], PluginInfo] = {}
        self._sources: dict[int, _Source] = {}
        #: entry points that failed to load, in loading order
        self.broken: list[BrokenPlugin] = []

    # -- loading -----------------------------------------------------------
    def add_module(self, module: Any, source: _Source) -> None:
        """Register one plugin module and collect what its hooks register.

        All or nothing: a module pluggy refuses (an argument the spec does not
        have, a hook no spec declares: pytest's ``check_pending``), a hook that
        raises or a duplicate name leaves the registry as it was and raises a
        one-line :class:`PluginError` naming the distribution.
        """
        if self.pm.is_registered(module):
            return
        label = checks.where(source.entry_point, source.distribution, source.version)
        try:
            self.pm.register(module, name=f"{source.distribution}:{source.entry_point}")
        except pluggy.PluginValidationError as exc:  # pluggy changed nothing (it validates first)
            raise PluginError(checks.bad_signature(self.pm, module, label, exc)) from None
        try:
            self._check_pending(module, label)
            added = self._run_hooks(module, source, label)
        except BaseException:
            self.pm.unregister(module)
            raise
        self._sources[id(module)] = source
        self._plugins.update(added)

    def _check_pending(self, module: Any, label: str) -> None:
        """A ``@hookimpl`` for a hook no spec declares is a typo, not something to ignore."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            message = checks.unknown_hooks(self.pm, module, label, list(self.kinds))
            raise PluginError(message or " ".join(str(exc).split())) from None

    def _run_hooks(self, module: Any, source: _Source, label: str) -> dict[tuple[str, str], PluginInfo]:
        added: dict[tuple[str, str], PluginInfo] = {}
        for hook_name, kind in self.kinds.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin is not module:
                    continue
                try:
                    impl.function(register=lambda obj, _k=kind: self._register(_k, obj, source, added))
                except PluginError:
                    raise
                except Exception as exc:  # a broken plugin must not become a traceback
                    raise PluginError(f"{label} failed in {hook_name}: {type(exc).__name__}: {exc}") from exc
        return added

    def _register(
        self, kind: str, obj: Any, source: _Source, added: dict[tuple[str, str], PluginInfo]
    ) -> None:
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(
                f"{source.distribution} {source.version} registered a {kind} without a name: {obj!r}"
            )
        key = (kind, name)
        first = self._plugins.get(key) or added.get(key)
        if first is not None:
            raise PluginError(
                f'duplicate {kind} "{name}": registered by {first.distribution} {first.version} '
                f"(entry point {first.entry_point}) and by {source.distribution} {source.version} "
                f"(entry point {source.entry_point})"
            )
        added[key] = PluginInfo(
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
                try:
                    module = ep.load()
                except Exception as exc:
                    raise PluginError(
                        f"Error importing {checks.where(ep.name, dist, version)}: {type(exc).__name__}: {exc}"
                    ) from exc
                self.add_module(module, source)
            except PluginError as exc:  # kept, not raised: `tickgate plugins` shows it as a row
                self.broken.append(BrokenPlugin(source, one_line(str(exc))))

    def check(self) -> None:
        """Fail closed: raise the first broken plugin's error (the others counted)."""
        if not self.broken:
            return
        first, rest = self.broken[0], len(self.broken) - 1
        more = (
            f" (and {rest} more broken plugin{'s' if rest > 1 else ''}: see tickgate plugins)" if rest else ""
        )
        raise PluginError(first.reason + more)

    def register_module(
        self,
        module: Any,
        *,
        distribution: str = "<in-process>",
        version: str = "0",
        entry_point: str | None = None,
    ) -> None:
        """Register an in-process plugin module (tests, embedding applications)."""
        name = entry_point if entry_point else getattr(module, "__name__", "plugin")
        self.add_module(module, _Source(name, distribution, version))

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
        order = {kind: i for i, kind in enumerate(self.kinds.values())}
        return iter(sorted(self._plugins.values(), key=lambda p: (order[p.kind], p.name)))


_registry: Registry | None = None


def get_registry(*, allow_broken: bool = False) -> Registry:
    """The process-wide registry, loading entry points on first use.

    A plugin that failed to load makes this raise its one-line
    :class:`PluginError` on every call (commands fail closed), unless
    ``allow_broken``: ``tickgate plugins`` and the ``--help`` listing still
    work, so the user can see what is broken and disable it.
    """
    global _registry
    if _registry is None:
        registry = Registry()
        registry.load_entry_points()
        _registry = registry
    if not allow_broken:
        _registry.check()
    return _registry


def reset_registry() -> None:
    """Forget loaded plugins (tests; a changed TICKGATE_PLUGINS)."""
    global _registry
    _registry = None
