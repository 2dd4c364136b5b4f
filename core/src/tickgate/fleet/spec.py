"""The ``cluster:`` policy section, checked and resolved (docs/fleets.md).

The schema (``schemas/policy.schema.json``, ``$defs/cluster``) has already
checked shapes and ranges when :func:`fleet_spec` runs; this module checks what
a schema cannot say (a fleet needs a timing model; ``replicas`` or ``pools``,
not both; a disaggregated fleet needs a prefill and a decode pool and a
transfer figure; data-parallel ranks need a scheduler that has them), resolves
every pool's scheduler and router plugin (their options validated by their own
schemas) and locates every refusal in the policy file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..host.policy import Policy, Selection, _select
from ..host.registry import Registry, get_registry
from ..interfaces import optional_attribute
from ..util.errors import InputError
from ..util.words import plural

__all__ = ["DEFAULT_ROUTER", "AutoscaleSpec", "FleetSpec", "PoolSpec", "TransferSpec", "fleet_spec"]

#: the router of a ``cluster`` section that names none
DEFAULT_ROUTER = "round-robin"
ROLES = ("mixed", "prefill", "decode")


@attrs.frozen
class TransferSpec:
    """KV transfer from a prefill replica to a decode replica: ``latency_ms +
    bytes / bandwidth``, bytes = prompt tokens x ``kv_bytes_per_token``."""

    bandwidth_bytes_per_ms: float
    latency_ms: float
    kv_bytes_per_token: float
    #: where the per-token figure came from: "policy" or the timing model's model
    bytes_source: str

    def ms(self, tokens: int) -> float:
        return self.latency_ms + tokens * self.kv_bytes_per_token / self.bandwidth_bytes_per_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "bandwidth_gb_s": self.bandwidth_bytes_per_ms / 1e6,
            "latency_ms": self.latency_ms,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_source": self.bytes_source,
        }


@attrs.frozen
class AutoscaleSpec:
    """``cluster.autoscaler`` and ``cluster.lifecycle``, resolved (docs/autoscaling.md)."""

    autoscaler: Selection
    interval_ms: float
    window_ms: float
    #: pool name -> (min_replicas, max_replicas)
    bounds: Mapping[str, tuple[int, int]]
    provisioning_ms: float
    load_ms: float
    warmup_ms: float
    #: where the load time came from: "policy" or the bandwidth and weight bytes it was computed from
    load_source: str

    @property
    def startup_ms(self) -> float:
        """From the decision to a replica that serves: provisioning, model load, warm-up."""
        return self.provisioning_ms + self.load_ms + self.warmup_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.autoscaler.plugin.name,
            "options": dict(self.autoscaler.options),
            "interval_s": self.interval_ms / 1000.0,
            "window_s": self.window_ms / 1000.0,
            "bounds": {
                pool: {"min_replicas": lo, "max_replicas": hi} for pool, (lo, hi) in self.bounds.items()
            },
            "lifecycle": {
                "provisioning_s": self.provisioning_ms / 1000.0,
                "load_s": round(self.load_ms / 1000.0, 6),
                "load_source": self.load_source,
                "warmup_s": self.warmup_ms / 1000.0,
            },
        }


@attrs.frozen
class PoolSpec:
    name: str
    role: str
    replicas: int
    scheduler: Selection
    router: Selection
    data_parallel_size: int
    lockstep: bool
    #: the policy the pool's schedulers are built from (its own scheduler section in place)
    policy: Policy


@attrs.frozen
class FleetSpec:
    pools: tuple[PoolSpec, ...]
    seed: int
    transfer: TransferSpec | None
    autoscale: AutoscaleSpec | None = None

    @property
    def disaggregated(self) -> bool:
        return any(p.role != "mixed" for p in self.pools)

    def to_json(self) -> dict[str, Any]:
        """The fleet as the report's ``inputs.cluster`` gives it."""
        out: dict[str, Any] = {
            "seed": self.seed,
            "pools": [
                {
                    "name": p.name,
                    "role": p.role,
                    "replicas": p.replicas,
                    "data_parallel_size": p.data_parallel_size,
                    "lockstep": p.lockstep,
                    "scheduler": p.scheduler.plugin.name,
                    "router": {"name": p.router.plugin.name, "options": dict(p.router.options)},
                }
                for p in self.pools
            ],
        }
        if self.transfer is not None:
            out["transfer"] = self.transfer.to_json()
        if self.autoscale is not None:
            out["autoscaler"] = self.autoscale.to_json()
        return out


def fleet_shape(pools: Sequence[Mapping[str, Any]]) -> str:
    """What a fleet is made of, in words, from its ``to_json()`` pools (a report's
    ``inputs.cluster.pools``): ``1 replica with 4 data-parallel ranks``, ``3 replicas``, ``4
    replicas: 1 prefill, 3 decode``. A replica of several data-parallel ranks is one engine
    process whose ranks each have their own scheduler and KV pool: counting its ranks as
    replicas, or not saying it has them, misstates the fleet."""
    parts = []
    for pool in pools:
        count, ranks = pool["replicas"], pool.get("data_parallel_size", 1)
        part = plural(count, "replica") if len(pools) == 1 else f"{count} {pool['name']}"
        if ranks > 1:
            part += f" with {ranks} data-parallel ranks" + (" each" if count > 1 else "")
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return f"{plural(sum(pool['replicas'] for pool in pools), 'replica')}: {', '.join(parts)}"


def fleet_spec(policy: Policy, registry: Registry | None = None) -> FleetSpec | None:
    """The policy's fleet, or None when it has no ``cluster`` section."""
    cluster = policy.data.get("cluster")
    if cluster is None:
        return None
    registry = registry or get_registry()
    where = ("cluster",)
    if policy.timing is None:
        raise _error(policy, "a fleet runs on a clock in ms: add a 'timing' section (docs/timing.md)", where)
    if "replicas" in cluster and "pools" in cluster:
        raise _error(
            policy,
            "give either 'replicas' (copies of the scheduler section) or 'pools', not both",
            (*where, "pools"),
        )
    default_router = _router(policy, registry, cluster.get("router"), (*where, "router"))
    pools_doc: Mapping[str, Any] = cluster.get("pools") or {
        "default": {"replicas": cluster.get("replicas", 1)}
    }
    pools = []
    for name, doc in pools_doc.items():
        at = (*where, "pools", name) if "pools" in cluster else where
        pools.append(_pool(policy, registry, name, doc, at, cluster, default_router))
    spec_pools = tuple(pools)
    transfer = None
    roles = {p.role for p in spec_pools}
    if roles != {"mixed"}:
        if "mixed" in roles or roles != {"prefill", "decode"}:
            raise _error(
                policy,
                "a disaggregated fleet has prefill and decode pools only (roles: "
                f"{', '.join(sorted(roles))})",
                (*where, "pools"),
            )
        transfer = _transfer(policy, cluster.get("transfer"), (*where, "transfer"))
        for p in spec_pools:
            if p.role == "decode" and not optional_attribute(
                p.scheduler.plugin.obj, "accepts_transferred_kv"
            ):
                sched_at = (
                    (*where, "pools", p.name, "scheduler", "name")
                    if "scheduler" in pools_doc[p.name]
                    else ("scheduler", "name")
                )
                raise _error(
                    policy,
                    f'the decode pool\'s scheduler "{p.scheduler.plugin.name}" cannot take a '
                    "request whose prompt KV arrives computed (a disaggregated decode side); "
                    "schedulers that can: vllm-v1",
                    sched_at,
                )
    elif any("router" in doc for doc in pools_doc.values()):
        name = next(n for n, doc in pools_doc.items() if "router" in doc)
        raise _error(
            policy,
            "one router (cluster.router) routes over every replica of a fleet without roles; "
            "a pool's own router is for the prefill and decode pools of a disaggregated fleet",
            (*where, "pools", name, "router"),
        )
    elif "transfer" in cluster:
        raise _error(
            policy,
            "'transfer' is for disaggregated fleets (pools with roles prefill and decode)",
            (*where, "transfer"),
        )
    autoscale = _autoscale(policy, registry, cluster, pools_doc, spec_pools)
    return FleetSpec(spec_pools, int(cluster.get("seed", 0)), transfer, autoscale)


def _autoscale(
    policy: Policy,
    registry: Registry,
    cluster: Mapping[str, Any],
    pools_doc: Mapping[str, Any],
    pools: Sequence[PoolSpec],
) -> AutoscaleSpec | None:
    """``cluster.autoscaler`` and ``cluster.lifecycle``: each pool's bounds, checked against its
    starting replicas; the model load time from the policy or the timing model's weights."""
    where = ("cluster",)
    block = cluster.get("autoscaler")
    if block is None:
        scaling_keys: list[tuple[str, ...]] = [(*where, "lifecycle")] if "lifecycle" in cluster else []
        scaling_keys += [
            (*where, "pools", name, key)
            for name, doc in pools_doc.items()
            for key in ("min_replicas", "max_replicas")
            if key in doc
        ]
        if scaling_keys:
            key_at = scaling_keys[0]
            raise _error(
                policy, f"'{key_at[-1]}' is for a fleet that scales: add 'cluster.autoscaler'", key_at
            )
        return None
    at = (*where, "autoscaler")
    selection = _plugin(policy, registry, "autoscaler", block, at)
    bounds = {}
    for pool in pools:
        doc = pools_doc[pool.name]
        pool_at = (*where, "pools", pool.name) if "pools" in cluster else where
        lo = int(doc.get("min_replicas", block.get("min_replicas", 1)))
        hi = int(doc.get("max_replicas", block.get("max_replicas", max(4 * pool.replicas, lo))))
        if lo > hi:
            key_at = (*pool_at, "min_replicas") if "min_replicas" in doc else (*at, "min_replicas")
            raise _error(
                policy, f"min_replicas {lo} is above max_replicas {hi} for pool {pool.name!r}", key_at
            )
        if not lo <= pool.replicas <= hi:
            key_at = (
                (*pool_at, "replicas") if "replicas" in doc or "pools" in cluster else (*where, "replicas")
            )
            raise _error(
                policy,
                f"pool {pool.name!r} starts with {pool.replicas} replica(s), outside its bounds {lo}..{hi} "
                "(min_replicas..max_replicas)",
                key_at,
            )
        bounds[pool.name] = (lo, hi)
    life = cluster.get("lifecycle") or {}
    life_at = (*where, "lifecycle")
    if "load_s" in life and "load_gb_per_s" in life:
        raise _error(
            policy,
            "give the model load time as 'load_s' or 'load_gb_per_s', not both",
            (*life_at, "load_gb_per_s"),
        )
    load_ms = 1000.0 * float(life.get("load_s", 0.0))
    source = "policy"
    if "load_gb_per_s" in life:
        per_gpu = getattr(policy.timing, "weight_bytes_per_gpu", None)  # the roofline's (a property)
        if not isinstance(per_gpu, (int, float)) or per_gpu <= 0:
            raise _error(
                policy,
                "the timing model does not know the model's weight bytes: give 'load_s' instead of 'load_gb_per_s'",
                (*life_at, "load_gb_per_s"),
            )
        weights = float(per_gpu)
        load_ms = weights / (float(life["load_gb_per_s"]) * 1e9) * 1000.0
        source = f"{weights / 1e9:.3f} GB of weights per GPU at {life['load_gb_per_s']} GB/s"
    return AutoscaleSpec(
        autoscaler=selection,
        interval_ms=1000.0 * float(block.get("interval_s", 15.0)),
        window_ms=1000.0 * float(block.get("window_s", 60.0)),
        bounds=bounds,
        provisioning_ms=1000.0 * float(life.get("provisioning_s", 0.0)),
        load_ms=load_ms,
        warmup_ms=1000.0 * float(life.get("warmup_s", 0.0)),
        load_source=source,
    )


def _pool(
    policy: Policy,
    registry: Registry,
    name: str,
    doc: Mapping[str, Any],
    at: tuple[Any, ...],
    cluster: Mapping[str, Any],
    default_router: Selection,
) -> PoolSpec:
    if "scheduler" in doc:
        block = doc["scheduler"]
        sel = _select(
            registry,
            "scheduler",
            block["name"],
            block.get("options", {}),
            policy.path,
            policy.locations,
            (*at, "scheduler", "name"),
            (*at, "scheduler", "options"),
        )
        pool_policy = attrs.evolve(
            policy, selections={**policy.selections, "scheduler": sel}, scheduler_at=(*at, "scheduler")
        )
    else:
        selected = policy.selection("scheduler")
        if selected is None:
            raise _error(
                policy,
                f"pool {name!r} needs a scheduler: give it one, or the policy a 'scheduler' section",
                at,
            )
        sel = selected
        pool_policy = policy
    router = _router(policy, registry, doc["router"], (*at, "router")) if "router" in doc else default_router
    dp = int(doc.get("data_parallel_size", cluster.get("data_parallel_size", 1)))
    if dp > 1 and not optional_attribute(sel.plugin.obj, "supports_data_parallel"):
        key = (
            (*at, "data_parallel_size") if "data_parallel_size" in doc else ("cluster", "data_parallel_size")
        )
        raise _error(
            policy,
            f'scheduler "{sel.plugin.name}" has no data-parallel ranks (an engine mirror '
            "such as vllm-v1, sglang or trtllm has)",
            key,
        )
    return PoolSpec(
        name=name,
        role=doc.get("role", "mixed"),
        replicas=int(doc.get("replicas", 1)),
        scheduler=sel,
        router=router,
        data_parallel_size=dp,
        lockstep=bool(doc.get("lockstep", cluster.get("lockstep", False))),
        policy=pool_policy,
    )


def _router(
    policy: Policy, registry: Registry, block: Mapping[str, Any] | None, at: tuple[Any, ...]
) -> Selection:
    return _plugin(policy, registry, "router", block or {"name": DEFAULT_ROUTER}, at)


def _plugin(
    policy: Policy, registry: Registry, kind: str, block: Mapping[str, Any], at: tuple[Any, ...]
) -> Selection:
    """A ``{name, options}`` section of the cluster at ``at``: its plugin of ``kind``, options
    validated by the plugin's schema, errors located there."""
    return _select(
        registry,
        kind,
        block["name"],
        block.get("options", {}),
        policy.path,
        policy.locations,
        (*at, "name"),
        (*at, "options"),
    )


def _transfer(policy: Policy, doc: Mapping[str, Any] | None, at: tuple[Any, ...]) -> TransferSpec:
    if doc is None or "bandwidth_gb_s" not in doc:
        raise _error(
            policy,
            "a disaggregated fleet needs the KV transfer's figures: 'transfer: "
            "{bandwidth_gb_s: ..., latency_ms: ...}' (docs/fleets.md)",
            at if doc is not None else ("cluster", "pools"),
        )
    per_token = doc.get("kv_bytes_per_token")
    source = "policy"
    if per_token is None:
        timing = policy.timing
        gpu_bytes = getattr(timing, "kv_token_bytes", None)
        if not gpu_bytes:
            raise _error(
                policy,
                "the timing model does not know the model's KV bytes per token: give 'kv_bytes_per_token'",
                at,
            )
        per_token = gpu_bytes * int(getattr(timing, "tp", 1) or 1)
        model = getattr(timing, "model", None)
        source = f"timing model ({getattr(model, 'key', model)})"
    return TransferSpec(
        bandwidth_bytes_per_ms=float(doc["bandwidth_gb_s"]) * 1e6,
        latency_ms=float(doc.get("latency_ms", 0.0)),
        kv_bytes_per_token=float(per_token),
        bytes_source=source,
    )


def _error(policy: Policy, message: str, at: tuple[Any, ...]) -> InputError:
    found = policy.locate(*at)
    probe = list(at)
    while found["line"] is None and probe:
        probe.pop()
        found = {**policy.locate(*probe), "json_path": found["json_path"]}
    return InputError(policy.path, message, **found)
