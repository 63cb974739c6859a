"""The CUDA-graph memory vLLM subtracts before sizing the KV cache, and the graphs `--compilation-config` asks for.

vLLM 0.33, v1/worker/gpu/cudagraph_utils.py:profile_cudagraph_memory captures every graph of the run into
a throwaway pool and measures it: PIECEWISE (and encoder, speculator) graphs in full; of the FULL graphs
only the largest two, extrapolated as first capture + (FULL graphs − 1) × max(second sample, 1 MiB)
(_extrapolate_full_graph_memory). kvplan cannot capture, so it models what that measures: the pool's
first allocation plus a cost per captured graph per decoder layer on the worker (a FULL graph at least
1 MiB, vLLM's _MIN_PER_GRAPH_BYTES). Which graphs are captured follows config/vllm.py:_set_cudagraph_sizes
and CudaGraphManager's capture descriptors (cudagraph_utils.py): PIECEWISE graphs for every capture size,
FULL graphs for the decode sizes up to max_num_seqs (FULL_AND_PIECEWISE, FULL_DECODE_ONLY) or for every
size (FULL), none with NONE or --enforce-eager.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kvplan.errors import InvalidParameter
from kvplan.units import MiB
from kvplan.vllm.defaults import LATEST, VllmVersion, cudagraph_estimate_subtracted
from kvplan.vllm.memory.budget import MemoryTerm, with_range

CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
CUDAGRAPH_MODES: tuple[CudagraphMode, ...] = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
DEFAULT_CUDAGRAPH_MODE: CudagraphMode = "FULL_AND_PIECEWISE"
# config/compilation.py:CompilationMode: only VLLM_COMPILE (3) splits the graph into pieces; with another
# mode PIECEWISE becomes NONE and FULL_AND_PIECEWISE becomes FULL (CompilationConfig.__post_init__).
COMPILATION_MODES = {"NONE": 0, "STOCK_TORCH_COMPILE": 1, "DYNAMO_TRACE_ONCE": 2, "VLLM_COMPILE": 3}
VLLM_COMPILE = 3
# The `--compilation-config` keys that change the graphs kvplan counts; the others are accepted and named.
COMPILATION_KEYS_MODELLED = ("cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size", "mode",
                             "level")
# config/vllm.py:_set_cudagraph_sizes: the default ceiling, 1024 on the SM100 family.
MAX_CUDAGRAPH_CAPTURE_SIZE = 512
MAX_CUDAGRAPH_CAPTURE_SIZE_SM100 = 1024
# model_executor/models/config.py:GptOssForCausalLMConfig.verify_and_update_config (vLLM 0.33; not in
# 0.11.0): max_cudagraph_capture_size = 1024 unless the user set the sizes or the maximum.
MODEL_MAX_CUDAGRAPH_CAPTURE_SIZE = {"GptOssForCausalLM": 1024}
# cudagraph_utils.py:_MIN_PER_GRAPH_BYTES: the floor of an extrapolated FULL graph.
MIN_FULL_GRAPH_BYTES = 1 * MiB

# --- The estimate's two constants --------------------------------------------------------------------
# Fitted on the two logs with a known model and capture list, neither in the validation half:
#   club3090-434 (calibration): Qwen3.6-27B, 64 layers, "PIECEWISE=3 (largest=16), FULL=2" → 0.09 GiB;
#   vllm issue #52872: a 64-layer hybrid, 51 PIECEWISE + 35 FULL graphs → 0.52 GiB pool.
# 0.09 GiB = base + 5 × 64 × c and 0.52 GiB = base + 86 × 64 × c give base ≈ 64 MiB, c ≈ 0.085 MiB.
CUDA_GRAPH_POOL_BASE_BYTES = 64 * MiB
CUDA_GRAPH_BYTES_PER_GRAPH_LAYER = round(0.085 * MiB)
# Two points fix two constants: the range is the formula's own stated uncertainty, ±50%.
CUDA_GRAPH_RANGE = (-0.5, 0.5)


@dataclass(frozen=True)
class CompilationSettings:
    """What `--compilation-config` says about CUDA graphs (config/compilation.py:CompilationConfig)."""

    cudagraph_mode: CudagraphMode | None = None  # None: vLLM's default (FULL_AND_PIECEWISE)
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    max_cudagraph_capture_size: int | None = None
    compilation_mode: int | None = None  # `mode` (or the older `level`): 3 = VLLM_COMPILE
    ignored_keys: tuple[str, ...] = ()

    def effective_mode(self) -> CudagraphMode:
        mode = self.cudagraph_mode or DEFAULT_CUDAGRAPH_MODE
        if self.compilation_mode is not None and self.compilation_mode != VLLM_COMPILE:
            mode = {"PIECEWISE": "NONE", "FULL_AND_PIECEWISE": "FULL"}.get(mode, mode)  # type: ignore[assignment]
        return mode


MAX_CAPTURE_SIZE_BOUND = 1 << 20  # far above any batch vLLM can schedule; bounds what a JSON may ask for


def _size(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CAPTURE_SIZE_BOUND:
        raise InvalidParameter(f"--compilation-config {what}: expected a whole number 1–{MAX_CAPTURE_SIZE_BOUND:,}, "
                               f"got {value!r}")
    return value


def compilation_settings(config: Mapping[str, Any] | None) -> CompilationSettings:
    """Read vLLM's `--compilation-config` JSON object (as parsed); vLLM's own errors for bad values."""
    if not config:
        return CompilationSettings()
    if not isinstance(config, Mapping):
        raise InvalidParameter(f"--compilation-config: expected a JSON object, got {config!r}")
    mode: CudagraphMode | None = None
    raw_mode = config.get("cudagraph_mode")
    if raw_mode is not None:
        text = str(raw_mode).upper()
        if isinstance(raw_mode, bool) or text not in CUDAGRAPH_MODES:
            raise InvalidParameter(f"--compilation-config cudagraph_mode must be one of {', '.join(CUDAGRAPH_MODES)}, "
                                   f"got {raw_mode!r}")
        mode = text
    sizes: tuple[int, ...] | None = None
    raw_sizes = config.get("cudagraph_capture_sizes")
    if raw_sizes is not None:
        if not isinstance(raw_sizes, (list, tuple)) or not raw_sizes:
            raise InvalidParameter("--compilation-config cudagraph_capture_sizes should contain at least one element "
                                   "when using cuda graph.")
        sizes = tuple(sorted({_size(s, "cudagraph_capture_sizes") for s in raw_sizes}))
    max_size = config.get("max_cudagraph_capture_size")
    max_size = None if max_size is None else _size(max_size, "max_cudagraph_capture_size")
    if sizes is not None and max_size is not None and max_size != sizes[-1]:
        raise InvalidParameter(f"customized max_cudagraph_capture_size(={max_size}) should be consistent with the "
                               f"max value of cudagraph_capture_sizes(={sizes[-1]})")
    comp: int | None = None
    raw_comp = config.get("mode", config.get("level"))
    if raw_comp is not None:
        if isinstance(raw_comp, str) and raw_comp.upper() in COMPILATION_MODES:
            comp = COMPILATION_MODES[raw_comp.upper()]
        elif isinstance(raw_comp, int) and not isinstance(raw_comp, bool) and raw_comp in COMPILATION_MODES.values():
            comp = raw_comp
        else:
            raise InvalidParameter(f"--compilation-config mode: valid modes are {', '.join(COMPILATION_MODES)} "
                                   f"(or 0–3), got {raw_comp!r}")
    ignored = tuple(sorted(str(k) for k in config if k not in COMPILATION_KEYS_MODELLED))
    return CompilationSettings(mode, sizes, max_size, comp, ignored)


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, arch: str | None,
                  compilation: CompilationSettings | None = None, *,
                  architecture: str | None = None) -> tuple[int, ...]:
    """The batch sizes vLLM 0.33 captures (config/vllm.py:_set_cudagraph_sizes, decode query length 1)."""
    c = compilation or CompilationSettings()
    if c.effective_mode() == "NONE":
        return ()
    max_size = c.max_cudagraph_capture_size
    if c.cudagraph_capture_sizes is None and max_size is None and architecture in MODEL_MAX_CUDAGRAPH_CAPTURE_SIZE:
        max_size = MODEL_MAX_CUDAGRAPH_CAPTURE_SIZE[architecture]
    uniform_decode: list[int] = []
    if max_size is None:
        blackwell = (arch or "").lower() == "blackwell"
        ceiling = MAX_CUDAGRAPH_CAPTURE_SIZE_SM100 if blackwell else MAX_CUDAGRAPH_CAPTURE_SIZE
        max_size = min(max_num_seqs * 2, ceiling)
        if max_num_seqs <= max_size:
            uniform_decode = [max_num_seqs]
    max_size = min(max_num_batched_tokens, max_size)
    if c.cudagraph_capture_sizes is not None:
        return tuple(s for s in c.cudagraph_capture_sizes if s <= max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= max_size]
    if max_size >= 8:
        sizes += list(range(8, min(max_size + 1, 256), 8))
    if max_size >= 256:
        sizes += list(range(256, max_size + 1, 16))
    if max_num_batched_tokens <= max_size:
        sizes.append(max_num_batched_tokens)
    sizes += [s for s in uniform_decode if s <= max_num_batched_tokens]
    return tuple(sorted(set(sizes)))


def graph_counts(max_num_seqs: int, max_num_batched_tokens: int, arch: str | None,
                 compilation: CompilationSettings | None = None, *,
                 architecture: str | None = None) -> tuple[int, int]:
    """(PIECEWISE graphs, FULL graphs) vLLM 0.33's CudaGraphManager captures (cudagraph_utils.py): the
    decode routine's FULL graphs for sizes up to max_num_seqs, the mixed routine's graph for every size."""
    c = compilation or CompilationSettings()
    sizes = capture_sizes(max_num_seqs, max_num_batched_tokens, arch, c, architecture=architecture)
    mode = c.effective_mode()
    decode = sum(1 for s in sizes if s <= max_num_seqs)
    if mode == "FULL_AND_PIECEWISE":
        return len(sizes), decode
    if mode == "FULL_DECODE_ONLY":
        return 0, decode
    if mode == "FULL":
        return 0, len(sizes)
    if mode == "PIECEWISE":
        return len(sizes), 0
    return 0, 0


def cuda_graph_bytes(piecewise: int, full: int, num_layers_on_worker: int) -> int:
    """What profile_cudagraph_memory measures for that many graphs: the pool's first allocation, a cost
    per graph per layer, a FULL graph at least 1 MiB (_extrapolate_full_graph_memory's floor)."""
    if piecewise + full == 0:
        return 0
    per_graph = num_layers_on_worker * CUDA_GRAPH_BYTES_PER_GRAPH_LAYER
    return CUDA_GRAPH_POOL_BASE_BYTES + piecewise * per_graph + full * max(per_graph, MIN_FULL_GRAPH_BYTES)


def estimate_cuda_graphs(
    *,
    num_layers_on_worker: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    arch: str | None,
    enforce_eager: bool,
    version: VllmVersion = LATEST,
    compilation: CompilationSettings | None = None,
    architecture: str | None = None,
    subtracted: bool | None = None,
) -> MemoryTerm:
    """CUDA-graph memory vLLM subtracts before sizing the cache (since v0.20, or as `subtracted` says:
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; 0 with --enforce-eager or cudagraph_mode NONE)."""
    if enforce_eager:
        return MemoryTerm("cuda_graphs", 0, "none", "--enforce-eager: no CUDA graphs are captured")
    c = compilation or CompilationSettings()
    if c.effective_mode() == "NONE":
        return MemoryTerm("cuda_graphs", 0, "none", "cudagraph_mode NONE: no CUDA graphs are captured")
    if subtracted is False:
        return MemoryTerm("cuda_graphs", 0, "not subtracted",
                          "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0: graphs are captured after sizing the cache")
    if subtracted is None and not cudagraph_estimate_subtracted(version):
        return MemoryTerm(
            "cuda_graphs",
            0,
            "not subtracted",
            f"vLLM {version} captures graphs after sizing the cache (estimate subtracted since 0.20)",
        )
    piecewise, full = graph_counts(max_num_seqs, max_num_batched_tokens, arch, c, architecture=architecture)
    total = cuda_graph_bytes(piecewise, full, num_layers_on_worker)
    mode = c.effective_mode()
    term = MemoryTerm(
        "cuda_graphs",
        total,
        "estimate",
        f"{mode}: {piecewise} piecewise + {full} full graphs × {num_layers_on_worker} layers × "
        f"{CUDA_GRAPH_BYTES_PER_GRAPH_LAYER / MiB:.3f} MiB + {CUDA_GRAPH_POOL_BASE_BYTES / MiB:.0f} MiB pool "
        f"(vLLM's graph profile; rough, ±50%)",
    )
    lo, hi = CUDA_GRAPH_RANGE
    return with_range(term, int(total * (1 + lo)), int(total * (1 + hi)))
