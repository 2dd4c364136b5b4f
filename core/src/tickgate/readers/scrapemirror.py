"""Base class of the engines' ``/metrics`` mirrors, and the histogram figures
they share.

Every engine serves Prometheus text with its own prefix (``vllm:``,
``sglang:``, ``trtllm_`` ...): an adapter subclasses :class:`ScrapeMirror`
with that prefix and the metric families its reader maps, and gets the sniff
and the checks every scrape needs (the prefix is there, at least one mapped
family is) with the same errors for every engine. What the figures mean is
the adapter's: names, units, generations.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import BackendMirror
from ..util.errors import InputError
from .common import read_text
from .prometheus import Scrape, histogram_ms, metric_names_in, parse_text, require_families


class ScrapeMirror(BackendMirror):
    """A ``/metrics`` scrape of one engine.

    ``prefix``: what starts the engine's metric names (sniffed in the head);
    ``families``: the names (without the prefix) its reader maps, of which a
    scrape needs one; ``expected``: what the error for a scrape without the
    prefix says was expected (None: it says nothing more).
    """

    prefix: ClassVar[str] = ""
    families: ClassVar[tuple[str, ...]] = ()
    expected: ClassVar[str | None] = None

    def sniff(self, path: Path, head: bytes) -> bool:
        return metric_names_in(head, [self.prefix])

    def scrape(self, path: Path) -> Scrape:
        """The parsed scrape, refused when it holds nothing this mirror maps."""
        s = parse_text(read_text(path), path)
        if not any(n.startswith(self.prefix) for n in s.names()):
            expected = f" (expected {self.expected})" if self.expected else ""
            raise InputError(path, f"no {self.prefix} metrics found{expected}")
        require_families(s, path, self.name, self.prefix, self.families)
        return s


def histogram_figures(
    s: Scrape,
    prefix: str,
    histograms: Mapping[str, str],
    agg: dict[str, Any],
    extra: dict[str, Any],
    notes: list[str],
) -> None:
    """Each seconds histogram of ``histograms`` (name without the prefix ->
    aggregate) as percentiles in ms into ``agg``. The first histogram with
    figures for an aggregate wins (one release's name, then another's); the
    TTFT histogram's observation count goes to ``extra`` as ``ttft_observations``.
    """
    for name, target in histograms.items():
        if target in agg:
            continue
        h = s.histogram(prefix + name)
        if h is None:
            continue
        pct = histogram_ms(h, prefix + name, notes)
        if pct:
            agg[target] = pct
        if target == "ttft_ms" and h.count is not None:
            extra["ttft_observations"] = h.count
