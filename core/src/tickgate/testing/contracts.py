"""Contract tests for plugins chosen by a policy file's ``scheduler``,
``admission`` and ``timing`` sections, and the checks every plugin kind shares.

A contract is a plain class (pytest does not collect it: its name does not
start with ``Test``); a package subclasses it as ``TestSomething`` and sets
class attributes. Every inherited test goes through the same code paths as
``tickgate replay``: the installed entry points, ``load_policy`` and
``replay``.
"""

from __future__ import annotations

import importlib.metadata as md
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..host.registry import ENTRY_POINT_GROUP, PluginInfo
from ..interfaces import AdmissionContext, Clock
from ..interfaces.model import Request
from ..util.errors import InputError, TickgateError
from ..util.schemas import data_file
from .support import across_hash_seeds, canonical, contract_workload, fresh_registry, write_json

#: options no plugin should accept: not a mapping, and an unknown key
GARBAGE_OPTIONS: tuple[Any, ...] = (["not", "a", "mapping"], {"__no_such_option__": 1})


class PluginContract:
    """Checks for any registered plugin: set ``kind``, ``plugin_name`` and
    (recommended) ``distribution``, the distribution expected to provide it."""

    kind: ClassVar[str] = ""
    plugin_name: ClassVar[str] = ""
    distribution: ClassVar[str | None] = None
    #: options that must be rejected with a located error
    bad_options: ClassVar[tuple[Any, ...]] = GARBAGE_OPTIONS

    def info(self) -> PluginInfo:
        if not self.kind or not self.plugin_name:
            raise AssertionError(f"{type(self).__name__} must set kind and plugin_name")
        return fresh_registry().get(self.kind, self.plugin_name)

    def test_registered_through_an_entry_point(self) -> None:
        info = self.info()
        if self.distribution is not None:
            assert info.distribution == self.distribution
        assert info.version == md.version(info.distribution)
        names = {
            ep.name for ep in md.distribution(info.distribution).entry_points if ep.group == ENTRY_POINT_GROUP
        }
        assert info.entry_point in names, (
            f"{info.entry_point!r} is not a [{ENTRY_POINT_GROUP}] entry point of {info.distribution}"
        )

    def test_description_is_one_line(self) -> None:
        description = self.info().description
        assert description.strip() and "\n" not in description

    def test_options_schema_is_a_valid_json_schema(self) -> None:
        import jsonschema

        schema = getattr(self.info().obj, "options_schema", None)
        # a dict: jsonschema takes no other mapping for an object
        assert isinstance(schema, dict), "options_schema must be a JSON Schema (a dict)"
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        json.dumps(schema, allow_nan=False)  # it is shown by `tickgate schema`: plain JSON only
        for bad in self.bad_options:
            assert not cls(schema).is_valid(bad), f"options schema accepts garbage: {bad!r}"


class SelectionContract(PluginContract):
    """Shared by plugins a policy section selects; replays :func:`contract_workload`
    (or ``workload``, a path) under :meth:`policy_document`."""

    section: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Any]] = {}
    workload: ClassVar[Path | None] = None

    def policy_document(self) -> dict[str, Any]:
        raise NotImplementedError

    def write_policy(self, tmp_path: Path, document: Mapping[str, Any] | None = None) -> Path:
        return write_json(tmp_path / "contract-policy.yaml", document or self.policy_document())

    def workload_path(self, tmp_path: Path) -> Path:
        return self.workload or write_json(tmp_path / "contract-workload.json", contract_workload())

    def run_replay(self, policy_path: Path, workload: Path) -> dict[str, Any]:
        from ..host.policy import load_policy
        from ..simulate import replay
        from ..workload.sources import open_requests

        fresh_registry()
        requests, inputs = open_requests(workload)
        return replay(requests, load_policy(policy_path), inputs=inputs)

    def test_policy_selects_it(self, tmp_path: Path) -> None:
        from ..host.policy import load_policy

        fresh_registry()
        selection = load_policy(self.write_policy(tmp_path)).selection(self.section)
        assert selection is not None and selection.plugin.name == self.plugin_name

    def test_bad_options_are_located_errors(self, tmp_path: Path) -> None:
        from ..host.policy import load_policy

        for bad in self.bad_options:
            doc = self.policy_document()
            doc[self.section]["options"] = bad
            path = self.write_policy(tmp_path, doc)
            fresh_registry()
            with pytest.raises(InputError) as caught:
                load_policy(path)
            err = caught.value
            assert err.path == str(path) and err.line is not None
            assert (err.json_path or "").startswith(f"$.{self.section}"), err

    def assert_selected(self, report: Mapping[str, Any], policy_path: Path) -> None:
        """The report names the plugin this contract checks."""
        assert report["plugins"][self.section]["name"] == self.plugin_name

    def test_replay_accounts_for_every_request(self, tmp_path: Path) -> None:
        policy = self.write_policy(tmp_path)
        report = self.run_replay(policy, self.workload_path(tmp_path))
        summary = report["summary"]
        assert summary["completed_requests"] + report["requests"]["rejected"] == summary["request_count"]
        assert summary["request_count"] > 0 and summary["final_kv_pages"] == 0
        self.assert_selected(report, policy)

    def test_replay_is_deterministic(self, tmp_path: Path) -> None:
        policy, workload = self.write_policy(tmp_path), self.workload_path(tmp_path)
        first = self.run_replay(policy, workload)
        assert canonical(self.run_replay(policy, workload)) == canonical(first)
        fingerprints = {
            json.loads(out)["summary"]["trace_fingerprint"]
            for out in across_hash_seeds("replay", str(policy), str(workload))
        }
        assert fingerprints == {first["summary"]["trace_fingerprint"]}

    def test_oversized_request_is_rejected_or_a_clean_error(self, tmp_path: Path) -> None:
        doc = contract_workload(4)
        doc["requests"].append(
            {"id": "huge", "prompt_tokens": 9_000_000, "max_output_tokens": 9_000_000, "arrival_tick": 0}
        )
        workload = write_json(tmp_path / "huge.json", doc)
        try:
            report = self.run_replay(self.write_policy(tmp_path), workload)
        except TickgateError:
            return
        statuses = {o["id"]: o["status"] for o in report["outcomes"]}
        assert statuses["huge"] == "rejected"


class SchedulerContract(SelectionContract):
    """Set ``plugin_name`` and ``policy`` (a policy file selecting the scheduler);
    ``options`` overrides the file's scheduler options when given."""

    kind = "scheduler"
    section = "scheduler"
    policy: ClassVar[Path | None] = None

    def policy_document(self) -> dict[str, Any]:
        from ..util.locations import load_yaml

        if self.policy is None:
            raise AssertionError(f"{type(self).__name__} must set policy (a policy file using the scheduler)")
        doc, _ = load_yaml(Path(self.policy))
        doc = dict(doc)
        doc["scheduler"] = dict(doc["scheduler"])
        if self.options:
            doc["scheduler"]["options"] = dict(self.options)
        return doc


class AdmissionPolicyContract(SelectionContract):
    """Set ``plugin_name`` and ``options``; the policy is the shipped default
    (seed scheduler) with ``admission`` replaced, and ``kv_allocator`` when set."""

    kind = "admission"
    section = "admission"
    kv_allocator: ClassVar[Mapping[str, Any] | None] = None
    base_policy: ClassVar[Path | None] = None

    def policy_document(self) -> dict[str, Any]:
        from ..util.locations import load_yaml

        doc, _ = load_yaml(Path(self.base_policy or data_file("policies", "default.yaml")))
        doc = dict(doc)
        doc["admission"] = {"name": self.plugin_name, "options": dict(self.options)}
        if self.kv_allocator is not None:
            doc["kv_allocator"] = dict(self.kv_allocator)
        return doc

    def test_queue_protocol(self) -> None:
        """enqueue / candidates / admitted / len agree: each queued request is
        offered once per walk, and admitting all of them empties the queue."""
        cls = self.info().obj
        ctx = AdmissionContext(
            kv_capacity_pages=256, page_size=16, timing=None, clock=Clock(), decode_slots=4
        )
        try:
            policy = cls.build(dict(self.options), ctx)
        except TickgateError as exc:
            pytest.skip(f"needs a richer context than the kit's unit context: {exc}")
        requests = [
            Request(
                **{k: v for k, v in r.items() if k != "prefix_blocks"},
                prefix_blocks=tuple(r["prefix_blocks"]),
            )
            for r in contract_workload(8)["requests"]
        ]
        queued = [r for r in requests if policy.enqueue(r, 0) is None]
        assert len(policy) == len(queued)
        for tick in range(1, len(queued) + 2):
            offered = list(policy.candidates(tick))
            assert len({r.id for r in offered}) == len(offered), "a request was offered twice in one walk"
            assert {r.id for r in offered} <= {r.id for r in queued}
            if not offered:
                break
            policy.admitted(offered[0], tick)
        assert len(policy) == 0 or not list(policy.candidates(len(queued) + 2))


#: step shapes a timing model is checked on: (prefill tokens, decoding sequences, context tokens)
STEP_SHAPES: tuple[tuple[int, int, int], ...] = tuple(
    (prefill, seqs, context)
    for prefill in (0, 1, 512, 8192)
    for seqs in (0, 1, 7, 256)
    for context in (0, 1, 4096, 1_000_000)
)


def decode_steps(
    model: Any, start: float, seqs: int, context: int, steps: int, until: float | None
) -> tuple[int, float]:
    """What ``decode_span`` must equal: ``step_ms`` added one step at a time, a
    step running only if it starts before ``until`` (the engine's way)."""
    now, n = start, 0
    while n < steps and (until is None or now < until):
        now = now + model.step_ms(0, seqs, context + n * seqs)
        n += 1
    return n, now


class TimingModelContract(SelectionContract):
    """Set ``plugin_name`` and ``options``; the policy is the shipped default (seed
    scheduler) with ``timing: {name: <plugin_name>, options: <options>}``, and the
    workload the kit's, its arrivals in ms (a timed replay)."""

    kind = "timing_model"
    section = "timing"
    base_policy: ClassVar[Path | None] = None

    def policy_document(self) -> dict[str, Any]:
        from ..util.locations import load_yaml

        doc, _ = load_yaml(Path(self.base_policy or data_file("policies", "default.yaml")))
        doc = dict(doc)
        doc["timing"] = {"name": self.plugin_name, "options": dict(self.options)}
        return doc

    def workload_path(self, tmp_path: Path) -> Path:
        if self.workload is not None:
            return self.workload
        doc = contract_workload()
        for r in doc["requests"]:
            r["arrival_ms"] = 7.5 * r.pop("arrival_tick")
        return write_json(tmp_path / "contract-workload-ms.json", doc)

    def model(self) -> Any:
        return self.info().obj.build(dict(self.options))

    def assert_selected(self, report: Mapping[str, Any], policy_path: Path) -> None:
        from ..host.policy import load_policy

        timing = load_policy(policy_path).timing
        assert timing is not None and report["inputs"]["timing"] == timing.to_json()
        assert report["latency"]["ttft_ms"]["count"] > 0

    def test_steps_are_priced_as_documented(self) -> None:
        """A finite, non-negative float for every step shape, the same every time, and
        never less for more context (``decode_span`` bisects on that)."""
        import math

        model, again = self.model(), self.model()
        for prefill, seqs, context in STEP_SHAPES:
            ms = model.step_ms(prefill, seqs, context)
            assert isinstance(ms, float) and math.isfinite(ms) and ms >= 0, (prefill, seqs, context, ms)
            assert again.step_ms(prefill, seqs, context) == ms
            if context:
                assert model.step_ms(prefill, seqs, context - 1) <= ms, "less context must not cost more"

    def test_a_decode_span_equals_its_single_steps(self) -> None:
        """``decode_span`` holds exactly the steps, and ends on exactly the float, that
        adding ``step_ms`` one step at a time would, with and without an arrival ahead."""
        model = self.model()
        for seqs, context, steps in ((0, 0, 5), (1, 0, 300), (7, 4096, 1000), (64, 100_000, 70_000)):
            start = 12.25
            whole = decode_steps(model, start, seqs, context, steps, None)
            assert model.decode_span(start, seqs, context, steps) == whole
            middle = decode_steps(model, start, seqs, context, steps // 2, None)[1]
            for until in (start, start + 1e-9, middle, (start + whole[1]) / 2, whole[1], whole[1] + 1.0):
                assert model.decode_span(start, seqs, context, steps, until) == decode_steps(
                    model, start, seqs, context, steps, until
                ), (seqs, context, steps, until)
        assert model.decode_span(3.0, 2, 10, 0, 100.0) == (0, 3.0)

    def test_to_json_builds_the_model_again(self, tmp_path: Path) -> None:
        """The report's ``inputs.timing`` is a ``timing`` section that prices every step the same."""
        from ..host.policy import load_policy

        model = self.model()
        section = json.loads(json.dumps(model.to_json(), allow_nan=False))
        doc = self.policy_document()
        doc["timing"] = section
        fresh_registry()
        rebuilt = load_policy(self.write_policy(tmp_path, doc)).timing
        assert rebuilt is not None and rebuilt.to_json() == section
        for shape in STEP_SHAPES:
            assert rebuilt.step_ms(*shape) == model.step_ms(*shape)
