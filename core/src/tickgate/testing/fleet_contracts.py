"""Contract tests for the plugins of a fleet: routers (kind ``router``) and autoscalers (kind
``autoscaler``). Subclass as ``TestSomething`` and set ``plugin_name``, ``options`` (and
``distribution``, ``bad_options``).

Both replay the shipped default policy (seed scheduler) with a linear timing model and the kit's
workload with its arrivals in ms, as a fleet: :class:`RouterContract` three replicas behind the
router, :class:`AutoscalerContract` one replica to start behind a least-loaded router, scaled by
the autoscaler every 10 ms. Every inherited test goes through ``load_policy`` and ``replay``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..interfaces.autoscaling import AutoscalerContext, PoolSignals, ScaleDecision
from ..interfaces.model import Request
from ..util.errors import InputError
from ..util.schemas import data_file
from .contracts import PluginContract
from .support import across_hash_seeds, canonical, contract_workload, fresh_registry, write_json

__all__ = ["AutoscalerContract", "RouterContract", "run_fleet_policy"]

#: the timing of every fleet contract: a fleet runs on a clock in ms
LINEAR = {"fixed_ms": 5.0, "per_prefill_token_ms": 0.01, "per_decode_seq_ms": 0.1}


class FleetPluginContract(PluginContract):
    """What a router's and an autoscaler's contracts share: the fleet they replay, the workload,
    and bad options located under ``cluster.<kind>.options``."""

    options: ClassVar[Mapping[str, Any]] = {}

    def cluster(self) -> dict[str, Any]:
        raise NotImplementedError

    def policy_document(self) -> dict[str, Any]:
        from ..util.locations import load_yaml

        doc, _ = load_yaml(Path(data_file("policies", "default.yaml")))
        doc = dict(doc)
        doc["timing"] = dict(LINEAR)
        doc["cluster"] = self.cluster()
        return doc

    def workload_path(self, tmp_path: Path) -> Path:
        doc = contract_workload()
        for r in doc["requests"]:
            r["arrival_ms"] = 7.5 * r.pop("arrival_tick")
        return write_json(tmp_path / "contract-workload-ms.json", doc)

    def test_bad_options_are_located_errors(self, tmp_path: Path) -> None:
        for bad in self.bad_options:
            doc = self.policy_document()
            doc["cluster"][self.kind]["options"] = bad
            path = write_json(tmp_path / "contract-policy.yaml", doc)
            fresh_registry()
            with pytest.raises(InputError) as caught:
                run_fleet_policy(path, self.workload_path(tmp_path))
            err = caught.value
            assert err.path == str(path) and err.line is not None
            assert (err.json_path or "").startswith(f"$.cluster.{self.kind}"), err


class _View:
    """A replica as a router sees it (:class:`tickgate.interfaces.routing.ReplicaView`), with fixed figures."""

    def __init__(self, position: int, in_flight: int, running: int, cached: int) -> None:
        self.position = position
        self.name = f"replica-{position}"
        self.pool = "default"
        self.in_flight = in_flight
        self.routed = in_flight
        self.running = running
        self.prefilled_tokens = 0
        self._cached = cached

    @property
    def waiting(self) -> int:
        return self.in_flight - self.running

    def kv_used_pages(self) -> int:
        return 10 * self.in_flight

    def kv_capacity_pages(self) -> int:
        return 1000

    def cached_prefix_tokens(self, request: Request) -> int:
        return min(self._cached, request.prompt_tokens)


class RouterContract(FleetPluginContract):
    """Set ``plugin_name`` and ``options``; the fleet is the shipped default policy
    (seed scheduler) with a timing model and ``cluster: {replicas: 3, router: ...}``,
    the kit's workload with its arrivals in ms."""

    kind = "router"

    def cluster(self) -> dict[str, Any]:
        return {"replicas": 3, "router": {"name": self.plugin_name, "options": dict(self.options)}}

    def test_every_route_is_a_position_of_the_pool(self) -> None:
        from ..interfaces.routing import RouterContext

        info = self.info()
        for replicas in (1, 2, 5):
            router = info.obj.build(
                dict(self.options), RouterContext(pool="default", replicas=replicas, seed=7)
            )
            for i in range(40):
                views = [
                    _View(
                        p,
                        (i * 7 + p * 3) % 5,
                        (i + p) % 3 if (i * 7 + p * 3) % 5 >= 2 else 0,
                        64 * ((i + p) % 4),
                    )
                    for p in range(replicas)
                ]
                request = Request(
                    id=f"r{i}",
                    prompt_tokens=200,
                    max_output_tokens=10,
                    arrival_ms=float(i),
                    prefix_blocks=(1, 2, 3),
                    tenant=f"t{i % 3}",
                )
                position = router.route(request, views)
                assert type(position) is int and 0 <= position < replicas, (replicas, i, position)

    def test_a_fleet_replay_is_deterministic(self, tmp_path: Path) -> None:
        policy = write_json(tmp_path / "contract-policy.yaml", self.policy_document())
        workload = self.workload_path(tmp_path)
        first = run_fleet_policy(policy, workload)
        assert first["fleet"]["routing"]["router"] == self.plugin_name
        assert sum(first["fleet"]["routing"]["decisions"].values()) == first["summary"]["request_count"] > 0
        assert canonical(run_fleet_policy(policy, workload)) == canonical(first)
        fingerprints = {
            json.loads(out)["summary"]["trace_fingerprint"]
            for out in across_hash_seeds("replay", str(policy), str(workload))
        }
        assert fingerprints == {first["summary"]["trace_fingerprint"]}


#: (waiting, running, arrivals in the window): a load that rises, holds and falls
LOAD = [(0, 1, 2), (4, 8, 10), (20, 16, 40), (60, 16, 80), (30, 16, 60), (5, 10, 20), (0, 2, 4), (0, 0, 0)]


class AutoscalerContract(FleetPluginContract):
    kind = "autoscaler"

    def cluster(self) -> dict[str, Any]:
        return {
            "replicas": 1,
            "router": {"name": "least-loaded"},
            "autoscaler": {
                "name": self.plugin_name,
                "options": dict(self.options),
                "interval_s": 0.01,
                "window_s": 0.05,
                "max_replicas": 4,
            },
            "lifecycle": {"provisioning_s": 0.02},
        }

    def _decisions(self) -> list[ScaleDecision]:
        from ..timing.linear import LinearTiming

        ctx = AutoscalerContext(
            pool="default",
            role="mixed",
            min_replicas=1,
            max_replicas=8,
            interval_ms=15_000.0,
            window_ms=60_000.0,
            startup_ms=30_000.0,
            timing=LinearTiming.build(
                {"fixed_ms": 5.0, "per_prefill_token_ms": 0.01, "per_decode_seq_ms": 0.1}
            ),
            scheduler_options={"max_num_seqs": 16},
            seed=7,
        )
        scaler = self.info().obj.build(dict(self.options), ctx)
        out, replicas = [], 1
        for i, (waiting, running, arrivals) in enumerate(LOAD * 2):
            signals = PoolSignals(
                pool="default",
                role="mixed",
                now_ms=15_000.0 * (i + 4),
                window_ms=60_000.0,
                ready=replicas,
                starting=0,
                draining=0,
                waiting=waiting,
                running=running,
                kv_usage=min(1.0, running / 16),
                arrivals=arrivals,
                arrival_rate=arrivals / 60.0,
                mean_prompt_tokens=512.0 if arrivals else 0.0,
                mean_output_tokens=64.0 if arrivals else 0.0,
                ttft_ms={
                    "p50": 40.0 + waiting,
                    "p90": 60.0 + 2 * waiting,
                    "p95": 70.0 + 3 * waiting,
                    "p99": 90.0 + 4 * waiting,
                },
                itl_ms={"p50": 5.0, "p90": 6.0, "p95": 7.0, "p99": 9.0},
            )
            decision = scaler.decide(signals)
            assert isinstance(decision, ScaleDecision), decision
            assert type(decision.replicas) is int and decision.replicas >= 0, decision
            assert isinstance(decision.reason, str) and decision.reason, decision
            out.append(decision)
            replicas = min(max(decision.replicas, 1), 8)
        return out

    def test_decisions_are_counts_and_repeat(self) -> None:
        assert self._decisions() == self._decisions()

    def test_a_scaled_fleet_replay_is_deterministic(self, tmp_path: Path) -> None:
        policy = write_json(tmp_path / "contract-policy.yaml", self.policy_document())
        workload = self.workload_path(tmp_path)
        first = run_fleet_policy(policy, workload)
        scaling = first["autoscaling"]
        assert scaling["name"] == self.plugin_name and scaling["timeline"]
        summary = first["summary"]
        assert summary["completed_requests"] + first["requests"]["rejected"] == summary["request_count"]
        assert canonical(run_fleet_policy(policy, workload)) == canonical(first)
        reports = [json.loads(out) for out in across_hash_seeds("replay", str(policy), str(workload))]
        assert {r["summary"]["trace_fingerprint"] for r in reports} == {first["summary"]["trace_fingerprint"]}
        assert all(r["autoscaling"]["events"] == scaling["events"] for r in reports)


def run_fleet_policy(policy_path: Path, workload: Path) -> dict[str, Any]:
    from ..host.policy import load_policy
    from ..simulate import replay
    from ..workload.sources import open_requests

    fresh_registry()
    requests, inputs = open_requests(workload)
    return replay(requests, load_policy(policy_path), inputs=inputs)
