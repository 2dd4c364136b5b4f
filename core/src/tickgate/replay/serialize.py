"""(Un)structuring tickgate's attrs values with cattrs.

One converter decides how values become JSON and back, so a report, a trace
and anything reading them agree on field names and layout. Fields at their
default are left out (a rejected request has no admission tick); times in ms
are rounded to the microsecond so reports do not carry float noise. Foreign
data is validated against the JSON Schemas before it is structured here.
"""

from __future__ import annotations

from typing import Any

import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ..interfaces.model import RequestOutcome

converter = cattrs.Converter()


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


converter.register_unstructure_hook(
    RequestOutcome,
    make_dict_unstructure_fn(
        RequestOutcome,
        converter,
        _cattrs_omit_if_default=True,
        arrival_ms=override(unstruct_hook=_ms),
        admitted_ms=override(unstruct_hook=_ms),
        first_token_ms=override(unstruct_hook=_ms),
        finished_ms=override(unstruct_hook=_ms),
        flags=override(unstruct_hook=list),
        # a rejection's key and figures restate its reason, which the entry carries: they
        # feed the report's rejections_by_reason / rejection_figures, not every outcome
        reason_key=override(omit=True),
        reason_figures=override(omit=True),
    ),
)
converter.register_structure_hook(
    RequestOutcome,
    make_dict_structure_fn(RequestOutcome, converter, flags=override(struct_hook=lambda v, _: tuple(v))),
)


def outcome_to_json(outcome: RequestOutcome) -> dict[str, Any]:
    """A request outcome as it appears in a report's ``outcomes`` list."""
    return converter.unstructure(outcome)


def outcome_from_json(data: dict[str, Any]) -> RequestOutcome:
    """Read back an entry of a report's ``outcomes`` list."""
    return converter.structure(data, RequestOutcome)
