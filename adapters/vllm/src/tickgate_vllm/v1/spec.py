"""Speculative decoding in the ``vllm-v1`` mirror: its options, what the method
resolves to on the scheduler side, the acceptance of drafts, the report's
figures and the drafter's cost. The step that schedules and verifies drafts is
:mod:`.spec_step`.

What vLLM 0.33 does, and where (``vllm/config/vllm.py`` = VC,
``vllm/config/speculative.py`` = SC, ``vllm/v1/core/sched/scheduler.py`` = S):

- ``VC.num_lookahead_tokens``: K extra KV slots per allocation for eagle and
  draft_model (their drafters write KV past the verified tokens), 0 for ngram;
- ``SC.max_num_new_slots_for_drafting``: one extra input slot per scheduled
  request for draft_model (the autoregressive draft input keeps one token), 0
  for ngram and eagle;
- ``S.__init__``'s ``can_skip_drafts`` (lookahead > 0 with the V2 model
  runner, vLLM 0.33's default: eagle, draft_model) and
  ``VC.num_hash_lookahead_tokens`` (1 for eagle with prefix caching: a block's
  hash also covers the next token, ``kv_cache_utils.get_request_block_hasher``);
- the fake verifier of the reference harness (``SpecModel`` in
  ``drive_vllm.py``): draft i of a request verified at output position ``pos``
  is accepted iff drafts 1..i-1 were and ``u_i < p_i``, ``u_i`` the first 8
  bytes of ``sha256(f"{seed}:{req_id}:{pos}:{i}")`` (big-endian) / 2**64: a
  function of the request and position only, so the mirror and the harness
  accept the same drafts whatever they schedule around them.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from hashlib import sha256
from typing import TYPE_CHECKING, Any

import attrs

from tickgate import ConfigError, Request

if TYPE_CHECKING:  # pragma: no cover
    from .request import RequestState

SPEC_METHODS = ("ngram", "eagle", "draft_model")
#: the reference harness's default acceptance rate (drive_vllm.py OPTIONAL_CONFIG)
DEFAULT_ACCEPTANCE = 0.7
#: the drafter's cost per draft position, as a fraction of a decode step of the
#: target model over the same sequences (tickgate's estimate, not measured):
#: n-gram matching runs on the CPU between steps; an EAGLE head is one decoder
#: layer plus the LM head, run once per draft position; a draft model (typically
#: 1/10 to 1/20 of the target) is a whole small model per draft position, whose
#: fixed per-step overheads do not shrink with its size
DRAFTER_COST = {"ngram": 0.0, "eagle": 0.05, "draft_model": 0.15}

_RATE = {"type": "number", "minimum": 0, "maximum": 1}
SPEC_OPTIONS: Mapping[str, Any] = {
    "num_speculative_tokens": {
        "type": "integer",
        "minimum": 0,
        "maximum": 1024,
        "description": "Drafts per request and step (vLLM's speculative_config "
        "num_speculative_tokens; 0, the default, turns speculative "
        "decoding off).",
    },
    "spec_method": {
        "enum": list(SPEC_METHODS),
        "description": "The drafter (speculative_config method): ngram (default), eagle or "
        "draft_model; what each changes in scheduling is in docs/vllm.md.",
    },
    "acceptance_rates": {
        "anyOf": [_RATE, {"type": "array", "items": _RATE, "minItems": 1, "maxItems": 1024}],
        "description": "Probability that draft i is accepted given drafts 1..i-1 were: one "
        "value for every position or one per position (default 0.7).",
    },
    "seed": {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**63 - 1,
        "description": "Seed of the acceptance draws (default 0), as the vLLM reference harness uses it.",
    },
    "spec_drafter_cost": {
        "type": "number",
        "minimum": 0,
        "maximum": 100,
        "description": "tickgate only: the drafter's cost per draft position as a fraction of "
        "a decode step (default by method: ngram 0, eagle 0.05, draft_model "
        "0.15).",
    },
}


class SpecDecoding:
    """The scheduler-side state of speculative decoding for one engine."""

    def __init__(self, cfg: Any) -> None:
        k = cfg.num_speculative_tokens
        rates = cfg.acceptance_rates
        if not isinstance(rates, (list, tuple)):
            rates = [rates] * k
        if len(rates) != k:
            raise ConfigError(
                f"expected one value or {k} (one per draft position, "
                f"num_speculative_tokens is {k}), found {len(rates)}",
                option="acceptance_rates",
            )
        thr = cfg.long_prefill_token_threshold
        if 0 < thr < 1 + k:
            # S.schedule's waiting loop pads a one-token admission to 1 + K, then caps it
            # at the threshold and asserts num_new_tokens == 1 + num_spec_tokens
            raise ConfigError(
                f"{thr} is below 1 + num_speculative_tokens "
                f"({1 + k}); vLLM 0.33's scheduler fails an assertion when it pads an "
                "admission to 1 + K tokens (pad_spec_decode in Scheduler.schedule)",
                option="long_prefill_token_threshold",
            )
        self.k = k
        self.method = cfg.spec_method
        self.rates = [float(p) for p in rates]
        self.seed = cfg.seed
        self.lookahead = k if self.method in ("eagle", "draft_model") else 0  # VC.num_lookahead_tokens
        self.draft_slots = 1 if self.method == "draft_model" else 0  # SC.max_num_new_slots_for_drafting
        self.can_skip = self.lookahead > 0  # S.can_skip_drafts (the V2 model runner)
        eagle_cache = self.method == "eagle" and cfg.enable_prefix_caching
        offload = cfg.kv_offload_cpu_blocks > 0
        # VC.num_hash_lookahead_tokens: EAGLE's block hashes cover the next token, except
        # with a KV connector, which keeps the legacy hashes ...
        self.hash_lookahead = 1 if eagle_cache and not offload else 0
        # ... and then the prefix cache drops the last block of every hit instead
        # (SC.use_eagle_block_drop; FullAttentionManager.find_longest_cache_hit)
        self.eagle_block_drop = eagle_cache and offload
        cost = cfg.spec_drafter_cost
        self.drafter_cost = DRAFTER_COST[self.method] if cost is None else float(cost)
        #: Request.spec_token_ids: drafts a running request holds for its next schedule (count)
        self.drafts: dict[RequestState, int] = {}
        #: Request.is_prefill_chunk: scheduled last with prompt left to compute
        self.chunking: set[RequestState] = set()
        #: what the drafter runs over after this step: (sequences, their tokens); read by drafter_ms
        self.drafted = (0, 0)
        # totals (the report's "speculative" section)
        self.verifications = 0  # request-steps with real drafts verified
        self.draft_tokens = 0  # real drafts verified
        self.pads = 0  # admissions padded with -1 drafts (pad_spec_decode)
        self.pad_tokens = 0
        self.accepted = 0
        self.generated = 0  # tokens sampled by verifying requests (1 + accepted each, before stops)
        self.drafted_per_pos = [0] * k
        self.accepted_per_pos = [0] * k
        self.skip_steps = 0
        self.steps = 0
        self.output_tokens = 0  # output tokens appended in all steps (after stops)

    def uniform(self, req_id: str, pos: int, i: int) -> float:
        """The harness's draw for draft ``i`` (1-based) at output position ``pos``."""
        h = sha256(f"{self.seed}:{req_id}:{pos}:{i}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2.0**64

    def num_accepted(self, req_id: str, pos: int, n: int) -> int:
        """Drafts accepted of the ``n`` scheduled: in order, up to the first rejected."""
        rates = self.rates
        acc = 0
        while acc < n and self.uniform(req_id, pos, acc + 1) < rates[acc]:
            acc += 1
        return acc

    def verified(self, n: int, acc: int, pad: bool) -> None:
        """Count one verification of ``n`` drafts (``pad``: -1 placeholders) with ``acc`` accepted."""
        if pad:
            self.pads += 1
            self.pad_tokens += n
            return
        self.verifications += 1
        self.draft_tokens += n
        self.accepted += acc
        self.generated += 1 + acc
        dp = self.drafted_per_pos
        for i in range(n):
            dp[i] += 1
        ap = self.accepted_per_pos
        for i in range(acc):
            ap[i] += 1

    def drafter_ms(self, timing: Any) -> float:
        """The drafter's time in this step: ``drafter_cost`` x K decode steps of the
        target over the sequences it drafts for (none when the step skips drafting)."""
        seqs, ctx = self.drafted
        self.drafted = (0, 0)
        if not seqs or not self.drafter_cost:
            return 0.0
        return self.drafter_cost * self.k * timing.step_ms(0, seqs, ctx)

    def summary(self) -> dict[str, Any]:
        """The report's ``scheduler.speculative`` section."""
        ver = self.verifications
        return {
            "method": self.method,
            "num_speculative_tokens": self.k,
            "acceptance_rates": self.rates,
            "num_lookahead_tokens": self.lookahead,
            "draft_slots": self.draft_slots,
            "num_hash_lookahead_tokens": self.hash_lookahead,
            "drafter_cost": self.drafter_cost,
            "verifications": ver,
            "drafted_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted,
            "acceptance_rate": round(self.accepted / self.draft_tokens, 6) if self.draft_tokens else 0.0,
            # conditional on the position being drafted (vLLM's per-position counters)
            "acceptance_rate_per_position": [
                round(a / d, 6) if d else 0.0 for a, d in zip(self.accepted_per_pos, self.drafted_per_pos)
            ],
            "drafted_per_position": list(self.drafted_per_pos),
            "accepted_per_position": list(self.accepted_per_pos),
            # vLLM's "mean acceptance length": tokens per verification, the bonus token included
            "mean_acceptance_length": round(self.generated / ver, 6) if ver else 0.0,
            "padded_admissions": self.pads,
            "pad_tokens": self.pad_tokens,
            "skip_drafts_steps": self.skip_steps,
            "output_tokens_per_step": round(self.output_tokens / self.steps, 6) if self.steps else 0.0,
            # what vLLM's SpecDecodingStats count (make_spec_decoding_stats): pads are drafts there
            "vllm_spec_decoding_stats": {
                "num_drafts": ver + self.pads,
                "num_draft_tokens": self.draft_tokens + self.pad_tokens,
                "num_accepted_tokens": self.accepted,
                "num_draft_tokens_per_pos": [d + self.pads for d in self.drafted_per_pos],
                "num_accepted_tokens_per_pos": list(self.accepted_per_pos),
            },
        }


def lookahead_block_keys(r: Request, keys: list[Hashable], block_size: int) -> list[Hashable]:
    """The shareable prompt block keys when each hash also covers the next token
    (``get_request_block_hasher`` with ``num_hash_lookahead_tokens = 1``): block i
    is keyed only while the prompt holds token ``(i + 1) * block_size``; the last
    full block of a prompt that ends on a block boundary is keyed by the first
    output token, unique to the request (:meth:`RequestState.key`).

    From ``prompt_token_ids``: the chain of :func:`.request.prompt_block_keys`
    with that token added. From workload block ids (no tokens): block i's key
    chained with block i + 1's, i.e. the next whole block must match, not only its
    first token (a simplification, docs/vllm.md).
    """
    ids = r.prompt_token_ids
    if ids is not None:
        out: list[Hashable] = []
        parent = 0
        for i in range(min(len(keys), (len(ids) - 1) // block_size)):
            end = (i + 1) * block_size
            parent = hash((parent, ids[end - block_size : end], ids[end]))
            out.append(parent)
        return out
    return [hash((a, b)) for a, b in itertools.pairwise(keys)]


def drafts_unused(q: RequestState, before: int, n: int) -> bool:
    """``Scheduler._drafts_unused``: the drafts proposed after this step cannot be
    verified, because the step is a non-final prefill chunk or samples the
    request's last token (it finishes even if every draft is rejected)."""
    return before + n < q.num_tokens or q.num_output_tokens + 1 >= q.max_tokens


def no_spec(cfg: Any) -> SpecDecoding:
    """The drafts' state of an engine without speculative decoding (K = 0: no draft,
    no lookahead, no draft slot), for the extended step when only offload needs it."""
    return SpecDecoding(
        attrs.evolve(
            cfg, num_speculative_tokens=0, spec_method="ngram", acceptance_rates=0.7, spec_drafter_cost=None
        )
    )
