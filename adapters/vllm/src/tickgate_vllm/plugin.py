"""Entry point ``vllm = tickgate_vllm.plugin``: registers this adapter's readers (native output formats, streaming evidence)'s plugins.

Implementation modules are imported inside the hooks (lazily).
"""

from __future__ import annotations

from tickgate import hookimpl  # noqa: F401  (hooks are added as the adapter grows)
