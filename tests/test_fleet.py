"""Fleets (issue 21): a policy's ``cluster`` section, replicas behind a router on one clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, POLICIES, TOYS

from tickgate.util.errors import InputError
from tickgate.util.locations import load_yaml
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests
from tickgate.testing.support import canonical, other_hash_seed

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
LINEAR = {"fixed_ms": 6.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.1, "per_context_token_ms": 0.0002}


def write_policy(tmp_path: Path, doc: dict[str, Any], name: str = "policy.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))
    return path


def policy_doc(base: Path, **cluster: Any) -> dict[str, Any]:
    doc, _ = load_yaml(base)
    doc = json.loads(json.dumps(doc))
    doc.pop("cluster", None)
    if cluster:
        doc["cluster"] = cluster
    return doc


def mooncake(limit: int) -> tuple[Any, dict[str, Any]]:
    return open_requests(MOONCAKE, "mooncake", limit=limit)


def run(policy: Path, limit: int = 200, keep: list[Any] | None = None) -> dict[str, Any]:
    requests, inputs = mooncake(limit)
    if keep is None:
        return replay(requests, load_policy(policy), inputs=inputs)
    from tickgate.fleet import fleet_spec, replay_fleet

    pol = load_policy(policy)
    inputs = dict(inputs, policy=pol.source or pol.path, timing=pol.timing.to_json())
    return replay_fleet(requests, pol, fleet_spec(pol), inputs=inputs, prefix_block_size=inputs["block_size"],
                        keep=keep)


# -- a one-replica fleet is the plain replay --------------------------------------------------
ENGINES = {
    "vllm-v1": (POLICIES / "vllm-v1-bench.yaml", {"num_gpu_blocks": 4096}),
    "sglang": (POLICIES / "sglang-default.yaml", {}),
    "trtllm": (POLICIES / "trtllm-max-utilization.yaml", {}),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_one_replica_fleet_makes_the_plain_replays_decisions(tmp_path: Path, engine: str) -> None:
    base, options = ENGINES[engine]
    plain_doc = policy_doc(base)
    plain_doc["scheduler"].setdefault("options", {}).update(options)
    plain = run(write_policy(tmp_path, plain_doc, "plain-policy.json"))
    keep: list[Any] = []
    fleet_doc = dict(plain_doc, cluster={"replicas": 1})
    report = run(write_policy(tmp_path, fleet_doc, "fleet.json"), keep=keep)
    _, replicas = keep
    (alone,) = replicas
    # the replica's own report is the plain replay's: its records, outcomes, figures, fingerprint
    for key in ("summary", "ticks", "outcomes", "pressure", "utilization", "requests", "latency", "scheduler"):
        assert alone.get(key) == plain.get(key), key
    assert report["fleet"]["replicas"][0]["summary"] == plain["summary"]
    assert report["latency"]["ttft_ms"] == plain["latency"]["ttft_ms"]
    assert report["latency"]["itl_ms"] == plain["latency"]["itl_ms"]
    assert report["outcomes"] == plain["outcomes"]
    assert report["summary"]["completed_requests"] == plain["summary"]["completed_requests"]


def test_a_one_replica_fleet_with_a_serial_front_end_is_the_plain_replay(tmp_path: Path) -> None:
    """The roofline model's vLLM front end delays arrivals: the fleet's replica has it too."""
    doc = policy_doc(POLICIES / "fleet-round-robin.yaml")
    plain = run(write_policy(tmp_path, doc, "plain-policy.json"), limit=150)
    assert load_policy(write_policy(tmp_path, doc, "plain-policy.json")).timing.serial_frontend
    keep: list[Any] = []
    run(write_policy(tmp_path, dict(doc, cluster={"replicas": 1}), "fleet.json"), limit=150, keep=keep)
    (alone,) = keep[1]
    for key in ("summary", "ticks", "outcomes", "latency"):
        assert alone[key] == plain[key], key


# -- routing ---------------------------------------------------------------------------------
def test_prefix_aware_routing_beats_round_robin_on_the_mooncake_trace(tmp_path: Path) -> None:
    """The done-when of issue 21: the trace shares prefixes, so sending a request where its
    prefix is cached gives more prefix-cache hits and a lower TTFT p50 (figures in docs/fleets.md)."""
    rr = run(POLICIES / "fleet-round-robin.yaml", limit=600)
    pa = run(POLICIES / "fleet-prefix-aware.yaml", limit=600)
    assert pa["fleet"]["prefix_cache_hit_rate"] > rr["fleet"]["prefix_cache_hit_rate"]
    assert pa["latency"]["ttft_ms"]["p50"] < rr["latency"]["ttft_ms"]["p50"]
    assert rr["summary"]["completed_requests"] == pa["summary"]["completed_requests"] == 600


def test_the_fleet_block(tmp_path: Path) -> None:
    report = run(POLICIES / "fleet-least-loaded.yaml", limit=120)
    fleet = report["fleet"]
    assert [r["name"] for r in fleet["replicas"]] == [f"replica-{i}" for i in range(4)]
    routed = [r["routed"] for r in fleet["replicas"]]
    assert sum(routed) == 120 == sum(fleet["routing"]["decisions"].values())
    assert list(fleet["routing"]["decisions"].values()) == routed
    assert sum(r["completed"] for r in fleet["replicas"]) == report["summary"]["completed_requests"]
    assert sum(r["summary"]["request_count"] for r in fleet["replicas"]) == 120
    assert 0.25 <= fleet["routing"]["jain_index"] <= 1.0
    assert fleet["routing"]["router"] == "least-loaded"
    # the client's view: one TTFT per completed request, whichever replica served it
    assert report["latency"]["ttft_ms"]["count"] == report["summary"]["completed_requests"]
    assert report["latency"]["busy_ms"] <= sum(r["busy_ms"] for r in fleet["replicas"]) + 1e-6
    assert report["inputs"]["cluster"]["pools"][0]["replicas"] == 4


def test_least_loaded_spreads_a_burst_evenly_and_round_robin_cycles(tmp_path: Path) -> None:
    """40 requests at once: least-loaded sees every replica's count go up as it routes (exact
    counts, ties rotating), so each gets 10; round-robin cycles in fleet order whatever the load."""
    workload = tmp_path / "burst.json"
    workload.write_text(json.dumps({"version": 1, "requests": [
        {"id": f"r{i}", "prompt_tokens": 100 + 50 * (i % 7), "max_output_tokens": 20 + i, "arrival_ms": 0.0}
        for i in range(40)]}))
    for router, expected in (("least-loaded", [10, 10, 10, 10]), ("round-robin", [10, 10, 10, 10])):
        doc = policy_doc(POLICIES / "vllm-v1-bench.yaml", replicas=4, router={"name": router})
        report = replay(*_open(workload), load_policy(write_policy(tmp_path, doc)))
        assert list(report["fleet"]["routing"]["decisions"].values()) == expected, router
    rr = run(POLICIES / "fleet-round-robin.yaml", limit=41)
    assert list(rr["fleet"]["routing"]["decisions"].values()) == [11, 10, 10, 10]
    ll = run(POLICIES / "fleet-least-loaded.yaml", limit=200)
    assert ll["fleet"]["routing"]["jain_index"] > 0.9


def _open(path: Path) -> tuple[Any, ...]:
    stream, inputs = open_requests(path)
    return (stream,)

@pytest.mark.parametrize("router", ["round-robin", "least-loaded", "power-of-two", "session-affinity",
                                    "prefix-aware"])
def test_fleet_replays_are_the_same_bytes_in_every_process(tmp_path: Path, router: str) -> None:
    from tickgate.testing.support import probe

    doc = policy_doc(POLICIES / "vllm-v1-bench.yaml", replicas=3, router={"name": router})
    policy = write_policy(tmp_path, doc)
    workload = tmp_path / "w.json"
    requests, inputs = mooncake(80)
    _write_workload(workload, requests, inputs)
    stream, header = open_requests(workload)
    here = replay(stream, load_policy(policy), inputs=header)
    there = json.loads(probe("replay", str(policy), str(workload), hash_seed=other_hash_seed()))
    assert canonical(there) == canonical(json.loads(json.dumps(here)))
    assert sum(here["fleet"]["routing"]["decisions"].values()) == 80


def _write_workload(path: Path, requests: Any, inputs: dict[str, Any]) -> None:
    rows = []
    for r in requests:
        row: dict[str, Any] = {"id": r.id, "prompt_tokens": r.prompt_tokens, "max_output_tokens": r.max_output_tokens,
                               "arrival_ms": r.arrival_ms}
        if r.prefix_blocks:
            row["prefix_blocks"] = list(r.prefix_blocks)
        if r.tenant is not None:
            row["tenant"] = r.tenant
        rows.append(row)
    path.write_text(json.dumps({"version": 1, "block_size": inputs["block_size"], "requests": rows}))


# -- data-parallel ranks --------------------------------------------------------------------
def test_data_parallel_ranks_are_balanced_and_lockstep_paces_every_rank(tmp_path: Path) -> None:
    independent = run(POLICIES / "fleet-dp.yaml", limit=300)
    names = [r["name"] for r in independent["fleet"]["replicas"]]
    assert names == [f"replica-0/dp{k}" for k in range(4)]
    routed = [r["routed"] for r in independent["fleet"]["replicas"]]
    assert sum(routed) == 300 and min(routed) > 0
    doc = policy_doc(POLICIES / "fleet-dp.yaml", replicas=1, data_parallel_size=4, lockstep=True)
    lockstep = run(write_policy(tmp_path, doc), limit=300)
    # every rank waits for the slowest at every step: no request finishes sooner on average
    assert lockstep["latency"]["e2e_ms"]["mean"] > independent["latency"]["e2e_ms"]["mean"]
    assert lockstep["summary"]["completed_requests"] == independent["summary"]["completed_requests"] == 300


# -- located errors -------------------------------------------------------------------------
BAD = [
    ({"replicas": 2, "router": {"name": "no-such-router"}}, "$.cluster.router.name", "no-such-router"),
    ({"replicas": 0}, "$.cluster.replicas", "minimum"),
    ({"replicas": 2, "pools": {"a": {"replicas": 1}}}, "$.cluster.pools", "not both"),
    ({"replicas": 2, "router": {"name": "least-loaded", "options": {"waiting_weight": -1}}},
     "$.cluster.router.options.waiting_weight", "minimum"),
    ({"pools": {"p": {"role": "prefill"}, "d": {"role": "decode"}}}, "$.cluster.pools", "transfer"),
    ({"pools": {"p": {"role": "prefill"}, "m": {}}}, "$.cluster.pools", "prefill and decode pools only"),
    ({"replicas": 2, "transfer": {"bandwidth_gb_s": 10}}, "$.cluster.transfer", "disaggregated"),
    ({"pools": {"a": {"replicas": 1}, "b": {"replicas": 2, "router": {"name": "round-robin"}}}},
     "$.cluster.pools.b.router", "one router"),
    ({"pools": {"a": {"replicas": 1, "scheduler": {"name": "vllm-v1", "options": {
        "block_size": 16, "num_gpu_blocks": 512, "max_num_batched_tokens": 512, "max_num_seqs": 0}}}}},
     "$.cluster.pools.a.scheduler.options.max_num_seqs", "minimum"),
]


@pytest.mark.parametrize("cluster,where,words", BAD)
def test_bad_cluster_sections_are_located_errors(tmp_path: Path, cluster: dict[str, Any], where: str,
                                                 words: str) -> None:
    path = tmp_path / "p.yaml"
    doc = policy_doc(POLICIES / "vllm-v1-bench.yaml")
    text = json.dumps(doc, indent=1)[:-2] + ',\n "cluster": ' + json.dumps(cluster) + "\n}\n"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        run(path, limit=5)
    err = caught.value
    assert err.json_path == where and err.line is not None, err
    assert words in str(err)


def test_dp_on_a_scheduler_without_ranks_and_a_fleet_without_a_clock_are_refused(tmp_path: Path) -> None:
    doc = policy_doc(POLICIES / "default.yaml", replicas=2, data_parallel_size=2)
    doc["timing"] = LINEAR
    with pytest.raises(InputError, match="no data-parallel ranks") as caught:
        run(write_policy(tmp_path, doc), limit=5)
    assert caught.value.json_path == "$.cluster.data_parallel_size" and caught.value.line is not None
    untimed = policy_doc(POLICIES / "default.yaml", replicas=2)
    with pytest.raises(InputError, match="timing") as caught:
        run(write_policy(tmp_path, untimed), limit=5)
    assert caught.value.json_path == "$.cluster"


def test_the_cli_replays_a_fleet_and_refuses_a_bad_one(tmp_path: Path) -> None:
    from tickgate.testing import run_cli

    out = tmp_path / "r.json"
    ok = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "50",
                 "--policy", str(POLICIES / "fleet-prefix-aware.yaml"), "--output", str(out))
    assert ok.returncode == 0, ok.stderr
    assert "on 4 replicas (prefix-aware)" in ok.stdout
    assert json.loads(out.read_text())["fleet"]["routing"]["decisions"]
    bad = tmp_path / "bad.yaml"
    bad.write_text((POLICIES / "fleet-round-robin.yaml").read_text().replace("round-robin}", "nope}"))
    out2 = tmp_path / "r2.json"
    res = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "5",
                  "--policy", str(bad), "--output", str(out2))
    assert res.returncode == 2 and not out2.exists()
    assert res.stderr.count("\n") == 1 and "$.cluster.router.name" in res.stderr and "Traceback" not in res.stderr


def test_the_sidecar_gives_a_fleet_the_same_report() -> None:
    """Large replays compute every engine's fingerprint and summary in forked children."""
    policy = load_policy(POLICIES / "fleet-prefix-aware.yaml")
    inline = replay(*mooncake(120)[:1], policy, inputs=mooncake(120)[1])
    forked = replay(*mooncake(120)[:1], policy, inputs=mooncake(120)[1], sidecar=True)
    assert canonical(forked) == canonical(inline)


def test_a_fleets_kv_events_round_trip_through_the_vllm_mirror(tmp_path: Path) -> None:
    """Every replica's events in one file, named by replica: `tickgate normalize` reads them
    back with the replay's counts; a one-replica fleet writes the plain replay's events."""
    from tickgate.testing import run_cli

    def replay_cli(policy: Path, tag: str) -> tuple[dict[str, Any], dict[str, Any]]:
        out, events, norm = tmp_path / f"{tag}.json", tmp_path / f"{tag}.msgpack", tmp_path / f"{tag}-n.json"
        res = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "60",
                      "--policy", str(policy), "--output", str(out), "--kv-events", str(events), "--quiet")
        assert res.returncode == 0, res.stderr
        res = run_cli("normalize", str(events), "-o", str(norm))
        assert res.returncode == 0, res.stderr
        return json.loads(out.read_text()), json.loads(norm.read_text())["run"]

    doc = policy_doc(POLICIES / "vllm-v1-bench.yaml", replicas=3, router={"name": "least-loaded"})
    doc["scheduler"]["options"]["num_gpu_blocks"] = 3000
    report, run_doc = replay_cli(write_policy(tmp_path, doc, "three-policy.json"), "three")
    kv, extra = report["kv_events"], run_doc["aggregates"]["extra"]
    assert run_doc["provenance"]["format"] == "vllm-kv-events"
    assert extra["kv_blocks_stored"] == kv["blocks_stored"] > 0
    assert extra["kv_blocks_removed"] == kv["blocks_removed"] > 0
    assert extra["kv_resident_blocks_at_end"] == kv["resident_blocks_at_end"]
    assert extra["kv_event_batches"] == kv["batches"]
    assert sorted(run_doc["provenance"]["replicas"]) == ["replica-0", "replica-1", "replica-2"]
    one = dict(doc, cluster={"replicas": 1})
    fleet1, _ = replay_cli(write_policy(tmp_path, one, "one-policy.json"), "one")
    plain_doc = policy_doc(POLICIES / "vllm-v1-bench.yaml")
    plain_doc["scheduler"]["options"]["num_gpu_blocks"] = 3000
    plain, _ = replay_cli(write_policy(tmp_path, plain_doc, "plain-policy.json"), "plain")
    assert fleet1["kv_events"] == plain["kv_events"]
    # a scheduler that records none is refused in one line, nothing written
    seed = policy_doc(POLICIES / "default.yaml", replicas=2)
    seed["timing"] = LINEAR
    out, events = tmp_path / "s.json", tmp_path / "s.msgpack"
    res = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "5",
                  "--policy", str(write_policy(tmp_path, seed, "seed-policy.json")), "--output", str(out),
                  "--kv-events", str(events))
    assert res.returncode == 2 and not out.exists() and not events.exists()
    assert "does not record KV-cache events" in res.stderr and res.stderr.count("\n") == 1


# -- disaggregated prefill/decode ----------------------------------------------------------------
def test_disaggregated_prefill_then_transfer_then_decode(tmp_path: Path) -> None:
    keep: list[Any] = []
    doc = policy_doc(POLICIES / "fleet-pd.yaml", router={"name": "least-loaded"},
                     pools={"prefill": {"role": "prefill", "replicas": 2}, "decode": {"role": "decode", "replicas": 2}},
                     transfer={"bandwidth_gb_s": 50, "latency_ms": 0.1})
    report = run(write_policy(tmp_path, doc), limit=120, keep=keep)
    fleet, replicas = keep
    by_name = {e.name: rep for e, rep in zip(fleet.engines, replicas)}
    fb = report["fleet"]
    assert report["summary"]["completed_requests"] == 120
    # every request prefilled once (one token sampled there), moved once, decoded once
    prefill = [by_name[f"prefill-{i}"] for i in range(2)]
    decode = [by_name[f"decode-{i}"] for i in range(2)]
    assert sum(r["summary"]["request_count"] for r in prefill) == 120 == sum(r["summary"]["request_count"] for r in decode)
    assert sum(r["summary"]["total_decode_tokens"] for r in prefill) == 0  # its one token is a prefill's sample
    assert all(o["output_tokens"] == 1 for r in prefill for o in r["outcomes"])
    requests = list(mooncake(120)[0])
    wanted = {r.id: r for r in requests}
    client = {o["id"]: o for o in report["outcomes"]}
    assert {i: o["output_tokens"] for i, o in client.items()} == {i: r.max_output_tokens for i, r in wanted.items()}
    # the transfers: one per request, bytes = prompt tokens x the model's KV bytes per token
    t = fb["transfers"]
    assert t["count"] == 120 and t["kv_bytes_per_token"] == 131072.0 and "llama-3.1-8b" in t["kv_bytes_source"]
    assert t["bytes"] == sum(r.prompt_tokens for r in requests) * 131072
    assert t["ms"]["max"] > t["ms"]["p50"] >= 0.1  # latency + bytes / 50 GB/s
    # a client sees the whole path: from its arrival (before the prefill) to the decode side's tokens
    decode_first = {o["id"]: o for r in decode for o in r["outcomes"]}
    prefill_done = {o["id"]: o for r in prefill for o in r["outcomes"]}
    for rid, o in client.items():
        assert o["arrival_ms"] == round(wanted[rid].arrival_ms, 3)
        assert o["first_token_ms"] == decode_first[rid]["first_token_ms"] > prefill_done[rid]["finished_ms"]
        assert decode_first[rid]["arrival_ms"] >= prefill_done[rid]["finished_ms"] + 0.1 - 1e-6
    assert fb["routing"]["prefill"]["router"] == fb["routing"]["decode"]["router"] == "least-loaded"
    # the fleet's hit rate is the prefill compute its prefix caches spared: the prefill side's hits;
    # the decode side's local hits on transferred prompts are in its transferred block instead
    entries = {r["name"]: r for r in fb["replicas"]}
    prefill_hits = sum(e.hit_tokens() for e in fleet.engines if e.name.startswith("prefill"))
    assert prefill_hits > 0
    assert fb["prefix_cache_hit_rate"] == round(prefill_hits / sum(r.prompt_tokens for r in requests), 6)
    moved = [entries[f"decode-{i}"]["transferred"] for i in range(2)]
    assert sum(m["requests"] for m in moved) == 120
    assert sum(m["tokens"] + m["local_hit_tokens"] for m in moved) == sum(r.prompt_tokens for r in requests)
    assert all(entries[f"decode-{i}"]["prefix_cache_hit_rate"] == 0.0 for i in range(2))
    assert all("transferred" not in entries[f"prefill-{i}"] for i in range(2))
    assert set(fb["routing"]["decisions"]) == {"prefill-0", "prefill-1", "decode-0", "decode-1"}
    # decode steps carry no prefill chunks of other requests: gaps far below a mixed fleet's
    mixed = run(POLICIES / "fleet-least-loaded.yaml", limit=120)
    assert report["latency"]["itl_ms"]["p99"] < mixed["latency"]["itl_ms"]["p99"]


def test_bad_disaggregated_fleets_are_located_errors(tmp_path: Path) -> None:
    # no model in the timing section (a linear one): the bytes per token must be given
    doc = policy_doc(TOYS / "vllm-v1-toy.yaml", pools={"p": {"role": "prefill"}, "d": {"role": "decode"}},
                     transfer={"bandwidth_gb_s": 25})
    with pytest.raises(InputError, match="kv_bytes_per_token") as caught:
        run(write_policy(tmp_path, doc), limit=5)
    assert caught.value.json_path == "$.cluster.transfer" and caught.value.line is not None
    # a decode side whose scheduler cannot take transferred KV
    doc = policy_doc(POLICIES / "sglang-default.yaml", pools={"p": {"role": "prefill"}, "d": {"role": "decode"}},
                     transfer={"bandwidth_gb_s": 25, "kv_bytes_per_token": 131072})
    with pytest.raises(InputError, match="cannot take a request whose prompt KV arrives computed") as caught:
        run(write_policy(tmp_path, doc), limit=5)
    assert caught.value.json_path == "$.scheduler.name"
