"""Sweep files: parse, validate (located errors) and expand into points.

A point is one workload and one assignment of values to dotted policy paths;
its policy document is the base policy document with those values set. Points
come in a fixed order: workloads as listed, then the grid's cartesian product
in the order its keys are written (the last key varies fastest), then the
``zip`` group (its i-th values together) fastest of all. Ids follow that order:
``p0000``, ``p0001``, ...
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError
from ..util.locations import Locations, json_path, load_yaml
from ..util.schemas import load_schema, validate


@attrs.frozen
class Workload:
    """One workload of the sweep: the file (resolved), as written, and how to read it."""

    path: Path
    label: str
    format: str = "workload"
    block_size: int | None = None
    limit: int | None = None


@attrs.frozen
class Point:
    id: str
    workload: Workload
    #: dotted policy path -> value, in the sweep file's order
    params: Mapping[str, Any]
    #: the policy document of this point (the base with ``params`` set)
    document: Mapping[str, Any]


@attrs.frozen
class Sweep:
    path: Path
    policy_path: Path
    points: tuple[Point, ...]


def load_sweep(path: Path) -> Sweep:
    """Read and check a sweep file; every error is one located line (exit 2)."""
    from ..host.policy import load_policy

    data, locs = load_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "a sweep file must be a mapping with 'policy', 'workloads' and 'grid'", line=1)
    schema = load_schema("sweep.schema.json")
    unknown = [key for key in data if key not in schema["properties"]]
    if unknown:  # at the key itself (the schema's error points at the whole mapping)
        allowed = ", ".join(sorted(schema["properties"]))
        raise InputError(
            path, f"unknown key {unknown[0]!r}; expected one of: {allowed}", **_at(locs, unknown[0])
        )
    validate(data, schema, file=path, locations=locs)
    base_dir = path.parent
    policy_path = base_dir / data["policy"]
    if not policy_path.is_file():
        raise InputError(path, f"policy file {policy_path} not found", **_at(locs, "policy"))
    load_policy(policy_path)  # the base itself must be a valid policy: its errors located in it
    base, _ = load_yaml(policy_path)
    workloads = [_workload(item, i, base_dir, path, locs) for i, item in enumerate(data["workloads"])]
    grid: dict[str, list[Any]] = data["grid"]
    zipped: dict[str, list[Any]] = data.get("zip", {})
    for section, axes in (("grid", grid), ("zip", zipped)):
        for key in axes:
            _check_path(base, key, policy_path, path, locs, section)
    for key in zipped:
        if key in grid:
            raise InputError(
                path, f"{key} is in both grid and zip; give it in one of them", **_at(locs, "zip", key)
            )
    lengths = {key: len(values) for key, values in zipped.items()}
    if len(set(lengths.values())) > 1:
        first = next(iter(lengths))
        odd = next(key for key, n in lengths.items() if n != lengths[first])
        raise InputError(
            path,
            f"zip lists must have the same length: {first} has {lengths[first]} values, "
            f"{odd} has {lengths[odd]}",
            **_at(locs, "zip", odd),
        )
    _check_size(path, locs, workloads, grid, next(iter(lengths.values()), None))
    for workload in workloads:
        check_requests(workload)
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    if zipped:
        n = next(iter(lengths.values()))
        rows = [{key: zipped[key][i] for key in zipped} for i in range(n)]
        combos = [{**combo, **row} for combo in combos for row in rows]
    total = len(workloads) * len(combos)
    width = max(4, len(str(total - 1)))
    points: list[Point] = []
    for workload in workloads:
        for params in combos:
            document = copy.deepcopy(base)
            for key, value in params.items():
                set_path(document, key, copy.deepcopy(value))
            points.append(Point(f"p{len(points):0{width}d}", workload, params, document))
    return Sweep(path, policy_path, tuple(points))


#: the most points one sweep may hold: each is a replay, and the grid is counted before it is
#: expanded (a 10^9-point product would otherwise be built in memory first)
MAX_POINTS = 100_000


def _check_size(
    path: Path,
    locs: Locations,
    workloads: list[Workload],
    grid: Mapping[str, list[Any]],
    zip_rows: int | None,
) -> None:
    factors = [len(workloads), *(len(values) for values in grid.values()), zip_rows or 1]
    total = math.prod(factors)
    if total > MAX_POINTS:
        shape = " x ".join(
            [f"{len(workloads)} workloads", *(f"{len(v)} {k}" for k, v in grid.items())]
            + ([f"{zip_rows} zip rows"] if zip_rows else [])
        )
        raise InputError(
            path,
            f"the sweep has {total:,} points ({shape}); one sweep runs at most {MAX_POINTS:,}: "
            "split it into several, or give fewer values",
            **_at(locs, "grid"),
        )


def _at(locs: Locations, *parts: Any) -> dict[str, Any]:
    where = json_path(parts)
    line, col = locs.get(where, (None, None))
    return {"line": line, "column": col, "json_path": where}


def _workload(item: Any, i: int, base_dir: Path, path: Path, locs: Locations) -> Workload:
    from ..host.registry import get_registry

    spec: dict[str, Any] = {"path": item} if isinstance(item, str) else item
    fmt = spec.get("format", "workload")
    resolved = base_dir / spec["path"]
    where = ("workloads", i) if isinstance(item, str) else ("workloads", i, "path")
    if not resolved.is_file():
        raise InputError(path, f"workload {resolved} not found", **_at(locs, *where))
    if fmt != "workload" and fmt not in get_registry().names("workload_reader"):
        names = ", ".join(["workload", *get_registry().names("workload_reader")])
        raise InputError(
            path, f"unknown format {fmt!r}; expected one of: {names}", **_at(locs, "workloads", i, "format")
        )
    if fmt == "workload" and "block_size" in spec:
        raise InputError(
            path,
            "block_size applies to trace formats; a workload file gives its own",
            **_at(locs, "workloads", i, "block_size"),
        )
    return Workload(resolved, spec["path"], fmt, spec.get("block_size"), spec.get("limit"))


def check_requests(workload: Workload) -> None:
    """Read every request the replays will read (the first ``limit``), once, before any
    replay: a request the workload's reader refuses is one located error now (exit 2,
    nothing written), not the same failure of every point after all of them ran. The
    requests stream past; memory does not grow with the workload."""
    from ..workload.sources import open_requests

    requests, _ = open_requests(
        workload.path, workload.format, block_size=workload.block_size, limit=workload.limit
    )
    for _ in requests:
        pass


def _check_path(base: Any, key: str, policy_path: Path, path: Path, locs: Locations, section: str) -> None:
    problem = path_problem(base, key, policy_path)
    if problem is not None:
        raise InputError(path, problem, **_at(locs, section, key))


def path_problem(base: Any, key: str, policy_path: Path | str) -> str | None:
    """Why a dotted path does not name a value the base policy document has (None: it does)."""
    node = base
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            parent = ".".join(parts[:depth]) or "the document"
            has = ", ".join(node) if isinstance(node, dict) else f"a {type(node).__name__}, not a mapping"
            return f"{key} is not in the policy {policy_path} ({parent} has: {has})"
        node = node[part]
    return None


def get_path(document: Mapping[str, Any], key: str) -> Any:
    node: Any = document
    for part in key.split("."):
        node = node[part]
    return node


def set_path(document: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = document
    for part in parents:
        node = node[part]
    node[last] = value


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
