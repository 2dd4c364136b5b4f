"""The ``aimd`` admission policy: adaptive concurrency, additive increase / multiplicative decrease.

An admission *window* caps how many requests may run at once. Each step with
requests waiting, the policy looks at two congestion signals:

* KV pressure: pages in use / capacity, in percent;
* queueing inside the engine: with ``active`` requests sharing
  ``decode_slots`` round-robin, each waits ``ceil(active / slots)`` steps per
  output token (the time-per-output-token a client sees).

While both stay under their thresholds and the window is what limits
admission, it grows by ``increase`` per step; when either is crossed it is
multiplied by ``decrease_factor`` (at most once per ``decrease_cooldown_ticks``,
so one congested episode is one cut, as in TCP). At ``critical_kv_pressure_pct``
admission pauses altogether. Order inside the window is priority-fcfs.

The window is written into every step's trace record (``detail.admission``:
``window``, and ``event`` when it moved), so its history is in the trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..interfaces import AdmissionContext, AdmissionPolicy
from ..interfaces.model import Request
from ..util.errors import ConfigError
from ._queue import OrderedQueue, fcfs_key

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "initial_window": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "Default 8."},
        "min_window": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "Default 1."},
        "max_window": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "Default 256."},
        "increase": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000,
            "description": "Added per uncongested step in which the window was full (default 1).",
        },
        "decrease_factor": {
            "type": "number",
            "exclusiveMinimum": 0,
            "exclusiveMaximum": 1,
            "description": "Multiplier on congestion (default 0.5).",
        },
        "decrease_cooldown_ticks": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000000000,
            "description": "Steps between two cuts (default 4).",
        },
        "kv_pressure_pct": {
            "type": "number",
            "minimum": 0,
            "maximum": 100,
            "description": "KV pressure at or above which the window shrinks (default 80).",
        },
        "critical_kv_pressure_pct": {
            "type": "number",
            "minimum": 0,
            "maximum": 100,
            "description": "KV pressure at or above which admission pauses (default 95).",
        },
        "max_ticks_per_token": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000,
            "description": "Decode queueing (steps per output token) at or above which "
            "the window shrinks (default: not used).",
        },
    },
}


class Aimd(AdmissionPolicy):
    name = "aimd"
    description = (
        "Adaptive concurrency window: additive increase, multiplicative decrease on KV pressure or queueing."
    )
    options_schema = OPTIONS_SCHEMA
    #: the window moves with every step, so the scheduler must ask every step
    dynamic = True

    def __init__(self, options: Mapping[str, Any], decode_slots: int | None) -> None:
        self.min = options.get("min_window", 1)
        self.max = options.get("max_window", 256)
        self.window = options.get("initial_window", min(8, self.max))
        if not self.min <= self.window <= self.max:
            raise ConfigError(
                f'admission "aimd": need min_window <= initial_window <= max_window, got '
                f"{self.min}, {self.window}, {self.max}"
            )
        self.increase = options.get("increase", 1)
        self.factor = float(options.get("decrease_factor", 0.5))
        self.cooldown = options.get("decrease_cooldown_ticks", 4)
        self.high = float(options.get("kv_pressure_pct", 80.0))
        self.critical = float(options.get("critical_kv_pressure_pct", 95.0))
        self.tpot = options.get("max_ticks_per_token")
        if self.tpot is not None and decode_slots is None:
            raise ConfigError(
                'admission "aimd": max_ticks_per_token needs a scheduler that reports its decode slots'
            )
        self.slots = decode_slots or 1
        self.queue = OrderedQueue()
        self.last_tick = -1
        self.last_cut = -(10**18)
        self.event: str | None = None
        self.paused = False
        self.stats = {
            "increases": 0,
            "decreases": 0,
            "paused_ticks": 0,
            "min_window": self.window,
            "max_window": self.window,
        }

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> Aimd:
        return cls(options, ctx.decode_slots)

    def enqueue(self, request: Request, tick: int) -> str | None:
        if request.id in self.queue:
            return "duplicate request id"
        self.queue.push(fcfs_key(request), request)
        return None

    def candidates(self, tick: int) -> Iterator[Request]:
        return self.queue.walk()

    def admitted(self, request: Request, tick: int) -> None:
        self.queue.remove(request)

    def limit(self, tick: int, *, kv_used: int, kv_capacity: int, active: int) -> int | None:
        if tick == self.last_tick:
            return 0 if self.paused else self.window
        self.last_tick = tick
        pressure = 100.0 * kv_used / kv_capacity if kv_capacity else 0.0
        queueing = -(-active // self.slots)
        congested = pressure >= self.high or (self.tpot is not None and queueing >= self.tpot)
        if congested or pressure >= self.critical:
            if tick - self.last_cut >= self.cooldown and self.window > self.min:
                self.window = max(self.min, int(self.window * self.factor))
                self.last_cut = tick
                self.event = "decrease"
                self.stats["decreases"] += 1
        elif active >= self.window and self.window < self.max:
            self.window = min(self.max, self.window + self.increase)
            self.event = "increase"
            self.stats["increases"] += 1
        self.stats["min_window"] = min(self.stats["min_window"], self.window)
        self.stats["max_window"] = max(self.stats["max_window"], self.window)
        self.paused = pressure >= self.critical
        if self.paused:
            self.event = "pause"
            self.stats["paused_ticks"] += 1
            return 0
        return self.window

    def trace_detail(self) -> Mapping[str, Any] | None:
        """The window after this step; ``event`` only on the step it moved (then cleared)."""
        event, self.event = self.event, None
        if event is None:
            return {"window": self.window}
        return {"window": self.window, "event": event}

    def summary(self) -> Mapping[str, Any]:
        return {"final_window": self.window, **self.stats}

    def __len__(self) -> int:
        return len(self.queue)
