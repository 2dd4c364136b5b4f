"""CPU KV offload's options in the ``vllm-v1`` mirror (merged into :mod:`.options`): the CPU tier's
size (vLLM's ``--kv-offloading-size``, in chunks), the ``OffloadingConnector``'s
``kv_connector_extra_config`` keys the mirror models, the reference harness's worker latency in steps,
and the host link's bandwidth for timed replays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_INT0 = {"type": "integer", "minimum": 0, "maximum": 1_000_000_000}


OFFLOAD_OPTIONS: Mapping[str, Any] = {
    "kv_offload_cpu_blocks": {
        **_INT0,
        "description": "CPU tier size in chunks of blocks_per_chunk blocks "
        "(vLLM's --kv-offloading-size in chunks; 0, the default, "
        "turns offloading off).",
    },
    "kv_offload_extra_config": {
        "type": "object",
        "additionalProperties": False,
        "description": "The OffloadingConnector's kv_connector_extra_config keys the mirror models.",
        "properties": {
            "blocks_per_chunk": {
                "type": "integer",
                "minimum": 1,
                "maximum": 4096,
                "description": "GPU blocks per CPU chunk (default 1).",
            },
            "store_threshold": {
                "type": "integer",
                "minimum": 0,
                "maximum": 1_000_000,
                "description": "Offers of a chunk before it is stored (default 0: at once).",
            },
        },
    },
    "kv_offload_load_steps": {
        **_INT0,
        "description": "Steps an async load takes: issued in step t, done in "
        "step t + this (default 0, as the reference harness).",
    },
    "kv_offload_store_steps": {
        **_INT0,
        "description": "Steps a store takes (default 1: the worker submits a "
        "step's stores at the start of the next step).",
    },
    "kv_offload_host_bandwidth_gb_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 100_000,
        "description": "tickgate only, timed replays: GPU<->CPU bandwidth per "
        "direction, GB/s (default 64, PCIe 5.0 x16).",
    },
}


DEFAULT_HOST_BANDWIDTH_GB_S = 64.0
