"""Read a workload file in a forked child process while the parent replays it.

Reading a workload (decoding JSON, checking every request, expanding block-id
runs) is about a tenth of a large replay and does not depend on it, so on a
machine with a second core a child process reads ahead while the parent
schedules. The child sends each request's fields as a plain tuple, in batches
of ``BATCH`` requests or ``BATCH_IDS`` ids, as frames through a pipe
(:mod:`tickgate.parallel.frames`: marshal, 1 MiB); a full pipe stops it, so it
is never more than that far ahead. An input error comes back from the
:class:`~tickgate.parallel.helper.Helper` and is raised in the parent,
unchanged, once the requests before it have been handed out: exactly what
reading in-process does (a bug in the reader surfaces as an internal error
either way, its message wrapped).

The replay command uses it when :func:`tickgate.parallel.switch.helpers_wanted`
says so (big files, two cores, ``TICKGATE_PARALLEL``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any

import attrs

from ..interfaces.model import Request
from ..parallel.helper import Channel, Helper

#: requests per message, at most
BATCH = 256
#: block and token ids per message, at most (plus one request)
BATCH_IDS = 1 << 16

_FIELDS = tuple(a.name for a in attrs.fields(Request))
_fields_of = attrgetter(*_FIELDS)


def prefetched(requests: Iterable[Request]) -> Iterator[Request]:
    """The same requests, read by a forked child. ``requests`` must be a fresh,
    unstarted stream: the child consumes it, the parent must not. The child
    starts with the first request asked for, so a stream never read starts
    none."""
    with Helper(
        lambda channel: _read_ahead(requests, channel),
        role="reading the workload ahead",
        early=" before the end of the workload",
        instead="reads it in this process instead",
        doing="reading the workload",
    ) as helper:
        for batch in helper:
            for fields in batch:
                yield Request(*fields)


def _read_ahead(requests: Iterable[Request], channel: Channel) -> None:  # pragma: no cover - in the child
    batch: list[tuple[Any, ...]] = []
    ids = 0  # block and token ids in the batch: long prompts make smaller batches
    try:
        for request in requests:
            batch.append(_fields_of(request))
            if request.prefix_blocks is not None:
                ids += len(request.prefix_blocks)
            if request.prompt_token_ids is not None:
                ids += len(request.prompt_token_ids)
            if len(batch) == BATCH or ids >= BATCH_IDS:
                channel.send(batch)
                batch = []
                ids = 0
    finally:  # the requests before an error arrive before it
        if batch:
            channel.send(batch)
