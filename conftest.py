"""Settings for every test in the repository (tests/, adapters/*/tests).

Property tests draw the same examples on every run (CI is a gate: a run must not fail because it
happened to draw a new example). Set TICKGATE_HYPOTHESIS_EXPLORE=1 to draw fresh random examples
when hunting for bugs (docs/DEVELOPING.md); pin what it finds with @example.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("tickgate-deterministic", derandomize=True)
settings.register_profile("tickgate-explore", derandomize=False)
settings.load_profile("tickgate-explore" if os.environ.get("TICKGATE_HYPOTHESIS_EXPLORE") else
                      "tickgate-deterministic")

#: the kit's fixtures (``tickgate_dist``) for every test, as a third-party adapter's conftest enables them
pytest_plugins = ["tickgate.testing"]
