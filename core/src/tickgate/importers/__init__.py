"""Workload readers: public traces (Mooncake, Azure, BurstGPT, splitwise) into requests, one module
each, registered by :mod:`.builtin_readers`; :mod:`.import_parts` reads a large trace in two processes
(docs/importers.md). Benchmark-client runs are :mod:`tickgate.client_runs`' (they read the gate's readers)."""
