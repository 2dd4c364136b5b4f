"""The vLLM adapter: the vllm-v1 scheduler mirror (`v1/`), readers of what vLLM and `vllm bench serve`
write (bench results, /metrics, KV events, SSE), the workload reader of a bench run (`bench_workload`),
the `conformance vllm` check."""

__version__ = "0.1.0"
