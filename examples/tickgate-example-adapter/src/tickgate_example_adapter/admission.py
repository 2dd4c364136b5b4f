"""``shortest-prompt-aging``: shortest prompt first, with aging so long prompts
cannot starve.

Shortest-prompt-first keeps the prefill budget busy with cheap requests and
cuts mean time to first token; on its own it starves long prompts under
steady load. Aging fixes that: every tick a request waits takes
``aging_tokens_per_tick`` tokens off its effective length, so any request
eventually sorts first. Ties fall to priority, then arrival, then id, so the
order is deterministic. ``max_prompt_tokens`` refuses longer prompts on arrival
with a reason (a rejected outcome, never a silent drop).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from tickgate import AdmissionContext, AdmissionPolicy, Request

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "aging_tokens_per_tick": {
            "type": "integer", "minimum": 0, "maximum": 1_000_000, "default": 16,
            "description": "Tokens taken off a waiting request's effective prompt length per tick waited.",
        },
        "max_prompt_tokens": {
            "type": "integer", "minimum": 1, "maximum": 10_000_000,
            "description": "Refuse prompts longer than this on arrival (default: no limit).",
        },
    },
}


class ShortestPromptAging(AdmissionPolicy):
    name = "shortest-prompt-aging"
    description = "Shortest prompt first; waiting requests age so long prompts cannot starve."
    options_schema = OPTIONS_SCHEMA

    def __init__(self, aging: int, max_prompt: int | None) -> None:
        self.aging = aging
        self.max_prompt = max_prompt
        #: id -> (request, tick it was queued)
        self._queue: dict[str, tuple[Request, int]] = {}

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> "ShortestPromptAging":
        return cls(int(options.get("aging_tokens_per_tick", 16)), options.get("max_prompt_tokens"))

    def enqueue(self, request: Request, tick: int) -> str | None:
        if self.max_prompt is not None and request.prompt_tokens > self.max_prompt:
            return f"prompt of {request.prompt_tokens} tokens over max_prompt_tokens {self.max_prompt}"
        self._queue[request.id] = (request, tick)
        return None

    def _key(self, item: tuple[Request, int], tick: int) -> tuple[int, int, float, str]:
        request, queued = item
        effective = max(0, request.prompt_tokens - self.aging * (tick - queued))
        arrival = request.arrival_ms if request.arrival_ms is not None else float(request.arrival_tick)
        return effective, request.priority, arrival, request.id

    def candidates(self, tick: int) -> Iterator[Request]:
        # The order depends on the tick (aging), so it is computed per walk; the
        # scheduler walks only when something changed, so this stays cheap.
        for item in sorted(self._queue.values(), key=lambda item: self._key(item, tick)):
            if item[0].id in self._queue:
                yield item[0]

    def admitted(self, request: Request, tick: int) -> None:
        del self._queue[request.id]

    def __len__(self) -> int:
        return len(self._queue)
