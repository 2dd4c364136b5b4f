"""Helper processes: the mechanism by which parts of a command run in a forked child on a second core.

Four commands use it, each from its own package: a large replay reads the workload ahead
(:mod:`tickgate.workload.prefetch`) and rolls records up into the fingerprint and summary
(:mod:`tickgate.replay.sidecar`); an import reads the second half of a large trace in a child
(:mod:`tickgate.importers.import_parts`); a gate reads the baseline in a child while it reads the
candidate (:mod:`tickgate.gate.sides`). All four are built the same way:

* :mod:`.switch` -- the one switch and threshold, :func:`.switch.helpers_wanted`
  (``TICKGATE_PARALLEL=0`` off, ``=1`` forced, else big inputs and two cores);
* :mod:`.frames` -- the one frame protocol over their pipes;
* :mod:`.helper` -- the one :class:`~.helper.Helper` context: fork, stream frames,
  the child's errors raised in the parent, the child stopped and reaped.

Results are identical with or without helpers (docs/DEVELOPING.md, "Helper processes").
"""
