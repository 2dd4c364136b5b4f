"""What a plan's configurations cost, and which cost is compared (docs/plan.md, "Cost").

``--cost gpus`` (the default) compares GPU counts, which only means something when every
configuration has GPUs of one kind: a plan whose configurations mix kinds is refused before
anything runs (an H200 and an H100 are one GPU each, and not the same money). ``--cost usd``
compares dollars per hour, GPUs x the price of their kind (:mod:`tickgate.cost.prices`), across
GPU kinds, tensor-parallel sizes and replica counts alike.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..cost.prices import PriceTable, Resolver
from ..cost.shape import gpus, pool_shapes
from ..util.errors import TickgateError
from .spec import PlanError, Vary

__all__ = ["COSTS", "check_costs", "entry_cost", "sort_key"]

#: what ``--cost`` compares: GPUs, or dollars per hour
COSTS = ("gpus", "usd")
_DIGITS = 6


def configurations(base: Mapping[str, Any], varies: Sequence[Vary]) -> Iterator[tuple[dict[str, Any], Any]]:
    """Every combination of the list values with each end of the range: the configurations a
    plan may replay, as far as their GPUs go (a range varies one integer between its ends)."""
    from ..sweep.spec import set_path

    lists = [v for v in varies if v.kind == "list"]
    ranged = next((v for v in varies if v.kind == "range"), None)
    ends: tuple[Any, ...] = ranged.values if ranged is not None else (None,)
    for values in itertools.product(*(v.values for v in lists)):
        for end in ends:
            params = dict(zip((v.path for v in lists), values))
            if ranged is not None:
                params[ranged.path] = end
            document = copy.deepcopy(dict(base))
            for path, value in params.items():
                set_path(document, path, copy.deepcopy(value))
            yield params, document


def check_costs(
    base: Mapping[str, Any],
    varies: Sequence[Vary],
    cost: str,
    prices: PriceTable | None,
    resolve: Resolver,
    policy_path: str,
) -> None:
    """Before anything runs: with ``--cost usd``, a price for every pool's GPU of every
    configuration; with ``--cost gpus``, one GPU kind across them all."""
    if cost == "usd" and prices is None:
        raise PlanError(
            f"--cost usd: no prices: give --prices FILE (e.g. policies/prices/cloud-2026.yaml) or a "
            f"prices: section in {policy_path}"
        )
    kinds: set[str] = set()
    for params, document in configurations(base, varies):
        for shape in pool_shapes(document):
            kinds.add(_kind(shape.gpu, resolve))
            if cost == "usd":
                assert prices is not None
                prices.price(shape.gpu, _where(shape.pool, params))
    if cost == "gpus" and len(kinds) > 1:
        how = (
            "plan with --cost usd (the prices are there)"
            if prices is not None
            else "plan with --cost usd and --prices FILE (e.g. policies/prices/cloud-2026.yaml)"
        )
        raise PlanError(
            f"--cost gpus: the configurations mix GPU kinds ({', '.join(sorted(kinds))}) and a GPU "
            f"count does not compare across kinds; {how}"
        )


def entry_cost(
    document: Mapping[str, Any], prices: PriceTable | None, latency: Mapping[str, Any] | None
) -> dict[str, Any]:
    """An evidence entry's ``cost``: GPUs and, with prices, USD per hour (GPUs x the price of
    their kind, summed over pools) and USD per million output tokens at the replay's output
    throughput (null without one: a failed replay, or nothing completed)."""
    out: dict[str, Any] = {"gpus": gpus(document)}
    if prices is None:
        return out
    usd_per_hour = math.fsum(
        shape.gpus * prices.price(shape.gpu, f"pool {shape.pool!r}") for shape in pool_shapes(document)
    )
    out["usd_per_hour"] = round(usd_per_hour, _DIGITS)
    rate = (latency or {}).get("output_tokens_per_s")
    out["usd_per_million_output_tokens"] = (
        round(usd_per_hour * 1_000_000 / (rate * 3600.0), _DIGITS) if rate else None
    )
    return out


def sort_key(cost: str) -> str:
    """The key of an entry's ``cost`` a plan minimises."""
    return "usd_per_hour" if cost == "usd" else "gpus"


def _kind(gpu: str | None, resolve: Resolver) -> str:
    if not gpu:
        return "unnamed (no timing.options.gpu)"
    try:
        return resolve(gpu)
    except TickgateError:
        return gpu


def _where(pool: str, params: Mapping[str, Any]) -> str:
    values = ", ".join(f"{k}={json.dumps(v)}" for k, v in params.items())
    return f"pool {pool!r}" + (f" with {values}" if values else "")
