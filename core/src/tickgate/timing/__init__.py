"""Timing from the model and the hardware: the ``roofline`` timing model, its
catalogue of models and GPUs, KV capacity from memory, the check and fit of
timing models against published measurements and your own runs (docs/timing.md),
and the ``expected-performance`` gate signal built on them (docs/calibrate.md)."""
