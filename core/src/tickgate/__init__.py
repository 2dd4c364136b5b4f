"""tickgate: deterministic inference-scheduling replay and release gates.

Plugin authors import everything they need from here::

    from tickgate import hookimpl
"""

from __future__ import annotations

from .hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["hookimpl", "__version__"]
