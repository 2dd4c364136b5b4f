"""Benchmark-client runs as workloads: what ``vllm bench serve``, ``sglang.bench_serving``, aiperf or
genai-perf sent, replayed (``tickgate import``; docs/importers.md, "Benchmark-client runs").

The bridge between the two flows: a client's file is read by the gate's reader of it
(:mod:`tickgate.readers`) and becomes requests of the replay's workload (:mod:`tickgate.importers`,
:mod:`tickgate.workload`), so it sits above both. :mod:`.reader` is the base every client's reader
subclasses (the adapters' too, as ``tickgate.ClientRunReader``), :mod:`.formats` the aiperf and
genai-perf readers, registered by :mod:`.builtin_readers`.
"""
