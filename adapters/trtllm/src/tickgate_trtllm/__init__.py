"""tickgate adapter for trtllm."""

__version__ = "0.1.0"
