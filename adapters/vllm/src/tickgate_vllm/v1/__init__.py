"""The vllm-v1 scheduler mirror: :class:`.scheduler.VllmV1Scheduler` is one class whose paths are
mixins, one module each (docs/vllm.md, "Module layout", says which vLLM code each mirrors)."""
