"""``tickgate sweep``: one replay per point of a grid of policy variants over workloads
(docs/sweep.md). :mod:`.spec` reads and expands the sweep file, :mod:`.run` runs,
resumes and writes the results."""
