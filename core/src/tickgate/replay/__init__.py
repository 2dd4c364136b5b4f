"""The replay flow: a workload (:mod:`.workload`, :mod:`.sources`) runs through a scheduler in the
engine loop (:mod:`.engine`), timed by :mod:`.timing`, into a report (:mod:`.report`,
:mod:`.serialize`); :func:`replay` (:mod:`.run`) is all of it in one call."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # lazily (PEP 562): the modules of the package import each other, and most
    # importers want one of them, not the whole flow
    if name == "replay":
        from .run import replay

        return replay
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
