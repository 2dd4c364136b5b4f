"""One-line reasons for plugins pluggy refuses.

pluggy reports a hook implementation whose arguments do not match its spec,
and (through ``check_pending``) a hook no spec declares, as a multi-line
``PluginValidationError`` naming a module object. Users need one line naming
the distribution and what to change, so the registry turns both into
:class:`~tickgate.util.errors.PluginError` messages built here.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import pluggy

from ..util.errors import one_line


def where(name: str, distribution: str, version: str, noun: str = "plugin") -> str:
    """How every message names a plugin: ``gate signal "p95" from tickgate 0.1.0``.

    Loading errors name the entry point as a ``plugin`` (the same words as the
    import error); once loaded, :meth:`tickgate.host.registry.PluginInfo.label` names
    a registered plugin through this, by its kind or the noun a message reads
    better with.
    """
    return f'{noun} "{name}" from {distribution} {version}'


def _implementations(pm: pluggy.PluginManager, module: Any) -> list[tuple[str, Any, dict[str, Any]]]:
    """(hook name, function, options) of every ``@hookimpl`` in ``module``, by hook name."""
    found = []
    for attr in dir(module):
        opts = pm.parse_hookimpl_opts(module, attr)
        if opts is not None:
            found.append((opts.get("specname") or attr, getattr(module, attr), dict(opts)))
    return sorted(found, key=lambda item: item[0])


def _arguments(function: Any) -> list[str]:
    """The arguments pluggy matches against a spec: positional ones without a default."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in positional and p.default is p.empty]


def bad_signature(
    pm: pluggy.PluginManager, module: Any, label: str, error: pluggy.PluginValidationError
) -> str:
    """``register_schedulers(reg)``: the argument that does not match the spec, and its name there."""
    for hook, function, _ in _implementations(pm, module):
        caller = getattr(pm.hook, hook, None)
        if caller is None or caller.spec is None:
            continue
        expected = list(caller.spec.argnames)
        given = _arguments(function)
        unknown = [name for name in given if name not in expected]
        if unknown:
            return (
                f"{label}: {hook}({', '.join(given)}) does not match the hook spec "
                f"{hook}({', '.join(expected)}): rename {', '.join(unknown)} "
                f"(pluggy passes arguments by name)"
            )
    return f"{label}: {' '.join(str(error).split())}"  # any other refusal, squeezed to one line


def unknown_hooks(pm: pluggy.PluginManager, module: Any, label: str, known: list[str]) -> str | None:
    """A ``@hookimpl`` no spec declares (``register_scheduler``), with the nearest real hook name;
    None when ``module`` has none (the pending hook belongs to another plugin)."""
    unknown = [
        hook
        for hook, _, opts in _implementations(pm, module)
        if hook not in known and not opts.get("optionalhook")
    ]
    if not unknown:
        return None
    hook = unknown[0]
    near = difflib.get_close_matches(hook, known, n=1)
    hint = f"did you mean {near[0]}?" if near else "tickgate.host.hookspecs lists the hooks"
    more = f" (and {', '.join(unknown[1:])})" if unknown[1:] else ""
    return one_line(f"{label} implements unknown hook {hook}{more}: {hint}")
