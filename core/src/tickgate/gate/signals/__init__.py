"""Built-in gate signals; registered by :mod:`tickgate.gate.signals.builtin_signals` exactly as a
third party's would be."""
