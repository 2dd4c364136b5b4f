"""Time-varying traffic (issue 35): ``tickgate generate --rate-profile`` draws a non-homogeneous
Poisson (or gamma) process by time rescaling through a piecewise-linear rate, and ``tickgate
import --time-scale`` speeds a trace up or slows it down. The counts are checked against the
integral of the rate computed here by hand, not by the code under test."""

from __future__ import annotations

import itertools
import json
import math
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import FIXTURES, REPO, run_cli
from tickgate.importers._common import time_scaled
from tickgate.interfaces.model import Request
from tickgate.util.errors import InputError
from tickgate.workload.format import read_workload
from tickgate.workload.rate_profile import DAY_SHAPE, PRESETS, RateProfile, arrival_times_s, preset

FIXTURE = FIXTURES / "workloads" / "diurnal-day.json"
SOURCES = FIXTURES / "workloads" / "SOURCES.txt"
AZURE = FIXTURES / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"
LENGTHS = ("--input-len", "100:200", "--output-len", "10:20")

#: rises from 0, holds, falls to 0, stays at 0, rises again: every kind of segment
POINTS = [[0, 0], [100, 40], [160, 40], [220, 5], [300, 0], [350, 0], [400, 30]]


def cumulative(points: list[list[float]], t: float) -> float:
    """∫₀ᵗ r for the linear interpolation of ``points``, segment by segment (the exact area)."""
    total = 0.0
    for (t0, r0), (t1, r1) in itertools.pairwise(points):
        if t <= t0:
            break
        u = min(t, t1) - t0
        total += r0 * u + (r1 - r0) / (t1 - t0) * u * u / 2
    return total


def profile_of(points: list[list[float]]) -> RateProfile:
    return RateProfile(tuple((float(t), float(r)) for t, r in points), {"file": "test"})


def generate(tmp_path: Path, *args: str, name: str = "w.json", env: dict[str, str] | None = None) -> Path:
    out = tmp_path / name
    res = run_cli("generate", *LENGTHS, *args, "--output", str(out), "--quiet", env=env)
    assert res.returncode == 0, res.stderr
    return out


def arrivals_s(path: Path) -> list[float]:
    return [r.arrival_ms / 1000.0 for r in read_workload(path).requests]  # type: ignore[operator]  # all timed


# -- the counts follow the rate ------------------------------------------------------------------


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 3.0])
def test_counts_per_stretch_match_the_integral_of_the_rate(burstiness: float) -> None:
    """Every segment, cut in quarters (so a ramp's inversion is checked inside it, not only at its
    ends): the count is within 4 sigma of ∫ r there. A gamma renewal process of shape k counts with
    variance about Λ / k; the flat zero segment gets nothing."""
    times = arrival_times_s(profile_of(POINTS), burstiness=burstiness, seed=11, cap=None)
    assert np.all(np.diff(times) >= 0) and times[-1] <= POINTS[-1][0]
    edges = sorted({t0 + (t1 - t0) * q / 4 for (t0, _), (t1, _) in itertools.pairwise(POINTS) for q in range(5)})
    chi2 = 0.0
    for a, b in itertools.pairwise(edges):
        expected = cumulative(POINTS, b) - cumulative(POINTS, a)
        observed = int(np.count_nonzero((times > a) & (times <= b)))
        if expected == 0:
            assert observed == 0, (a, b)
            continue
        sigma = math.sqrt(expected / burstiness)
        assert abs(observed - expected) <= 4 * sigma + 1, (a, b, observed, expected)
        chi2 += (observed - expected) ** 2 / (expected / burstiness)
    assert len(times) == pytest.approx(cumulative(POINTS, 400), abs=4 * math.sqrt(cumulative(POINTS, 400) / burstiness))
    assert chi2 < 70  # 24 stretches with mass: the chi-square's 99.99th percentile is about 57 + margin


def test_the_peak_is_as_much_busier_than_the_trough_as_the_profile_says() -> None:
    """The shipped day (the workday preset): the hour around 14:00 against the one around 04:00,
    observed vs the integral of the rate."""
    header = json.loads(FIXTURE.open().readline().rstrip(",\n").removesuffix(', "requests": [') + "}")
    profile = header["source"]["rate_profile"]
    points = profile["points"]
    times = np.array(arrivals_s(FIXTURE))
    hour = profile["period_s"] / 24

    def around(h: int) -> tuple[int, float]:
        a, b = h * hour - hour / 2, h * hour + hour / 2
        return int(np.count_nonzero((times > a) & (times <= b))), cumulative(points, b) - cumulative(points, a)

    (peak, peak_expected), (trough, trough_expected) = around(14), around(4)
    assert abs(peak - peak_expected) <= 4 * math.sqrt(peak_expected)
    assert abs(trough - trough_expected) <= 4 * math.sqrt(trough_expected)
    shape = PRESETS[profile["preset"]]
    assert shape[14] == max(shape) and shape[4] == min(shape)  # the hours compared are the peak and the trough
    expected = peak_expected / trough_expected
    assert expected > 10 and peak / trough == pytest.approx(expected, rel=0.3)


def test_a_cap_keeps_the_first_arrivals_of_the_uncapped_draw() -> None:
    profile = preset("day", peak_rate=2.0, period_s=3600.0)
    full = arrival_times_s(profile, burstiness=1.0, seed=3, cap=None)
    capped = arrival_times_s(profile, burstiness=1.0, seed=3, cap=500)
    assert len(capped) == 500 and np.array_equal(capped, full[:500])


def test_the_day_preset_is_scaled_by_peak_and_period() -> None:
    profile = preset("day", peak_rate=4.0, period_s=14400.0)
    assert len(profile.points) == 25 and profile.end_s == 14400.0 and profile.peak == 4.0
    assert [t for t, _ in profile.points] == [600.0 * i for i in range(25)]
    assert profile.points[0][1] == profile.points[-1][1]  # the day closes where it opened
    assert max(DAY_SHAPE) == 1.0 and len(DAY_SHAPE) == 24


def test_a_profile_file_in_yaml_and_the_header_records_it(tmp_path: Path) -> None:
    spec = tmp_path / "p.yaml"
    spec.write_text("description: a ramp\npoints:\n  - [0, 0]\n  - [60, 10]\n")
    out = generate(tmp_path, "--rate-profile", str(spec), "--seed", "5")
    doc = json.loads(out.read_text())
    source = doc["source"]
    assert source["rate_profile"] == {"file": str(spec), "points": [[0, 0], [60, 10]]}
    assert source["requests"] == len(doc["requests"]) and source["burstiness"] == 1.0
    assert "rate" not in source and "following the rate profile p.yaml" in doc["description"]
    assert abs(len(doc["requests"]) - 300) <= 4 * math.sqrt(300)  # ∫ r = 60 * 10 / 2


def test_requests_caps_a_profile(tmp_path: Path) -> None:
    out = generate(tmp_path, "--rate-profile", "day", "--peak-rate", "5", "--period", "600", "--requests", "40")
    doc = json.loads(out.read_text())
    assert len(doc["requests"]) == 40 and doc["source"]["max_requests"] == 40
    assert doc["requests"][-1]["arrival_ms"] < 600_000


# -- determinism -------------------------------------------------------------------------------


def test_same_arguments_same_bytes_in_any_process(tmp_path: Path) -> None:
    args = ("--rate-profile", "day", "--peak-rate", "8", "--period", "900", "--burstiness", "0.6", "--seed", "9")
    a = generate(tmp_path, *args, name="a.json", env={"PYTHONHASHSEED": "0"})
    b = generate(tmp_path, *args, name="b.json", env={"PYTHONHASHSEED": "31337"})
    assert a.read_bytes() == b.read_bytes()
    c = generate(tmp_path, *args[:-1], "10", name="c.json")
    assert c.read_bytes() != a.read_bytes()


def recorded_command() -> list[str]:
    """The one generate command SOURCES.txt records for the fixture."""
    lines = [line.strip() for line in SOURCES.read_text().splitlines() if line.strip().startswith("tickgate generate")]
    assert len(lines) == 1
    return shlex.split(lines[0])


def test_the_recorded_command_makes_the_shipped_fixture(tmp_path: Path) -> None:
    argv = recorded_command()
    out = argv.index("--output")
    assert argv[out + 1] == "fixtures/workloads/diurnal-day.json"
    assert "--peak-rate" in argv and "--rate-profile" in argv and " ".join(argv) in (REPO / "docs" / "workload.md").read_text()
    argv[out + 1] = str(tmp_path / "again.json")
    res = run_cli(*argv[1:], "--quiet")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "again.json").read_bytes() == FIXTURE.read_bytes()
    assert FIXTURE.stat().st_size <= 4_000_000


def test_the_fixture_is_a_workload_replay_reads() -> None:
    workload = read_workload(FIXTURE)
    requests = list(workload.requests)
    assert len(requests) == workload.header.source["requests"] == 27002  # type: ignore[index]  # a generated header
    assert all(1000 <= r.prompt_tokens <= 3000 and 1000 <= r.max_output_tokens <= 3000 for r in requests)
    assert requests[-1].arrival_ms is not None and requests[-1].arrival_ms <= 7_200_000


# -- refusals ----------------------------------------------------------------------------------

BAD = [
    ('{"points": [[0, 1]]}', "$.points", "1 point(s); expected at least 2 [time_s, rate] points"),
    ('{"points": [[0, 1], [10, -2]]}', "$.points[1][1]", "less than the minimum of 0"),
    ('{"points": [[0, 1], [10, 2], [10, 3]]}', "$.points[2][0]", "strictly increasing"),
    ('{"points": [[5, 1], [10, 2]]}', "$.points[0][0]", "expected 0"),
    ('{"points": [[0, 1], [10, "fast"]]}', "$.points[1][1]", "is not of type 'number'"),
    ('{"points": [[0, 1], [10, 2, 3]]}', "$.points[1]", "too long"),
    ('{"pionts": [[0, 1], [10, 2]]}', "$", "unknown key 'pionts'; expected one of: description, points"),
    ('{"description": "no points"}', "$", "'points' is required"),
    ('{"points": [[0, 0], [10, 0]]}', "$.points", "every rate is 0"),
    ('{"points": [[0, 1], [10, 2]]', None, "invalid YAML"),  # cut short (the same loader as policy files)
]


@pytest.mark.parametrize(("text", "where", "what"), BAD)
def test_a_bad_profile_file_is_one_located_line_and_nothing_is_written(
    tmp_path: Path, text: str, where: str | None, what: str
) -> None:
    spec = tmp_path / "profile.json"
    spec.write_text(text)
    out = tmp_path / "w.json"
    res = run_cli("generate", *LENGTHS, "--rate-profile", str(spec), "--output", str(out))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"error: {spec}:1:"), res.stderr
    if where is not None:
        assert f": {where}: " in res.stderr, res.stderr
    assert what in res.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [spec]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "2", "--rate-profile", "day", "--peak-rate", "2"], "--rate and --rate-profile exclude each other"),
        (["--rate-profile", "day"], "give --peak-rate"),
        (["--peak-rate", "3", "--rate", "2", "--requests", "5"], "give --rate-profile too"),
        (["--rate", "2"], "give --requests"),
        (["--rate-profile", "nowhere.json"], "nowhere.json"),
        (["--rate-profile", "day", "--peak-rate", "1000000", "--period", "86400"], "at most 10,000,000"),
    ],
)
def test_bad_combinations_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "w.json"
    res = run_cli("generate", *LENGTHS, *args, "--output", str(out))
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and not out.exists()


def test_peak_and_period_belong_to_a_preset(tmp_path: Path) -> None:
    spec = tmp_path / "p.json"
    spec.write_text('{"points": [[0, 1], [10, 2]]}')
    res = run_cli("generate", *LENGTHS, "--rate-profile", str(spec), "--peak-rate", "3", "--output", str(tmp_path / "w.json"))
    assert res.returncode == 2 and "gives its own times and rates" in res.stderr


# -- import --time-scale -------------------------------------------------------------------------


def imported(tmp_path: Path, *args: str, name: str) -> dict[str, Any]:
    out = tmp_path / name
    res = run_cli("import", "azure", str(AZURE), *args, "--output", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("parallel", ["0", "1"])
def test_time_scale_halves_the_arrival_times_of_a_real_trace(tmp_path: Path, parallel: str) -> None:
    plain = imported(tmp_path, name="a.json")
    res = run_cli("import", "azure", str(AZURE), "--time-scale", "0.5", "--output", str(tmp_path / "b.json"),
                  "--quiet", env={"TICKGATE_PARALLEL": parallel})
    assert res.returncode == 0, res.stderr
    half = json.loads((tmp_path / "b.json").read_text())
    assert len(half["requests"]) == len(plain["requests"]) == 8819
    assert plain["requests"][-1]["arrival_ms"] > 3_000_000  # about an hour: a real spread of times
    for before, after in zip(plain["requests"], half["requests"]):
        assert after["arrival_ms"] == before["arrival_ms"] * 0.5
        assert {**after, "arrival_ms": None} == {**before, "arrival_ms": None}
    assert half["source"]["time_scale"] == 0.5 and "time_scale" not in plain["source"]
    assert "arrival times x 0.5" in half["description"]


@pytest.mark.parametrize("factor", ["0", "-1", "fast"])
def test_time_scale_must_be_above_zero(tmp_path: Path, factor: str) -> None:
    out = tmp_path / "w.json"
    res = run_cli("import", "azure", str(AZURE), "--time-scale", factor, "--output", str(out))
    assert res.returncode == 2 and "--time-scale" in res.stderr and not out.exists()


def test_time_scale_keeps_a_deadlines_slack_and_refuses_steps() -> None:
    timed = [Request("a", 8, 4, arrival_ms=1000.0, deadline_ms=1500.0), Request("b", 8, 4)]
    scaled = list(time_scaled(timed, 0.25, Path("t.csv")))
    assert (scaled[0].arrival_ms, scaled[0].deadline_ms) == (250.0, 750.0)
    assert scaled[1] == timed[1]  # step 0 is step 0 at any speed
    with pytest.raises(InputError, match="arrives at step 3, not at a time"):
        list(time_scaled([Request("c", 8, 4, arrival_tick=3)], 2.0, Path("t.csv")))
