"""Admission policies: the order and filter of a scheduler's waiting queue (``priority-fcfs``, the
default; ``sla-lanes``, ``deadline-edf``, ``fair-share``, ``aimd``, ``lpm``), one module each,
registered by :mod:`.builtin_policies` (docs/admission.md)."""
