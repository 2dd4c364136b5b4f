"""Plugins that return invalid data are named, with their distribution."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from tickgate import LinearTiming
from tickgate.util.errors import PluginError, ReplayError
from tickgate.host.hookspecs import hookimpl
from tickgate.interfaces import AdmissionPolicy, Horizon, WorkloadReader
from tickgate.interfaces.model import Request, TickRecord
from tickgate.host.registry import get_registry
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests

from conftest import POLICIES

REQUESTS = [Request(id="a", prompt_tokens=16, max_output_tokens=2), Request(id="b", prompt_tokens=16, max_output_tokens=2)]


def register(kind_hook: str, obj: Any) -> None:
    module = types.ModuleType(f"bad_{obj.name}")
    setattr(module, kind_hook, hookimpl(lambda register: register(obj)))
    get_registry().register_module(module, distribution="bad-dist", version="6.6")


def policy_with(tmp_path: Path, scheduler: str | None = None, admission: str | None = None) -> Any:
    text = (POLICIES / "default.yaml").read_text()
    if admission:
        text = text.replace("name: priority-fcfs", f"name: {admission}")
    if scheduler:
        text = f"version: 1\nscheduler:\n  name: {scheduler}\n"
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return load_policy(path)


class _Base:
    options_schema = {"type": "object"}

    @classmethod
    def build(cls, options: Any, ctx: Any) -> Any:
        obj = cls()
        obj.clock = ctx.clock
        return obj

    def add(self, request: Request) -> None:
        self.left = getattr(self, "left", 0) + 1

    def has_work(self) -> bool:
        return getattr(self, "left", 0) > 0

    def pop_outcomes(self) -> list:
        return []

    def kv_capacity_pages(self) -> int:
        return 1

    def kv_used_pages(self) -> int:
        return 0

    def decode_slots_per_tick(self) -> int:
        return 1

    def extra_summary(self) -> dict:
        return {}


@pytest.mark.parametrize(("name", "bad", "message"), [
    ("returns-dict", lambda self, h: {"tick": self.clock.tick}, "returned dict instead of a TickRecord"),
    ("wrong-tick", lambda self, h: TickRecord(tick=self.clock.tick + 5), "returned a record for tick 5"),
    ("zero-span", lambda self, h: TickRecord(tick=self.clock.tick, span=0), "(span 0)"),
    ("raises", lambda self, h: {}["missing"], 'scheduler "raises" from bad-dist 6.6 failed at step 0: KeyError'),
])
def test_scheduler_returning_garbage(tmp_path: Path, name: str, bad: Any, message: str) -> None:
    cls = type(name.title().replace("-", ""), (_Base,), {"name": name, "step": bad})
    register("register_schedulers", cls)
    with pytest.raises(PluginError) as exc:
        replay(REQUESTS, policy_with(tmp_path, scheduler=name))
    assert message in str(exc.value)


def test_admission_policy_yielding_garbage(tmp_path: Path) -> None:
    class Garbage(AdmissionPolicy):
        name = "garbage"

        def __init__(self) -> None:
            self.n = 0

        @classmethod
        def build(cls, options: Any, ctx: Any) -> "Garbage":
            return cls()

        def enqueue(self, request: Request, tick: int) -> None:
            self.n += 1

        def candidates(self, tick: int):  # type: ignore[no-untyped-def]
            yield {"id": "not-a-request"}

        def __len__(self) -> int:
            return self.n

    register("register_admission_policies", Garbage)
    with pytest.raises(PluginError, match=r'admission "garbage" from bad-dist 6.6 offered dict as a candidate'):
        replay(REQUESTS, policy_with(tmp_path, admission="garbage"))


@pytest.mark.parametrize(("name", "rows", "message"), [
    ("yields-dicts", lambda path, opts: iter([{"id": "x"}]), 'workload reader "yields-dicts" from bad-dist 6.6 yielded dict'),
    ("explodes", lambda path, opts: (1 / 0 for _ in range(1)), 'workload reader "explodes" from bad-dist 6.6 failed: ZeroDivisionError'),
])
def test_workload_reader_returning_garbage(tmp_path: Path, name: str, rows: Any, message: str) -> None:
    cls = type(name.title().replace("-", ""), (WorkloadReader,), {"name": name, "read": lambda self, p, o: rows(p, o)})
    register("register_workload_readers", cls)
    trace = tmp_path / "t.txt"
    trace.write_text("x\n")
    stream, _ = open_requests(trace, name)
    with pytest.raises(PluginError, match=message):
        list(stream)


def test_a_stall_with_timed_arrivals_pending_is_still_caught(tmp_path: Path) -> None:
    """Arrivals in ms keep coming, but nothing can ever run: stop, do not loop to the tick limit."""
    class Stuck(_Base):
        name = "stuck"

        def step(self, horizon: Horizon) -> TickRecord:
            return TickRecord(tick=self.clock.tick, queued=self.left, duration_ms=1.0)

    register("register_schedulers", Stuck)
    policy = policy_with(tmp_path, scheduler="stuck")
    policy = type(policy)(policy.path, policy.data, policy.locations, policy.selections,
                          LinearTiming(fixed_ms=1.0), policy.max_ticks)
    requests = [Request(id=f"r{i}", prompt_tokens=1, max_output_tokens=1, arrival_ms=float(i * 10**6))
                for i in range(3)]
    with pytest.raises(ReplayError, match="no progress for 100000 steps"):
        replay(requests, policy)
