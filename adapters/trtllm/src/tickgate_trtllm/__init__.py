"""The TensorRT-LLM adapter: the trtllm scheduler mirror (scheduler, options, capacity, micro_batch, block and
prefix reuse), readers of what TensorRT-LLM and trtllm-bench write."""

__version__ = "0.1.0"
