"""``tickgate sweep``: one replay per point of a grid of policy variants over workloads
(docs/sweep.md). :mod:`.spec` reads and expands the sweep file, :mod:`.run` runs,
resumes and writes the results, :mod:`.executor` is where points run (the interface,
the point runner, local processes) and :mod:`.ray_executor` the Ray tasks
(``tickgate[ray]``). ``tickgate plan`` replays its configurations the same way."""
