"""The GPU catalogue and the GPU mapping's schema: every shipped entry is a valid mapping,
names resolve to the GPU an operator means, a misspelt key is refused by name, and the link
between GPUs is NVLink inside the scale-up domain and the network beyond it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tickgate.testing import run_cli
from tickgate.timing.catalogue import catalogue
from tickgate.timing.gpus import TENSOR_DTYPES, lookup_gpu
from tickgate.util.errors import ConfigError
from tickgate.util.schemas import load_schema, validate

REPO = Path(__file__).resolve().parents[1]
GPUS = catalogue()["gpus"]
H100 = GPUS["H100-SXM-80GB"]
BLACKWELL = ["B200-SXM-180GB", "B300-SXM-288GB", "GB200-NVL72-186GB", "GB300-NVL72-279GB"]
WITHOUT_FP4 = ["H100-SXM-80GB", "H100-PCIe-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "A100-SXM4-80GB",
               "L40S-48GB", "L4-24GB", "MI300X-192GB", "MI325X-256GB"]


@pytest.mark.parametrize("key", sorted(GPUS))
def test_every_catalogue_gpu_is_a_valid_gpu_mapping_with_its_sources(key: str) -> None:
    entry = GPUS[key]
    validate(entry, load_schema("gpu.schema.json"), file=None)
    assert entry["sources"] and all(str(s).startswith("http") for s in entry["sources"])
    # the fields tickgate reads are present on every entry, null where the part has none
    for field in ("fp4_dense_tflops", "int8_dense_tflops", "scale_up_domain_gpus", "scale_out_bandwidth_GBps"):
        assert field in entry, field
    gpu = lookup_gpu(key)
    assert gpu.key == key and gpu.scale_up_domain_gpus == entry["scale_up_domain_gpus"]
    assert lookup_gpu(dict(entry)).tflops == gpu.tflops  # a copied entry is the same GPU


def test_the_schema_is_the_roofline_options_gpu_branch_and_ships_with_the_schemas() -> None:
    from tickgate.timing.roofline import RooflineTiming

    branch = RooflineTiming.options_schema["properties"]["gpu"]["oneOf"][1]
    shipped = json.loads((REPO / "schemas" / "gpu.schema.json").read_text(encoding="utf-8"))
    assert branch == {k: v for k, v in shipped.items() if k not in ("$schema", "$id")}
    assert set(shipped["required"]) == {"memory_gb", "hbm_bandwidth_GBps"}
    assert {f"{dtype}_dense_tflops" for dtype in TENSOR_DTYPES} <= set(shipped["properties"])
    # the wheel carries the whole schemas/ folder (hatch force-include), this file with it
    pyproject = (REPO / "core" / "pyproject.toml").read_text(encoding="utf-8")
    assert '"../schemas" = "tickgate/schemas"' in pyproject


@pytest.mark.parametrize(("name", "key"), [
    ("h100_sxm", "H100-SXM-80GB"), ("h200_sxm", "H200-SXM-141GB"), ("b200_sxm", "B200-SXM-180GB"),
    ("gb200", "GB200-NVL72-186GB"), ("H100", "H100-SXM-80GB"), ("h100", "H100-SXM-80GB"),
    ("H100 PCIe", "H100-PCIe-80GB"), ("H100 NVL", "H100-NVL-94GB"), ("B200", "B200-SXM-180GB"),
    ("GB300", "GB300-NVL72-279GB"), ("B300", "B300-SXM-288GB"), ("L4", "L4-24GB"), ("L40S", "L40S-48GB"),
    ("MI300X", "MI300X-192GB"), ("mi325x", "MI325X-256GB"), ("MI355X", "MI355X-288GB"),
])
def test_names_aliases_and_short_names_resolve(name: str, key: str) -> None:
    assert lookup_gpu(name).key == key


def test_every_system_of_the_silicon_measurements_is_an_alias() -> None:
    """aiconfigurator's system column (realdata/measured/silicon/SOURCES.txt) names four systems."""
    aliases = catalogue()["gpu_aliases"]
    for system in ("h100_sxm", "h200_sxm", "b200_sxm", "gb200"):
        assert aliases[system]["assume"] in GPUS and aliases[system]["note"]


def test_an_h100_with_its_memory_but_not_its_form_is_ambiguous_now_that_there_are_three() -> None:
    with pytest.raises(ConfigError) as err:
        lookup_gpu("H100 80GB")
    assert str(err.value) == ("GPU 'H100 80GB' is ambiguous: it could be H100-PCIe-80GB or H100-SXM-80GB; name "
                              "one of them, or the alias H100-80GB-unspecified (assumes H100-SXM-80GB)")


@pytest.mark.parametrize("typo", ["nvlnk_bandwidth_GBps", "fp4_dense_tflop", "scale_out_bandwidth_GBs"])
def test_a_gpu_mapping_with_a_misspelt_key_is_refused_naming_the_key(typo: str) -> None:
    figures = {"memory_gb": 80, "hbm_bandwidth_GBps": 3350, "bf16_dense_tflops": 989.4, typo: 900}
    with pytest.raises(ConfigError, match=f"GPU figures \\$: unknown key '{typo}'; expected one of: .*"):
        lookup_gpu(figures)


def test_a_gpu_mapping_with_a_misspelt_key_fails_validate_naming_it(tmp_path: Path) -> None:
    text = (REPO / "policies" / "vllm-v1-bench.yaml").read_text(encoding="utf-8")
    assert "gpu: H100-SXM-80GB" in text
    policy = tmp_path / "p.yaml"
    policy.write_text(text.replace("gpu: H100-SXM-80GB", "gpu: {memory_gb: 180, hbm_bandwidth_GBps: 8000, "
                                   "bf16_dense_tflops: 2250, fp4_dense_tflop: 9000}"), encoding="utf-8")
    res = run_cli("validate", str(policy))
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1
    assert "$.timing.options.gpu: unknown key 'fp4_dense_tflop'; expected one of:" in res.stderr
    assert "fp4_dense_tflops" in res.stderr.split("expected one of:")[1]


def test_a_gpu_mapping_with_a_bad_figure_is_refused_at_its_path() -> None:
    with pytest.raises(ConfigError, match=r"GPU figures \$\.scale_up_domain_gpus: "):
        lookup_gpu({"memory_gb": 80, "hbm_bandwidth_GBps": 3350, "bf16_dense_tflops": 989.4,
                    "scale_up_domain_gpus": 0})


@pytest.mark.parametrize("key", BLACKWELL)
def test_blackwell_has_an_fp4_peak_above_its_fp8(key: str) -> None:
    gpu = lookup_gpu(key)
    assert gpu.peak_tflops("fp4") == GPUS[key]["fp4_dense_tflops"] > gpu.peak_tflops("fp8")


@pytest.mark.parametrize("key", WITHOUT_FP4)
def test_a_part_without_fp4_refuses_it_naming_the_dtype(key: str) -> None:
    with pytest.raises(ConfigError, match=f"GPU '{key}' has no fp4 tensor-core peak"):
        lookup_gpu(key).peak_tflops("fp4")


def test_fp6_where_the_part_has_it() -> None:
    assert lookup_gpu("MI355X").peak_tflops("fp6") == GPUS["MI355X-288GB"]["fp6_dense_tflops"]
    with pytest.raises(ConfigError, match="no fp6 tensor-core peak"):
        lookup_gpu("MI300X").peak_tflops("fp6")


@pytest.mark.parametrize(("key", "inside", "beyond"), [
    ("H100-SXM-80GB", 8, 16), ("B200-SXM-180GB", 8, 9), ("GB200-NVL72-186GB", 72, 144),
    ("GB300-NVL72-279GB", 72, 73), ("MI300X-192GB", 8, 16), ("H100-NVL-94GB", 2, 4),
])
def test_a_group_inside_its_domain_talks_over_nvlink_and_beyond_it_over_the_network(
    key: str, inside: int, beyond: int
) -> None:
    entry, gpu = GPUS[key], lookup_gpu(key)
    per_direction = entry["nvlink_bandwidth_GBps"] / 2
    assert gpu.group_link_gbps(2) == gpu.group_link_gbps(inside) == per_direction
    network = entry["scale_out_bandwidth_GBps"] or gpu.pcie_gbps
    assert gpu.group_link_gbps(beyond) == network < per_direction


def test_scale_out_figures_are_the_nics_per_gpu_per_direction() -> None:
    # 400 Gb/s ConnectX-7 per GPU on HGX H100/H200/B200; 800 Gb/s ConnectX-8 on B300/GB300
    for key in ("H100-SXM-80GB", "H200-SXM-141GB", "B200-SXM-180GB"):
        assert lookup_gpu(key).scale_out_gbps == 400 / 8
    for key in ("B300-SXM-288GB", "GB300-NVL72-279GB"):
        assert lookup_gpu(key).scale_out_gbps == 800 / 8


def test_a_pcie_card_reaches_every_peer_over_pcie() -> None:
    for key in ("L4-24GB", "L40S-48GB"):
        gpu = lookup_gpu(key)
        assert gpu.scale_up_domain_gpus == 1 and gpu.group_link_gbps(2) == gpu.pcie_gbps == 32.0


def test_a_mapping_without_the_new_fields_gets_the_documented_defaults() -> None:
    nvlinked = lookup_gpu({"memory_gb": 80, "hbm_bandwidth_GBps": 3350, "bf16_dense_tflops": 989.4,
                           "nvlink_bandwidth_GBps": 900, "pcie": "Gen5 x16"})
    assert (nvlinked.scale_up_domain_gpus, nvlinked.scale_out_gbps) == (8, 64.0)
    assert nvlinked.group_link_gbps(8) == 450.0 and nvlinked.group_link_gbps(9) == 64.0
    alone = lookup_gpu({"memory_gb": 48, "hbm_bandwidth_GBps": 864, "bf16_dense_tflops": 362})
    assert (alone.scale_up_domain_gpus, alone.scale_out_gbps, alone.group_link_gbps(4)) == (1, 32.0, 32.0)
    with pytest.raises(ConfigError, match="at least one GPU"):
        alone.group_link_gbps(0)


def test_the_catalogue_table_in_docs_timing_is_current() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_table.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_all_reduce_across_domains_uses_every_nic_of_a_domain() -> None:
    """NCCL reduces within a node over NVLink and sends each GPU's share through its own NIC:
    16 H100s over two HGX boards reduce at 8 x 50 GB/s, not at one NIC's 50 GB/s."""
    h100 = lookup_gpu("H100-SXM-80GB")
    assert h100.allreduce_gbps(8) == h100.link_gbps == 450
    assert h100.allreduce_gbps(16) == 8 * h100.scale_out_gbps == 400
    # an all-to-all (expert dispatch) has no reduction to shrink its traffic: one NIC per GPU
    assert h100.group_link_gbps(16) == h100.scale_out_gbps
    # within NVL72 everything stays on NVLink
    gb200 = lookup_gpu("gb200")
    assert gb200.allreduce_gbps(64) == gb200.link_gbps
