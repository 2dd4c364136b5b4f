"""Autoscalers: the built-in plugins that size a fleet's pools through a replay
(docs/autoscaling.md). The fleet (:mod:`tickgate.fleet.scaling`) asks them; they
recommend, it acts."""
