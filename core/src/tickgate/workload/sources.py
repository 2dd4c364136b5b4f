"""Open a request stream from a workload file or any registered trace format."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..interfaces import optional_attribute
from ..interfaces.model import Request
from ..util.errors import InputError, PluginError, TickgateError


def open_requests(
    path: Path,
    input_format: str = "workload",
    *,
    block_size: int | None = None,
    limit: int | None = None,
    prefetch: bool = False,
) -> tuple[Iterable[Request], dict[str, Any]]:
    """Return a lazy request stream and a description of the input for reports.

    ``prefetch``: read a workload file in a forked child (:mod:`tickgate.workload.prefetch`;
    the same requests); the replay command asks for it on large files."""
    inputs: dict[str, Any] = {"workload": str(path), "format": input_format}
    if input_format == "workload":
        from .format import read_workload

        try:
            workload = read_workload(path)
        except InputError as exc:
            if not exc.message.startswith(NOT_A_WORKLOAD):
                raise
            raise InputError(
                exc.path,
                f"{exc.message} ({_format_hint()})",
                line=exc.line,
                column=exc.column,
                json_path=exc.json_path,
            ) from None
        stream: Iterable[Request] = workload.requests
        if prefetch:
            from .prefetch import prefetched

            stream = prefetched(stream)
        if workload.header.description:
            inputs["description"] = workload.header.description
        if workload.header.block_size is not None:
            inputs["block_size"] = workload.header.block_size
        if workload.header.max_concurrency is not None:
            inputs["max_concurrency"] = workload.header.max_concurrency  # replay() enforces it
    else:
        from ..host.registry import get_registry

        try:
            info = get_registry().get("workload_reader", input_format)
        except PluginError as exc:
            raise InputError(path, f"{exc} (or 'workload')") from None
        options: dict[str, Any] = {}
        if block_size is not None:
            options["block_size"] = block_size
        effective = (
            block_size if block_size is not None else optional_attribute(info.obj, "default_block_size")
        )
        if effective is not None:
            inputs["block_size"] = effective
        if not path.exists():
            raise InputError(path, "file not found")
        stream = _checked(info, info.obj().read(path, options))
    if limit is not None:
        stream = itertools.islice(stream, limit)
    return stream, inputs


#: how a file that is not JSON, or not one JSON object, fails as a workload file
NOT_A_WORKLOAD = ("invalid JSON", "expected a JSON object with version and requests")


def _format_hint() -> str:
    """What a user who gave a trace without ``--input-format`` should add: the registered
    workload readers, grouped by the kind of file they read."""
    from ..host.registry import get_registry

    kinds: dict[str, list[str]] = {}
    for info in get_registry().of_kind("workload_reader"):
        kinds.setdefault(optional_attribute(info.obj, "file_kind") or "other", []).append(info.name)
    listed = ", ".join(
        f"{', '.join(names[:-1])} or {names[-1]} ({kind})" if len(names) > 1 else f"{names[0]} ({kind})"
        for kind, names in sorted(kinds.items())
    )
    return (
        "read as a tickgate workload file, the default --input-format; for a trace name its format with "
        f"--input-format: {listed or 'no trace reader is installed'}"
    )


def _checked(info: Any, stream: Iterable[Any]) -> Iterator[Request]:
    """A reader is plugin code: its failures and wrong values name it."""
    label = info.label("workload reader")
    try:
        for item in stream:
            if type(item) is not Request:
                raise PluginError(
                    f"{label} yielded {type(item).__name__}, not a tickgate.interfaces.model.Request"
                )
            yield item
    except TickgateError:
        raise
    except Exception as exc:
        raise PluginError(f"{label} failed: {type(exc).__name__}: {exc}") from exc
