"""What every layer shares and nothing tickgate-specific: errors meant for users (:mod:`.errors`),
located JSON reading (:mod:`.locations`, :mod:`.jsonstream`, :mod:`.jsonio`), atomic writes
(:mod:`.atomic`), JSON Schema validation and shipped data files (:mod:`.schemas`), quantiles
(:mod:`.quantile`), terminal progress (:mod:`.progress`) and counts in messages (:mod:`.words`)."""
