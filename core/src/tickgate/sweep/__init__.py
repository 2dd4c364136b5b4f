"""``tickgate sweep``: one replay per point of a grid of policy variants over workloads
(docs/sweep.md). :mod:`.spec` reads and expands the sweep file, :mod:`.run` runs, resumes and writes
the results (a point's line: :mod:`.headline`), :mod:`.task` is a point as plain data and the point
runner, :mod:`.executor` where points run (local processes) and :mod:`.ray_executor` the Ray tasks
(``tickgate[ray]``). ``tickgate plan`` replays its configurations the same way."""
