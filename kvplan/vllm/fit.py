"""`fit`: a model, a GPU and `vllm serve` settings → what vLLM would do at startup (`FitReport`).

A pipeline of small pure stages, each with a frozen result, in the order vLLM's engine core runs them
(v1/engine/core.py:_initialize_kv_caches):

1. `resolve_settings` (settings.py): vLLM's argument checks, then every setting resolved, with its source;
2. KV specs per worker (model/kv_cache.py:kv_cache_specs);
3. `memory_stage`: the worker's budget, one function per term (vllm/memory/);
4. `block_stage`: groups, blocks, tokens, concurrency and the fit check (block_plan.py), with auto-fit;
5. verdicts: startup (verdicts.py:startup_verdict) and preemption (verdicts.py:preemption_verdict);
6. `build_report`, then advice (advice.py), each candidate re-planned through this same pipeline.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, cast

from kvplan.errors import BadConfig
from kvplan.model.kv_cache import KVCacheSpec, kv_cache_specs
from kvplan.model.weights import FP_BYTES, expert_parallel_bytes_saved, mtp_module_stored_bytes
from kvplan.units import GiB
from kvplan.vllm.advice import advise_fixes
from kvplan.vllm.architectures import served_quantization_methods
from kvplan.vllm.block_plan import BlockPlanSettings, KVCachePlan, plan_kv_cache
from kvplan.vllm.configs import ParallelConfig
from kvplan.vllm.defaults import (
    DEFAULT_BLOCK_SIZE,
    DSV4_PACKED_GROUPS_SINCE,
    KV_TOKENS_FROM_CONCURRENCY_SINCE,
    fit_check_reserves_null_block,
    flashinfer_sampler_by_default,
    override_sets_checked_memory,
    pp_fit_check_merged,
    refusal_wording,
)
from kvplan.vllm.dtype import served_dtype
from kvplan.vllm.encoder_gemma4 import with_gemma4_encoder_peak
from kvplan.vllm.kv_connectors import connector_cpu_note
from kvplan.vllm.memory.activation import ProfileRun, estimate_activation, penalty_state_bytes
from kvplan.vllm.memory.budget import (
    MemoryBudget,
    MemoryTerm,
    memory_budget,
    shifted,
    startup_baseline_bytes,
    user_term,
)
from kvplan.vllm.memory.cuda_graphs import VLLM_COMPILE, GraphCapture, compilation_settings, estimate_cuda_graphs
from kvplan.vllm.memory.lora import lora_bytes_per_gpu
from kvplan.vllm.memory.non_torch import estimate_non_torch, flashinfer_ar_fusion_workspace
from kvplan.vllm.memory.weights import estimate_weights, tower_bytes_per_gpu
from kvplan.vllm.multimodal import MmLimits, apply_mm_limits, gemma4_encoder_profile, text_only
from kvplan.vllm.offload import deployment_tier, tier_note
from kvplan.vllm.quantization import apply_quantization
from kvplan.vllm.report import (
    CacheSummary,
    DeploymentSummary,
    FitReport,
    GroupSummary,
    MemorySummary,
    SchedulerSummary,
    StageSummary,
    TowerSummary,
    VerdictSummary,
)
from kvplan.vllm.settings import (
    GpuLike,
    ResolvedSettings,
    ServeSettings,
    check_model_served,
    gpu_platform,
    mm_limits,
    resolve_settings,
)
from kvplan.vllm.speculative import (
    DRAFT_MODEL,
    EAGLE_METHODS,
    SpecDecode,
    draft_specs,
    eagle_head_params,
    mtp_layers,
    own_draft_specs,
    resolve_speculative,
)
from kvplan.vllm.verdicts import PreemptionVerdict, Startup, StartupRange, preemption_verdict, startup_verdict

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

SpecsPerWorker = list[list[KVCacheSpec]]


def memory_stage(model: ModelSpec, gpu: GpuLike, s: ServeSettings, r: ResolvedSettings,
                 specs: SpecsPerWorker, spec_decode: SpecDecode | None = None) -> MemoryBudget:
    """Stage 3: the worker's budget. With PP > 1 every stage has its own (`stages`, first to last: its weights
    and embedding or LM head, its layers' CUDA graphs, the encoder profile on the first, the sampler's dummy
    run on the last), as each worker profiles itself (v1/worker/gpu_worker.py:determine_available_memory);
    the budget returned is the last stage's until block_stage names the tightest. A term the user measured
    (`--weights-memory` …) replaces kvplan's estimate of it on every stage."""
    par = s.parallel_config
    if par.pipeline_parallel_size == 1:
        return _stage_budget(model, gpu, s, r, specs, spec_decode, None)
    stages = tuple(_stage_budget(model, gpu, s, r, specs, spec_decode, i) for i in range(par.pipeline_parallel_size))
    return replace(stages[-1], stages=stages)


def _stage_budget(model: ModelSpec, gpu: GpuLike, s: ServeSettings, r: ResolvedSettings, specs: SpecsPerWorker,
                  spec_decode: SpecDecode | None, stage: int | None) -> MemoryBudget:
    """One worker's budget: PP stage `stage`, or the only one (None)."""
    par, cache, mc = s.parallel_config, s.cache_config, s.model_config
    batch = r.scheduler_config.batch
    weights = _weights_term(model, gpu, s, r, spec_decode, stage)
    last, first = stage is None or stage == par.pipeline_parallel_size - 1, stage in (None, 0)
    moe_point = _flashinfer_moe_point(model, gpu, s, r)
    activation = (user_term("activation", s.measured.activation_bytes, "--activation-memory")
                  if s.measured.activation_bytes is not None
                  else _with_encoder_profile(
                      _said_moe_kernel(estimate_activation(
                          model, ProfileRun(batch.max_num_batched_tokens, batch.max_num_seqs,
                                            tp=par.tensor_parallel_size, moe_tp=_moe_tensor_parallel(model, par),
                                            first_stage=first, with_sampler=last, moe_point_bytes=moe_point),
                          version=r.version, flashinfer_sampler=s.env.use_flashinfer_sampler,
                          model_runner_v2=r.model_runner.v2,
                          flashinfer_default=flashinfer_sampler_by_default(s.vllm_version)),
                          moe_point, model, s.env.use_flashinfer_moe_fp8),
                      model, s, r, first=first))
    activation = activation if s.measured.activation_bytes is not None else with_gemma4_encoder_peak(
        activation, model, s, r, total_bytes=gpu.cuda_total_bytes, weights_bytes=weights.bytes, first=first)
    integrated = getattr(gpu, "integrated", False)
    measured, group = s.measured, _moe_group(model, par)
    non_torch = (user_term("non_torch", measured.non_torch_bytes, "--non-torch-memory")
                 if measured.non_torch_bytes is not None
                 else _with_penalty_state(estimate_non_torch(tp=group, pp=par.pipeline_parallel_size,
                                                             version=r.version, integrated=integrated, arch=gpu.arch,
                                                             pcie_only=getattr(gpu, "pcie_only", False),
                                                             nvswitch_gpus=_nvswitch_gpus(gpu, group)),
                                          model, r, last_stage=last))
    non_torch = non_torch if measured.non_torch_bytes is not None else _with_ar_fusion_workspace(non_torch, model,
                                                                                               gpu, s, r)
    graphs = (user_term("cuda_graphs", measured.cuda_graph_bytes, "--cuda-graph-memory")
              if measured.cuda_graph_bytes is not None
              else estimate_cuda_graphs(GraphCapture(
                  batch.max_num_seqs, batch.max_num_batched_tokens, arch=gpu.arch, enforce_eager=mc.enforce_eager,
                  compilation=compilation_settings(s.compilation_config),
                  architecture=model.architectures[0] if model.architectures else None,
                  moe_layers_on_worker=_moe_layers_on_worker(model, par, stage), tp=_moe_tensor_parallel(model, par)),
                  version=r.version, subtracted=s.env.estimate_cudagraphs, model_runner_v2=r.model_runner.v2))
    return memory_budget(
        cuda_total_bytes=gpu.cuda_total_bytes,
        gpu_memory_utilization=r.cache_config.gpu_memory_utilization,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        cuda_graphs=graphs,
        kv_cache_memory_bytes=cache.kv_cache_memory_bytes,
        startup_baseline=startup_baseline_bytes(tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size,
                                                integrated=integrated),
    )


def _moe_layers_on_worker(model: ModelSpec, par: ParallelConfig, stage: int | None) -> int:
    """The target model's MoE layers on the worker (the busiest PP stage when `stage` is None): the part of
    vLLM's CUDA-graph estimate that grows per layer (memory/cuda_graphs.py). A draft runs eagerly or is small."""
    from kvplan.model.parallel import pp_layer_ranges

    ranges = pp_layer_ranges(model.num_layers, par.pipeline_parallel_size)
    counts = [sum(1 for i in r if i < len(model.layers) and model.layers[i].moe) for r in ranges]
    return max(counts, default=0) if stage is None else counts[stage]


def _moe_tensor_parallel(model: ModelSpec, par: ParallelConfig) -> int:
    """The ranks each expert's intermediate is split over (model_executor/layers/fused_moe/config.py:
    FusedMoEParallelConfig.make, read in 0.33): TP × DP flattened, or 1 with --enable-expert-parallel ("In EP,
    each device owns a set of experts fully"). Divides the MoE part of the CUDA-graph estimate and the expert width
    of the fused-MoE workspace (memory/activation.py:triton_moe_workspace_bytes)."""
    group = _moe_group(model, par)
    return 1 if par.enable_expert_parallel and group > 1 else group


def _flashinfer_moe_point(model: ModelSpec, gpu: GpuLike, s: ServeSettings, r: ResolvedSettings) -> int | None:
    """What a block-FP8 MoE layer holds at its FlashInfer CUTLASS call where the release picks that kernel
    (memory/flashinfer_moe.py: SM 9.0, vLLM 0.15–0.16, or with EP later); None: the Triton caches
    (memory/activation.py:ProfileRun.moe_point_bytes)."""
    from kvplan.vllm.memory.flashinfer_moe import flashinfer_cutlass_moe_point_bytes, flashinfer_cutlass_moe_selected

    par = s.parallel_config
    if par.data_parallel_size > 1:
        # DP: the MoE layer sees the DP group's gathered tokens, chunked in the profile run (modular_kernel.py:
        # _allocate_buffers' is_dp_ep branch), which neither workspace count here follows: the Triton caches kept
        return None
    group = _moe_group(model, par)
    ep = par.enable_expert_parallel and group > 1
    if not flashinfer_cutlass_moe_selected(model, version=r.version, capability=getattr(gpu, "capability", None),
                                           expert_parallel=ep, use_flashinfer_moe_fp8=s.env.use_flashinfer_moe_fp8):
        return None
    return flashinfer_cutlass_moe_point_bytes(model, moe_tp=_moe_tensor_parallel(model, par),
                                              ep_size=group if ep else 1,
                                              num_tokens=r.scheduler_config.batch.max_num_batched_tokens)


def _said_moe_kernel(term: MemoryTerm, point: int | None, model: ModelSpec | None = None,
                     use_flashinfer_moe_fp8: bool | None = None) -> MemoryTerm:
    """The activation term saying that its MoE layers run FlashInfer's CUTLASS kernel (`point`: their hold), and
    when VLLM_USE_FLASHINFER_MOE_FP8 is set on a block-FP8 MoE, that the variable chose the kernel."""
    from kvplan.vllm.environment import USE_FLASHINFER_MOE_FP8
    from kvplan.vllm.memory.flashinfer_moe import fp8_block_moe

    said = (f"; {USE_FLASHINFER_MOE_FP8}={int(use_flashinfer_moe_fp8)}"
            if use_flashinfer_moe_fp8 is not None and model is not None and fp8_block_moe(model) else "")
    if point is None:
        return replace(term, assumption=f"{term.assumption}{said}: the Triton MoE caches") if said else term
    return replace(term, assumption=f"{term.assumption}; the block-FP8 MoE runs FlashInfer's CUTLASS kernel "
                                    f"(its workspace with vLLM's buffer {point / GiB:.2f} GiB at the MoE call){said}")


def _moe_group(model: ModelSpec, par: ParallelConfig) -> int:
    """The GPUs one worker's collectives span: TP, or TP × DP for a MoE with data parallelism, whose expert
    layers dispatch and combine over the DP group (layers/fused_moe: dp_size > 1), with or without EP. A V1
    log (Qwen3-30B-A3B, TP 1 × DP 2 with EP, vllm#30942) prints 0.61 GiB of non-torch growth, where one GPU
    shows 0.02–0.26."""
    return par.tensor_parallel_size * (par.data_parallel_size if model.moe is not None else 1)


def _with_ar_fusion_workspace(term: MemoryTerm, model: ModelSpec, gpu: GpuLike, s: ServeSettings,
                              r: ResolvedSettings) -> MemoryTerm:
    """Non-torch growth plus FlashInfer's all-reduce fusion workspace where vLLM builds one
    (memory/non_torch.py:flashinfer_ar_fusion_workspace)."""
    par = s.parallel_config
    if par.tensor_parallel_size < 2:  # no all-reduce to fuse
        return term
    comp = compilation_settings(s.compilation_config)
    compiled = not s.model_config.enforce_eager and comp.compilation_mode in (None, VLLM_COMPILE)
    ws = flashinfer_ar_fusion_workspace(
        tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size, dp=par.data_parallel_size,
        hidden=model.hidden_size, max_num_batched_tokens=r.scheduler_config.batch.max_num_batched_tokens,
        capability=getattr(gpu, "capability", None), version=r.version, compiled=compiled,
        nvswitch_gpus=_nvswitch_gpus(gpu, par.tensor_parallel_size) or 0,
        fuse=comp.fuse_allreduce_rms)
    if ws is None:
        return term
    best, low, high = ws
    return shifted(term, best, f"plus FlashInfer's all-reduce + RMSNorm fusion workspace, {best / GiB:.2f} GiB (three "
                               f"buffers, {low / GiB:.2f} … {high / GiB:.2f} GiB as the multicast granularity rounds "
                               "them; vLLM 0.17+ -O2 at TP > 1 on one NVSwitch node)",
                   low_delta=low, high_delta=high)


def _nvswitch_gpus(gpu: GpuLike, tp: int) -> int | None:
    """The GPUs one NVSwitch joins in this GPU's node (kvplan/hardware/nodes.py), where NVLS and CUDA multicast
    work; 0 for GPUs without NVLink between them (GpuSpec.pcie_only); None on one GPU (the node catalog stays
    unimported)."""
    if tp < 2:
        return None
    if getattr(gpu, "pcie_only", False):
        return 0
    from kvplan.hardware.nodes import nvswitch_gpus

    return nvswitch_gpus(getattr(gpu, "id", ""))


def _with_penalty_state(term: MemoryTerm, model: ModelSpec, r: ResolvedSettings, *, last_stage: bool) -> MemoryTerm:
    """Non-torch growth plus Model Runner V2's penalty state: torch tensors, but vLLM counts them where it
    counts non-torch growth, in "consumed memory (weights + non-torch)" (memory/activation.py). Only on the last
    PP stage: Model Runner V2 builds its Sampler, whose PenaltiesState holds them, there alone
    (v1/worker/gpu/model_runner.py:load_model, `if self.is_last_pp_rank and not self.is_pooling_model`; read in
    0.22.0, 0.27.1 and 0.33.0)."""
    seqs = r.scheduler_config.batch.max_num_seqs
    penalties = penalty_state_bytes(model, max_num_seqs=seqs, version=r.version, model_runner_v2=r.model_runner.v2)
    if not penalties or not last_stage:
        return term
    return shifted(term, penalties, f"plus Model Runner V2's penalty state for {seqs:,} requests "
                                    f"({penalties / GiB:.2f} GiB)")


def _with_encoder_profile(term: MemoryTerm, model: ModelSpec, s: ServeSettings, r: ResolvedSettings, *,
                          first: bool = True) -> MemoryTerm:
    """The activation peak with the multimodal encoder's profile (first PP stage): Qwen3-VL's, Qwen2.5-VL's,
    Llama-4's and Mistral-3's (Pixtral) by release, ported (vllm/encoder_profile.py, vllm/encoder_qwen2_5_vl.py,
    vllm/encoder_llama4.py, vllm/encoder_pixtral.py: _with_qwen_vl_encoder); gemma-4's dummy encoder outputs held
    through the profiling run (vllm/multimodal.py; an estimate: its encoder's own forward peak
    is not modelled, so the range reaches twice them); all limits 0 profile no encoder."""
    if not model.mm_modalities:
        return term
    limits = mm_limits(s)
    if text_only(model, limits):
        return replace(term, assumption=f"{term.assumption}; no encoder profile (every multimodal limit is 0)")
    if not first:  # model_runner.py:profile_run profiles the encoder on the first PP stage only
        return term
    qwen = _with_qwen_vl_encoder(term, model, s, r, limits)
    if qwen is not None:
        return qwen
    batch = r.scheduler_config.batch
    enc = gemma4_encoder_profile(model, limits, max_num_batched_tokens=batch.max_num_batched_tokens,
                                 max_num_seqs=batch.max_num_seqs, max_model_len=r.model_config.max_model_len)
    if enc is None and not any(limits.count(m) > 0 for m in model.mm_modalities):
        return replace(term, assumption=f"{term.assumption}; no encoder profile (embedding-only: every multimodal "
                                        "limit is 0)")  # encoder_runner.py:profile_encoder_cache
    if enc is None:
        return replace(term, assumption=f"{term.assumption}; the multimodal encoder's profile is not modelled")
    extra = enc.retained_bytes
    return shifted(term, extra, f"encoder profile: {enc.items} {enc.modality} item(s) × {enc.embeds_per_item:,} "
                   f"embeddings held +{extra / GiB:.2f} GiB (estimate, +{extra / GiB:.2f} … +{2 * extra / GiB:.2f} "
                   "GiB)", low_delta=extra, high_delta=2 * extra)


def _with_qwen_vl_encoder(term: MemoryTerm, model: ModelSpec, s: ServeSettings, r: ResolvedSettings,
                          limits: MmLimits) -> MemoryTerm | None:
    """A Qwen-VL, Llama-4 or Mistral-3 tower's encoder profile, by its model file (VisionGeometry.kind:
    vllm/encoder_profile.py:qwen3_vl_encoder_phase, vllm/encoder_qwen2_5_vl.py:qwen2_5_vl_encoder_phase,
    vllm/encoder_llama4.py:llama4_geometry_phase, vllm/encoder_pixtral.py:pixtral_encoder_phase): the profiling
    peak is the larger of the vision tower's own forward and what the encoder leaves allocated on top of the language
    model's dummy run and sampler (`term`). None: no such tower, or none of its modalities allowed."""
    from kvplan.vllm.encoder_llama4 import llama4_geometry_phase
    from kvplan.vllm.encoder_pixtral import PIXTRAL_FORWARD_RANGE, pixtral_encoder_phase
    from kvplan.vllm.encoder_profile import qwen3_vl_encoder_phase, vision_forward_range
    from kvplan.vllm.encoder_qwen2_5_vl import native_vision_ops, qwen2_5_vl_encoder_phase

    tower = next((t for t in model.towers if t.geometry is not None and t.loaded), None)
    if tower is None or tower.geometry is None:
        return None
    batch = r.scheduler_config.batch
    encoder_phase = {"qwen2_5_vl": qwen2_5_vl_encoder_phase, "llama4": llama4_geometry_phase,
                     "pixtral": pixtral_encoder_phase}.get(tower.geometry.kind, qwen3_vl_encoder_phase)
    native: dict[str, tuple[bool, bool]] = {}
    if tower.geometry.kind == "qwen2_5_vl":  # which of the tower's custom ops run natively (a compiled serve)
        cc, comp = s.compilation_config or {}, compilation_settings(s.compilation_config)
        native["native_ops"] = native_vision_ops(
            r.version, compiled=not s.model_config.enforce_eager and comp.compilation_mode in (None, VLLM_COMPILE),
            backend=str(cc.get("backend") or ""), custom_ops=tuple(str(o) for o in cc.get("custom_ops") or ()))
    phase = encoder_phase(tower.geometry, r.version, model_runner_v2=bool(r.model_runner.v2),
                          tp=s.parallel_config.tensor_parallel_size,
                          max_num_batched_tokens=batch.max_num_batched_tokens, max_num_seqs=batch.max_num_seqs,
                          max_model_len=r.model_config.max_model_len, image_limit=limits.count("image"),
                          video_limit=limits.count("video"), elem=4 if model.dtype == "float32" else 2,
                          data_parallel=tower.mm_encoder_tp_mode == "data", **native)
    if phase is None:
        return None
    lo, hi = PIXTRAL_FORWARD_RANGE if tower.geometry.kind == "pixtral" else vision_forward_range(r.version)
    fwd = phase.forward_peak_bytes
    best = max(fwd, term.bytes + phase.retained_bytes)
    low = max(int(fwd * (1 + lo)), term.low_bytes + phase.retained_low_bytes)
    high = max(int(fwd * (1 + hi)), term.high_bytes + phase.retained_high_bytes)
    return shifted(term, best - term.bytes,
                   f"encoder profile: {phase.what}: +{phase.retained_bytes / GiB:.2f} GiB through the run; the vision "
                   f"tower's own peak {fwd / GiB:.2f} GiB (estimate {lo:+.0%} … {hi:+.0%})",
                   low_delta=low - term.low_bytes, high_delta=high - term.high_bytes)


STARTS = StartupRange.STARTS
STARTS_IF_OPTIMISTIC = StartupRange.STARTS_IF_OPTIMISTIC
DOES_NOT_START = StartupRange.DOES_NOT_START


class Ranges(NamedTuple):
    """The report's ranges, (pessimistic, optimistic) ends of the estimate, and the startup verdict over them."""

    available_kv: tuple[int, int]
    kv_cache_tokens: tuple[int, int]
    max_concurrency: tuple[float, float]
    startup: StartupRange


def range_fields(specs: SpecsPerWorker, budget: MemoryBudget, r: ResolvedSettings, s: ServeSettings,
                 spec_decode: SpecDecode | None = None) -> Ranges:
    """The report's ranges: the block plan and the startup verdict at the pessimistic and the optimistic
    end of the available KV memory (MemoryBudget.available_kv_range). "starts" when even the pessimistic
    end starts, "starts only if the estimate is optimistic" when only the optimistic end (or the best
    estimate) does, "does not start" when not even the optimistic end does."""
    low, high = budget.available_kv_range
    ends = []
    free = budget.startup_free_range or (budget.startup_free_bytes,) * 2
    for k, (available, pick, free_end) in enumerate(((low, "high_bytes", free[0]), (high, "low_bytes", free[1]))):
        def at_end(b: MemoryBudget, available: int, pick: str = pick, free_end: int = free_end,
                   k: int = k) -> MemoryBudget:
            return replace(b, available_kv_bytes=available, weights=replace(b.weights, bytes=getattr(b.weights, pick)),
                           startup_free_bytes=free_end, stages=())
        end = at_end(budget, available)
        if budget.stages:
            end = replace(end, stages=tuple(at_end(b, b.available_kv_range[k]) for b in budget.stages))
        plan, _ = block_stage(specs, end, r, s, spec_decode)
        ends.append((plan, startup_verdict(heaviest_stage(end), plan)[0] is Startup.OK))
    (p_low, ok_low), (p_high, ok_high) = ends
    verdict = STARTS if ok_low else STARTS_IF_OPTIMISTIC if ok_high else DOES_NOT_START
    return Ranges((low, high), (p_low.kv_cache_tokens, p_high.kv_cache_tokens),
                  (p_low.max_concurrency, p_high.max_concurrency), verdict)


def _weights_term(model: ModelSpec, gpu: GpuLike, s: ServeSettings, r: ResolvedSettings,
                  spec_decode: SpecDecode | None = None, stage: int | None = None) -> MemoryTerm:
    """`--weights-memory`, else kvplan's loaded-weights estimate. When the config does not say enough to
    count the weights, `fit` stops with the reason, unless --kv-cache-memory-bytes makes them irrelevant to
    the KV cache (only the out-of-memory check needs them, and it is skipped)."""
    par, cache, lora = s.parallel_config, s.cache_config, s.lora_config
    if s.measured.weights_bytes is not None:
        return user_term("weights", s.measured.weights_bytes, "--weights-memory")
    try:
        term = estimate_weights(model, tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size, arch=gpu.arch,
                                version=r.version, moe_backend=s.kernel_config.moe_backend,
                                total_bytes=s.measured.weights_total_bytes,
                                max_num_batched_tokens=r.scheduler_config.batch.max_num_batched_tokens, stage=stage)
        if spec_decode is not None and spec_decode.method == DRAFT_MODEL and spec_decode.draft is not None:
            term = _draft_weights(term, replace(spec_decode.draft, dtype=model.dtype), gpu, s, r, stage)
        # MTP modules and EAGLE heads sit with the LM head
        last = stage is None or stage == par.pipeline_parallel_size - 1
        term = _mtp_weights(term, model, spec_decode, s) if last else term
        if last and spec_decode is not None and spec_decode.method in EAGLE_METHODS and spec_decode.draft is not None:
            term = _eagle_weights(term, model, spec_decode, s)
        if lora.enable_lora:  # adapter slots are allocated while the model loads ("Model loading took")
            adapters = lora_bytes_per_gpu(model, tp=par.tensor_parallel_size, max_loras=lora.max_loras,
                                          max_lora_rank=lora.max_lora_rank)
            term = shifted(term, adapters, f"LoRA buffers for {lora.max_loras} adapter(s) of rank {lora.max_lora_rank} "
                                           f"+{adapters / GiB:.2f} GiB (estimate)")
        if par.enable_expert_parallel and par.data_parallel_size > 1 and model.moe is not None:
            term = _expert_parallel(model, s, term)
        # model_loader/utils.py: parameters are placed in CPU memory up to this budget
        if s.offload_config.cpu_offload_bytes:
            moved = min(term.bytes, s.offload_config.cpu_offload_bytes)
            term = shifted(term, -moved, f"--cpu-offload-gb keeps {moved / GiB:.2f} GiB in CPU memory")
        return term
    except BadConfig as exc:
        if cache.kv_cache_memory_bytes is not None:
            return MemoryTerm("weights", 0, "none", f"unknown ({exc}); not needed with --kv-cache-memory-bytes, "
                                                    "so the out-of-memory check is skipped")
        raise BadConfig(f"the weights cannot be estimated: {exc}",
                        hint="pass --weights-memory (vLLM's 'Model loading took X GiB'), or a Hub id whose "
                             "safetensors metadata gives the checkpoint's size") from exc


def _draft_weights(term: MemoryTerm, draft: ModelSpec, gpu: GpuLike, s: ServeSettings,
                   r: ResolvedSettings, stage: int | None = None) -> MemoryTerm:
    """A draft model's weights load inside the same "Model loading took" (v1/worker/gpu/model_runner.py:
    load_model runs speculator.load_model under its DeviceMemoryProfiler), in the target's dtype (`draft`
    comes in it), split like the target's by the worker's TP and PP groups
    (standalone_ar/speculator.py:load_draft_model)."""
    par = s.parallel_config
    own = estimate_weights(draft, tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size, arch=gpu.arch,
                           version=r.version, stage=stage)
    return shifted(term, own.bytes, f"draft model {draft.name} +{own.bytes / GiB:.2f} GiB (parameters × stored "
                                    "bytes)", low_delta=own.low_bytes, high_delta=own.high_bytes)


def _eagle_weights(term: MemoryTerm, model: ModelSpec, spec: SpecDecode, s: ServeSettings) -> MemoryTerm:
    """An EAGLE head loads inside "Model loading took", in the target's dtype, split over the TP ranks of the
    last stage (speculative.eagle_head_params: an estimate; its high end keeps an embedding of its own)."""
    par = s.parallel_config
    assert spec.draft is not None
    params, embed = eagle_head_params(spec.draft, spec, model)
    e = FP_BYTES.get(model.dtype, 2)
    extra, own_embed = -(-params * e // par.tensor_parallel_size), -(-embed * e // par.tensor_parallel_size)
    return shifted(term, extra, f"{spec.method} head +{extra / GiB:.2f} GiB (embedding shared with the target; "
                                f"+{own_embed / GiB:.2f} GiB if the head keeps its own; estimate)",
                   low_delta=extra, high_delta=extra + own_embed)


def _mtp_weights(term: MemoryTerm, model: ModelSpec, spec: SpecDecode | None, s: ServeSettings) -> MemoryTerm:
    """The checkpoint's MTP modules load only with MTP speculation (vLLM skips their weights otherwise), on the
    last pipeline stage, split over its TP ranks (model/weights.py:mtp_module_stored_bytes: an estimate). The
    analytic count leaves them out, so MTP adds them; a Hub safetensors total holds them, so without MTP they
    come off it."""
    par = s.parallel_config
    layers = mtp_layers(model)
    on = spec is not None and spec.method == "mtp"
    if not layers or on == (s.measured.weights_total_bytes is not None):
        return term
    delta = -(-layers * mtp_module_stored_bytes(model) // par.tensor_parallel_size) * (1 if on else -1)
    what = (f"{layers} MTP module(s) {delta / GiB:+.2f} GiB (a decoder layer + eh_proj each; estimate)" if on else
            f"the checkpoint's {layers} MTP module(s), not loaded without MTP speculation, {delta / GiB:+.2f} GiB")
    return shifted(term, delta, what, low_delta=delta, high_delta=delta)


def _expert_parallel(model: ModelSpec, s: ServeSettings, term: MemoryTerm) -> MemoryTerm:
    """--enable-expert-parallel with DP: the routed experts are split over TP × DP ranks instead of each DP
    replica holding its TP share of all of them (layers/fused_moe/layer.py: ep_size = tp × dp, expert_map)."""
    par = s.parallel_config
    ranks = par.tensor_parallel_size * par.data_parallel_size
    saved = expert_parallel_bytes_saved(model, tp=par.tensor_parallel_size, ep=ranks)
    return shifted(term, -saved, f"experts split over {ranks} EP ranks -{saved / GiB:.2f} GiB")


def stage_available_kv(budget: MemoryBudget) -> int | list[int]:
    """The available KV memory block_plan sizes each worker with: one per PP stage when they differ."""
    return [b.available_kv_bytes for b in budget.stages] if budget.stages else budget.available_kv_bytes


def with_tightest_stage(budget: MemoryBudget, plan: KVCachePlan) -> MemoryBudget:
    """The stage whose block count vLLM keeps for every worker (v1/core/kv_cache_planning.py:
    get_kv_cache_configs, "Change the num_blocks of each rank to the smallest among all ranks"), as the budget
    the report shows, with every stage's kept in `stages`. Ties go to the earlier stage, as block_plan's."""
    if not budget.stages:
        return budget
    counted = [(max(0, b.available_kv_bytes // bpb), i)
               for i, (b, bpb) in enumerate(zip(budget.stages, plan.bytes_per_block_per_worker, strict=True))
               if bpb > 0]
    i = min(counted)[1] if counted else len(budget.stages) - 1
    return replace(budget.stages[i], stages=budget.stages, tightest_stage=i)


def heaviest_stage(budget: MemoryBudget) -> MemoryBudget:
    """The stage with the most weights: the one that runs out of memory first while loading (startup_verdict)."""
    return max(budget.stages, key=lambda b: b.weights.bytes) if budget.stages else budget


def block_stage(specs: SpecsPerWorker, budget: MemoryBudget, r: ResolvedSettings, s: ServeSettings,
                spec_decode: SpecDecode | None = None) -> tuple[KVCachePlan, list[str]]:
    """Stage 4: the block plan at max_model_len; with auto-fit (`--max-model-len -1`), re-planned at the
    longest length that fits, as vLLM does. Decode context parallelism and a speculative draft's extra
    state blocks enter here. Returns the plan and the notes it gives rise to."""

    par, cache = s.parallel_config, s.cache_config
    def plan_at(length: int) -> KVCachePlan:
        return plan_kv_cache(specs, stage_available_kv(budget), BlockPlanSettings(
            r.cache_config.block_size, length, r.scheduler_config.window_tokens,
            mamba_cache_mode=r.cache_config.mamba_cache_mode,
            mamba_checkpoint_alignment=r.cache_config.mamba_checkpoint_alignment,
            mamba_prefill_checkpoint_blocks=r.cache_config.mamba_prefill_checkpoint_blocks,
            min_kernel_block_size=r.backend.min_kernel_block_size,
            disable_hybrid_kv_cache_manager=r.scheduler_config.disable_hybrid_kv_cache_manager,
            num_speculative_blocks=spec_decode.num_speculative_tokens if spec_decode is not None else 0,
            context_parallel=par.decode_context_parallel_size,
            num_blocks_override=cache.num_gpu_blocks_override,
            tokens_per_group_block=r.version < KV_TOKENS_FROM_CONCURRENCY_SINCE,
            dsv4_layer_tuples=r.version < DSV4_PACKED_GROUPS_SINCE,
            merged_pp_fit_check=pp_fit_check_merged(r.version),
            reserve_null_block=fit_check_reserves_null_block(r.version),
            override_sets_checked_memory=override_sets_checked_memory(r.version),
            refusal_wording=refusal_wording(r.version),
        ))

    notes: list[str] = []
    max_len = r.model_config.max_model_len
    plan = plan_at(max_len)
    if r.model_config.auto_fit and not plan.fits and plan.estimated_max_model_len:
        notes.append(
            f"Auto-fit max_model_len: reduced from {max_len} to {plan.estimated_max_model_len} to fit in "
            "available KV cache memory (vLLM's --max-model-len auto)."
        )
        plan = plan_at(plan.estimated_max_model_len)
    return plan, notes


def _block_size_source(plan: KVCachePlan, s: ServeSettings, r: ResolvedSettings) -> tuple[KVCachePlan, str]:
    """Where the final block size came from; adds vLLM's "Setting kv cache block size" line when the backend
    changed it."""
    cache = s.cache_config
    if plan.block_size != r.cache_config.block_size:
        return plan, f"raised from {r.cache_config.block_size} so an attention page holds the Mamba/GDN state"
    if r.cache_config.block_size != DEFAULT_BLOCK_SIZE and cache.block_size is None:
        line = f"Setting kv cache block size to {r.cache_config.block_size} for {r.backend.name} backend."
        return replace(plan, vllm_log=(line, *plan.vllm_log)), r.cache_config.block_size_source
    return plan, r.cache_config.block_size_source


def _towers(model: ModelSpec, s: ServeSettings) -> tuple[TowerSummary, ...]:
    """The towers in the weights (memory/weights.py:tower_bytes_per_gpu), one line each."""
    par = s.parallel_config
    return tuple(TowerSummary(t.name, t.modalities, t.loaded, t.params,
                              tower_bytes_per_gpu(model, t, tp=par.tensor_parallel_size) if t.loaded else 0)
                 for t in model.towers)


def _stages(specs: SpecsPerWorker, budget: MemoryBudget, plan: KVCachePlan) -> tuple[StageSummary, ...]:
    """Every PP stage's budget and own block count (empty with PP 1)."""
    if not budget.stages:
        return ()
    return tuple(StageSummary(i, len(specs[i]), b.weights.bytes, b.activation.bytes, b.non_torch.bytes,
                              b.cuda_graphs.bytes, b.available_kv_bytes, b.available_kv_range, bpb,
                              max(0, b.available_kv_bytes // bpb) if bpb > 0 else 0)
                 for i, (b, bpb) in enumerate(zip(budget.stages, plan.bytes_per_block_per_worker, strict=True)))


def stage_note(stages: tuple[StageSummary, ...], tightest: int | None) -> str:
    """What the report says about the PP stages: each has its own budget, vLLM keeps the fewest blocks."""
    counts = ", ".join(f"stage {st.stage} {st.num_gpu_blocks:,}" for st in stages)
    head = (f"PP {len(stages)}: each stage profiles its own memory (the first holds the embedding, the last the LM "
            "head and runs the sampler's dummy batch) and vLLM gives every stage the smallest block count "
            f"(v1/core/kv_cache_planning.py): {counts} blocks")
    if tightest is None or len({st.num_gpu_blocks for st in stages}) == 1:
        return f"{head}; the memory figures above are stage {tightest if tightest is not None else 0}'s."
    return f"{head}; stage {tightest} is the tightest, and the memory figures above are its."


def _budget_notes(s: ServeSettings, gpu: GpuLike) -> list[str]:
    notes = []
    if s.cache_config.kv_cache_memory_bytes is not None:
        notes.append("--kv-cache-memory-bytes: vLLM skips the memory profile and ignores --gpu-memory-utilization.")
    if getattr(gpu, "link", None) == "pcie" and s.parallel_config.world_size > 1:
        notes.append("--gpu-link pcie: the GPUs reach each other over PCIe or host memory, so no NVLS or FlashInfer "
                     "all-reduce fusion workspace is counted, and vLLM 0.11–0.26's non-torch term takes the PCIe "
                     "figure.")
    return notes


def _load_notes(s: ServeSettings, max_len: int, max_num_seqs: int) -> list[str]:
    """What the report should say about the settings it was judged at."""
    par = s.parallel_config
    notes = []
    if s.load.context is not None and s.load.context > max_len:
        notes.append(
            f"--context {s.load.context:,} is above max_model_len {max_len:,}: vLLM rejects such requests; "
            f"judged at {max_len:,}."
        )
    if s.load.concurrency is not None and s.load.concurrency > max_num_seqs:
        notes.append(
            f"--concurrency {s.load.concurrency} is above max_num_seqs {max_num_seqs}: the rest wait "
            "in the queue, so preemption is judged at max_num_seqs."
        )
    if par.decode_context_parallel_size > 1:
        notes.append(f"Decode context parallelism {par.decode_context_parallel_size}: each block id holds "
                     f"block_size × {par.decode_context_parallel_size} tokens of a request, sharded over "
                     f"{par.decode_context_parallel_size} ranks.")
    if s.kv_transfer_config is not None:
        notes.append(f"KV connector {str(s.kv_transfer_config.get('kv_connector'))[:80]}: planned with the hybrid KV "
                     "cache manager as vLLM leaves it for this connector; the connector's own GPU buffers are not "
                     "modelled." + connector_cpu_note(s.kv_transfer_config))
    if par.prefill_context_parallel_size > 1:
        pcp = par.prefill_context_parallel_size
        notes.append(f"Prefill context parallelism {pcp}: {par.world_size} GPUs per replica (tp × pp × pcp), each "
                     "with the plan above: "
                     + ("PCP alone replicates the KV cache (config/parallel.py: pcp_shard_decode_requests)."
                        if par.decode_context_parallel_size == 1 else
                        f"DCP {par.decode_context_parallel_size} shards each request's KV over the PCP ranks."))
    if par.data_parallel_size > 1:
        per_replica = par.world_size
        notes.append(f"{par.data_parallel_size} data-parallel replicas of {per_replica} GPU(s), each its own KV pool "
                     "and its own requests: the figures above are one replica's.")
    return notes


def _limit_to_draft(r: ResolvedSettings, spec: SpecDecode | None, *,
                    allow_custom_code: bool = False) -> tuple[ResolvedSettings, list[str]]:
    """The speculative draft's notes; a draft model shorter than the target lowers the target's max_model_len
    (config/vllm.py:_limit_max_model_len_to_draft, Model Runner V2; after the scheduler's batch defaults)."""
    if spec is None:
        return r, []
    notes = [f"Speculative decoding ({spec.method}, {spec.num_speculative_tokens} token(s)): "
             f"{spec.draft_layers} draft layer(s) share the KV cache."]
    if spec.method != DRAFT_MODEL or spec.draft is None:
        return r, notes
    # vLLM builds the draft from the registry like any model (config/speculative.py: ModelConfig(model=…)).
    check_model_served(spec.draft, r.version, allow_custom_code=allow_custom_code)
    # config/speculative.py:max_num_new_slots_for_drafting; config/vllm.py:num_lookahead_tokens.
    notes.append(f"Draft model: the scheduler keeps 1 slot per scheduled request of max_num_batched_tokens for "
                 f"the draft and allocates {spec.num_speculative_tokens} lookahead slot(s) per request; the draft "
                 "runs without CUDA graphs.")
    if spec.max_model_len is not None and spec.max_model_len < r.model_config.max_model_len:
        notes.append(f"The draft model's max_model_len ({spec.max_model_len}) is smaller than the target model's "
                     f"({r.model_config.max_model_len}) and the V2 model runner can't skip speculation for longer "
                     "sequences; "
                     f"reducing max_model_len to {spec.max_model_len}.")
        sources = {**r.sources, "max_model_len": "the draft model's (vLLM's _limit_max_model_len_to_draft)"}
        r = replace(r, model_config=r.model_config._replace(max_model_len=spec.max_model_len), sources=sources)
    return r, notes


def plan_fit(model: ModelSpec, gpu: GpuLike, settings: ServeSettings, *, advise: bool = True) -> FitReport:
    """Plan a `vllm serve` deployment: memory budget, KV blocks, tokens, concurrency, startup verdict,
    preemption verdict and (with `advise`) changes that fix what fails. Pure."""
    s = settings
    par, cache, mc = s.parallel_config, s.cache_config, s.model_config
    model = apply_quantization(model, mc.quantization, served_quantization_methods())
    dtype = served_dtype(model, gpu.arch, mc.dtype)
    dtype_notes = []
    if dtype != model.dtype:  # --dtype, or no bfloat16 before SM80: every dtype-sized figure follows
        if mc.dtype == "auto":
            dtype_notes.append(f"{gpu.name} has no {model.dtype}: vLLM runs the model (and an auto KV cache) in "
                               f"{dtype}")
        model = replace(model, dtype=dtype)
    model, mm_notes = apply_mm_limits(model, mm_limits(s))
    r = resolve_settings(model, gpu, s)
    spec_decode = resolve_speculative(model, s.speculative_config, s.speculative_draft, tp=par.tensor_parallel_size,
                                      max_model_len=r.model_config.max_model_len)
    r, spec_notes = _limit_to_draft(r, spec_decode, allow_custom_code=mc.trust_remote_code)
    specs = kv_cache_specs(model, tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size,
                           kv_cache_dtype=r.cache_config.kv_cache_dtype_flag,
                           mamba_cache_dtype=cache.mamba_cache_dtype, mamba_ssm_cache_dtype=cache.mamba_ssm_cache_dtype)
    if spec_decode is not None and spec_decode.method == DRAFT_MODEL:
        own = own_draft_specs(model.num_layers, spec_decode, tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size,
                              kv_cache_dtype=r.cache_config.kv_cache_dtype_flag, dtype=model.dtype)
        for stage, draft_stage in zip(specs, own, strict=True):
            stage.extend(draft_stage)
    elif spec_decode is not None:
        specs[-1].extend(draft_specs(specs[-1], model.num_layers, spec_decode, tp=par.tensor_parallel_size,
                                     kv_cache_dtype=r.cache_config.kv_cache_dtype_flag, dtype=model.dtype))
    budget = memory_stage(model, gpu, s, r, specs, spec_decode)
    plan, plan_notes = block_stage(specs, budget, r, s, spec_decode)
    budget = with_tightest_stage(budget, plan)
    plan_notes += spec_notes
    plan, bs_source = _block_size_source(plan, s, r)
    startup, error = startup_verdict(heaviest_stage(budget), plan, platform=gpu_platform(gpu))
    max_len = plan.max_model_len
    preempt = preemption_verdict(
        plan,
        max_num_seqs=r.scheduler_config.batch.max_num_seqs,
        context=min(s.load.context, max_len) if s.load.context is not None else None,
        concurrency=s.load.concurrency,
        # config/vllm.py:num_lookahead_tokens: EAGLE, MTP and draft models reserve one slot per draft token
        lookahead=spec_decode.num_speculative_tokens if spec_decode is not None else 0,
    )
    final = replace(r, cache_config=r.cache_config._replace(block_size_source=bs_source))
    planned = Planned(final, budget, plan, startup, error, preempt, range_fields(specs, budget, r, s, spec_decode),
                      _towers(model, s), _stages(specs, budget, plan))
    report = build_report(model, gpu, s, planned,
                          notes=[*model.config_notes, *dtype_notes, *mm_notes, *_budget_notes(s, gpu), *plan_notes,
                                 *_load_notes(s, max_len, r.scheduler_config.batch.max_num_seqs)])
    if report.memory.stages:
        report = replace(report, notes=(*report.notes, stage_note(report.memory.stages, report.memory.tightest_stage)))
    if cache.kv_offloading_size is not None:
        tier = deployment_tier(model, s, bytes_per_block=report.cache.bytes_per_block,
                               block_size=report.cache.block_size)
        report = replace(report, cache=report.cache._replace(kv_offload=tier),
                         notes=(*report.notes, tier_note(tier, par.data_parallel_size)))
    if advise and (not report.verdict.fits or preempt.possible):
        report = replace(report, verdict=report.verdict._replace(advice=tuple(advise_fixes(
            model, s, report, lambda new: plan_fit(model, gpu, new, advise=False)))))
    return report


@dataclass(frozen=True)
class Planned:
    """Stages 1–5's results, what the report is built from: the resolved settings (`block_size_source` the
    final one), the tightest stage's budget, the block plan, the verdicts on it, the ranges of the estimate,
    the multimodal towers counted and every PP stage's budget."""

    resolved: ResolvedSettings
    budget: MemoryBudget
    plan: KVCachePlan
    startup: Startup
    error: str | None
    preemption: PreemptionVerdict
    ranges: Ranges
    towers: tuple[TowerSummary, ...] = ()
    stages: tuple[StageSummary, ...] = ()


def build_report(model: ModelSpec, gpu: GpuLike, s: ServeSettings, planned: Planned, notes: list[str]) -> FitReport:
    """Stage 6: the report the renderers and `--json` read, nested as report.py's parts."""
    par, cache = s.parallel_config, s.cache_config
    r, budget, plan, startup, ranges = planned.resolved, planned.budget, planned.plan, planned.startup, planned.ranges
    fits = startup is Startup.OK
    max_len = plan.max_model_len
    return FitReport(
        deployment=DeploymentSummary(
            model=model.name, gpu=gpu.id, gpu_name=gpu.name, tp=par.tensor_parallel_size,
            pp=par.pipeline_parallel_size, num_gpus=par.world_size_across_dp, vllm_version=str(r.version),
            model_runner=r.model_runner.name, attention_backend=r.backend.name, platform=gpu_platform(gpu),
            platform_rules=_platform_rules(gpu, s, r.cache_config.kv_cache_dtype)),
        memory=MemorySummary(
            gpu_memory_utilization=r.cache_config.gpu_memory_utilization, cuda_total_bytes=gpu.cuda_total_bytes,
            requested_bytes=budget.requested_bytes, weights_bytes=budget.weights.bytes,
            activation_bytes=budget.activation.bytes, non_torch_bytes=budget.non_torch.bytes,
            cuda_graph_bytes=budget.cuda_graphs.bytes, available_kv_bytes=budget.available_kv_bytes,
            available_kv_range=ranges.available_kv, kv_cache_memory_bytes_given=cache.kv_cache_memory_bytes is not None,
            terms=budget.terms, towers=planned.towers, stages=planned.stages, tightest_stage=budget.tightest_stage),
        cache=CacheSummary(
            kv_cache_dtype=r.cache_config.kv_cache_dtype, block_size=plan.block_size,
            block_size_source=r.cache_config.block_size_source, bytes_per_block=plan.bytes_per_block,
            num_gpu_blocks=plan.num_gpu_blocks, usable_blocks=plan.usable_blocks,
            blocks_per_request=plan.blocks_per_request, kv_cache_tokens=plan.kv_cache_tokens,
            kv_cache_tokens_range=ranges.kv_cache_tokens,
            groups=tuple(
                GroupSummary(g.kind, len(g.layers), g.block_size, g.page_size_bytes,
                             g.blocks_per_request(max_len, r.scheduler_config.window_tokens, plan.mamba_blocks),
                             g.sliding_window, g.attention_chunk_size)
                for g in plan.groups)),
        scheduler=SchedulerSummary(
            max_model_len=max_len, max_num_seqs=r.scheduler_config.batch.max_num_seqs,
            max_num_batched_tokens=r.scheduler_config.batch.max_num_batched_tokens,
            in_flight_tokens=r.scheduler_config.in_flight_tokens, max_concurrency=plan.max_concurrency,
            max_concurrency_range=ranges.max_concurrency),
        verdict=VerdictSummary(
            fits=fits, startup=startup, startup_range=ranges.startup, error=planned.error,
            estimated_max_model_len=plan.estimated_max_model_len, log_line=plan.log_line if fits else None,
            preemption=planned.preemption),
        settings_sources=dict(r.sources),
        vllm_log=plan.vllm_log,
        notes=tuple(notes),
    )


def _platform_rules(gpu: GpuLike, s: ServeSettings, kv_dtype: str) -> str | None:
    """For a ROCm GPU, which of vLLM's rules planned it (kvplan/vllm/rocm.py); None on CUDA."""
    if gpu_platform(gpu) != "rocm":
        return None
    from kvplan.vllm.rocm import RocmGpu, rules_note
    from kvplan.vllm.settings import rocm_aiter

    return rules_note(cast("RocmGpu", gpu), rocm_aiter(s), kv_dtype)
