"""Built-in gate signals; registered by :mod:`tickgate.gate.plugin` exactly as a
third party's would be."""
