"""The seed scheduler (:mod:`.scheduler`): conservative paged reservation, budgeted admission,
round-robin decode; the default policy's scheduler, registered by :mod:`.builtin_scheduler`."""
