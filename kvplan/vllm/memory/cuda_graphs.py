"""The CUDA-graph memory vLLM subtracts before sizing the KV cache, and the graphs `--compilation-config` asks for.

What vLLM subtracts is its own *estimate*, not the graphs' real pool. v1/worker/gpu_model_runner.py:
profile_cudagraph_memory (the V1 runner, read in 0.20, 0.22, 0.23, 0.24, 0.27, 0.30 and 0.33) captures the two largest
graphs of each mode (PIECEWISE, FULL) into a throwaway pool, measuring the free memory each capture takes,
and extrapolates linearly: max over the modes of the first capture + Σ over the modes of (graphs − 1) ×
max(second capture, 1 MiB). The first FULL sample runs with profile_seq_lens = min(max_model_len,
max_num_batched_tokens // its tokens), so its transient is charged too. Graphs share one pool at runtime, so
the real pool is smaller ("CUDA graph pool memory: X GiB (actual), Y GiB (estimated)"); vllm#45178 (MiniMax-M2.5
NVFP4, B200, DEP 2: 769,888 KV tokens without the estimate, 245,840 with it) and vllm#53013 (118.65 GiB
estimated on GB300) show how far the extrapolation reaches on large MoE models. Model Runner V2
(v1/worker/gpu/cudagraph_utils.py) measures its PIECEWISE graphs in full and extrapolates only FULL ones
(first + (FULL − 1) × max(second, 1 MiB), _extrapolate_full_graph_memory); kvplan uses the V1 form for both,
which the range covers.

kvplan cannot capture, so it models the extrapolation: a first capture, plus a cost per extrapolated graph
(PIECEWISE − 1 and FULL − 1): a constant for the model's dense part, and a cost per MoE layer on the worker
that shrinks with the ranks an expert is split over (TP × DP; the experts' intermediate activations are split
over them; an assumption the two MoE logs agree with better than without it), not with expert parallelism,
where each rank holds whole experts (fused_moe/config.py:FusedMoEParallelConfig.make): GLM-5.2-NVFP4 at TP 4 +
EP logs 4.99 GiB for 51 + 51 graphs, inside the undivided range and above the divided one.
Fitted on logs that print both the capture counts and the
estimate for a model whose layers are known (tests/fixtures/data/cuda-graph-estimates.yaml). Which graphs
are captured follows config/vllm.py:_set_cudagraph_sizes and the capture descriptors: PIECEWISE graphs for
every capture size, FULL graphs for the decode sizes up to max_num_seqs (FULL_AND_PIECEWISE,
FULL_DECODE_ONLY) or for every size (FULL), none with NONE or --enforce-eager. DeepSeek-V4 counts the same
whichever way its PIECEWISE graphs are made: 0.22 compiles DeepseekV4Model (@support_torch_compile, split at
vllm::deepseek_v4_attention); 0.23 drops the decorator and turns on breakable graphs for it (config/vllm.py;
vllm#54677 reads the same in 0.26 and 0.28).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kvplan.errors import InvalidParameter
from kvplan.model.architectures import family_for
from kvplan.units import GiB, MiB
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
# model_executor/models/config.py:MODELS_CONFIG_MAP raises max_cudagraph_capture_size per architecture unless the
# user set the sizes or the maximum (GptOssForCausalLMConfig: 1024): Family.max_cudagraph_capture_size.
# cudagraph_utils.py:_MIN_PER_GRAPH_BYTES: the floor of an extrapolated FULL graph.
MIN_FULL_GRAPH_BYTES = 1 * MiB

# --- The estimate's constants (tests/fixtures/data/cuda-graph-estimates.yaml) ---------------------------------
# Dense part, from the three logs of dense/hybrid models (graphs extrapolated: PIECEWISE − 1 + FULL − 1):
#   Qwen2.5-7B, 0.22.0, TP 1: 35 + 19 graphs → 0.37 GiB: 64 MiB + 52 × 6.06 MiB
#   vllm#52872, a 64-layer hybrid: 51 + 35 → 0.52 GiB: 64 MiB + 84 × 5.58 MiB
#   club3090-434, Qwen3.6-27B, TP 2: 3 + 2 → 0.09 GiB: 64 MiB + 3 × 9.4 MiB
# The cost per graph does not grow with the layers (28 and 64 layers cost the same): a constant, 6 MiB (the
# median). The first capture: 64 MiB (the earlier fit's pool base).
CUDA_GRAPH_FIRST_CAPTURE_BYTES = 64 * MiB
CUDA_GRAPH_BYTES_PER_GRAPH = 6 * MiB
# MoE part, per MoE layer on the worker and per extrapolated graph, at TP 1 (÷ TP):
#   MiniMax-M2.7 FP8, A100, TP 4 (vllm#39610): 35 + 19 → 0.67 GiB: 64 MiB + 52 × (6 + 62 × 0.385 / 4) MiB
#   Qwen3.6-35B-A3B NVFP4, TP 1 (two logs, 1 + 1 → 0.36 GiB and 11 + 7 → 1.21 GiB): 16 more graphs cost
#   0.85 GiB, 6 + 40 × 1.21 MiB each (40 layers: the held Qwen3.5-35B-A3B config's)
# Two MoE kernels (Marlin FP8 on Ampere, FlashInfer CUTLASS NVFP4) three times apart, and no log for the others
# (MXFP4, Triton, DeepGEMM): the best value is the smaller, which every MoE log reaches, the range their span.
CUDA_GRAPH_BYTES_PER_MOE_LAYER_GRAPH = round(0.385 * MiB)
# Ranges, each end holding on every log of that file (the two above and club3090-104's "PIECEWISE=5" → 0.13 GiB,
# Mistral-Small-4 AWQ's "PIECEWISE=3" → 0.14 GiB): the first capture 0 … 104 MiB (0.37 GiB with MoE layers: the
# one-graph Qwen3.6-35B-A3B log is all first capture), 5.5 … 9.5 MiB per graph, 0.35 … 1.3 MiB per MoE layer.
CUDA_GRAPH_FIRST_CAPTURE_RANGE = (0, 104 * MiB)
CUDA_GRAPH_FIRST_CAPTURE_HIGH_MOE = round(0.37 * GiB)
CUDA_GRAPH_PER_GRAPH_RANGE = (round(5.5 * MiB), round(9.5 * MiB))
CUDA_GRAPH_PER_MOE_LAYER_RANGE = (round(0.35 * MiB), round(1.3 * MiB))


@dataclass(frozen=True)
class CompilationSettings:
    """What `--compilation-config` says about CUDA graphs (config/compilation.py:CompilationConfig)."""

    cudagraph_mode: CudagraphMode | None = None  # None: vLLM's default (FULL_AND_PIECEWISE)
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    max_cudagraph_capture_size: int | None = None
    compilation_mode: int | None = None  # `mode` (or the older `level`): 3 = VLLM_COMPILE
    ignored_keys: tuple[str, ...] = ()
    # pass_config.fuse_allreduce_rms (config/compilation.py:PassConfig); None: the release's -O2 default. Its
    # FlashInfer workspace is non-torch memory (memory/non_torch.py:flashinfer_ar_fusion_workspace).
    fuse_allreduce_rms: bool | None = None

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
    fuse, pass_ignored = _pass_config(config.get("pass_config"))
    ignored = tuple(sorted([str(k) for k in config if k not in (*COMPILATION_KEYS_MODELLED, "pass_config")]
                           + pass_ignored))
    return CompilationSettings(mode, sizes, max_size, comp, ignored, fuse)


def _pass_config(raw: Any) -> tuple[bool | None, list[str]]:
    """`pass_config`'s fuse_allreduce_rms (true / false / null) and the keys kvplan does not model."""
    if raw is None:
        return None, []
    if not isinstance(raw, Mapping):
        raise InvalidParameter(f"--compilation-config pass_config: expected a JSON object, got {raw!r}")
    fuse = raw.get("fuse_allreduce_rms")
    if fuse is not None and not isinstance(fuse, bool):
        raise InvalidParameter(f"--compilation-config pass_config.fuse_allreduce_rms: expected true or false, "
                               f"got {fuse!r}")
    return fuse, [f"pass_config.{k}" for k in raw if k != "fuse_allreduce_rms"] if raw else ["pass_config"]


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, arch: str | None,
                  compilation: CompilationSettings | None = None, *,
                  architecture: str | None = None) -> tuple[int, ...]:
    """The batch sizes vLLM 0.33 captures (config/vllm.py:_set_cudagraph_sizes, decode query length 1)."""
    c = compilation or CompilationSettings()
    if c.effective_mode() == "NONE":
        return ()
    max_size = c.max_cudagraph_capture_size
    raised = family_for((architecture,), "").max_cudagraph_capture_size if architecture else 0
    if c.cudagraph_capture_sizes is None and max_size is None and raised:
        max_size = raised
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


def extrapolated_graphs(piecewise: int, full: int) -> int:
    """The graphs profile_cudagraph_memory extrapolates: all but the first of each mode."""
    return max(0, piecewise - 1) + max(0, full - 1)


def cuda_graph_bytes(piecewise: int, full: int, *, moe_layers: int = 0, tp: int = 1,
                     end: Literal["best", "low", "high"] = "best") -> int:
    """vLLM's estimate for that many graphs (see the module docstring): a first capture, plus per extrapolated
    graph a constant and a cost per MoE layer on the worker ÷ `tp`, the ranks an expert's intermediate is split
    over (1 with expert parallelism: each rank holds whole experts); `end` picks the range's low or high end."""
    if piecewise + full == 0:
        return 0
    if end == "best":
        first, per_graph, per_moe = (CUDA_GRAPH_FIRST_CAPTURE_BYTES, CUDA_GRAPH_BYTES_PER_GRAPH,
                                     CUDA_GRAPH_BYTES_PER_MOE_LAYER_GRAPH)
    else:
        i = 0 if end == "low" else 1
        first = CUDA_GRAPH_FIRST_CAPTURE_RANGE[i]
        if end == "high" and moe_layers:
            first = CUDA_GRAPH_FIRST_CAPTURE_HIGH_MOE
        per_graph, per_moe = CUDA_GRAPH_PER_GRAPH_RANGE[i], CUDA_GRAPH_PER_MOE_LAYER_RANGE[i]
    each = max(per_graph + moe_layers * per_moe // max(1, tp), MIN_FULL_GRAPH_BYTES)
    return first + extrapolated_graphs(piecewise, full) * each


# Model Runner V2's profile_cudagraph_memory (v1/worker/gpu/model_runner.py, read in the wheels): `return 0` ("It is TBD
# whether we keep this API or not") in 0.22, 0.23, 0.24, 0.26, 0.27.1 and 0.28.0; 0.29.0, 0.30–0.32 and 0.33 call
# _profile_cudagraph_memory (v1/worker/gpu/cudagraph_utils.py). gpu_worker.py subtracts what it returns.
MRV2_GRAPH_ESTIMATE_SINCE = VllmVersion(0, 29)


@dataclass(frozen=True)
class GraphCapture:
    """What decides the CUDA graphs one worker captures and what they cost: the capture sizes follow
    `max_num_seqs` and `max_num_batched_tokens` (graph_counts), the modes the GPU `arch`, the model `architecture`
    and -cc (`compilation`); --enforce-eager captures none; each graph grows with the worker's
    `moe_layers_on_worker` MoE layers, split over the `tp` ranks each expert's intermediate is split over
    (cuda_graph_bytes)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    arch: str | None = None
    enforce_eager: bool = False
    compilation: CompilationSettings | None = None
    architecture: str | None = None
    moe_layers_on_worker: int = 0
    tp: int = 1


def estimate_cuda_graphs(capture: GraphCapture, *, version: VllmVersion = LATEST, subtracted: bool | None = None,
                         model_runner_v2: bool = False) -> MemoryTerm:
    """CUDA-graph memory vLLM subtracts before sizing the cache (since v0.20, or as `subtracted` says:
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; 0 with --enforce-eager or cudagraph_mode NONE). Model Runner V2
    estimates nothing before 0.29 (MRV2_GRAPH_ESTIMATE_SINCE)."""
    arch, tp, moe_layers_on_worker = capture.arch, capture.tp, capture.moe_layers_on_worker
    if capture.enforce_eager:
        return MemoryTerm("cuda_graphs", 0, "none", "--enforce-eager: no CUDA graphs are captured")
    c = capture.compilation or CompilationSettings()
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
    if model_runner_v2 and version < MRV2_GRAPH_ESTIMATE_SINCE:
        return MemoryTerm("cuda_graphs", 0, "not subtracted",
                          f"vLLM {version}'s Model Runner V2 estimates no CUDA-graph memory before sizing the cache "
                          "(v1/worker/gpu/model_runner.py:profile_cudagraph_memory returns 0 up to 0.28)")
    piecewise, full = graph_counts(capture.max_num_seqs, capture.max_num_batched_tokens, arch, c,
                                   architecture=capture.architecture)
    m = moe_layers_on_worker
    total = cuda_graph_bytes(piecewise, full, moe_layers=m, tp=tp)
    moe = (f" + {moe_layers_on_worker} MoE layers × {CUDA_GRAPH_BYTES_PER_MOE_LAYER_GRAPH / MiB:.2f} MiB ÷ TP {tp}"
           if moe_layers_on_worker else "")
    term = MemoryTerm(
        "cuda_graphs",
        total,
        "estimate",
        f"{c.effective_mode()}: {piecewise} piecewise + {full} full graphs, vLLM's estimate extrapolates "
        f"{extrapolated_graphs(piecewise, full)} of them × ({CUDA_GRAPH_BYTES_PER_GRAPH / MiB:.0f} MiB{moe}) "
        f"+ {CUDA_GRAPH_FIRST_CAPTURE_BYTES / MiB:.0f} MiB first capture (fitted on vLLM's logged estimates)"
        + ("; vLLM's extrapolation has reached tens of GiB for large MoE models on Blackwell (vllm#45178, #53013), "
           "beyond this range: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 or fewer capture sizes bound it"
           if moe_layers_on_worker and (arch or "").lower() == "blackwell" else ""),
    )
    return with_range(term, cuda_graph_bytes(piecewise, full, moe_layers=m, tp=tp, end="low"),
                      cuda_graph_bytes(piecewise, full, moe_layers=m, tp=tp, end="high"))
