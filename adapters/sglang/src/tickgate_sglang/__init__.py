"""The SGLang adapter: the sglang scheduler mirror (scheduler, options, schedule_policy, prefill_adder,
radix_cache, kv_memory, decode_batch, request_state, step_result, scheduler_state), readers of what SGLang and
`sglang.bench_serving` write, the workload reader of a bench_serving run (`bench_workload`), the
`conformance sglang` check."""

__version__ = "0.1.0"
