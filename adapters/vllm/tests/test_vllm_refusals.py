"""The mirror refuses, when it is built, what vLLM 0.33 refuses when it starts
(``SchedulerConfig.verify_max_model_len``), naming the option; what vLLM accepts builds."""

from __future__ import annotations

import pytest

from tickgate import ConfigError
from tickgate_vllm.v1.options import V1Config

BASE = {"block_size": 16, "num_gpu_blocks": 64, "max_num_seqs": 8, "max_num_batched_tokens": 256}


@pytest.mark.parametrize("extra, option, words", [
    ({"enable_chunked_prefill": False, "max_model_len": 257}, "max_num_batched_tokens", "(256) smaller than max_model_len (257)"),
    ({"enable_chunked_prefill": False}, "max_num_batched_tokens", "max_model_len (unset"),
    ({"max_num_seqs": 257}, "max_num_batched_tokens", "smaller than max_num_seqs (257)"),
    ({"max_model_len": 100, "long_prefill_token_threshold": 101}, "long_prefill_token_threshold", "(101) greater"),
])
def test_what_vllm_refuses_is_refused(extra, option, words):
    with pytest.raises(ConfigError) as err:
        V1Config.from_options({**BASE, **extra})
    assert err.value.option == option and words in str(err.value)


@pytest.mark.parametrize("extra", [
    {"enable_chunked_prefill": False, "max_model_len": 256},  # the budget equals the model length
    {"max_num_seqs": 256},
    {"max_model_len": 100, "long_prefill_token_threshold": 100},
    {"long_prefill_token_threshold": 10_000},  # no max_model_len: unlimited
])
def test_what_vllm_accepts_builds(extra):
    assert V1Config.from_options({**BASE, **extra}).max_num_batched_tokens == 256
