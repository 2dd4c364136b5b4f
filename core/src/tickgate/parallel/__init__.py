"""Helper processes: parts of a command that run in a forked child on a second core.

Two parts of a large replay do not depend on the scheduler's decisions: reading
the workload (:mod:`.prefetch`) and rolling records up into the fingerprint and
summary (:mod:`.sidecar`); an import reads the second half of a large trace in a
child (:mod:`.import_parts`); a gate reads the baseline in a child while it
reads the candidate (:mod:`.gate_sides`). All four are built the same way:

* :mod:`.switch` -- the one switch and threshold, :func:`.switch.helpers_wanted`
  (``TICKGATE_PARALLEL=0`` off, ``=1`` forced, else big inputs and two cores);
* :mod:`.frames` -- the one frame protocol over their pipes;
* :mod:`.helper` -- the one :class:`~.helper.Helper` context: fork, stream frames,
  the child's errors raised in the parent, the child stopped and reaped.

Results are identical with or without helpers (docs/DEVELOPING.md, "Helper processes").
"""
