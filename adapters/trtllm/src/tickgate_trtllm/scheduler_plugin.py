"""Entry point ``trtllm-scheduler = tickgate_trtllm.scheduler_plugin``: the trtllm
scheduling mirror (scheduler plugins), imported lazily inside the hooks."""

from __future__ import annotations

from tickgate import hookimpl  # noqa: F401
