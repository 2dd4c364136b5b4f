"""Workloads: the file format (:mod:`.format`, a pipe read once by :mod:`.piped`), opening any input as
requests (:mod:`.sources`, with :mod:`.prefetch` reading ahead in a helper process), ``tickgate
generate`` (:mod:`.generate`, its time-varying rates in :mod:`.rate_profile`) and the runs of prefix-block ids (:mod:`.block_runs`) (docs/workload.md)."""
