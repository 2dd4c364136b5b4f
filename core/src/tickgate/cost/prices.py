"""Price tables: USD per GPU-hour by GPU kind (``schemas/prices.schema.json``).

A table is a file (``--prices FILE``, YAML or JSON) or a policy's top-level ``prices:`` section,
the same format either way. When both are there the file wins (it is the more specific choice,
made for this run) and the report's ``cost.prices.origin`` says which was used.

GPU names are matched as the timing model matches them, through the GPU catalogue's keys and
aliases (``H100``, ``h100_sxm`` and ``H100-SXM-80GB`` are one GPU): the table is keyed by the
catalogue key its names resolve to. The resolver comes from the caller
(:func:`tickgate.timing.gpus.gpu_key`): the catalogue lives in a layer above this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError, TickgateError
from ..util.locations import Locations, json_path, load_yaml
from ..util.schemas import load_schema, validate

__all__ = ["PriceTable", "Resolver", "load_prices", "policy_prices", "select_prices"]

#: a GPU name -> its catalogue key; raises a :class:`TickgateError` for a name it does not know
Resolver = Callable[[str], str]


@attrs.frozen
class PriceTable:
    #: catalogue key -> USD per GPU-hour
    prices: Mapping[str, float]
    #: catalogue key -> the name the table gives it
    names: Mapping[str, str]
    currency: str
    date: str
    sources: tuple[str, ...]
    #: the file the table is in (a price file, or the policy)
    path: str
    #: where in that file: () for a price file, ("prices",) in a policy
    prefix: tuple[str, ...]
    locations: Locations
    resolve: Resolver = attrs.field(eq=False, repr=False)

    @property
    def origin(self) -> str:
        """As the report gives it: ``FILE``, or ``POLICY $.prices`` for a policy's section."""
        return self.path if not self.prefix else f"{self.path} {json_path(self.prefix)}"

    def key(self, gpu: str) -> str:
        """The catalogue key of ``gpu`` (a name it does not know stays as written)."""
        try:
            return self.resolve(gpu)
        except TickgateError:
            return gpu

    def price(self, gpu: str | None, where: str) -> float:
        """USD per GPU-hour of ``gpu`` (as a policy names it); ``where`` says who uses it
        (``pool 'decode'``) in the error when the table has no price for it."""
        if not gpu:
            raise TickgateError(
                f"{where} names no GPU (timing.options.gpu) to price with {self.origin}: "
                "name one (the roofline timing model's gpu)"
            )
        key = self.key(gpu)
        if key in self.prices:
            return self.prices[key]
        at = (*self.prefix, "prices")
        line, column = self.locations.get(json_path(at), (None, None))
        named = gpu if key == gpu else f"{gpu} ({key})"
        raise InputError(
            self.path,
            f"no price for GPU {named}, used by {where}; the table prices "
            f"{', '.join(sorted(self.names.values()))}",
            line=line,
            column=column,
            json_path=json_path(at),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "currency": self.currency,
            "date": self.date,
            "sources": list(self.sources),
        }


def load_prices(path: Path, resolve: Resolver) -> PriceTable:
    """A price file (YAML or JSON); errors name the file, the line and the JSON path."""
    data, locations = load_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "a price table is a mapping with currency, date and prices", line=1)
    return _table(data, locations, path, (), resolve)


def policy_prices(
    data: Mapping[str, Any], locations: Locations, path: Path | str, resolve: Resolver
) -> PriceTable | None:
    """A policy document's ``prices:`` section as a table (None without one)."""
    if "prices" not in data:
        return None
    return _table(data["prices"], locations, path, ("prices",), resolve)


def select_prices(
    prices_path: Path | None,
    policy_data: Mapping[str, Any] | None,
    locations: Locations,
    policy_path: Path | str | None,
    resolve: Resolver,
) -> PriceTable | None:
    """The table a run uses: ``--prices FILE`` when given, else the policy's ``prices:`` section,
    else None (no dollars)."""
    if prices_path is not None:
        return load_prices(prices_path, resolve)
    if policy_data is None or policy_path is None:
        return None
    return policy_prices(policy_data, locations, policy_path, resolve)


def _table(
    data: Any, locations: Locations, path: Path | str, prefix: tuple[str, ...], resolve: Resolver
) -> PriceTable:
    validate(data, load_schema("prices.schema.json"), file=path, locations=locations, prefix=prefix)
    prices: dict[str, float] = {}
    names: dict[str, str] = {}
    for name, value in data["prices"].items():
        at = (*prefix, "prices", name)
        line, column = locations.get(json_path(at), (None, None))
        try:
            key = resolve(name)
        except TickgateError as exc:
            raise InputError(path, str(exc), line=line, column=column, json_path=json_path(at)) from None
        if key in prices:
            raise InputError(
                path,
                f"{name} is {key}, already priced as {names[key]}: give each GPU one price",
                line=line,
                column=column,
                json_path=json_path(at),
            )
        prices[key] = float(value)
        names[key] = str(name)
    return PriceTable(
        prices=prices,
        names=names,
        currency=data["currency"],
        date=data["date"],
        sources=tuple(data.get("sources", ())),
        path=str(path),
        prefix=prefix,
        locations=locations,
        resolve=resolve,
    )
