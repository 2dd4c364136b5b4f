"""A workload file that cannot be read twice (a pipe, ``<(zcat w.json.gz)``, a
FIFO), read once as it streams: :func:`read_once` is what
:func:`tickgate.workload.format.read_workload` does for anything but a regular file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..interfaces.model import Request
from ..util.errors import InputError
from ..util.jsonstream import JsonStream, json_key
from ..util.locations import Locations, open_binary
from .format import Workload, _header_from, _members, _requests_at

#: header members that change a replay or its report: read once, a file gives them before its requests
_BEFORE_REQUESTS = ("block_size", "description", "max_concurrency")


def read_once(path: Path) -> Workload:
    """A workload that cannot be read twice (a pipe), read once through one
    handle: the members before ``requests`` are its header, the requests stream
    from where they are, and members after them are checked at the end: the
    ``version`` and ``source`` of a ``sort_keys`` layout are taken, a member that
    would have changed the replay is an error (it came too late to apply). A
    prefetching child (:mod:`tickgate.workload.prefetch`) inherits the handle and
    reads on where this process stopped."""
    fh = open_binary(path, "a workload file")
    try:
        s = JsonStream(fh, path)
        members = _members(s, path)
        header: dict[str, Any] = {}
        locations: Locations = {"$": (1, 1)}
        for name in members:
            member = f"$.{json_key(name)}"
            locations[member] = s.where(s.pos)
            if name == "requests":
                header[name] = []
                break
            header[name] = s.value(member)
        checked = _header_from(header, path, locations, complete="requests" not in header)
    except BaseException:
        fh.close()
        raise
    return Workload(checked, _stream_rest(fh, s, members, header, locations), str(path))


def _stream_rest(
    fh: Any, s: JsonStream, members: Iterator[str], header: dict[str, Any], locations: Locations
) -> Iterator[Request]:
    """The requests of :func:`read_once`'s stream ``s`` (at the ``requests``
    member of ``members``), then the members after them, checked."""
    path = s.path
    with fh:
        yield from _requests_at(s, path)
        for name in members:
            member = f"$.{json_key(name)}"
            locations[member] = where = s.where(s.pos)
            if name in _BEFORE_REQUESTS:
                raise InputError(
                    path,
                    f"{name} comes after the requests, too late to apply: a workload that is "
                    "not a regular file (a pipe) is read once, so give it before the requests",
                    line=where[0],
                    column=where[1],
                    json_path=member,
                )
            header[name] = s.value(member)
        _header_from(header, path, locations)
