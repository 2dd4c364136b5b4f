"""Join baseline and candidate by request_id into a :class:`Comparison`.

Pairs are ordered by request_id, not by file order, so the same traffic
written in another order gives the same report (the bootstrap resamples pair
positions). The join is one dict lookup per candidate request: linear.
"""

from __future__ import annotations

import math
from array import array
from typing import Iterable

import attrs

from .observations import NO_STREAM, Side
from .stats import derive_seed


@attrs.define
class Comparison:
    """Joined observations handed to every gate signal.

    ``pairs_b[p]``/``pairs_c[p]`` are the baseline and candidate rows of pair
    ``p``. ``per_request`` is False when either side has only run aggregates
    (then there are no pairs and signals compare ``baseline.aggregates`` with
    ``candidate.aggregates``).
    """

    baseline: Side
    candidate: Side
    pairs_b: array  # type: ignore[type-arg]
    pairs_c: array  # type: ignore[type-arg]
    baseline_only: list[str]
    candidate_only: list[str]
    seed: int = 0
    _segment_cache: dict[str, list[str | None]] = attrs.field(factory=dict)
    _ok_cache: list[int] | None = None

    @property
    def per_request(self) -> bool:
        return self.baseline.has_requests and self.candidate.has_requests

    @property
    def matched(self) -> int:
        return len(self.pairs_b)

    def seed_for(self, label: str) -> int:
        return derive_seed(self.seed, label)

    def pair_id(self, pair: int) -> str:
        return self.candidate.ids[self.pairs_c[pair]]

    def ok_pairs(self) -> list[int]:
        """Pairs where neither side reported an error (latency of a failed
        request says nothing about speed; the error-rate signal judges those)."""
        if self._ok_cache is None:
            be, ce = self.baseline.errors, self.candidate.errors
            pb, pc = self.pairs_b, self.pairs_c
            self._ok_cache = [p for p in range(len(pb)) if not be[pb[p]] and not ce[pc[p]]]
        return self._ok_cache

    def paired(self, column: str, pairs: Iterable[int]) -> tuple[list[int], list[float], list[float], list[int]]:
        """(pairs used, baseline values, candidate values, pairs missing a value)."""
        bcol, ccol = self.baseline.num[column], self.candidate.num[column]
        pb, pc = self.pairs_b, self.pairs_c
        used: list[int] = []
        bv: list[float] = []
        cv: list[float] = []
        missing: list[int] = []
        isnan = math.isnan
        for p in pairs:
            b = bcol[pb[p]]
            c = ccol[pc[p]]
            if isnan(b) or isnan(c):
                missing.append(p)
            else:
                used.append(p)
                bv.append(b)
                cv.append(c)
        return used, bv, cv, missing

    def segment_keys(self) -> list[str]:
        keys = dict.fromkeys(self.baseline.segment_keys())
        keys.update(dict.fromkeys(self.candidate.segment_keys()))
        return list(keys)

    def segment_values(self, key: str) -> list[str | None]:
        """The pair's value of a segment key: the candidate's, else the baseline's."""
        cached = self._segment_cache.get(key)
        if cached is not None:
            return cached
        ccat = self.candidate.cats.get(key)
        bcat = self.baseline.cats.get(key)
        cvals = ccat.values if ccat else []
        bvals = bcat.values if bcat else []
        ccodes = ccat.codes if ccat else None
        bcodes = bcat.codes if bcat else None
        out: list[str | None] = []
        for p in range(len(self.pairs_b)):
            code = ccodes[self.pairs_c[p]] if ccodes is not None else -1
            if code >= 0:
                out.append(cvals[code])
                continue
            code = bcodes[self.pairs_b[p]] if bcodes is not None else -1
            out.append(bvals[code] if code >= 0 else None)
        self._segment_cache[key] = out
        return out

    def has_streaming(self, side: Side, row: int) -> bool:
        return side.streaming[row] != NO_STREAM


def join(baseline: Side, candidate: Side, seed: int = 0) -> Comparison:
    """Match requests by id; count and list the unmatched on either side."""
    bindex = baseline.index
    cids = candidate.ids
    pairs_b = array("q")
    pairs_c = array("q")
    candidate_only: list[str] = []
    for row in sorted(range(len(cids)), key=cids.__getitem__):
        b = bindex.get(cids[row])
        if b is None:
            candidate_only.append(cids[row])
        else:
            pairs_b.append(b)
            pairs_c.append(row)
    cindex = candidate.index
    baseline_only = sorted(rid for rid in baseline.ids if rid not in cindex)
    return Comparison(baseline, candidate, pairs_b, pairs_c, baseline_only, candidate_only, seed)
