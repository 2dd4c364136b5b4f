"""Join baseline and candidate by request_id into a :class:`Comparison`.

Pairs are ordered by request_id, not by file order, so the same traffic
written in another order gives the same report (the bootstrap resamples pair
positions). The join is one dict lookup per candidate request: linear.

An id says where a request sits in a client's dataset (its position, or a
conversation and turn); it does not prove both runs sent the same prompt.
Where both sides carry a ``prompt_identity`` (a hash of the prompt, or the
client's prompt token count) and the two differ, the requests are not the
same, and the runs did not send the same traffic under the same keys (another
dataset, seed or order). Then no pair is trusted: a prompt length that happens
to agree does not prove the prompt is the same, so nothing is compared, the
differing pairs are listed in ``prompt_mismatches`` and the ``matched-traffic``
signal holds naming them. Unrelated requests are never compared silently.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import itemgetter
from typing import Any, cast

import attrs

from .column_cache import ColumnMemo
from .observations import NO_STREAM, Side, ascending
from .stats import derive_seed


def gather(values: Sequence[Any], index: Sequence[int]) -> list[Any]:
    """``[values[i] for i in index]`` as one C call (itemgetter)."""
    if not index:
        return []
    if len(index) == 1:
        return [values[index[0]]]
    return list(itemgetter(*index)(values))


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
    pairs_b: array
    pairs_c: array
    baseline_only: list[str]
    candidate_only: list[str]
    seed: int = 0
    #: (request_id, baseline identity, candidate identity) of same-id pairs whose prompts differ, by id;
    #: when there are any, no pair is compared (see the module docstring)
    prompt_mismatches: list[tuple[str, str, str]] = attrs.field(factory=list)
    _segment_cache: dict[str, list[str | None]] = attrs.field(factory=dict)
    _ok_cache: list[int] | None = None
    _group_cache: dict[str, dict[str, list[int]]] = attrs.field(factory=dict)
    _aligned: dict[tuple[str, str], Any] = attrs.field(factory=dict)
    _identity: dict[str, bool] = attrs.field(factory=dict)
    _in_group: dict[tuple[str, str, str, str], Any] = attrs.field(factory=dict)
    _memo: ColumnMemo = attrs.field(factory=ColumnMemo)
    _every_pair: list[int] | None = None
    _group_masks: dict[str, dict[str, bytes | None] | None] = attrs.field(factory=dict)
    _group_sizes: dict[str, dict[str, int]] = attrs.field(factory=dict)
    _group_quantiles: dict[tuple[str, str, str, str, float], float] = attrs.field(factory=dict)

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

    def aligned(self, which: str, column: str) -> Any:
        """A column of one side in pair order (cached): ``aligned("candidate",
        "latency_ms")[p]`` is the candidate latency of pair ``p``. Numeric
        columns are ``array('d')`` (NaN = absent), ``errors`` is ``array('b')``,
        ``fingerprints`` a list. Reading aligned columns instead of gathering
        per signal keeps the random access into each side to once per column."""
        key = (which, column)
        cached = self._aligned.get(key)
        if cached is None:
            side, rows = self._side(which)
            if self._in_pair_order(which):  # files sorted by id, all matched
                source = side.num.get(column)
                cached = source if source is not None else getattr(side, column)
            elif column in side.num:
                cached = array("d", gather(side.num[column], rows))
            elif column == "errors":
                cached = array("b", gather(side.errors, rows))
            else:
                cached = gather(getattr(side, column), rows)
            self._aligned[key] = self._memo.keep(cached)
        return cached

    def _side(self, which: str) -> tuple[Side, array]:
        return (self.baseline, self.pairs_b) if which == "baseline" else (self.candidate, self.pairs_c)

    def _in_pair_order(self, which: str) -> bool:
        """Row p of the side is pair p (then its columns are used as they are)."""
        if which not in self._identity:
            side, rows = self._side(which)
            self._identity[which] = len(rows) == len(side) and rows == array("q", range(len(rows)))
        return self._identity[which]

    def _all_pairs(self) -> list[int]:
        """``list(range(matched))``, made once: every group that holds every pair shares it."""
        if self._every_pair is None:
            self._every_pair = list(range(len(self.pairs_b)))
        return self._every_pair

    def in_group(self, which: str, column: str, key: str, value: str) -> Any:
        """``aligned(which, column)`` restricted to one segment's pairs (cached:
        signals and segment summaries ask for the same groups)."""
        ck = (which, column, key, value)
        cached = self._in_group.get(ck)
        if cached is None:
            col = self.aligned(which, column)
            rows = self.groups(key)[value]
            cached = self._in_group[ck] = self._memo.keep(
                array("d", gather(col, rows))
                if isinstance(col, array) and col.typecode == "d"
                else gather(col, rows),
                within=col,
            )
        return cached

    def group_quantile(self, which: str, column: str, key: str, value: str, q: float) -> float:
        """``quantile(in_group(which, column, key, value), q)``, computed once.

        When the groups come from category codes and the column has no NaN,
        the group is a byte mask over the pairs and its quantile is read from
        the column's tail (``tails.Tail``) or, failing that, selected from the
        values the mask cuts out; the group's column is never gathered or
        kept (a million pairs' segment columns would otherwise stay in memory
        for the whole gate)."""
        ck = (which, column, key, value, q)
        cached = self._group_quantiles.get(ck)
        if cached is None:
            col = self.aligned(which, column)
            masks = self._masks(key)
            if masks is not None and not self.has_nan(col):
                mask = masks[value]
                cached = (
                    self.quantile(col, q)
                    if mask is None
                    else self._memo.selection_quantile(col, mask, self.group_sizes(key)[value], q)
                )
            else:
                cached = self.quantile(self.in_group(which, column, key, value), q)
            self._group_quantiles[ck] = cached
        return cached

    def quantile(self, values: Sequence[float], q: float) -> float:
        """The exact q-quantile of ``values`` (``stats.select_quantile``); computed
        once per column returned by :meth:`aligned` or :meth:`in_group`, so
        signals and segment summaries share it."""
        return self._memo.quantile(values, q)

    def has_nan(self, values: Sequence[float]) -> bool:
        """Whether ``values`` holds a NaN (an absent value); remembered like :meth:`quantile`."""
        return self._memo.has_nan(values)

    def ok_pairs(self) -> list[int]:
        """Pairs where neither side reported an error (latency of a failed
        request says nothing about speed; the error-rate signal judges those)."""
        if self._ok_cache is None:
            n = len(self.pairs_b)
            bflags = self.aligned("baseline", "errors")
            cflags = self.aligned("candidate", "errors")
            if not any(bflags) and not any(cflags):
                self._ok_cache = self._all_pairs()
            else:
                self._ok_cache = list(compress(range(n), [not (b or c) for b, c in zip(bflags, cflags)]))
        return self._ok_cache

    def paired(self, column: str, pairs: list[int]) -> tuple[list[int], Any, Any, list[int]]:
        """(pairs used, baseline values, candidate values, pairs missing the value on one side).

        A pair where *neither* side has the value is in neither list: evidence
        nobody recorded says nothing against either run (a one-token output has
        no inter-token gap in any run), so it is left out, not counted against
        the candidate. ``len(pairs) - len(used) - len(missing)`` such pairs."""
        ball, call = self.aligned("baseline", column), self.aligned("candidate", column)
        if len(pairs) == len(ball):  # every pair, in order
            bv, cv = ball, call
        else:
            bv, cv = array("d", gather(ball, pairs)), array("d", gather(call, pairs))
        if not self.has_nan(bv) and not self.has_nan(cv):
            return list(pairs), bv, cv, []
        # NaN is the only value unequal to itself: b != b means the baseline lacks it
        keep = [b == b and c == c for b, c in zip(bv, cv)]
        missing = [p for p, b, c in zip(pairs, bv, cv) if (b != b) is not (c != c)]
        return (
            list(compress(pairs, keep)),
            array("d", compress(bv, keep)),
            array("d", compress(cv, keep)),
            missing,
        )

    def groups(self, key: str) -> dict[str, list[int]]:
        """Pair indices per value of a segment key (pairs without a value left
        out), values in order of first appearance. The lists are shared: do not
        change them."""
        cached = self._group_cache.get(key)
        if cached is None:
            masks = self._masks(key)
            if masks is not None:
                n = len(self.pairs_b)
                cached = self._group_cache[key] = {
                    value: self._all_pairs() if mask is None else list(compress(range(n), mask))
                    for value, mask in masks.items()
                }
        if cached is None:
            cached = {}
            values = self.segment_values(key)
            distinct = [v for v in dict.fromkeys(values) if v is not None]
            if len(distinct) <= 16:  # few values: one C-level pass per value
                for value in distinct:
                    cached[value] = list(compress(range(len(values)), map(value.__eq__, values)))
            else:
                for p, v in enumerate(values):
                    if v is not None:
                        cached.setdefault(v, []).append(p)
            self._group_cache[key] = cached
        return cached

    def group_sizes(self, key: str) -> dict[str, int]:
        """Pairs per value of a segment key, in the order of :meth:`groups`
        (counted from the byte masks when there are masks: no index lists).
        Shared: do not change it."""
        sizes = self._group_sizes.get(key)
        if sizes is None:
            masks = self._masks(key)
            if masks is not None:
                n = len(self.pairs_b)
                sizes = {value: n if mask is None else mask.count(1) for value, mask in masks.items()}
            else:
                sizes = {value: len(rows) for value, rows in self.groups(key).items()}
            self._group_sizes[key] = sizes
        return sizes

    def _masks(self, key: str) -> dict[str, bytes | None] | None:
        """Per value of a segment key, a byte per pair (1: the pair has the
        value; None: every pair has it), from the candidate's category codes
        when every pair's candidate names a value (the common case): comparing
        small integers, not strings. None: not applicable (some pairs take the
        baseline's value, or more than 16 values)."""
        if key in self._group_masks:
            return self._group_masks[key]
        masks: dict[str, bytes | None] | None = None
        cat = self.candidate.cats.get(key)
        if cat is not None:
            codes = self._codes("candidate", key)
            if -1 not in codes:
                distinct = list(dict.fromkeys(codes))
                if len(distinct) == 1:
                    masks = {cat.values[distinct[0]]: None}
                elif len(distinct) <= 16 and max(distinct, default=0) < 256:
                    labels = bytes(codes.tolist())  # one byte per pair: its code
                    masks = {
                        cat.values[c]: labels.translate(bytes(c) + b"\x01" + bytes(255 - c)) for c in distinct
                    }
        self._group_masks[key] = masks
        return masks

    def _codes(self, which: str, key: str) -> array:
        """A side's category codes for ``key`` in pair order (-1: no value)."""
        side, rows = self._side(which)
        codes = side.cats[key].codes
        return codes if self._in_pair_order(which) else array("i", gather(codes, rows))

    def segment_keys(self) -> list[str]:
        keys = dict.fromkeys(self.baseline.segment_keys())
        keys.update(dict.fromkeys(self.candidate.segment_keys()))
        return list(keys)

    def segment_values(self, key: str) -> list[str | None]:
        """The pair's value of a segment key: the candidate's, else the baseline's."""
        cached = self._segment_cache.get(key)
        if cached is not None:
            return cached
        out = self._side_values("candidate", key)
        if None in out:
            fallback = self._side_values("baseline", key)
            out = [b if c is None else c for c, b in zip(out, fallback)]
        self._segment_cache[key] = out
        return out

    def _side_values(self, which: str, key: str) -> list[str | None]:
        side, rows = self._side(which)
        cat = side.cats.get(key)
        if cat is None:
            return [None] * len(rows)
        lookup = [*cat.values, None]  # code -1 -> None
        return list(map(lookup.__getitem__, self._codes(which, key)))

    def has_streaming(self, side: Side, row: int) -> bool:
        return side.streaming[row] != NO_STREAM


def join(baseline: Side, candidate: Side, seed: int = 0) -> Comparison:
    """Match requests by id; count and list the unmatched on either side.

    Observation files are usually written in id order with the same requests
    on both sides; then the pairs are (i, i) and neither the sort nor the
    lookups are needed (1M pairs: ~1.2 s -> ~0.05 s). The result is the same.
    """
    cids = candidate.ids
    if ascending(cids):  # sorting by id would change nothing
        if baseline.ids == cids and baseline.prompts == candidate.prompts:
            # same ids in the same (sorted) order, same prompts: pair i is row i on both sides
            identity = array("q", range(len(cids)))
            comparison = Comparison(baseline, candidate, identity, array("q", identity), [], [], seed)
            comparison._identity.update(baseline=True, candidate=True)  # known: no need to compare
            return comparison
        order: Sequence[int] = range(len(cids))
    else:
        order = sorted(range(len(cids)), key=cids.__getitem__)
    ordered = cids if isinstance(order, range) else gather(cids, order)
    matches = list(map(baseline.index.get, ordered))
    found = [b is not None for b in matches]
    pairs_b = array("q", cast("Iterator[int]", compress(matches, found)))  # the found: none is None
    pairs_c = array("q", compress(order, found))
    candidate_only = [cids[row] for row, f in zip(order, found) if not f] if len(pairs_b) < len(order) else []
    cindex = candidate.index
    baseline_only = (
        sorted(rid for rid in baseline.ids if rid not in cindex) if len(pairs_b) < len(baseline) else []
    )
    pairs_b, pairs_c, mismatches = _same_prompts(baseline, candidate, pairs_b, pairs_c)
    return Comparison(baseline, candidate, pairs_b, pairs_c, baseline_only, candidate_only, seed, mismatches)


def _same_prompts(
    baseline: Side,
    candidate: Side,
    pairs_b: array,
    pairs_c: array,
) -> tuple[array, array, list[tuple[str, str, str]]]:
    """The pairs, or none when any two known prompt identities differ (then
    also the differing pairs, in id order)."""
    bp, cp = gather(baseline.prompts, pairs_b), gather(candidate.prompts, pairs_c)
    if bp == cp:
        return pairs_b, pairs_c, []
    mismatches = [
        (candidate.ids[row], b, c)
        for row, b, c in zip(pairs_c, bp, cp)
        if b is not None and c is not None and b != c
    ]
    if not mismatches:
        return pairs_b, pairs_c, []
    return array("q"), array("q"), mismatches
