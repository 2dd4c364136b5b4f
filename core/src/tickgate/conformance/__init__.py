"""The conformance of a scheduler mirror with a recorded run of its real engine: read the reference
harness's workload and per-step lines, replay the mirror, compare step by step (:mod:`.check`). The
adapters reach it through the public API (``conformance_command`` ...)."""
