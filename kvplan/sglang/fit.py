"""One SGLang deployment's plan: resolved defaults, free memory, KV byte budget, token pool, verdict.

`plan_sglang_fit` chains defaults.resolve_defaults, budget.estimate_free_memory (or the measured figures),
budget.profile_budget and pool.size_pool, as SGLang's `ModelRunner.alloc_memory_pool` ->
`KVCacheConfigurator.configure` does at startup. Pure: numbers in, numbers out.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import GpuSpec
from kvplan.model.spec import ModelSpec
from kvplan.sglang import SGLANG_VERSION
from kvplan.sglang.architectures import MULTIMODAL_ARCHITECTURES, SGLANG_CONFIG_REGISTRY, TRANSFORMERS_MODEL_TYPES
from kvplan.sglang.budget import Budget, FreeMemory, estimate_free_memory, profile_budget
from kvplan.sglang.defaults import ServerDefaults, SglangDeployment, check_deployment, resolve_defaults
from kvplan.sglang.pool import (
    PoolGeometry,
    TokenPool,
    context_length,
    geometry,
    kv_dtype_name,
    size_pool,
    unsupported_reason,
)

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class SglangFit:
    """`kvplan fit --engine sglang`: what SGLang would resolve, size and print for one deployment."""

    model: str
    gpu: str
    gpu_name: str
    engine: str
    sglang_version: str
    tp: int
    pp: int
    dp: int
    attn_dp_size: int
    num_gpus: int
    defaults: ServerDefaults
    kv_cache_dtype: str
    geometry: PoolGeometry
    context_len: int
    weights_bytes: int
    free_memory: FreeMemory
    budget: Budget
    pool: TokenPool | None
    fits: bool
    startup: str
    max_total_num_tokens: int  # per attention-DP worker (0 when it does not start)
    max_running_requests: int  # per attention-DP worker
    total_tokens: int  # all attention-DP workers of one replica
    total_running_requests: int
    requests_at_context: int  # full-context requests the pool holds at once, all workers
    max_total_num_tokens_range: tuple[int, int] | None
    notes: tuple[str, ...]


def gpu_memory_mib(chip: GpuSpec) -> int:
    """What utils/common.py:get_device_memory_capacity reads: nvidia-smi memory.total (MiB) on CUDA, rocminfo's
    pool size / 1024 on HIP; the catalog's NVML total in MiB for both."""
    return chip.nvml_total_bytes // MiB


def _platform(chip: GpuSpec) -> tuple[str, int | None]:
    if chip.vendor.lower() == "amd":
        return "hip", None
    cap = chip.capability
    return "cuda", cap[0] if cap else None


def check_config_readable(spec: ModelSpec, *, remote_code_allowed: bool) -> None:
    """Refuse a config SGLang cannot read without running the repository's code, in transformers' words
    (utils/hf_transformers/common.py:get_config: SGLang's _CONFIG_REGISTRY, else AutoConfig)."""
    model_type = spec.config_model_type or spec.facts.spelt.model_type  # the top-level config's
    if model_type in SGLANG_CONFIG_REGISTRY or model_type in TRANSFORMERS_MODEL_TYPES:
        return
    if spec.facts.spelt.has_auto_map:
        if not remote_code_allowed:
            raise InvalidParameter(f"The repository {spec.name} contains custom code which must be executed to "
                                   "correctly load the model.", hint="SGLang needs --trust-remote-code for it")
        return
    raise InvalidParameter(f"The checkpoint you are trying to load has model type `{model_type}` but Transformers "
                           "does not recognize this architecture.",
                           hint="SGLang 0.5.23 pins transformers 5.19.0 (kvplan/sglang/architectures.py)")


def is_multimodal(spec: ModelSpec) -> bool:
    """configs/model_config.py:ModelConfig.is_multimodal: a listed architecture, or a nested text config."""
    if spec.architectures and any(a in MULTIMODAL_ARCHITECTURES for a in spec.architectures):
        return True
    # kvplan's ModelSpec reads the text config; a top-level model_type of its own means it was nested.
    nested = bool(spec.config_model_type) and spec.config_model_type != spec.model_type
    return nested or spec.facts.spelt.nested


def _tokens_at(budget_gib: float, geo: PoolGeometry, page: int) -> int:
    return max(0, int(budget_gib * GiB)) // geo.cell_bytes // page * page


def plan_sglang_fit(spec: ModelSpec, chip: GpuSpec, dep: SglangDeployment, *, weights_bytes: int,
                    weights_range: tuple[int, int], measured: FreeMemory | None = None) -> SglangFit:
    """SGLang's startup sizing for `spec` on `chip`; `measured` replaces kvplan's free-memory estimate."""
    check_deployment(dep)
    check_config_readable(spec, remote_code_allowed=dep.trust_remote_code)
    reason = unsupported_reason(spec)
    if reason is None and dep.pp > 1:
        reason = "pipeline parallelism (SGLang's per-stage layer split and MIN over stages) is not modelled yet"
    if reason is None and dep.speculative_algorithm is not None:
        reason = "speculative decoding (the draft's KV cells and graph sizes) is not modelled yet"
    multimodal = is_multimodal(spec)
    if reason is None and multimodal and dep.mem_fraction_static is None:
        reason = ("a multimodal model: SGLang scales mem_fraction_static by its vision tower "
                  "(memory_hook.py:adjust_mem_fraction_for_vlm), not modelled yet; give --mem-fraction-static")
    if reason is not None:
        raise InvalidParameter(f"SGLang {SGLANG_VERSION} rules: {reason}")
    platform, sm = _platform(chip)
    use_mla = spec.mla is not None
    ctx = context_length(spec, dep.context_length)
    defaults = resolve_defaults(dep, gpu_mem_mib=gpu_memory_mib(chip), platform=platform,  # type: ignore[arg-type]
                                sm_major=sm, use_mla=use_mla, kv_heads=spec.num_kv_heads, context_len=ctx,
                                llama2_path="llama-2" in spec.name.lower(),
                                architecture=spec.architectures[0] if spec.architectures else "")
    kv_dtype = kv_dtype_name(dep.kv_cache_dtype, spec)
    geo = geometry(spec, attn_tp=defaults.attn_tp_size, kv_dtype=kv_dtype)
    world = dep.tp * dep.pp
    free = measured or estimate_free_memory(cuda_total_bytes=chip.cuda_total_bytes, weights_bytes=weights_bytes,
                                            weights_range=weights_range, world=world)
    frac = defaults.mem_fraction_static
    budget = profile_budget(avail_gib=free.avail_gib, pre_gib=free.pre_gib, mem_fraction_static=frac,
                            multimodal=multimodal)
    notes: list[str] = []
    pool: TokenPool | None = None
    startup = "starts"
    if budget.refusal is not None:
        startup = budget.refusal
    else:
        assert budget.budget_bytes is not None
        try:
            pool = size_pool(geo, budget.budget_bytes, page_size=defaults.page_size, context_len=ctx,
                             max_total_tokens=dep.max_total_tokens, max_running=dep.max_running_requests,
                             attn_dp_size=defaults.attn_dp_size, chunked_prefill_size=defaults.chunked_prefill_size,
                             max_prefill_tokens=defaults.max_prefill_tokens)
        except InvalidParameter as exc:
            startup = str(exc)
        else:
            notes.extend(pool.warnings)
    token_range = None
    if measured is None or measured.source == "estimate":
        lo = _tokens_at(free.avail_range[0] - free.pre_range[0] * (1 - frac), geo, defaults.page_size)
        hi = _tokens_at(free.avail_range[1] - free.pre_range[1] * (1 - frac), geo, defaults.page_size)
        token_range = (lo, hi)
    tokens = pool.max_total_num_tokens if pool else 0
    reqs = pool.max_running_requests if pool else 0
    if defaults.attn_dp_size > 1 and measured is None:
        notes.append(f"weights are estimated as {dep.tp} tensor-parallel shards; under attention DP SGLang splits "
                     f"the attention weights over attention-TP {defaults.attn_tp_size} only (more per GPU), "
                     "not counted here")
    notes.append("the CUDA graphs, activations and request table must fit in the slack pre × (1 − "
                 f"mem_fraction_static) = {budget.slack_gib:.2f} GiB: SGLang's heuristic, not checked here")
    return SglangFit(
        model=spec.name, gpu=chip.id, gpu_name=chip.name, engine="sglang", sglang_version=SGLANG_VERSION,
        tp=dep.tp, pp=dep.pp, dp=dep.dp, attn_dp_size=defaults.attn_dp_size, num_gpus=dep.tp * dep.pp * dep.replicas,
        defaults=defaults, kv_cache_dtype=kv_dtype, geometry=geo, context_len=ctx, weights_bytes=weights_bytes,
        free_memory=free, budget=budget, pool=pool, fits=pool is not None, startup=startup,
        max_total_num_tokens=tokens, max_running_requests=reqs, total_tokens=tokens * defaults.attn_dp_size,
        total_running_requests=reqs * defaults.attn_dp_size,
        requests_at_context=(tokens // ctx) * defaults.attn_dp_size, max_total_num_tokens_range=token_range,
        notes=tuple(notes))
