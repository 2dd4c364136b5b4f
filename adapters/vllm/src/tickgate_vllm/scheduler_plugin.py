"""Entry point ``vllm-scheduler = tickgate_vllm.scheduler_plugin``: the vllm
scheduling mirror (scheduler plugins), imported lazily inside the hooks."""

from __future__ import annotations

from tickgate import hookimpl  # noqa: F401
