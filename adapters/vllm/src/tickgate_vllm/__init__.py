"""tickgate adapter for vllm."""

__version__ = "0.1.0"
