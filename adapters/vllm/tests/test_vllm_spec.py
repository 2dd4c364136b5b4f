"""Speculative decoding in the vllm-v1 mirror (v1.spec, v1.spec_step): the
acceptance rule of the vLLM reference harness, the report's figures against the
harness's own counters for every recorded spec case, timing, option errors and
determinism. Step-by-step conformance is test_vllm_conformance.py (the spec-*
cases of fixtures/vllm-reference/cases.json)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from tickgate import Request
from tickgate.util.errors import ConfigError, InputError
from tickgate_vllm.conformance import load_reference_workload, scheduler_options
from tickgate_vllm.v1.options import V1Config
from tickgate_vllm.v1.spec import SpecDecoding
from vllm_helpers import mirror_run as _mirror
from vllm_helpers import replay_reports_across_hash_seeds

REPO = Path(__file__).resolve().parents[3]
REF = REPO / "fixtures" / "vllm-reference"
SPEC_CASES = [c["name"] for c in json.loads((REF / "cases.json").read_text()) if c["name"].startswith("spec-")]
HARNESS = Path(os.environ.get("VLLM_REFERENCE_DIR", REPO.parent / "shared" / "tools" / "vllm-reference"))


def _cfg(**kw) -> V1Config:
    base = {"block_size": 16, "num_gpu_blocks": 100, "max_num_seqs": 8, "max_num_batched_tokens": 256}
    return V1Config.from_options({**base, **kw})


def _draw(seed: int, rid: str, pos: int, i: int) -> float:
    """The harness's draw, restated from its README."""
    digest = hashlib.sha256(f"{seed}:{rid}:{pos}:{i}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def test_acceptance_is_the_harness_rule() -> None:
    rates = [0.9, 0.6, 0.3, 0.5]
    spec = SpecDecoding(_cfg(num_speculative_tokens=4, acceptance_rates=rates, seed=7))
    seen = set()
    for rid in ("r0000", "r0017", "A"):
        for pos in range(40):
            for n in range(5):
                expected = 0
                while expected < n and _draw(7, rid, pos, expected + 1) < rates[expected]:
                    expected += 1
                assert spec.num_accepted(rid, pos, n) == expected
                seen.add(expected)
    assert seen == {0, 1, 2, 3, 4}  # the draws reach every outcome
    assert SpecDecoding(_cfg(num_speculative_tokens=3, acceptance_rates=1.0)).num_accepted("x", 5, 3) == 3
    assert SpecDecoding(_cfg(num_speculative_tokens=3, acceptance_rates=0.0)).num_accepted("x", 5, 3) == 0


@pytest.mark.skipif(not (HARNESS / "drive_vllm.py").exists(), reason="the vLLM reference harness is not here")
def test_acceptance_agrees_with_the_harness_spec_model() -> None:
    sys.path.insert(0, str(HARNESS))
    try:
        import drive_vllm  # type: ignore[import-not-found]  # SpecModel is plain Python
    finally:
        sys.path.remove(str(HARNESS))
    cfg = {"num_speculative_tokens": 3, "acceptance_rates": [0.8, 0.5, 0.4], "seed": 11}
    theirs = drive_vllm.SpecModel(cfg)
    ours = SpecDecoding(_cfg(**cfg))
    for pos in range(200):
        for n in range(4):
            assert ours.num_accepted(f"r{pos % 7}", pos, n) == theirs.num_accepted(f"r{pos % 7}", pos, [5] * n)
        assert theirs.num_accepted("r1", pos, [-1, -1, -1]) == 0  # pads: always rejected


@pytest.mark.parametrize("name", SPEC_CASES)
def test_report_counts_agree_with_vllm(name: str) -> None:
    requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
    summary, _, _ = _mirror(requests, scheduler_options(config))
    theirs = json.loads((REF / f"{name}.summary.json").read_text())
    s = summary["speculative"]
    tot = theirs["totals"]
    assert s["drafted_tokens"] + s["pad_tokens"] == tot["spec_tokens"]
    assert s["pad_tokens"] == tot["spec_pad_tokens"]
    assert s["accepted_tokens"] == tot["spec_accepted"]
    assert s["verifications"] == tot["spec_verifications"]
    assert s["vllm_spec_decoding_stats"] == theirs["vllm_spec_decoding_stats"]
    facts = theirs["spec_scheduler"]
    assert (s["method"], s["num_lookahead_tokens"], s["draft_slots"], s["num_hash_lookahead_tokens"]) == (
        facts["method"], facts["num_lookahead_tokens"], facts["draft_slots"], facts["num_hash_lookahead_tokens"])
    # the report's derived figures
    for rate, acc, drafted in zip(s["acceptance_rate_per_position"], s["accepted_per_position"],
                                  s["drafted_per_position"]):
        assert rate == round(acc / drafted, 6)
    assert s["mean_acceptance_length"] == round(1 + s["accepted_tokens"] / s["verifications"], 6)
    assert s["acceptance_rate"] == round(s["accepted_tokens"] / s["drafted_tokens"], 6)


def _requests(n: int, prompt: int, out: int) -> list[Request]:
    return [Request(id=f"q{i}", prompt_tokens=prompt + i, max_output_tokens=out, arrival_tick=0) for i in range(n)]


def test_acceptance_length_and_tokens_per_step() -> None:
    base = {"block_size": 16, "num_gpu_blocks": 400, "max_num_seqs": 8, "max_num_batched_tokens": 1024}
    reqs = _requests(4, 20, 41)
    plain, _, plain_records = _mirror(reqs, base)
    assert "speculative" not in plain
    every, lines, records = _mirror(reqs, {**base, "num_speculative_tokens": 3, "acceptance_rates": 1.0})
    s = every["speculative"]
    # first drafts only after the prompt: step 0 prefills, step 1 verifies 3 drafts per request
    assert lines[0]["spec"] == [] and lines[0]["drafts"] == [[f"q{i}", 3] for i in range(4)]
    assert lines[1]["spec"] == [[f"q{i}", 3, 3, 0] for i in range(4)]
    assert [e[1] for e in lines[1]["sched"]] == [4, 4, 4, 4]
    assert s["mean_acceptance_length"] == 4.0 and s["acceptance_rate_per_position"] == [1.0, 1.0, 1.0]
    # 41 tokens: the first from the prefill, then 10 steps of 4
    assert len(records) == 11 and sum(r.span for r in plain_records) == 41
    assert s["output_tokens_per_step"] == round(4 * 41 / 11, 6)
    none, _, _ = _mirror(reqs, {**base, "num_speculative_tokens": 3, "acceptance_rates": 0.0})
    assert none["speculative"]["mean_acceptance_length"] == 1.0 and none["speculative"]["accepted_tokens"] == 0


def test_timing_prices_the_drafts_and_the_drafter() -> None:
    from tickgate.timing.linear import LinearTiming

    base = {"block_size": 16, "num_gpu_blocks": 100, "max_num_seqs": 8, "max_num_batched_tokens": 256,
            "num_speculative_tokens": 2, "acceptance_rates": 1.0}
    reqs = [Request(id="a", prompt_tokens=10, max_output_tokens=5, arrival_ms=0.0)]
    timing = LinearTiming(fixed_ms=0.0, per_prefill_token_ms=1.0, per_decode_seq_ms=10.0)
    _, _, records = _mirror(reqs, {**base, "spec_method": "ngram"}, timing)
    # prefill of 10; then one sequence verifying 2 drafts (priced as 2 more tokens) per step
    assert [r.duration_ms for r in records] == [10.0, 12.0, 12.0]
    _, _, eagle = _mirror(reqs, {**base, "spec_method": "eagle"}, timing)
    # eagle's drafter: 0.05 x K = 0.1 of a decode step over the drafting sequence, after
    # every step that samples (none after the step that samples the last token: skip_drafts)
    assert [r.duration_ms for r in eagle] == [10.0 + 1.0, 12.0 + 1.0, 12.0]
    _, _, free = _mirror(reqs, {**base, "spec_method": "eagle", "spec_drafter_cost": 0}, timing)
    assert [r.duration_ms for r in free] == [10.0, 12.0, 12.0]


def test_option_errors_are_named() -> None:
    from tickgate import validate
    from tickgate_vllm.v1.options import OPTIONS_SCHEMA

    base = {"block_size": 16, "num_gpu_blocks": 100, "max_num_seqs": 8, "max_num_batched_tokens": 256}
    with pytest.raises(ConfigError, match=r"expected one value or 3 .* found 2") as exc:
        _mirror([], {**base, "num_speculative_tokens": 3, "acceptance_rates": [0.5, 0.5]})
    assert exc.value.option == "acceptance_rates"  # located at that option in the policy file
    with pytest.raises(ConfigError, match=r"3 is below 1 \+ num_speculative_tokens") as exc:
        _mirror([], {**base, "num_speculative_tokens": 3, "long_prefill_token_threshold": 3})
    assert exc.value.option == "long_prefill_token_threshold"
    with pytest.raises(InputError, match="spec_method"):
        validate({**base, "spec_method": "medusa"}, OPTIONS_SCHEMA, file="p.yaml")
    with pytest.raises(InputError, match="acceptance_rates"):
        validate({**base, "acceptance_rates": [1.5]}, OPTIONS_SCHEMA, file="p.yaml")


def test_draft_model_input_slot_never_starves_a_config_vllm_accepts() -> None:
    # without chunking vLLM needs max_model_len <= the budget, so a prompt (< max_model_len)
    # always leaves draft_model its one input slot
    base = {"block_size": 16, "num_gpu_blocks": 100, "max_num_seqs": 8, "max_num_batched_tokens": 65,
            "max_model_len": 65, "enable_chunked_prefill": False, "num_speculative_tokens": 2}
    reqs = [Request(id="a", prompt_tokens=64, max_output_tokens=3, arrival_tick=0)]
    for method in ("ngram", "draft_model"):
        _mirror(reqs, {**base, "spec_method": method})


def test_spec_replay_is_identical_across_hash_seeds(tmp_path: Path) -> None:
    name = "spec-eagle-prefix-aligned"
    doc = json.loads((REF / f"{name}.workload.json").read_text())
    outs = replay_reports_across_hash_seeds(doc, tmp_path, ("0", "123"))
    assert outs[0] == outs[1]
    report = json.loads(outs[0])
    assert report["scheduler"]["speculative"]["num_hash_lookahead_tokens"] == 1
    assert report["scheduler"]["preemptions"] > 0


def test_spec_cases_cover_methods_caching_pressure_priority_padding_and_skips() -> None:
    configs = {n: json.loads((REF / f"{n}.workload.json").read_text())["config"] for n in SPEC_CASES}
    summaries = {n: json.loads((REF / f"{n}.summary.json").read_text()) for n in SPEC_CASES}
    steps = {n: [json.loads(line) for line in (REF / f"{n}.steps.jsonl").read_text().splitlines()]
             for n in SPEC_CASES}
    covered = {(c["spec_method"], c.get("enable_prefix_caching", False)) for c in configs.values()}
    assert covered == {(m, p) for m in ("ngram", "eagle", "draft_model") for p in (True, False)}
    for method in ("ngram", "eagle", "draft_model"):  # each under KV pressure
        assert any(summaries[n]["totals"]["preemptions"] >= 20 for n, c in configs.items()
                   if c["spec_method"] == method)
        assert any(c.get("policy") == "priority" for c in configs.values() if c["spec_method"] == method)
    assert sum(s["totals"]["spec_pad_tokens"] for s in summaries.values()) >= 40
    assert sum(line["skip_drafts"] for lines in steps.values() for line in lines) >= 50
    assert any(s["spec_scheduler"]["num_hash_lookahead_tokens"] == 1 for s in summaries.values())
    # drafts truncated by the budget or max_model_len somewhere: fewer scheduled than held
    assert any(e[1] < c["num_speculative_tokens"] and not e[3]
               for n, c in configs.items() for line in steps[n] for e in line["spec"])
    assert all(s["vllm_version"] == "0.33.0" and not s["deadlock"] for s in summaries.values())


def test_eagle_hash_lookahead_with_workload_block_ids() -> None:
    """Without token ids (a Mooncake-style trace) a block's hash covers the next
    whole block: two prompts sharing 4 blocks then differing hit 3 of them."""
    base = {"block_size": 16, "num_gpu_blocks": 100, "max_num_seqs": 8, "max_num_batched_tokens": 256,
            "enable_prefix_caching": True, "num_speculative_tokens": 2}
    reqs = [Request(id="a", prompt_tokens=96, max_output_tokens=2, arrival_tick=0, prefix_blocks=(1, 2, 3, 4, 5, 6)),
            Request(id="b", prompt_tokens=96, max_output_tokens=2, arrival_tick=4, prefix_blocks=(1, 2, 3, 4, 8, 9))]
    for method, hit in (("ngram", 64), ("eagle", 48)):
        _, lines, _ = _mirror(reqs, {**base, "spec_method": method})
        admitted = [e for line in lines for e in line["sched"] if e[0] == "b" and e[2] == "new"]
        assert admitted[0][3] == hit, method
