"""The GPUs a roofline timing model can be built from.

A policy can say ``gpu: H100-SXM-80GB`` (a catalogue key), an alias such as
``H100-80GB-unspecified``, ``H100`` (an alias: the SXM part) or ``b200_sxm`` (the system names
of aiconfigurator's measurements), a short name that fits one catalogue GPU (``H200``,
``GB200``; never one that fits several: ``A100`` is refused with the choices), or give the
GPU's figures as a mapping checked against ``schemas/gpu.schema.json``. An unknown name is a
:class:`~tickgate.util.errors.ConfigError` listing the known ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from ..util.errors import ConfigError, InputError
from ..util.schemas import load_schema, validate
from .catalogue import catalogue, find

__all__ = ["TENSOR_DTYPES", "GpuSpec", "gpu_key", "lookup_gpu"]

#: PCIe bandwidth per direction (GB/s, x16) where a GPU's record names only the generation
_PCIE_GBPS = {"gen3": 16.0, "gen4": 32.0, "gen5": 64.0, "gen6": 128.0}

#: the dtypes a GPU has a tensor-core peak for (``<dtype>_dense_tflops`` in the catalogue)
TENSOR_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp6", "fp4")


@attrs.frozen
class GpuSpec:
    """One GPU's peaks: dense tensor-core TFLOPS per dtype (:data:`TENSOR_DTYPES`), memory
    and links: NVLink inside its scale-up domain, the network beyond it."""

    key: str
    tflops: Mapping[str, float | None]
    memory_gb: float
    hbm_bandwidth_gbps: float
    #: NVLink bandwidth per direction (GB/s); None without NVLink
    nvlink_gbps: float | None
    #: PCIe bandwidth per direction (GB/s)
    pcie_gbps: float
    source: str = ""
    #: GPUs in one NVLink (or Infinity Fabric) domain: 8 on HGX, 72 on NVL72, 1 without NVLink
    scale_up_domain_gpus: int = 1
    #: network bandwidth per GPU per direction (GB/s) between domains; the PCIe figure when
    #: the GPU's record gives none (every byte off a PCIe card crosses its PCIe link, and a NIC
    #: sits behind one too)
    scale_out_gbps: float = attrs.field(default=attrs.Factory(lambda self: self.pcie_gbps, takes_self=True))

    def peak_tflops(self, dtype: str) -> float:
        value = self.tflops.get(dtype)
        if not value:
            raise ConfigError(
                f"GPU {self.key!r} has no {dtype} tensor-core peak "
                f"(known: {', '.join(k for k, v in sorted(self.tflops.items()) if v)})"
            )
        return float(value)

    @property
    def link_gbps(self) -> float:
        """Per-direction bandwidth between tensor-parallel peers: NVLink, else PCIe."""
        return self.nvlink_gbps if self.nvlink_gbps else self.pcie_gbps

    def group_link_gbps(self, gpus: int) -> float:
        """Per-direction bandwidth each GPU of a group of ``gpus`` exchanges data at: NVLink
        (PCIe without it) while the group fits in one scale-up domain, the network
        (:attr:`scale_out_gbps`) once it spans domains: a collective runs at its slowest
        hop, and an all-reduce over 16 H100s crosses the 400 Gb/s NICs."""
        if gpus < 1:
            raise ConfigError(f"a group of GPUs has at least one GPU, not {gpus}")
        return self.link_gbps if gpus <= self.scale_up_domain_gpus else self.scale_out_gbps

    def allreduce_gbps(self, gpus: int) -> float:
        """The bus bandwidth (NCCL's convention: 2 (n - 1) / n x bytes over it) of an all-reduce
        over ``gpus`` GPUs. Within a scale-up domain, NVLink. Across domains NCCL reduces within
        each domain over NVLink and sends every GPU's share through its own NIC (multi-rail rings
        and trees: nccl-tests' PERFORMANCE.md), so the network carries 1 / (GPUs per domain) of
        the data per NIC: bus bandwidth = scale-out per GPU x GPUs per domain, capped by NVLink.
        An all-to-all has no such reduction: :meth:`group_link_gbps`."""
        if gpus <= self.scale_up_domain_gpus:
            return self.link_gbps
        return min(self.link_gbps, self.scale_out_gbps * min(self.scale_up_domain_gpus, gpus))


def lookup_gpu(value: str | Mapping[str, Any]) -> GpuSpec:
    """A GPU by catalogue key or alias, or from a mapping of its figures (the
    catalogue's field names, ``schemas/gpu.schema.json``: ``bf16_dense_tflops``,
    ``fp4_dense_tflops``, ``memory_gb``, ``hbm_bandwidth_GBps``, ``nvlink_bandwidth_GBps``,
    ``scale_up_domain_gpus``, ``scale_out_bandwidth_GBps``, ...); a misspelt key is refused
    by name rather than read as absent."""
    data = catalogue()
    gpus, aliases = data["gpus"], {k: v["assume"] for k, v in data.get("gpu_aliases", {}).items()}
    if isinstance(value, Mapping):
        try:
            validate(dict(value), load_schema("gpu.schema.json"), file=None)
        except InputError as exc:
            raise ConfigError(f"GPU figures {exc.json_path}: {exc.message}") from None
        return _gpu("gpu", value)
    key = find(value, gpus, aliases)
    if key is None:
        key = _short_gpu_name(value, gpus, aliases)
    if key is None:
        raise ConfigError(
            f"unknown GPU {value!r} (known: {', '.join(sorted({*gpus, *aliases}))}; "
            "or give its figures as a mapping)"
        )
    return _gpu(key, gpus[key])


def gpu_key(name: str) -> str:
    """The catalogue key a GPU name means (``H100``, ``h100_sxm`` -> ``H100-SXM-80GB``): what a
    price table and a policy's GPUs are matched by (:mod:`tickgate.cost.prices`). An unknown or
    ambiguous name is the :class:`ConfigError` :func:`lookup_gpu` raises."""
    return lookup_gpu(name).key


def _gpu_words(name: str) -> set[str]:
    """The words of a GPU name as people write them: ``H100 SXM``, ``h100-sxm5-80g`` and
    ``NVIDIA H100-SXM-80GB`` share ``{h100, sxm, 80gb}`` (the SXM generation and the
    vendor dropped, a memory size in GB either way)."""
    words = set()
    for word in re.split(r"[\s_/-]+", name.casefold()):
        word = re.sub(r"^(\d+)g$", r"\1gb", re.sub(r"^sxm\d$", "sxm", word))
        if word and word != "nvidia":
            words.add(word)
    return words


def _short_gpu_name(value: str, gpus: Mapping[str, Any], aliases: Mapping[str, str]) -> str | None:
    """The catalogue GPU a short name (``H100``, ``A100-PCIe``, ``L40S``) means: the one GPU
    whose key, or an alias of which, has every word of it. A name that fits more than one GPU
    is refused listing them (``A100``: the SXM4 and the PCIe card differ in bandwidth and
    clocks); None when it fits none."""
    words = _gpu_words(value)
    if not words:
        return None
    fits = {key for key in gpus if words <= _gpu_words(key)}
    fits |= {key for alias, key in aliases.items() if words <= _gpu_words(alias) and key in gpus}
    if len(fits) > 1:
        named = [
            f"the alias {alias} (assumes {key})"
            for alias, key in sorted(aliases.items())
            if words <= _gpu_words(alias)
        ]
        raise ConfigError(
            f"GPU {value!r} is ambiguous: it could be {' or '.join(sorted(fits))}; name one of them"
            + (f", or {' or '.join(named)}" if named else "")
        )
    return fits.pop() if fits else None


def _gpu(key: str, entry: Mapping[str, Any]) -> GpuSpec:
    for need in ("memory_gb", "hbm_bandwidth_GBps"):
        if not isinstance(entry.get(need), (int, float)):
            raise ConfigError(f"GPU {key!r}: {need} must be a number")
    tflops = {dtype: entry.get(f"{dtype}_dense_tflops") for dtype in TENSOR_DTYPES}
    if not tflops["bf16"] and not tflops["fp16"]:
        raise ConfigError(f"GPU {key!r}: bf16_dense_tflops (or fp16_dense_tflops) must be a number")
    tflops["bf16"] = tflops["bf16"] or tflops["fp16"]
    tflops["fp16"] = tflops["fp16"] or tflops["bf16"]
    nvlink = entry.get("nvlink_bandwidth_GBps")
    pcie = _pcie(entry.get("pcie"))
    domain = entry.get("scale_up_domain_gpus")
    scale_out = entry.get("scale_out_bandwidth_GBps")
    return GpuSpec(
        key=key,
        tflops=tflops,
        memory_gb=float(entry["memory_gb"]),
        hbm_bandwidth_gbps=float(entry["hbm_bandwidth_GBps"]),
        # the catalogue's NVLink figures are bidirectional totals (its notes say so)
        nvlink_gbps=float(nvlink) / 2 if nvlink else None,
        pcie_gbps=pcie,
        source="; ".join(entry.get("sources", ())),
        # without a figure: an NVLink part sits on an 8-GPU HGX board, a PCIe card alone
        scale_up_domain_gpus=int(domain) if domain else (8 if nvlink else 1),
        scale_out_gbps=float(scale_out) if scale_out else pcie,
    )


def _pcie(text: Any) -> float:
    """Per-direction PCIe bandwidth from the catalogue's wording ("Gen5 x16, 128 GB/s
    bidirectional"; "Gen4 x16"); Gen4 x16 when it says nothing."""
    if isinstance(text, (int, float)):
        return float(text)
    text = str(text or "").lower()
    m = re.search(r"([\d.]+)\s*gb/s\s*bidirectional", text)
    if m:
        return float(m.group(1)) / 2
    m = re.search(r"gen\s*(\d)", text)
    return _PCIE_GBPS.get(f"gen{m.group(1)}", 32.0) if m else 32.0
