"""One replay, on one engine or on a fleet: :func:`replay` reads the policy and hands the workload to
:mod:`tickgate.replay` (one engine) or :mod:`tickgate.fleet` (replicas behind a router). The choice is
made here, above both, so that neither package knows the other's caller."""

from __future__ import annotations

from .choice import check_buildable, replay

__all__ = ["check_buildable", "replay"]
