"""One SGLang deployment's plan: resolved defaults, free memory, KV byte budget, token pool, verdict.

`plan_sglang_fit` chains defaults.resolve_defaults, budget.estimate_free_memory (or the measured figures),
budget.profile_budget and pool.size_pool, as SGLang's `ModelRunner.alloc_memory_pool` ->
`KVCacheConfigurator.configure` does at startup. Pure: numbers in, numbers out.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import GpuSpec
from kvplan.model.spec import ModelSpec
from kvplan.sglang import SGLANG_VERSION, kv_quant
from kvplan.sglang.architectures import (
    SGLANG_CONFIG_REGISTRY,
    TRANSFORMERS_MODEL_TYPES,
    heads_refusal,
    model_class_refusal,
)
from kvplan.sglang.budget import Budget, FreeMemory, estimate_free_memory, profile_budget
from kvplan.sglang.defaults import (
    ModelTraits,
    ServerDefaults,
    SglangDeployment,
    SglangGpu,
    check_deployment,
    resolve_defaults,
)
from kvplan.sglang.dsa import is_dsa
from kvplan.sglang.dsa import kv_dtype as dsa_kv_dtype
from kvplan.sglang.dsa import page_size as dsa_page_size
from kvplan.sglang.dsv4 import DEFAULT_MAX_RUNNING_REQUESTS as DSV4_MAX_RUNNING_REQUESTS
from kvplan.sglang.dsv4 import check_speculative as check_dsv4_speculative
from kvplan.sglang.dsv4 import is_dsv4
from kvplan.sglang.mamba import SpecReserve, mamba_ratio, mamba_state
from kvplan.sglang.multimodal import (
    breakable_prefill_graph_kept,
    mm_reservation_gib,
    vlm_fraction_factor,
)
from kvplan.sglang.pool import (
    GEMMA4_ASSISTANT,
    GEMMA4_ASSISTANT_FORWARD,
    PoolGeometry,
    PoolLimits,
    TokenPool,
    context_length,
    geometry,
    kv_dtype_name,
    pool_build_refusal,
    size_pool,
    unsupported_reason,
)
from kvplan.sglang.pp import pp_layer_ranges
from kvplan.sglang.speculative import (
    BANDED_MTP_ARCHITECTURE,
    EAGLE_FAMILY,
    MTP_ARCHITECTURES,
    NEXTN_REWRITTEN_TO_ONE,
    SpecDecode,
    SpeculativeArgs,
    canonical_algorithm,
    resolve_speculative,
)
from kvplan.sglang.swa import split_layers
from kvplan.verdict import Verdict

MiB = 1 << 20
GiB = 1 << 30


class SglangStartup(Verdict):
    """SGLang's startup verdict when it starts; a refusal is SGLang's own message instead (SglangFit.startup)."""

    STARTS = "starts"


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
    geometry: PoolGeometry | None  # None: SGLang refuses before the pool, which kvplan does not model for it
    context_len: int
    weights_bytes: int
    free_memory: FreeMemory
    budget: Budget
    pool: TokenPool | None
    fits: bool
    startup: str  # SglangStartup.STARTS, or the refusal SGLang stops with, in its words
    max_total_num_tokens: int  # per attention-DP worker (0 when it does not start)
    max_running_requests: int  # per attention-DP worker
    total_tokens: int  # all attention-DP workers of one replica
    total_running_requests: int
    requests_at_context: int  # full-context requests the pool holds at once, all workers
    max_total_num_tokens_range: tuple[int, int] | None
    notes: tuple[str, ...]
    speculative: SpecDecode | None = None  # the speculative arguments SGLang resolves (None: no draft)


def requests_at(fit: SglangFit, context: int) -> int:
    """Requests of `context` tokens one attention-DP worker runs at once: its pool ÷ the context rounded up to
    whole pages (mem_cache/allocator/paged.py:PagedTokenToKVPoolAllocator hands a request whole pages), capped at
    max_running_requests. 0 when SGLang would not start."""
    page = fit.defaults.page_size
    per_request = -(-max(context, 1) // page) * page
    return min(fit.max_total_num_tokens // per_request, fit.max_running_requests)


# utils/common.py:get_amdgpu_memory_capacity reads rocminfo's "Pool 1" size (KB) / 1024, which is not the catalog's
# rocm-smi total on every GPU: 288 GiB exactly on MI355X (the figure whose mem_fraction_static, 0.911, matches the
# public log of sglang PR #18263, reference §2.3). Others: the catalog's total (MI300X's 196592 is both).
ROCMINFO_POOL_MIB = {"mi355x": 294912}


def gpu_memory_mib(chip: GpuSpec) -> int:
    """What utils/common.py:get_device_memory_capacity reads: nvidia-smi memory.total (MiB) on CUDA, rocminfo's
    pool size / 1024 on HIP (ROCMINFO_POOL_MIB where it differs); else the catalog's NVML total in MiB."""
    return ROCMINFO_POOL_MIB.get(chip.id, chip.nvml_total_bytes // MiB)


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


def check_model_class(spec: ModelSpec) -> None:
    """Refuse, in SGLang's words, a model SGLang has no class for and cannot load through its Transformers backend
    (model_loader/utils.py:resolve_transformers_arch, raised when the model loads, before the KV pool is sized)."""
    refusal = model_class_refusal(spec.architectures, auto_model=spec.facts.spelt.auto_model)
    if refusal is not None:
        raise InvalidParameter(refusal, hint=f"SGLang {SGLANG_VERSION} stops loading the model (ValueError); "
                                             "its server arguments resolve, no KV pool is sized")


def total_kv_heads(spec: ModelSpec) -> int:
    """configs/model_config.py:ModelConfig.get_total_num_kv_heads (its attribute list): an MLA config's own
    num_key_value_heads (DeepSeek-V3: 128), not kvplan's one latent head; what the HIP MLA backend choice divides."""
    if spec.mla is None:
        return spec.num_kv_heads
    stated = spec.facts.sglang.stated_kv_heads  # n_head_kv, num_kv_heads, num_key_value_heads, … (spelt.py)
    return stated if stated is not None else spec.num_attention_heads


def asymmetric_kv(spec: ModelSpec) -> bool:
    """configs/model_config.py:ModelConfig.has_asymmetric_kv: K and V rows of different widths (MiMo-V2's
    192 / 128), in the full or the sliding layers (MLA configs are rewritten to symmetric first)."""
    return spec.mla is None and any(x.head_size_v and x.head_size_v != x.head_size for x in spec.layers)


def _tokens_at(budget: Budget, geo: PoolGeometry, page: int, context_len: int) -> int:
    """The token count a budget buys on one PP stage's geometry (0 when SGLang would refuse it; a pure Mamba
    model's is context_len). DeepSeek-V4 never reaches it: its pools under PP are refused (`_unmodelled`)."""
    if budget.budget_bytes is None:
        return 0
    if not geo.cell_bytes:
        return context_len // page * page
    return int(max(0, budget.budget_bytes) // geo.cell_size) // page * page


def _unmodelled(spec: ModelSpec, dep: SglangDeployment, draft: ModelSpec | None = None) -> str | None:
    """What of this deployment kvplan's port does not model (None: all of it)."""
    reason = unsupported_reason(spec, attn_tp=dep.attn_tp_size, tp=dep.tp)
    plain = (split_layers(spec) is None and not is_dsa(spec) and not any(x.kind == "mamba" for x in spec.layers)
             and spec.architectures[:1] != (GEMMA4_ASSISTANT,) and not is_dsv4(spec))
    if reason is None and dep.pp > 1 and not plain:
        reason = ("pipeline parallelism with a sliding-window, Mamba or DSA pool (the per-stage split of its layer "
                  "kinds) is not modelled yet")
    if reason is None and dep.speculative_algorithm is not None:
        reason = _speculative_unmodelled(spec, dep, plain=plain, draft=draft)
    return reason


def _speculative_unmodelled(spec: ModelSpec, dep: SglangDeployment, *, plain: bool,
                            draft: ModelSpec | None) -> str | None:
    """What of a speculative deployment kvplan does not model: the draft beside a sliding-window, Mamba or DSA
    pool or under PP, and a draft checkpoint other than the target whose config was not read (`draft`)."""
    mamba = any(x.kind == "mamba" for x in spec.layers)
    if dep.pp > 1:
        return ("speculative decoding under pipeline parallelism (the draft worker's stages and pools) is not "
                "modelled yet")
    if canonical_algorithm(str(dep.speculative_algorithm)) == "NGRAM":
        # NGRAM has no draft model: the pool configurator sizes the target's pool alone (the spec oracle: Gemma-4
        # 26B at TP 8, HybridSWAPoolConfigurator, the same 30,720 B cell; DeepSeek-V3.2's DSA page 64 refused by
        # _handle_ngram's top-k/page rule, which resolve_speculative words); a Mamba hybrid's per-step state is
        # carved with the state slots (mamba.carve_mamba_cache's SpecReserve)
        return None
    if draft is not None and draft.architectures[:1] == (GEMMA4_ASSISTANT,):
        # speculative_hook.py:_resolve_speculative_algorithm_alias
        if str(dep.speculative_algorithm).upper() == "EAGLE3":
            raise InvalidParameter("Gemma4AssistantForCausalLM draft requires --speculative-algorithm NEXTN or "
                                   "EAGLE; EAGLE3 is not supported for this draft architecture.")
        return ("a Gemma4AssistantForCausalLM draft: SGLang promotes NEXTN/EAGLE to FROZEN_KV_MTP, which kvplan has "
                "not modelled yet")
    if is_dsv4(spec):  # DSV4PoolConfigurator's speculative path (kvplan.sglang.dsv4: Dsv4Part.draft_tokens)
        return None
    # A DSA pool: DefaultPoolConfigurator.__init__'s DSA branch (kvplan.sglang.speculative.draft_cell_bytes); a
    # Mamba hybrid: its full-attention layers' cell scaled the same way, the state carve with SpecReserve.
    # A hybrid SWA pool: HybridSWAPoolConfigurator.__init__'s draft split (PoolGeometry.draft_swa_layers).
    swa = split_layers(spec) is not None
    dsa = is_dsa(spec) and not swa and not mamba
    mamba_ok = mamba and not swa and not is_dsa(spec)
    swa_ok = swa and not mamba and not is_dsa(spec) and spec.architectures[:1] != (BANDED_MTP_ARCHITECTURE,)
    if not (plain or dsa or mamba_ok or swa_ok):
        return ("an EAGLE/MTP draft beside this pool (a sliding-window pool with Mamba or DSA layers, Gemma-4's "
                "assistant, or Inkling's mtp_local_layer_ids, which kvplan does not read) is not modelled yet")
    path = dep.speculative_draft_model_path
    if path is not None and path != spec.name and draft is None:
        return ("a draft checkpoint other than the target (--speculative-draft-model-path): kvplan does not read "
                "the draft's config for its layer count yet")
    arch = (spec.architectures[:1] or ("",))[0]
    if path is None and arch not in MTP_ARCHITECTURES and arch not in NEXTN_REWRITTEN_TO_ONE:
        return ("an EAGLE draft without --speculative-draft-model-path on an architecture SGLang does not give "
                "its own MTP draft (speculative_hook.py:_handle_eagle_family) is not modelled")
    return None


def draft_layers(draft: ModelSpec) -> int:
    """spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state: the draft-mode config's num_nextn_predict_layers
    (configs/model_config.py rewrites it to 1 for MiMo-V2 and GLM-5-Next), else its max(num_hidden_layers,
    num_attention_layers). `draft` is the draft checkpoint, the target's own for the MTP architectures."""
    arch = draft.architectures[0] if draft.architectures else ""
    if arch in NEXTN_REWRITTEN_TO_ONE:
        return 1
    stated = draft.facts.sglang.nextn_predict_layers
    attention = sum(1 for x in draft.layers if x.kind not in ("mamba", "mlp_only"))
    return stated if stated is not None else max(draft.num_layers, attention)


def _budget_decides(spec: ModelSpec, dep: SglangDeployment, reason: str | None) -> bool:
    """Whether SGLang's startup refusal can still be told for a pool kvplan does not model: the budget
    (_profile_available_bytes) comes before the pool configurator and has no model-specific step unless the
    model keeps Mamba state; kvplan's default fraction is not checked for those families, so the fraction must
    be given; PP and speculative decoding change what is measured."""
    return (reason is not None and dep.mem_fraction_static is not None and dep.pp == 1
            and dep.speculative_algorithm is None and not any(x.kind == "mamba" for x in spec.layers))


def _speculative(spec: ModelSpec, dep: SglangDeployment, d: ServerDefaults, geo: PoolGeometry | None,
                 draft: ModelSpec | None) -> tuple[SglangDeployment, PoolGeometry | None, SpecDecode | None]:
    """speculative_hook.py:handle_speculative_decoding after the memory and backend hooks: the deployment with the
    max_running_requests it resolves, the pool geometry with the EAGLE/STANDALONE draft's layers."""
    if dep.speculative_algorithm is None:
        return dep, geo, None
    if is_dsv4(spec):  # arg_groups/deepseek_v4_hook.py runs before the speculative hook
        check_dsv4_speculative(str(dep.speculative_algorithm), dep.speculative_eagle_topk, 0)
        if dep.max_running_requests is None:  # apply_deepseek_v4_defaults' 256 comes first: no reset to 48 (oracle)
            dep = dataclasses.replace(dep, max_running_requests=DSV4_MAX_RUNNING_REQUESTS)
    sd = resolve_speculative(SpeculativeArgs(
        str(dep.speculative_algorithm), dep.speculative_num_steps, dep.speculative_eagle_topk,
        dep.speculative_num_draft_tokens, dep.speculative_draft_model_path, dep.max_running_requests), spec, d)
    dep = dataclasses.replace(dep, max_running_requests=sd.max_running_requests)
    if geo is not None and geo.dsv4 is not None:  # DSV4PoolConfigurator: the draft as rings and (L + 1) / L
        check_dsv4_speculative(str(dep.speculative_algorithm), dep.speculative_eagle_topk, sd.num_draft_tokens)
        return dep, dataclasses.replace(geo, dsv4=dataclasses.replace(geo.dsv4, draft_tokens=sd.num_draft_tokens)), sd
    if geo is not None and sd.algorithm in EAGLE_FAMILY:
        distinct = sd.draft_model_path not in (None, spec.name)
        # spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state: a path-less draft (the Qwen3-Next / Qwen3.5
        # MTP heads) takes eagle_draft_num_layers from the TARGET config as written, which has no
        # num_nextn_predict_layers there: no draft rows in the target's cell.
        source = draft if distinct and draft else spec
        layers = (spec.facts.sglang.nextn_predict_layers or 0) if sd.draft_model_path is None else \
            draft_layers(source)
        # eagle_draft_swa_num_layers: the draft config's sliding layers when it is a hybrid SWA model
        # (a path-less draft: the target's).
        draft_split = split_layers(source) if geo.swa is not None else None
        geo = dataclasses.replace(geo, draft_layers=layers, draft_swa_layers=len(draft_split[1]) if draft_split else 0)
    return dep, geo, sd


def _speculative_notes(sd: SpecDecode | None, geo: PoolGeometry | None) -> list[str]:
    """SGLang's speculative warnings, and what the draft adds to the pool and to the weights."""
    if sd is None:
        return []
    notes = [*sd.warnings, f"speculative decoding: {sd.algorithm}, {sd.num_steps} steps, top-k {sd.eagle_topk}, "
                           f"{sd.num_draft_tokens} draft tokens (speculative_hook.py)"]
    if geo is not None and sd.algorithm in EAGLE_FAMILY and sd.draft_model_path is None and not geo.draft_layers:
        notes.append("a path-less MTP draft: SGLang takes eagle_draft_num_layers from the target config as written "
                     "(no num_nextn_predict_layers), so the target's cell holds no draft rows "
                     "(spec_aux_hidden_state.py); the draft worker's own pool is not priced in this budget")
    if geo is not None and geo.draft_layers:
        notes.append(f"the draft's {geo.draft_layers} KV layer(s) share the target's token count: "
                     f"{geo.cell_bytes - geo.target_cell_bytes:,} of the {geo.cell_bytes:,} bytes per token "
                     "(pool_configurator.py:DefaultPoolConfigurator.__init__); the draft worker allocates them")
        notes.append("SGLang charges the draft's weights to the budget (loaded before sizing): kvplan's estimate "
                     "adds a draft checkpoint's, or the target's own MTP modules (an estimate), unless measured")
    return notes


def resolve_server_args(spec: ModelSpec, chip: GpuSpec,
                        dep: SglangDeployment) -> tuple[str, int | None, int, ServerDefaults]:
    """Platform, SM major, context_len and the resolved server arguments (ServerArgs.resolve_once, which runs
    before the model class is built: a deployment the class then refuses still resolves)."""
    platform, sm = _platform(chip)
    ctx = context_length(spec, dep.context_length)
    gpu = SglangGpu(platform, sm, gpu_memory_mib(chip))  # type: ignore[arg-type]
    traits = model_traits(spec, hip=platform == "hip", use_aiter=dep.use_aiter)
    return platform, sm, ctx, resolve_defaults(dep, gpu, traits, ctx)


def model_traits(spec: ModelSpec, *, hip: bool, use_aiter: bool) -> ModelTraits:
    """What SGLang's server-argument resolution reads of the model (sglang/defaults.py:ModelTraits)."""
    return ModelTraits(
        use_mla=spec.mla is not None, kv_heads=total_kv_heads(spec),
        architecture=spec.architectures[0] if spec.architectures else "", llama2_path="llama-2" in spec.name.lower(),
        has_mamba=any(x.kind == "mamba" for x in spec.layers),
        # cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible: off for DeepSeek-V4
        prefill_graph_allowed=breakable_prefill_graph_kept(spec) and not is_dsv4(spec),
        vlm_factor=vlm_fraction_factor(spec),
        asymmetric_kv=asymmetric_kv(spec),
        dsa_page_size=dsa_page_size(spec, hip=hip, use_aiter=use_aiter) if is_dsa(spec) else None,
        deepseek_v4=is_dsv4(spec))


def _check_kv_quant(kv_dtype: str, platform: str, sm: int | None, backend: str, geo: PoolGeometry | None,
                    spec: ModelSpec) -> None:
    """A block-scaled KV dtype (kvplan.sglang.kv_quant): SGLang's refusal in its words, or kvplan's."""
    use_mla = spec.mla is not None
    said = kv_quant.refusal(kv_dtype, platform=platform, sm_major=sm, backend=backend, use_mla=use_mla)
    if said is not None:
        raise InvalidParameter(said, hint="SGLang refuses it while resolving its server arguments "
                                          "(arg_groups/kv_cache_hook.py)")
    plain = (geo is not None and geo.kind == "mha" and geo.swa is None
             and not any(x.kind == "mamba" for x in spec.layers))
    reason = kv_quant.unmodelled(kv_dtype, backend=backend, use_mla=use_mla, plain_mha=plain)
    if reason is not None:
        raise InvalidParameter(f"SGLang {SGLANG_VERSION} rules: {reason}")


def _pp_stages(geo: PoolGeometry | None, pp: int, budget: Budget, page: int,
               ctx: int) -> list[tuple[PoolGeometry, int]]:
    """Each PP stage's geometry (its get_pp_indices layers) and the tokens its budget buys ([] without PP); the
    same budget on every stage (kvplan estimates one free-memory figure for all ranks)."""
    if pp == 1 or geo is None:
        return []
    out = []
    for start, end in pp_layer_ranges(geo.layers, pp):
        stage = dataclasses.replace(geo, layers=end - start)
        out.append((stage, _tokens_at(budget, stage, page, ctx)))
    return out


def _size_stages(geo: PoolGeometry | None, stages: list[tuple[PoolGeometry, int]], budget: Budget,
                 dep: SglangDeployment, d: ServerDefaults, ctx: int) -> tuple[TokenPool | None, str]:
    """`_size` of stage 0 held to the MIN over the PP stages (`_pp_stages`; [] without PP)."""
    return _size(stages[0][0] if stages else geo, budget, dep, d, ctx,
                 sync_tokens=min(t for _g, t in stages) if stages else None)


def _token_range(profile: Callable[[float, float], Budget], free: FreeMemory, geo: PoolGeometry,
                 dep: SglangDeployment, d: ServerDefaults, ctx: int) -> tuple[int, int]:
    """max_total_num_tokens at each end of the free-memory estimate, through the same pool sizing as the count
    (--max-total-tokens, PP's MIN, the pool's own caps), so the range holds the count it is printed beside."""
    ends = []
    for avail, pre in zip(free.avail_range, free.pre_range, strict=True):
        budget = profile(avail, pre)
        pool, _ = _size_stages(geo, _pp_stages(geo, dep.pp, budget, d.page_size, ctx), budget, dep, d, ctx)
        ends.append(pool.max_total_num_tokens if pool else 0)
    return ends[0], ends[1]


def _size(geo: PoolGeometry | None, budget: Budget, dep: SglangDeployment, d: ServerDefaults,
          ctx: int, sync_tokens: int | None = None) -> tuple[TokenPool | None, str]:
    """The pool a budget buys and the startup verdict (SglangStartup.STARTS, or SGLang's refusal)."""
    if budget.refusal is not None:
        return None, budget.refusal
    assert budget.budget_bytes is not None and geo is not None
    try:
        limits = PoolLimits(d.page_size, ctx, dep.max_total_tokens, dep.max_running_requests, d.attn_dp_size,
                            d.chunked_prefill_size, d.max_prefill_tokens)
        pool = size_pool(geo, budget.budget_bytes, limits, mamba=budget.mamba, sync_tokens=sync_tokens)
    except InvalidParameter as exc:
        return None, str(exc)
    return pool, SglangStartup.STARTS


def _after_pool(spec: ModelSpec, geo: PoolGeometry | None, pool: TokenPool | None, startup: str,
                notes: list[str]) -> str:
    """What stops SGLang after it sized the pool (pool.py:pool_build_refusal while it builds it; Gemma-4's MTP
    draft at its first forward), else `startup`; appends the note that explains it."""
    if pool is not None and (built := pool_build_refusal(geo)) is not None:
        startup = built
    if pool is not None and spec.architectures[:1] == (GEMMA4_ASSISTANT,):
        startup = f"RuntimeError: {GEMMA4_ASSISTANT_FORWARD}"  # after the pool, at the first forward
        notes.append("Gemma-4's MTP draft (models/gemma4_mtp.py): SGLang allocates this pool, then its first forward "
                     "fails; it serves the draft beside its target (--speculative-draft-model-path with "
                     "--speculative-algorithm NEXTN or EAGLE, promoted to FROZEN_KV_MTP: speculative_hook.py)")
    return startup


def _check_loadable(spec: ModelSpec, dep: SglangDeployment) -> SglangDeployment:
    """SGLang's refusals before the pool, in its words (flags, config, model class, the class's head split);
    the deployment as SGLang renames it."""
    check_deployment(dep)
    if dep.attention_backend == "tokenspeed_mla" and dep.kv_cache_dtype != "fp8_e4m3":
        # arg_groups/serving_hook.py:_handle_deprecated_args: "tokenspeed_mla required FP8 KV; setting
        # --kv-cache-dtype=fp8_e4m3." (the backend itself becomes cutedsl_mla: defaults.ATTENTION_BACKEND_ALIASES)
        dep = dataclasses.replace(dep, kv_cache_dtype="fp8_e4m3")
    check_model(spec, dep)
    if spec.mla is None:
        refused = heads_refusal(spec.architectures, heads=spec.num_attention_heads, kv_heads=total_kv_heads(spec),
                                tp=dep.tp, attn_tp=dep.attn_tp_size)
        if refused is not None:
            raise InvalidParameter(refused, hint="SGLang's model class refuses it when the model loads")
    return dep


def _geometry(spec: ModelSpec, dep: SglangDeployment, d: ServerDefaults, kv_dtype: str, sm: int | None, *,
              hip: bool) -> PoolGeometry:
    """pool.geometry for this deployment's attention TP, ratio and hybrid-SWA switch."""
    return geometry(spec, attn_tp=d.attn_tp_size, kv_dtype=kv_dtype, sm_major=sm, hip=hip,
                    swa_ratio=dep.swa_full_tokens_ratio, disable_hybrid_swa=dep.disable_hybrid_swa_memory)


def check_model(spec: ModelSpec, dep: SglangDeployment) -> None:
    """SGLang's refusals of the model whatever the GPU and TP (so the catalog sweep refuses them once, as bad
    input): the config it cannot read, no model class, and more pipeline stages than layers
    (utils/common.py:make_layers asserts it before distributed/utils.py:get_pp_indices would hand a stage no
    layer, and its pool a zero-byte cell)."""
    check_config_readable(spec, remote_code_allowed=dep.trust_remote_code)
    check_model_class(spec)
    if dep.pp > spec.num_layers:
        raise InvalidParameter(f"AssertionError: assert not pp_size or num_hidden_layers >= pp_size "
                               f"(utils/common.py:make_layers; {spec.num_layers} layers, pp_size {dep.pp})",
                               hint="SGLang's model class refuses it when the model loads")


def plan_sglang_fit(spec: ModelSpec, chip: GpuSpec, dep: SglangDeployment, *, weights_bytes: int,
                    weights_range: tuple[int, int], measured: FreeMemory | None = None,
                    draft: ModelSpec | None = None) -> SglangFit:
    """SGLang's startup sizing for `spec` on `chip` (`measured` replaces kvplan's free-memory estimate; `draft`: a
    draft checkpoint not the target's, its weights in `weights_bytes`); unmodelled pools refused (_budget_decides)."""
    dep = _check_loadable(spec, dep)
    reason = _unmodelled(spec, dep, draft)
    early = _budget_decides(spec, dep, reason)
    if reason is not None and not early:
        raise InvalidParameter(f"SGLang {SGLANG_VERSION} rules: {reason}")
    platform, sm, ctx, defaults = resolve_server_args(spec, chip, dep)
    kv_dtype = dsa_kv_dtype(dep.kv_cache_dtype, spec, sm) if is_dsa(spec) else kv_dtype_name(dep.kv_cache_dtype, spec)
    geo = None if early else _geometry(spec, dep, defaults, kv_dtype, sm, hip=platform == "hip")
    dep, geo, spec_decode = _speculative(spec, dep, defaults, geo, draft)
    if platform == "hip" and kv_dtype.startswith("fp8"):
        # HIP maps fp8_e5m2 to fp8_dtype too (mem_cache/kv_cache_dtype.py): an e4m3 format, fnuz on gfx942.
        kv_dtype = "fp8_e4m3"
        if geo is not None:
            geo = dataclasses.replace(geo, dtype=kv_dtype, fnuz=chip.arch == "cdna3")
    _check_kv_quant(kv_dtype, platform, sm, defaults.attention_backend, geo, spec)
    free = measured or estimate_free_memory(cuda_total_bytes=chip.cuda_total_bytes, weights_bytes=weights_bytes,
                                            weights_range=weights_range, world=dep.tp * dep.pp)
    frac = defaults.mem_fraction_static
    state = mamba_state(spec, attn_tp=defaults.attn_tp_size, tp=dep.tp, ssm_dtype=dep.mamba_ssm_dtype)
    mm_gib = mm_reservation_gib(spec, hopper=platform == "cuda" and sm == 9, gpu_mem_mib=gpu_memory_mib(chip),
                                max_running_requests=dep.max_running_requests)
    ratio = mamba_ratio(spec.architectures[0] if spec.architectures else "")
    reserve = None if spec_decode is None else SpecReserve(spec_decode.num_draft_tokens,
                                                           spec_decode.max_running_requests or 0)

    def profile(avail: float, pre: float) -> Budget:
        return profile_budget(avail_gib=avail, pre_gib=pre, mem_fraction_static=frac, mm_reservation_gib=mm_gib,
                              mamba=state, mamba_ratio=ratio, mamba_full_memory_ratio=dep.mamba_full_memory_ratio,
                              max_mamba_cache_size=dep.max_mamba_cache_size, attn_dp_size=defaults.attn_dp_size,
                              spec=reserve)

    budget = profile(free.avail_gib, free.pre_gib)
    if early and budget.refusal is None:
        raise InvalidParameter(f"SGLang {SGLANG_VERSION} rules: {reason}",
                               hint=f"SGLang's budget would leave {(budget.budget_bytes or 0) / GiB:.2f} GiB for the "
                                    "KV pool, so the pool decides")
    stages = _pp_stages(geo, dep.pp, budget, defaults.page_size, ctx)
    pool, startup = _size_stages(geo, stages, budget, dep, defaults, ctx)
    notes: list[str] = [*(pool.warnings if pool else ()), *_speculative_notes(spec_decode, geo)]
    if stages:
        notes.append(f"PP {dep.pp}: stage layers {[g.layers for g, _t in stages]} (get_pp_indices); each stage's "
                     f"tokens {[t for _g, t in stages]}, SGLang keeps the MIN (_apply_token_constraints); the "
                     "line shown is stage 0's")
    startup = _after_pool(spec, geo, pool, startup, notes)
    if early:
        notes.append(f"the KV pool itself is not modelled ({reason}); SGLang refuses before it sizes one; the "
                     "server arguments shown are SGLang's generic rules, not checked for this model")
    token_range = None
    if geo is not None and (measured is None or measured.source == "estimate"):
        token_range = _token_range(profile, free, geo, dep, defaults, ctx)
    tokens = pool.max_total_num_tokens if pool else 0
    reqs = pool.max_running_requests if pool else 0
    if defaults.attn_dp_size > 1 and measured is None:
        notes.append(f"weights are estimated as {dep.tp} tensor-parallel shards; under attention DP SGLang splits "
                     f"the attention weights over attention-TP {defaults.attn_tp_size} only (more per GPU), "
                     "not counted here")
    if is_dsa(spec) and platform == "hip" and not dep.use_aiter:
        notes.append("DeepSeek sparse attention on ROCm: page size 1, SGLang's default environment; with "
                     "SGLANG_USE_AITER=1 and Triton ≥ 3.5 (aiter's preshuffle paged-MQA path, "
                     "layers/attention/dsa/utils.py) SGLang pages by 64 × index_kpool (paste the line with it)")
    notes.append("the CUDA graphs, activations and request table must fit in the slack pre × (1 − "
                 f"mem_fraction_static) = {budget.slack_gib:.2f} GiB: SGLang's heuristic, not checked here")
    return SglangFit(
        model=spec.name, gpu=chip.id, gpu_name=chip.name, engine="sglang", sglang_version=SGLANG_VERSION,
        tp=dep.tp, pp=dep.pp, dp=dep.dp, attn_dp_size=defaults.attn_dp_size, num_gpus=dep.tp * dep.pp * dep.replicas,
        defaults=defaults, kv_cache_dtype=kv_dtype, geometry=geo, context_len=ctx, weights_bytes=weights_bytes,
        free_memory=free, budget=budget, pool=pool, fits=pool is not None and startup is SglangStartup.STARTS,
        startup=startup, max_total_num_tokens=tokens, max_running_requests=reqs,
        total_tokens=tokens * defaults.attn_dp_size, total_running_requests=reqs * defaults.attn_dp_size,
        requests_at_context=(tokens // ctx) * defaults.attn_dp_size, max_total_num_tokens_range=token_range,
        notes=tuple(notes), speculative=spec_decode)
