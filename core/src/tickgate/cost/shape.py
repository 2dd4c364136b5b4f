"""The GPUs a policy document takes: per pool, its replicas, their GPU kind and GPUs per replica.

``tickgate plan`` prices each configuration it replays with this (GPUs, or GPUs x the price of
their kind) and ``tickgate replay --prices`` bills a static fleet by it (docs/plan.md, "Cost").
It reads the document, not a built policy: a plan prices points before replaying them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["PoolShape", "gpus", "pool_shapes"]

#: the timing options that multiply the GPUs of one engine: tensor parallel x pipeline parallel x
#: attention data parallel (the roofline's layout, docs/timing.md; the MoE sizes split the same GPUs)
_ENGINE_SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "attention_dp_size")


@attrs.frozen
class PoolShape:
    """One pool of a configuration: ``replicas`` replicas of ``gpus_per_replica`` GPUs of kind
    ``gpu``. A configuration without a ``cluster`` section is one pool, ``default``, of one replica."""

    pool: str
    replicas: int
    #: the GPU as the policy names it (``timing.options.gpu``); None when it names none (a
    #: linear timing model) or gives the GPU's figures instead of a name
    gpu: str | None
    gpus_per_replica: int

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica


def pool_shapes(document: Mapping[str, Any]) -> tuple[PoolShape, ...]:
    """The pools of a policy document, in its order:

    - replicas: ``cluster.replicas``, or each of ``cluster.pools``' ``replicas``; 1 without a
      ``cluster`` section;
    - GPUs per replica: the timing model's ``tensor_parallel_size`` x ``pipeline_parallel_size`` x
      ``attention_dp_size`` (each 1 when unset), x ``data_parallel_size`` (engine ranks) of the
      pool, the cluster, or the scheduler's options (1 when unset);
    - the GPU kind: the timing model's ``gpu``; a pool's own ``timing`` section (where it has
      one) before the policy's.
    """
    cluster = document.get("cluster")
    if isinstance(cluster, Mapping):
        pools = cluster.get("pools")
        if isinstance(pools, Mapping) and pools:
            return tuple(
                _shape(str(name), _int(pool.get("replicas"), 1), pool, document)
                for name, pool in pools.items()
                if isinstance(pool, Mapping)
            )
        return (_shape("default", _int(cluster.get("replicas"), 1), cluster, document),)
    return (_shape("default", 1, {}, document),)


def gpus(document: Mapping[str, Any]) -> int:
    """GPUs a configuration takes: the sum over its pools of replicas x GPUs per replica
    (:func:`pool_shapes`)."""
    return sum(shape.gpus for shape in pool_shapes(document))


def _shape(name: str, replicas: int, section: Mapping[str, Any], document: Mapping[str, Any]) -> PoolShape:
    timing = section.get("timing", document.get("timing"))
    options: Any = {}
    if isinstance(timing, Mapping):
        # a named model keeps its options under ``options``; the short spelling has them inline
        options = timing.get("options", {}) if "name" in timing else timing
    if not isinstance(options, Mapping):
        options = {}
    per_engine = 1
    for key in _ENGINE_SIZES:
        per_engine *= _int(options.get(key), 1)
    gpu = options.get("gpu")
    return PoolShape(
        pool=name,
        replicas=replicas,
        gpu=gpu if isinstance(gpu, str) else None,
        gpus_per_replica=per_engine * _data_parallel(section, document),
    )


def _data_parallel(section: Mapping[str, Any], document: Mapping[str, Any]) -> int:
    scheduler = section.get("scheduler", document.get("scheduler"))
    sched_options = scheduler.get("options", {}) if isinstance(scheduler, Mapping) else {}
    dp = section.get("data_parallel_size")
    cluster = document.get("cluster")
    if dp is None and isinstance(cluster, Mapping):
        dp = cluster.get("data_parallel_size")
    if dp is None and isinstance(sched_options, Mapping):
        dp = sched_options.get("data_parallel_size")
    return _int(dp, 1)


def _int(value: Any, default: int) -> int:
    return value if type(value) is int and value > 0 else default
