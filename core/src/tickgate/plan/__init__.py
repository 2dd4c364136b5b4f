"""``tickgate plan``: the cheapest configuration whose replay meets every SLO
(docs/plan.md). :mod:`.spec` reads ``--slo`` / ``--vary``, :mod:`.pricing` prices a
configuration (GPUs, or dollars per hour: ``--cost``), :mod:`.search` chooses what to replay (bisection over a monotone
range), :mod:`.goodput` counts the requests that meet their SLOs, :mod:`.output`
writes PLAN.json and the table."""
