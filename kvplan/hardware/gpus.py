"""The GPU catalog: memory, bandwidth and dense tensor throughput of the accelerators kvplan plans for.

Figures live in the packaged ``kvplan/hardware/gpus.yaml``, one entry per GPU, each figure with its source
(datasheet URL and quote, a measured log line, or "derived: ..."). Two memory totals are kept
because vLLM reads both (vLLM reference §9):

* ``cuda_total_bytes``: the total that ``torch.cuda.mem_get_info`` (cudaMemGetInfo) reports. It
  excludes driver-reserved memory, and it is what ``gpu_memory_utilization`` multiplies
  (``v1/worker/gpu_worker.py:Worker.init_device``).
* ``nvml_total_bytes``: the NVML / nvidia-smi total, which vLLM's default batch tiers compare with
  160 GiB and 70 GiB (``platforms/cuda.py:get_device_total_memory``).

A user file (``--gpus-file`` or ``$KVPLAN_GPUS_FILE``) adds GPUs or overrides figures by id. This
module reads YAML, so it is the catalog's one adapter; everything else here is pure.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kvplan.errors import BadConfig, InvalidParameter, UnknownGpu, close_matches
from kvplan.units import MAX_BYTES, parse_bytes

GPUS_FILE_ENV = "KVPLAN_GPUS_FILE"
PACKAGED_FILE = "gpus.yaml"

# Dtypes with a dense tensor-core figure in the catalog.
FLOPS_DTYPES = ("bf16", "fp16", "fp8", "fp4", "int8")

# Spellings people (and vLLM's --dtype / --kv-cache-dtype / quantization names) use for them.
_DTYPE_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp8_e4m3": "fp8",
    "fp8_e4m3fn": "fp8",
    "fp8_e5m2": "fp8",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "fp4_e2m1": "fp4",
}

# When a chip has no figure for a dtype, the kernel that runs instead uses the next wider format:
# FP8 checkpoints on Ampere run as W8A16 (BF16 GEMMs); BF16 on Volta/Turing runs as FP16 (vLLM
# casts bf16 to fp16 below compute capability 8.0).
_FLOPS_FALLBACK: Mapping[str, tuple[str, ...]] = {
    "fp4": ("fp8", "bf16", "fp16"),
    "fp8": ("bf16", "fp16"),
    "int8": ("fp8", "bf16", "fp16"),
    "bf16": ("fp16",),
    "fp16": ("bf16",),
}

# CUDA compute capability -> architecture name (NVIDIA CUDA GPUs list; vLLM platforms/cuda.py keys
# attention-backend choices on the same (major, minor) pairs).
_ARCH_BY_CAPABILITY: Mapping[tuple[int, int], str] = {
    (7, 0): "volta",
    (7, 2): "volta",
    (7, 5): "turing",
    (8, 0): "ampere",
    (8, 6): "ampere",
    (8, 7): "ampere",
    (8, 9): "ada",
    (9, 0): "hopper",
}
_ARCH_BY_MAJOR: Mapping[int, str] = {
    10: "blackwell",  # SM100/SM103 data-center Blackwell (B200, B300, GB200, GB300)
    11: "blackwell",  # SM110 (Thor)
    12: "blackwell-rtx",  # SM120 GeForce / RTX PRO and SM121 GB10 (DGX Spark): no tcgen05, other attention kernels
}
# ROCm gfx targets -> AMD CDNA generation (ROCm GPU architecture specs).
_ARCH_BY_GFX: Mapping[str, str] = {
    "gfx908": "cdna1",
    "gfx90a": "cdna2",
    "gfx940": "cdna3",
    "gfx941": "cdna3",
    "gfx942": "cdna3",
    "gfx950": "cdna4",
}

# Words that name a vendor or product line, dropped when matching full device names such as
# "NVIDIA GeForce RTX 4090" or "Tesla T4" against catalog ids.
_NOISE_WORDS = frozenset({"nvidia", "amd", "tesla", "geforce", "instinct", "radeon"})

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_CAPABILITY_RE = re.compile(r"^(\d+)\.(\d+)$")
_GFX_RE = re.compile(r"^gfx[0-9a-f]+$")
# A FLOP/s figure: number, optional SI prefix (decimal), optional "FLOPS" / "FLOP/s".
_FLOPS_RE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtTpP]?)\s*(?:flops|flop/s|flop)?\s*$",
    re.IGNORECASE,
)
_SI_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}

_BYTE_KEYS = ("cuda_total_bytes", "nvml_total_bytes")
_RATE_KEYS = ("memory_bandwidth_bytes_per_s", "interconnect_bytes_per_s")
_ALLOWED_KEYS = frozenset(
    {
        "id", "name", "vendor", "aliases", "device_names", "memory_gb", "cuda_total_bytes",
        "nvml_total_bytes", "memory_bandwidth_bytes_per_s", "flops", "compute_capability",
        "interconnect_bytes_per_s", "sources", "integrated", "platform",
    }
)
# Keys every packaged entry must have (compute_capability may be null, but must be stated).
_PACKAGED_REQUIRED = (
    "id", "name", "vendor", "memory_gb", "cuda_total_bytes", "nvml_total_bytes",
    "memory_bandwidth_bytes_per_s", "flops", "compute_capability", "sources",
)
# Keys a new GPU in a user file must have; the rest default (nvml total = CUDA total, etc.).
_USER_REQUIRED = ("id", "name", "cuda_total_bytes", "memory_bandwidth_bytes_per_s")
# How the GPUs of one deployment reach each other (GpuSpec.with_link): NVLink/NVSwitch, or PCIe and host memory.
GPU_LINKS = ("nvlink", "pcie")
# The vLLM platform class that plans a GPU: platforms/cuda.py (CudaPlatform) or platforms/rocm.py (RocmPlatform,
# chosen when amdsmi finds an AMD GPU: platforms/__init__.py:rocm_platform_plugin). A user GPU without one takes
# its vendor's (amd → rocm).
PLATFORMS = ("cuda", "rocm")


class ResolvedFlops(NamedTuple):
    """A peak-throughput lookup: the figure used, for which dtype, and what was asked for."""

    flops: float
    dtype: str
    requested: str

    @property
    def is_fallback(self) -> bool:
        """True when the chip has no figure for the requested dtype and a wider one stands in."""
        return self.dtype != self.requested


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator. Bytes are ints; rates are floats in SI units (bytes/s, dense FLOP/s)."""

    id: str
    name: str
    vendor: str
    aliases: tuple[str, ...]
    memory_gb: float
    cuda_total_bytes: int
    nvml_total_bytes: int
    memory_bandwidth_bytes_per_s: float | None
    flops: Mapping[str, float] = field(hash=False)
    compute_capability: str | None
    interconnect_bytes_per_s: float | None
    sources: Mapping[str, str] = field(hash=False)
    device_names: tuple[str, ...] = ()
    custom: bool = False
    # Memory shared with the CPU (CUDA's device property is_integrated, e.g. GB10): vLLM then measures free
    # memory as the host's MemAvailable (utils/mem_utils.py:MemorySnapshot.measure).
    integrated: bool = False
    platform: str = "cuda"  # PLATFORMS: whose attention-backend, block-size and fp8 rules vLLM applies
    # How the deployment's GPUs reach each other, where the user says so (GPU_LINKS, `--gpu-link`); None: the
    # catalog's figure decides (an NVLink figure, or none: PCIe).
    link: str | None = None

    @property
    def capability(self) -> tuple[int, int] | None:
        """CUDA compute capability as (major, minor), e.g. (9, 0); None for AMD or unknown."""
        if self.compute_capability is None:
            return None
        m = _CAPABILITY_RE.match(self.compute_capability)
        return (int(m.group(1)), int(m.group(2))) if m else None

    @property
    def pcie_only(self) -> bool:
        """A CUDA GPU with no NVLink to its peers: a catalog GPU without an interconnect figure (not integrated), or
        one the user said is linked over PCIe (`link`). NCCL and vLLM's all-reduce then run over PCIe or host
        memory. False for a --gpu-memory GPU without `link`, whose interconnect is not known."""
        if self.link is not None:
            return self.platform == "cuda" and not self.integrated and self.link == "pcie"
        return (self.platform == "cuda" and not self.custom and not self.integrated
                and self.interconnect_bytes_per_s is None)

    @property
    def arch(self) -> str:
        """Architecture from the compute capability: "hopper", "blackwell", "ampere", "cdna3", ...

        Data-center Blackwell (SM10x) is "blackwell" and GeForce/RTX PRO Blackwell (SM12x) is
        "blackwell-rtx": vLLM picks different attention backends for them. "unknown" if not known.
        """
        cap = self.capability
        if cap is not None:
            return _ARCH_BY_CAPABILITY.get(cap) or _ARCH_BY_MAJOR.get(cap[0], "unknown")
        if self.compute_capability is not None:
            return _ARCH_BY_GFX.get(self.compute_capability.split(":")[0], "unknown")
        return "unknown"

    def resolve_flops(self, dtype: str = "bf16") -> ResolvedFlops:
        """The dense FLOP/s figure for `dtype`, falling back to a wider format the chip has.

        fp4 -> fp8 -> bf16 -> fp16; fp8 -> bf16; bf16 <-> fp16. The result says which dtype it used.
        """
        want = normalize_dtype(dtype)
        for candidate in (want, *_FLOPS_FALLBACK.get(want, ())):
            value = self.flops.get(candidate)
            if value is not None:
                return ResolvedFlops(value, candidate, want)
        raise InvalidParameter(
            f"GPU {self.id!r} has no tensor throughput figure for {want}",
            hint="pass --gpu-flops, or add flops to the GPU in a --gpus-file",
        )

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for `dtype` (with the fallback of `resolve_flops`)."""
        return self.resolve_flops(dtype).flops

    def require_bandwidth(self) -> float:
        """Memory bandwidth in bytes/s; an error when it is unknown (a custom GPU without one)."""
        if self.memory_bandwidth_bytes_per_s is None:
            raise InvalidParameter(
                f"GPU {self.id!r} has no memory bandwidth figure", hint="pass --gpu-bandwidth, e.g. 1TB/s"
            )
        return self.memory_bandwidth_bytes_per_s

    def ridge_point(self, dtype: str = "bf16") -> float:
        """Roofline ridge point in FLOP/byte: peak FLOP/s over memory bandwidth (Williams et al. 2009)."""
        return self.peak_flops(dtype) / self.require_bandwidth()

    def with_link(self, link: str, source: str = "user: --gpu-link") -> GpuSpec:
        """A copy whose GPUs reach each other over `link` (GPU_LINKS). "pcie" drops the NVLink figure: two cards
        of an 8-GPU H200 NVL host outside one NVLink bridge (`nvidia-smi topo -m`: PIX, PXB, PHB, NODE or SYS)
        talk over PCIe, so neither the memory plan nor the roofline may count NVLink."""
        key = link.strip().lower()
        if key not in GPU_LINKS:
            raise InvalidParameter(f"unknown GPU link {link!r} (choose from {', '.join(GPU_LINKS)})",
                                   hint="nvlink: NVLink or NVSwitch between the GPUs (nvidia-smi topo -m: NV#); "
                                        "pcie: anything else (PIX, PXB, PHB, NODE, SYS)")
        sources = {**self.sources, "link": source}
        if key == "pcie":
            sources.pop("interconnect_bytes_per_s", None)
            return dataclasses.replace(self, link=key, interconnect_bytes_per_s=None, sources=sources)
        return dataclasses.replace(self, link=key, sources=sources)

    def with_cuda_total(self, cuda_total_bytes: int, source: str = "user: --gpu-total-bytes") -> GpuSpec:
        """A copy whose cudaMemGetInfo total is `cuda_total_bytes` (a value measured on the user's box)."""
        if cuda_total_bytes <= 0:
            raise InvalidParameter(f"GPU total memory must be > 0 bytes, got {cuda_total_bytes}")
        return dataclasses.replace(
            self, cuda_total_bytes=int(cuda_total_bytes), sources={**self.sources, "cuda_total_bytes": source}
        )


# --------------------------------------------------------------------------- small parsers


def normalize_dtype(dtype: str) -> str:
    """`bfloat16` -> `bf16`, `fp8_e4m3` -> `fp8`, `nvfp4` -> `fp4`; unknown dtypes are an error."""
    key = dtype.strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in FLOPS_DTYPES:
        raise InvalidParameter(f"unknown compute dtype {dtype!r} (expected one of {', '.join(FLOPS_DTYPES)})")
    return key


def parse_flops(text: str | int | float, *, what: str = "--gpu-flops") -> float:
    """Parse a FLOP/s figure: `300T`, `1.2 PFLOPS`, `989.4e12`, `500TFLOP/s` (decimal SI prefixes)."""
    if isinstance(text, bool):
        raise InvalidParameter(f"{what}: expected a FLOP/s figure, got {text!r}")
    if isinstance(text, (int, float)):
        try:
            value = float(text)
        except OverflowError:  # an integer beyond float's range: refused below like ∞
            value = float("inf")
    else:
        m = _FLOPS_RE.match(text)
        if not m:
            raise InvalidParameter(
                f"{what}: cannot read {text!r} as FLOP/s (examples: 300T, 1.2PFLOPS, 989.4e12)"
            )
        value = float(m.group(1)) * _SI_PREFIX[m.group(2).lower()]
    if not value > 0 or value == float("inf"):
        shown = repr(text)
        raise InvalidParameter(f"{what}: must be a positive number of FLOP/s, got "
                               f"{shown if len(shown) <= 40 else shown[:40] + '…'}")
    return value


def _slug(text: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `h10080gbhbm3`, `h100-sxm` -> `h100sxm`: for tolerant matching."""
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w and w not in _NOISE_WORDS]
    return "".join(words)


# --------------------------------------------------------------------------- custom GPU


def custom_gpu(
    memory: str | int,
    bandwidth: str | float | None = None,
    flops: str | float | None = None,
    name: str = "custom",
) -> GpuSpec:
    """A GPU from flags: `--gpu-memory 24GiB --gpu-bandwidth 1TB/s [--gpu-flops 300T]`.

    `memory` is taken as the CUDA total (what cudaMemGetInfo reports and gpu_memory_utilization
    multiplies), and the NVML total is set to the same value. `flops` is the dense BF16/FP16
    figure; FP8/FP4 lookups fall back to it (see `GpuSpec.resolve_flops`).
    """
    total = parse_bytes(memory, what="--gpu-memory")
    if total <= 0:
        raise InvalidParameter(f"--gpu-memory must be > 0, got {memory!r}")
    sources = {
        "memory_gb": "derived: --gpu-memory / 1e9",
        "cuda_total_bytes": f"user: --gpu-memory {memory}",
        "nvml_total_bytes": "user: --gpu-memory (NVML total assumed equal to the CUDA total)",
    }
    bw: float | None = None
    if bandwidth is not None:
        bw = float(parse_bytes(bandwidth, what="--gpu-bandwidth"))
        if bw <= 0:
            raise InvalidParameter(f"--gpu-bandwidth must be > 0, got {bandwidth!r}")
        sources["memory_bandwidth_bytes_per_s"] = f"user: --gpu-bandwidth {bandwidth}"
    flops_map: dict[str, float] = {}
    if flops is not None:
        value = parse_flops(flops)
        flops_map = {"bf16": value, "fp16": value}
        sources["flops.bf16"] = sources["flops.fp16"] = f"user: --gpu-flops {flops}"
    return GpuSpec(
        id=name.strip().lower() or "custom",
        name=name,
        vendor="custom",
        aliases=(),
        memory_gb=total / 1e9,
        cuda_total_bytes=total,
        nvml_total_bytes=total,
        memory_bandwidth_bytes_per_s=bw,
        flops=flops_map,
        compute_capability=None,
        interconnect_bytes_per_s=None,
        sources=sources,
        custom=True,
    )


# --------------------------------------------------------------------------- loading and validation


def _fail(where: str, gpu_id: str | None, message: str) -> BadConfig:
    entry = f"GPU {gpu_id!r}: " if gpu_id else ""
    return BadConfig(f"{where}: {entry}{message}")


def _positive_number(value: Any, *, where: str, gpu_id: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _fail(where, gpu_id, f"{key} must be a positive number, got {value!r}")
    try:
        if isinstance(value, str):
            sized = key in (*_BYTE_KEYS, *_RATE_KEYS)  # "79.19GiB", "3.35TB/s" read as sizes
            number = float(parse_bytes(value, what=key)) if sized else float(value)
        else:
            number = float(value)
    except (InvalidParameter, ValueError):
        raise _fail(where, gpu_id, f"{key} must be a positive number, got {value!r}") from None
    if not 0 < number < float("inf"):
        raise _fail(where, gpu_id, f"{key} must be a positive number, got {value!r}")
    # The bound --gpu-memory has (units.MAX_BYTES, 1 EiB; memory_gb in GB, rates per second): a typo such as
    # 1e50 would otherwise plan a GPU of 10**41 GiB and print counts of 40 digits.
    limit = MAX_BYTES / 10**9 if key == "memory_gb" else MAX_BYTES
    if number > limit:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise _fail(where, gpu_id, f"{key} {shown} is beyond any GPU (kvplan accepts at most 1 EiB"
                                   f"{', 1.15e+09 GB' if key == 'memory_gb' else ''})")
    return number


def _positive_flops(value: Any, *, where: str, gpu_id: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _fail(where, gpu_id, f"{key} must be a positive FLOP/s figure, got {value!r}")
    try:
        return parse_flops(value, what=key)
    except InvalidParameter:
        raise _fail(where, gpu_id, f"{key} must be a positive FLOP/s figure, got {value!r}") from None


def _str_tuple(value: Any, *, where: str, gpu_id: str, key: str, lower: bool) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and str(v).strip() for v in value):
        raise _fail(where, gpu_id, f"{key} must be a list of names, got {value!r}")
    return tuple(str(v).strip().lower() if lower else str(v).strip() for v in value)


def _capability(value: Any, *, where: str, gpu_id: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and not isinstance(value, bool):
        value = f"{value:.1f}"
    text = value.strip().lower() if isinstance(value, str) else ""
    if _CAPABILITY_RE.match(text) or _GFX_RE.match(text):
        return text
    raise _fail(where, gpu_id, f"compute_capability must look like \"9.0\" or \"gfx942\", got {value!r}")


def _figure_keys(spec: GpuSpec) -> list[str]:
    """The source keys a spec needs: one per figure it states."""
    keys = ["memory_gb", "cuda_total_bytes", "nvml_total_bytes"]
    if spec.memory_bandwidth_bytes_per_s is not None:
        keys.append("memory_bandwidth_bytes_per_s")
    keys += [f"flops.{d}" for d in spec.flops]
    if spec.compute_capability is not None:
        keys.append("compute_capability")
    if spec.interconnect_bytes_per_s is not None:
        keys.append("interconnect_bytes_per_s")
    if spec.integrated:
        keys.append("integrated")
    return keys


def _entry_id(raw: Any, *, where: str, strict: bool, base: GpuSpec | None) -> str:
    """Check an entry's shape, id, keys and required keys; its lowercase id."""
    if not isinstance(raw, dict):
        raise _fail(where, None, f"each GPU must be a mapping, got {raw!r}")
    gpu_id = str(raw.get("id", "")).strip().lower()
    if not gpu_id:
        raise _fail(where, None, f"a GPU entry has no id (keys: {', '.join(map(str, raw))})")
    if not _ID_RE.match(gpu_id):
        raise _fail(where, gpu_id, "id may use only letters, digits, '.', '_' and '-'")
    unknown = sorted(str(k) for k in raw if k not in _ALLOWED_KEYS and not _is_extension(k))
    if unknown:
        allowed = ", ".join(sorted(_ALLOWED_KEYS))
        raise _fail(where, gpu_id, f"unknown key(s) {', '.join(unknown)} (allowed: {allowed})")
    required = _PACKAGED_REQUIRED if strict else (() if base is not None else _USER_REQUIRED)
    for key in required:
        if key not in raw:
            raise _fail(where, gpu_id, f"missing {key}")
    return gpu_id


def _base_fields(base: GpuSpec | None) -> dict[str, Any]:
    """The fields an entry starts from: the overridden catalog entry's, or neutral defaults."""
    if base is not None:
        return {f.name: getattr(base, f.name) for f in dataclasses.fields(GpuSpec)}
    return {"vendor": "unknown", "aliases": (), "device_names": (), "compute_capability": None,
            "interconnect_bytes_per_s": None, "flops": {}, "sources": {}, "custom": False}


def _name_fields(raw: dict[Any, Any], fields: dict[str, Any], *, where: str, gpu_id: str,
                 override: bool) -> dict[str, Any]:
    """The name, vendor, aliases and device names an entry states (an override adds names, removes none)."""
    out: dict[str, Any] = {}
    if "name" in raw:
        if not isinstance(raw["name"], str) or not raw["name"].strip():
            raise _fail(where, gpu_id, f"name must be a non-empty string, got {raw['name']!r}")
        out["name"] = raw["name"].strip()
    if "vendor" in raw:
        out["vendor"] = str(raw["vendor"]).strip().lower()
    if "platform" in raw:
        platform = str(raw["platform"]).strip().lower()
        if platform not in PLATFORMS:
            raise _fail(where, gpu_id, f"platform must be one of {', '.join(PLATFORMS)}, got {raw['platform']!r}")
        out["platform"] = platform
    elif not override:
        out["platform"] = "rocm" if out.get("vendor") == "amd" else "cuda"
    for key in ("aliases", "device_names"):
        if key in raw:
            names = _str_tuple(raw[key], where=where, gpu_id=gpu_id, key=key, lower=(key == "aliases"))
            out[key] = tuple(dict.fromkeys((*fields[key], *names))) if override else names
    return out


def _figure_fields(raw: dict[Any, Any], *, where: str, gpu_id: str) -> dict[str, Any]:
    """The byte totals, rates, memory_gb and compute capability an entry states, validated."""
    def num(key: str) -> float:
        return _positive_number(raw[key], where=where, gpu_id=gpu_id, key=key)

    out: dict[str, Any] = {}
    for key in _BYTE_KEYS:
        if key in raw:
            value = num(key)
            if value != int(value):
                raise _fail(where, gpu_id, f"{key} must be a whole number of bytes, got {raw[key]!r}")
            out[key] = int(value)
    for key in ("memory_bandwidth_bytes_per_s", "interconnect_bytes_per_s"):
        if key in raw:
            out[key] = None if (raw[key] is None and key == "interconnect_bytes_per_s") else num(key)
    if "memory_gb" in raw:
        out["memory_gb"] = num("memory_gb")
    if "compute_capability" in raw:
        out["compute_capability"] = _capability(raw["compute_capability"], where=where, gpu_id=gpu_id)
    if "integrated" in raw:
        if not isinstance(raw["integrated"], bool):
            raise _fail(where, gpu_id, f"integrated must be true or false, got {raw['integrated']!r}")
        out["integrated"] = raw["integrated"]
    return out


def _flops_field(raw: dict[Any, Any], *, where: str, gpu_id: str) -> dict[str, float]:
    """The FLOP/s per dtype an entry states, validated."""
    if not isinstance(raw["flops"], dict):
        raise _fail(where, gpu_id, f"flops must map dtypes ({', '.join(FLOPS_DTYPES)}) to FLOP/s")
    parsed: dict[str, float] = {}
    for dtype, value in raw["flops"].items():
        if dtype not in FLOPS_DTYPES:
            expected = ", ".join(FLOPS_DTYPES)
            raise _fail(where, gpu_id, f"flops.{dtype}: unknown dtype (expected {expected})")
        parsed[dtype] = _positive_flops(value, where=where, gpu_id=gpu_id, key=f"flops.{dtype}")
    return parsed


def _sources_field(raw: dict[Any, Any], inherited: dict[str, str], *, where: str, gpu_id: str,
                   strict: bool) -> dict[str, str]:
    """The source of every figure: inherited, then a user file's own name (user files), then what it states."""
    raw_sources = raw.get("sources") or {}
    if not isinstance(raw_sources, dict) or not all(isinstance(v, str) for v in raw_sources.values()):
        raise _fail(where, gpu_id, "sources must map figure keys to source strings")
    stated = [k for k in raw if k in (*_BYTE_KEYS, *_RATE_KEYS, "memory_gb", "compute_capability")]
    stated += [f"flops.{d}" for d in (raw.get("flops") or {})]
    sources = dict(inherited)
    if not strict:
        # A figure from a user file is sourced to that file unless the file says more.
        sources.update({k: f"user file {where}" for k in stated if raw.get(k, 0) is not None})
    sources.update({str(k): v.strip() for k, v in raw_sources.items()})
    return sources


def _check_packaged_sources(spec: GpuSpec, *, where: str, gpu_id: str) -> None:
    """A packaged entry sources every figure it states, and only those."""
    needed = _figure_keys(spec)
    missing = [k for k in needed if not spec.sources.get(k)]
    if missing:
        raise _fail(where, gpu_id, f"figure(s) without a source: {', '.join(missing)}")
    stale = sorted(set(spec.sources) - set(needed))
    if stale:
        raise _fail(where, gpu_id, f"source(s) for figures it does not state: {', '.join(stale)}")


def _parse_entry(raw: Any, *, where: str, strict: bool, base: GpuSpec | None) -> GpuSpec:
    """Validate one YAML entry; `base` is the catalog entry it overrides (user files only)."""
    gpu_id = _entry_id(raw, where=where, strict=strict, base=base)
    # Start from the overridden entry (or neutral defaults), then apply what the file states.
    fields = _base_fields(base)
    fields["id"] = gpu_id
    fields.update(_name_fields(raw, fields, where=where, gpu_id=gpu_id, override=base is not None))
    fields.update(_figure_fields(raw, where=where, gpu_id=gpu_id))
    if "flops" in raw:
        fields["flops"] = {**fields["flops"], **_flops_field(raw, where=where, gpu_id=gpu_id)}
    # Defaults for a new user GPU: the NVML total is unknown, so take the CUDA total.
    fields.setdefault("nvml_total_bytes", fields["cuda_total_bytes"])
    fields.setdefault("memory_gb", fields["nvml_total_bytes"] / 1e9)
    fields["sources"] = _sources_field(raw, fields["sources"], where=where, gpu_id=gpu_id, strict=strict)
    if strict and not fields["flops"]:
        raise _fail(where, gpu_id, "flops must state at least one dtype")
    spec = GpuSpec(**fields)
    if strict:
        _check_packaged_sources(spec, where=where, gpu_id=gpu_id)
    return spec


def _is_extension(key: object) -> bool:
    """Keys starting with `x-` are ignored, as in plans: a place for YAML anchors."""
    return isinstance(key, str) and key.startswith("x-")


def _entries(data: Any, where: str) -> list[Any]:
    if isinstance(data, dict):
        other = sorted(str(k) for k in data if k != "gpus" and not _is_extension(k))
        if "gpus" in data and not other:
            data = data["gpus"]
        elif other:
            raise BadConfig(f"{where}: unknown top-level key(s) {', '.join(other)} (allowed: gpus, and x-… "
                            "keys for YAML anchors)")
    if not isinstance(data, list):
        raise BadConfig(f"{where}: expected a list of GPUs under a top-level 'gpus:' key")
    return data


def parse_catalog(
    data: Any, where: str, *, strict: bool = False, base: Mapping[str, GpuSpec] | None = None
) -> dict[str, GpuSpec]:
    """Validate parsed YAML (`{"gpus": [...]}`) into specs, adding to or overriding `base` by id.

    `strict` is the packaged catalog's rule: every figure present and sourced. User files may omit
    sources and, when overriding an existing id, state only the figures they change.
    """
    catalog = dict(base or {})
    seen: set[str] = set()
    for raw in _entries(data, where):
        gpu_id = str(raw.get("id", "")).strip().lower() if isinstance(raw, dict) else ""
        if gpu_id and gpu_id in seen:
            raise _fail(where, gpu_id, "listed twice")
        spec = _parse_entry(raw, where=where, strict=strict, base=catalog.get(gpu_id))
        seen.add(spec.id)
        catalog[spec.id] = spec
    _name_index(catalog.values(), where=where)  # collisions are an error at load time
    return catalog


def _name_index(specs: Iterable[GpuSpec], *, where: str = "GPU catalog") -> dict[str, str]:
    """Exact lookup keys (id, aliases, device names; lower-case) -> id. Collisions are an error."""
    index: dict[str, str] = {}
    for spec in specs:
        for key in (spec.id, *spec.aliases, *(d.lower() for d in spec.device_names)):
            other = index.get(key)
            if other is not None and other != spec.id:
                raise BadConfig(f"{where}: name {key!r} is used by both GPU {other!r} and GPU {spec.id!r}")
            index[key] = spec.id
    return index


def _slug_index(specs: Iterable[GpuSpec]) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for spec in specs:
        for key in (spec.id, *spec.aliases, *spec.device_names):
            slug = _slug(key)
            if slug:
                index.setdefault(slug, set()).add(spec.id)
    return index


def _load_yaml(text: str, where: str, *, packaged: bool = False) -> Any:
    """A GPU file's data, read by the bounded YAML reader plans use too (kvplan/yaml_reader.py: its depth
    and node limits)."""
    from kvplan import yaml_reader

    return yaml_reader.load(text, where, packaged=packaged)


@functools.cache
def _packaged_catalog() -> Mapping[str, GpuSpec]:
    """The packaged catalog, parsed and validated once per process (`kvplan fit` sweeps it)."""
    from importlib.resources import files

    text = files("kvplan.hardware").joinpath(PACKAGED_FILE).read_text(encoding="utf-8")
    where = f"kvplan/hardware/{PACKAGED_FILE}"
    return parse_catalog(_load_yaml(text, where, packaged=True), where, strict=True)


def _read_user_file(path: Path) -> Any:
    from kvplan import files

    return _load_yaml(files.read_text(str(path), files.GPUS, where=f"GPU file {str(path)!r}"), str(path))


def load_catalog(extra_file: str | Path | None = None) -> dict[str, GpuSpec]:
    """The packaged catalog plus the GPUs of `extra_file` (or `$KVPLAN_GPUS_FILE`), by id.

    Entries of the extra file add GPUs or override figures of existing ones. Order: packaged
    entries as in gpus.yaml, then new ones from the file. The returned dict is a fresh copy.
    """
    catalog = dict(_packaged_catalog())
    path = extra_file if extra_file is not None else (os.environ.get(GPUS_FILE_ENV) or None)
    if path is None or str(path) == "":
        return catalog
    return parse_catalog(_read_user_file(Path(path)), str(path), base=catalog)


def find_gpu(name: str, catalog: Mapping[str, GpuSpec]) -> GpuSpec:
    """Look `name` up in `catalog`: id, alias or device name, ignoring case, spaces and punctuation.

    Full device names as vLLM and nvidia-smi print them ("NVIDIA H100 80GB HBM3") match the
    catalog's `device_names`. Nothing is matched by prefix or substring: "H100 NVL" must not
    become H100 SXM. An ambiguous or unknown name raises UnknownGpu with suggestions.
    """
    key = " ".join(name.split()).lower()
    gpu_id = _name_index(catalog.values()).get(key)
    if gpu_id is None:
        hits = _slug_index(catalog.values()).get(_slug(key), set())
        if len(hits) == 1:
            gpu_id = next(iter(hits))
        elif hits:
            raise UnknownGpu(name, sorted(hits))
    if gpu_id is None:
        names = [n for s in catalog.values() for n in (s.id, *s.aliases)]
        raise UnknownGpu(name, close_matches(key, names))
    return catalog[gpu_id]


def gpu_for_device_name(name: str, catalog: Mapping[str, GpuSpec]) -> GpuSpec | None:
    """The catalog GPU a logged device name names, or None when it names none or several: `find_gpu`'s lookup
    (the fused-MoE config form "NVIDIA_H200" matches too). Alternatives written "A / B" resolve only when every
    one names the same GPU ("GB10 / DGX Spark" is gb10; "H200/H20" is None)."""
    hits: set[str] = set()
    for part in name.split("/"):
        try:
            hits.add(find_gpu(part, catalog).id)
        except UnknownGpu:
            return None
    return catalog[hits.pop()] if len(hits) == 1 else None


def get_gpu(name: str, extra_file: str | Path | None = None) -> GpuSpec:
    """The catalog GPU called `name` (id, alias or device name); see `find_gpu`."""
    return find_gpu(name, load_catalog(extra_file))
