"""KV-cache allocators of the seed scheduler: ``paged`` (:mod:`.paged`) and ``prefix-cache``
(:mod:`.prefix_cache`), registered by :mod:`.builtin_allocators`."""
