"""KV events out: the writer's vLLM framing, `tickgate replay --kv-events` and its round trip through
the project's `vllm-kv-events` reader, determinism, refusals."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Union

import msgspec
import pytest

from conftest import FIXTURES, POLICIES, run_cli
from tickgate import AllBlocksCleared, BlockRemoved, BlockStored, Clock, KvEventWriter, run_scheduler
from tickgate.host.policy import load_policy
from tickgate.readers.kv_events import decode_all, summarize
from tickgate.replay.engine import build_scheduler
from tickgate.replay.kv_events_out import KvEventSink, _Batch, _Cleared, _Removed, _Stored
from tickgate.workload.sources import open_requests

MOONCAKE = FIXTURES / "realdata/traces/mooncake_conversation_trace.jsonl"
REAL_KV = FIXTURES / "realdata/kv_events"


# vLLM 0.33's structs as its decoder sees them (vllm/distributed/kv_events.py, fields per
# docs/design/fleets-sources.md section 4): an array-like batch, tagged map events.
class VBlockStored(msgspec.Struct, tag="BlockStored", omit_defaults=True, gc=False):
    block_hashes: list[Union[int, bytes]]
    parent_block_hash: Union[int, bytes, None]
    token_ids: list[int]
    block_size: int
    lora_id: Union[int, None]
    medium: Union[str, None]
    lora_name: Union[str, None]
    extra_keys: Union[list[Any], None] = None
    group_idx: Union[int, None] = None


class VBlockRemoved(msgspec.Struct, tag="BlockRemoved", omit_defaults=True, gc=False):
    block_hashes: list[Union[int, bytes]]
    medium: Union[str, None]
    group_idx: Union[int, None] = None


class VAllBlocksCleared(msgspec.Struct, tag="AllBlocksCleared", omit_defaults=True, gc=False):
    pass


class VKVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Union[VBlockStored, VBlockRemoved, VAllBlocksCleared]]
    data_parallel_rank: Union[int, None] = None


EVENTS = [BlockStored((111, 222), None, 8, 4), BlockRemoved((111,)), AllBlocksCleared(),
          BlockStored(((1 << 64) - 1,), 222, 4, 4)]


def test_vllms_decoder_reads_both_batch_shapes() -> None:
    fh = io.BytesIO()
    writer = KvEventWriter(fh)
    writer.write_batch(1.5, EVENTS, 0)
    writer.write_batch(2.0, EVENTS[:1], 1, "decode-3")
    writer.write_batch(3.0, [], 0)  # nothing to publish: nothing written (as vLLM)
    decoder = msgspec.msgpack.Decoder(VKVEventBatch)
    batches = [decoder.decode(bytes(b)) for b in _payloads(fh.getvalue())]
    assert [(b.ts, b.data_parallel_rank, len(b.events)) for b in batches] == [(1.5, 0, 4), (2.0, 1, 1)]
    stored = batches[0].events[0]
    assert stored.block_hashes == [111, 222] and stored.parent_block_hash is None and stored.block_size == 4
    assert len(stored.token_ids) == 8 and all(0 <= t < 65536 for t in stored.token_ids)
    assert stored.medium == "GPU" and stored.lora_id is None and stored.lora_name is None
    assert batches[0].events[3].block_hashes == [(1 << 64) - 1]
    assert isinstance(batches[0].events[2], VAllBlocksCleared)
    raw = [obj for _, obj in decode_all(fh.getvalue(), "x")]
    assert len(raw[0]) == 3 and raw[1][3] == "decode-3"  # the replica: a 4th element vLLM ignores
    assert writer.counts.batches == 2
    s = summarize(fh.getvalue(), "x")  # the reader's replay of the same events, a clear included
    c = writer.counts
    assert (s.batches, s.blocks_stored, s.blocks_removed, s.tokens_stored, s.peak_resident, s.resident_end) == (
        c.batches, c.blocks_stored, c.blocks_removed, c.tokens_stored, c.peak_resident, c.resident) == (
        2, 5, 1, 20, 3, 3)
    assert s.replicas == {"decode-3": [2, 0, 2]}


def _payloads(data: bytes) -> list[bytes]:
    offsets = [o for o, _ in decode_all(data, "x")] + [len(data)]
    return [data[a:b] for a, b in zip(offsets, offsets[1:])]


def test_encoding_is_vllms_byte_for_byte() -> None:
    """The generated vLLM map-event payload, re-encoded from its values with the writer's
    structs, gives the same bytes: field order, omitted defaults, nil fields, the array batch."""
    data = (REAL_KV / "vllm_v0.28_map_events.msgpack").read_bytes()
    ts, events, rank = msgspec.msgpack.decode(data)
    wire: list[Any] = []
    for e in events:
        fields = {k: v for k, v in e.items() if k != "type"}
        kind = {"BlockStored": _Stored, "BlockRemoved": _Removed, "AllBlocksCleared": _Cleared}[e["type"]]
        wire.append(kind(**fields))
    assert msgspec.msgpack.Encoder().encode(_Batch(ts, wire, rank)) == data


def test_synthetic_token_ids_tell_blocks_apart() -> None:
    fh = io.BytesIO()
    KvEventWriter(fh).write_batch(0.0, [BlockStored((5, 5 + (1 << 20)), None, 32, 16)])
    (_, batch), = decode_all(fh.getvalue(), "x")
    tokens = batch[1][0]["token_ids"]
    assert len(tokens) == 32 and tokens[:16] != tokens[16:]
    assert tokens[:4] == [5, 0, 0, 0] and tokens[16:20] == [5, 16, 0, 0]


def test_reader_keeps_one_resident_set_per_replica() -> None:
    fh = io.BytesIO()
    w = KvEventWriter(fh)
    w.write_batch(0.0, [BlockStored((1, 2), None, 8, 4)], 0, "a")
    w.write_batch(0.0, [BlockStored((1, 3), None, 8, 4)], 0, "b")  # hash 1 on both replicas
    w.write_batch(1.0, [BlockRemoved((1,))], 0, "a")
    s = summarize(fh.getvalue(), "x")
    assert s.resident_end == 3 == w.counts.resident  # b still holds 1
    assert s.peak_resident == 4 == w.counts.peak_resident
    assert s.replicas == {"a": [2, 1, 1], "b": [2, 0, 2]} and s.removed_unknown == 0


def _policy(tmp_path: Path, blocks: int = 3000, seqs: int = 2, name: str = "vllm-small.yaml",
            **extra: Any) -> Path:
    text = (POLICIES / "vllm-v1-bench.yaml").read_text()
    text = text.replace("num_gpu_blocks: 2048", f"num_gpu_blocks: {blocks}")
    text = text.replace("max_num_seqs: 64", f"max_num_seqs: {seqs}")
    for key, value in extra.items():
        text += f"{key}: {json.dumps(value)}\n"
    path = tmp_path / name
    path.write_text(text)
    return path


def _replay(tmp_path: Path, policy: Path, tag: str, limit: int = 100,
            env: dict[str, str] | None = None) -> Any:
    report, events = tmp_path / f"{tag}.json", tmp_path / f"{tag}.msgpack"
    result = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", str(limit),
                     "--policy", str(policy), "--output", str(report), "--kv-events", str(events), "--quiet",
                     env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(report.read_text()), events


def test_mooncake_round_trip(tmp_path: Path) -> None:
    """Replay the Mooncake conversation slice under a pool small enough to evict, read the
    file back with `tickgate normalize`: its counts equal the report's kv_events block, and
    both equal counts made without the events (the requests' blocks; the pool at the end)."""
    policy = _policy(tmp_path)
    report, events = _replay(tmp_path, policy, "r")
    kv = report["kv_events"]
    norm = tmp_path / "n.json"
    result = run_cli("normalize", str(events), "-o", str(norm))
    assert result.returncode == 0, result.stderr
    run = json.loads(norm.read_text())["run"]
    assert run["provenance"]["format"] == "vllm-kv-events"
    extra = run["aggregates"]["extra"]
    assert extra == {
        "kv_block_size": 16,
        "kv_event_batches": kv["batches"],
        "kv_events_block_stored": kv["events"]["BlockStored"],
        "kv_events_block_removed": kv["events"]["BlockRemoved"],
        "kv_events_all_blocks_cleared": kv["events"]["AllBlocksCleared"],
        "kv_blocks_stored": kv["blocks_stored"],
        "kv_blocks_removed": kv["blocks_removed"],
        "kv_blocks_removed_unseen": 0,
        "kv_tokens_stored": kv["tokens_stored"],
        "kv_peak_resident_blocks": kv["peak_resident_blocks"],
        "kv_resident_blocks_at_end": kv["resident_blocks_at_end"],
    }
    assert run["aggregates"]["duration_s"] > 0 and run["provenance"]["data_parallel_ranks"] == [0]
    # independent counts: no preemption here, so every block a completed request computed beyond
    # its prefix hit was registered once (vLLM's cache_full_blocks), nothing else was
    assert report["scheduler"]["preemptions"] == 0 and kv["blocks_removed"] > 0
    done = [o for o in report["outcomes"] if o["status"] == "completed"]
    assert len(done) == report["requests"]["completed"]
    assert kv["blocks_stored"] == sum((o["prompt_tokens"] + o["output_tokens"] - 1) // 16
                                      - o.get("prefix_hit_tokens", 0) // 16 for o in done)
    assert kv["tokens_stored"] == 16 * kv["blocks_stored"]
    assert kv["events"]["BlockRemoved"] == kv["blocks_removed"]  # vLLM: one event per evicted block
    # the same replay in process: the pool's hashed blocks at the end are the resident set
    pol = load_policy(policy)
    clock = Clock()
    requests, inputs = open_requests(MOONCAKE, "mooncake", block_size=None, limit=100)
    scheduler, _ = build_scheduler(pol, clock, prefix_block_size=inputs["block_size"])
    scheduler.enable_kv_events()
    fh = io.BytesIO()
    writer = KvEventWriter(fh)
    run_scheduler(requests, scheduler, clock, [KvEventSink(scheduler, clock, writer, timed=True)],
                  timing=pol.timing)
    pool = scheduler.pool
    assert kv["resident_blocks_at_end"] == pool.usable - pool.anon_free == len(pool.hashes)
    assert fh.getvalue() == events.read_bytes()


def test_same_bytes_in_every_process(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    outs = [_replay(tmp_path, policy, f"s{seed}", limit=40, env={"PYTHONHASHSEED": seed})
            for seed in ("0", "4242")]
    assert outs[0][1].read_bytes() == outs[1][1].read_bytes()
    assert outs[0][0] == outs[1][0]


def test_untimed_batches_are_stamped_with_the_step(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(json.dumps({"version": 1, "scheduler": {"name": "vllm-v1", "options": {
        "block_size": 4, "num_gpu_blocks": 20, "max_num_seqs": 4, "max_num_batched_tokens": 32,
        "enable_prefix_caching": True}}}))
    out, events = tmp_path / "r.json", tmp_path / "e.msgpack"
    result = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(policy),
                     "--output", str(out), "--kv-events", str(events), "--quiet")
    assert result.returncode == 0, result.stderr
    stamps = [b[0] for _, b in decode_all(events.read_bytes(), events)]
    assert stamps and stamps == sorted(stamps) and all(float(s).is_integer() for s in stamps)
    assert json.loads(out.read_text())["kv_events"]["batches"] == len(stamps)


def test_a_scheduler_without_events_is_refused_in_one_line(tmp_path: Path) -> None:
    events = tmp_path / "e.msgpack"
    result = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--policy",
                     str(POLICIES / "default.yaml"), "--output", str(tmp_path / "r.json"),
                     "--kv-events", str(events))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "does not record KV-cache events" in result.stderr and "default.yaml" in result.stderr
    assert not events.exists() and not (tmp_path / "r.json").exists()


def test_nothing_is_written_when_the_replay_fails(tmp_path: Path) -> None:
    policy = _policy(tmp_path, limits={"max_ticks": 50})
    events = tmp_path / "e.msgpack"
    result = run_cli("replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", "20",
                     "--policy", str(policy), "--output", str(tmp_path / "r.json"),
                     "--kv-events", str(events))
    assert result.returncode == 2 and "tick limit" in result.stderr
    assert list(tmp_path.iterdir()) == [policy]


def test_kv_events_output_must_not_clobber_another_output(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(out),
                     "--kv-events", str(out))
    assert result.returncode == 2 and "--kv-events and --output name the same file" in result.stderr


@pytest.mark.parametrize("name", ["vllm_arraylike.msgpack", "vllm_v0.28_map_events.msgpack"])
def test_vllm_files_read_as_before(name: str) -> None:
    s = summarize((REAL_KV / name).read_bytes(), name)
    assert s.replicas == {} and s.resident_end == 0 and s.peak_resident == 2



def test_mixed_batches_count_and_encode_event_by_event() -> None:
    """Seeded batches mixing every event kind (a hash removed and stored again in one batch,
    removed twice, unknown, cleared): the writer, which drops a run of removals from the resident
    set at once, counts as a replay of the events one by one does, and its bytes are vLLM's
    structs encoded from lists, batch by batch, token ids per the documented rule."""
    import random

    rng = random.Random(38)
    pool = [rng.getrandbits(64) for _ in range(40)]
    fh = io.BytesIO()
    writer = KvEventWriter(fh)
    expected = b""
    resident: set[int] = set()
    peak = removed = 0

    def tokens(hashes: tuple[int, ...], per: int) -> list[int]:  # each hash's 16-bit words, repeated
        return [(h >> (16 * (i % 4))) & 0xFFFF for h in hashes for i in range(per)]

    for step in range(400):
        events: list[Any] = []
        for _ in range(rng.randrange(1, 12)):
            roll = rng.random()
            if roll < 0.35:
                size = rng.choice([1, 3, 4, 16])
                hashes = tuple(rng.choice(pool) for _ in range(rng.randrange(1, 4)))
                events.append(BlockStored(hashes, rng.choice([None, pool[0]]), size * len(hashes), size))
                resident.update(hashes)
                peak = max(peak, len(resident))
            elif roll < 0.995:
                hashes = tuple(rng.choice(pool) for _ in range(rng.randrange(1, 3)))
                events.append(BlockRemoved(hashes))
                resident.difference_update(hashes)
                removed += len(hashes)
            else:
                events.append(AllBlocksCleared())
                resident.clear()
        writer.write_batch(step / 8, events, 0)
        assert (writer.counts.resident, writer.counts.peak_resident) == (len(resident), peak)
        wire = [VBlockStored(list(e.block_hashes), e.parent_block_hash, tokens(e.block_hashes, e.block_size),
                             e.block_size, None, e.medium, None) if isinstance(e, BlockStored)
                else VBlockRemoved(list(e.block_hashes), e.medium) if isinstance(e, BlockRemoved)
                else VAllBlocksCleared() for e in events]
        expected += msgspec.msgpack.encode(VKVEventBatch(step / 8, wire, 0))
    c = writer.counts
    assert (c.resident, c.peak_resident, c.blocks_removed, c.batches) == (len(resident), peak, removed, 400)
    s = summarize(fh.getvalue(), "x")
    assert (s.resident_end, s.peak_resident, s.blocks_removed) == (len(resident), peak, removed)
    assert fh.getvalue() == expected
