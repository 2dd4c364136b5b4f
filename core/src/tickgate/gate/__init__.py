"""The release gate: join baseline and candidate observations by request id,
let every configured gate signal (a plugin) judge the pair, and decide
promote / hold / rollback (or inconclusive) with a report that says what to do next.

Modules: :mod:`.inputs` (read bundles, neutral files, backend-mirror files),
:mod:`.observations` (columnar sides), :mod:`.join` (the :class:`Comparison`
signals receive), :mod:`.protocol` (:class:`SignalResult`, the signal
protocol), :mod:`.stats` (paired bootstrap, minimum sample sizes),
:mod:`.config`, :mod:`.runner`, :mod:`.segments`, :mod:`.report`,
:mod:`.api`. See docs/gate.md.
"""
