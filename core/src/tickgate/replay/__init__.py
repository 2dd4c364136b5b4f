"""The replay of one engine: a workload's requests run through a scheduler in the engine loop
(:mod:`.engine`), timed by the policy's timing model, into a report (:mod:`.report`, :mod:`.serialize`,
:mod:`.series`, :mod:`.token_gaps`); :func:`.run.replay_engine` is all of it in one call, and
:func:`tickgate.simulate.replay` chooses between it and a fleet."""
