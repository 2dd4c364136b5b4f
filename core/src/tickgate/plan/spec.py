"""What ``tickgate plan`` is asked: SLOs (``--slo NAME=MS``, ``--goodput G``),
the varied policy paths (``--vary PATH=LO..HI`` or ``--vary PATH=A,B,C``); what a
configuration costs is :mod:`tickgate.cost.shape`'s (GPUs) and :mod:`.pricing`'s (dollars). Every mistake is one line naming the option
as written (exit status 2), found before anything runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..cost.shape import gpus
from ..util.errors import TickgateError

__all__ = [
    "METRICS",
    "STATS",
    "PlanError",
    "Slo",
    "Vary",
    "check_goodput",
    "check_varies",
    "gpus",
    "parse_slos",
    "parse_vary",
]

#: the report's ``latency`` blocks an SLO may name, and their statistics (docs/report.md)
METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = ("p50", "p90", "p95", "p99", "mean", "max")
#: metrics a request has on its own (its outcome): what --goodput counts against
PER_REQUEST = ("ttft", "tpot", "e2e")
_SLO = re.compile(r"^({})_({})_ms$".format("|".join(METRICS), "|".join(STATS)))
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


class PlanError(TickgateError):
    """A bad option of ``tickgate plan``: one line, exit status 2."""


@attrs.frozen
class Slo:
    #: as given, e.g. ``ttft_p99_ms``
    name: str
    metric: str
    stat: str
    limit: float

    def measure(self, latency: Mapping[str, Any] | None) -> float | None:
        """The replay's figure: ``latency.<metric>_ms.<stat>`` (None: no completed request)."""
        block = (latency or {}).get(f"{self.metric}_ms")
        return None if not block else block.get(self.stat)


@attrs.frozen
class Vary:
    path: str
    #: ``range`` (``lo..hi``, searched by bisection) or ``list`` (each value replayed)
    kind: str
    values: tuple[Any, ...]
    #: as given on the command line (after ``PATH=``)
    spec: str

    @property
    def option(self) -> str:
        return f"--vary {self.path}={self.spec}"

    def as_json(self) -> Any:
        if self.kind == "range":
            return {"range": [self.values[0], self.values[-1]]}
        return list(self.values)


def parse_slos(texts: Sequence[str]) -> tuple[Slo, ...]:
    slos: dict[str, Slo] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise PlanError(f"--slo {text}: expected NAME=MILLISECONDS, e.g. ttft_p99_ms=2000")
        match = _SLO.match(name)
        if match is None:
            raise PlanError(
                f"--slo {text}: unknown SLO {name!r}; expected <metric>_<stat>_ms with metric "
                "one of "
                f"{', '.join(METRICS)} and stat one of {', '.join(STATS)} (e.g. ttft_p99_ms)"
            )
        limit = _number(value)
        if limit is None or limit <= 0:
            raise PlanError(
                f"--slo {text}: the limit must be a positive number of milliseconds, not {value!r}"
            )
        if name in slos:
            raise PlanError(f"--slo {text}: {name} is given twice")
        slos[name] = Slo(name, match.group(1), match.group(2), limit)
    return tuple(slos.values())


def check_goodput(goodput: float | None, slos: Sequence[Slo]) -> dict[str, float] | None:
    """The per-request limits --goodput counts against: for each of TTFT, TPOT and
    end-to-end latency the loosest limit given for it (a p50 and a p99 limit on
    TTFT: a request meets TTFT within the p99's); None without --goodput."""
    if goodput is None:
        return None
    if not (0 < goodput <= 1):
        raise PlanError(f"--goodput {goodput}: expected a fraction of the requests, 0 < G <= 1 (e.g. 0.99)")
    limits: dict[str, float] = {}
    for slo in slos:
        if slo.metric in PER_REQUEST:
            limits[slo.metric] = max(limits.get(slo.metric, 0.0), slo.limit)
    if not limits:
        raise PlanError(
            f"--goodput {goodput}: needs a per-request SLO (--slo on {', '.join(PER_REQUEST)}); "
            "inter-token gaps are not known per request"
        )
    return limits


def parse_vary(text: str) -> Vary:
    path, sep, spec = text.partition("=")
    path = path.strip()
    if not sep or not path or not spec.strip():
        raise PlanError(
            f"--vary {text}: expected PATH=LO..HI (integers, searched) or PATH=A,B,C (each replayed)"
        )
    if any(not part for part in path.split(".")):
        raise PlanError(
            f"--vary {text}: {path!r} is not a dotted policy path (e.g. scheduler.options.max_num_seqs)"
        )
    if ".." in spec:
        match = _RANGE.match(spec)
        if match is None:
            raise PlanError(f"--vary {text}: a range is LO..HI with integer ends, e.g. 1..32")
        lo, hi = int(match.group(1)), int(match.group(2))
        if lo > hi:
            raise PlanError(f"--vary {text}: the range is empty ({lo} > {hi})")
        return Vary(path, "range", (lo, hi), spec)
    if any(item.strip() == "" for item in spec.split(",")):
        raise PlanError(f"--vary {text}: an empty value in the list")
    values = tuple(_scalar(item.strip()) for item in spec.split(","))
    seen: list[Any] = []
    for value in values:
        if any(type(value) is type(old) and value == old for old in seen):
            raise PlanError(f"--vary {text}: {value!r} is listed twice")
        seen.append(value)
    return Vary(path, "list", values, spec)


def check_varies(varies: Sequence[Vary], base: Mapping[str, Any], policy_path: str) -> None:
    """Paths the base policy has, each varied once, at most one range, on an integer."""
    from ..sweep.spec import get_path, path_problem

    seen = set()
    for vary in varies:
        if vary.path in seen:
            raise PlanError(f"{vary.option}: {vary.path} is varied twice")
        seen.add(vary.path)
        problem = path_problem(base, vary.path, policy_path)
        if problem is not None:
            raise PlanError(f"{vary.option}: {problem}")
        current = get_path(base, vary.path)
        if vary.kind == "range" and (type(current) is not int):
            raise PlanError(
                f"{vary.option}: a range varies an integer setting, and {vary.path} is "
                f"{current!r} in {policy_path}; list the values instead (PATH=A,B,C)"
            )
    ranges = [v for v in varies if v.kind == "range"]
    if len(ranges) > 1:
        raise PlanError(
            f"{ranges[1].option}: only one --vary may be a range (searched by bisection for each "
            f"combination of the others); list the values of {ranges[1].path} (PATH=A,B,C)"
        )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _scalar(text: str) -> Any:
    """A list value as YAML would read it: an integer, a number, true/false/null, or a string."""
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    number = _number(text)
    if number is not None and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        return number
    return text
