"""tickgate-example-adapter: a complete third-party tickgate plugin package.

It reads an engine's own CSV format into neutral observations (the
``example-csv`` backend mirror) and adds an admission policy
(``shortest-prompt-aging``). Copy it to start an adapter for an engine tickgate
does not ship (llama.cpp, an in-house server, ...).
"""

__version__ = "0.1.0"
