"""Timing from the model and the hardware: the ``roofline`` timing model, its
catalogue of models and GPUs, KV capacity from memory, and the check and fit of
timing models against published measurements (docs/timing.md)."""
