"""SGLang 0.5.23's speculative decoding: the server arguments it resolves and the draft's KV cells.

Sources (paths relative to `sglang/srt/` in the 0.5.23 wheel):

* `arg_groups/speculative_hook.py:handle_speculative_decoding` upper-cases the algorithm and aliases NEXTN to
  EAGLE (`_resolve_speculative_algorithm_alias`; `speculative/spec_registry.py:_RESERVED_ALIASES`), then
  dispatches (`speculative/spec_info.py:SpeculativeAlgorithm.handle_server_args`) to
  * `_handle_eagle_family` (EAGLE, EAGLE3, STANDALONE): refuses STANDALONE with attention DP; an unset
    `--max-running-requests` becomes 48; the MTP architectures (`MTP_ARCHITECTURES`) take the target's own path as
    the draft; unset steps/top-k/draft tokens come from `_auto_choose_speculative_params`; top-k 1 forces
    draft tokens = steps + 1; refuses top-k > 1 on trtllm_mha, and top-k > 1 with pages > 1 off
    flashinfer/fa3/triton;
  * `_handle_ngram` (NGRAM): refuses attention DP; max_running_requests 48; top-k = --speculative-ngram-max-bfs-
    breadth (10); draft tokens 12; steps = draft tokens // top-k; refuses top-k > 1 with pages > 1 off flashinfer.
* The hook runs after `arg_groups/memory_hook.py:handle_gpu_memory_settings` (`arg_groups/pipeline.py`), so the
  48 caps neither the decode CUDA-graph max_bs nor mem_fraction_static (whose speculative term is PD-decode only).
  The default attention backend (`arg_groups/model_override_base.py:get_default_attn_backend`) is chosen before it
  too, from the top-k as given (`utils/common.py:is_no_spec_infer_or_topk_one`).
* The draft's KV (`model_executor/pool_configurator.py:DefaultPoolConfigurator.__init__`, EAGLE/STANDALONE, target
  worker): `_cell_size += int(_cell_size × draft_layers / layers)` — one token count for target and draft, the
  draft's rows priced at the target's per-layer size. `draft_layers` is `eagle_draft_num_layers`
  (`model_executor/model_runner_components/spec_aux_hidden_state.py:_resolve_eagle_aux_hidden_state`): the draft
  config's `num_nextn_predict_layers`, else its max(num_hidden_layers, num_attention_layers). NGRAM has no draft
  model and adds no cells.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import InvalidParameter

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
ALGORITHMS = (*EAGLE_FAMILY, "NGRAM")  # what kvplan models; NEXTN resolves to EAGLE
# speculative/spec_info.py:SpeculativeAlgorithm (and the NEXTN alias): builtins kvplan does not model.
UNMODELLED_ALGORITHMS = ("DFLASH", "UNO", "DSPARK", "FROZEN_KV_MTP")
# speculative_hook.py:_handle_eagle_family: these take --model-path as the draft when none is given.
MTP_ARCHITECTURES = (
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
    "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
)
# configs/model_config.py:ModelConfig.__init__ (is_draft_model) rewrites these to their MTP class with
# num_nextn_predict_layers = 1: MIMO_V2_MODEL_ARCHS, GLM-5-Next, Qwen3-Next, Qwen3-MoE, Qwen3.5 (and InternS2),
# Qwen4-Exp, EXAONE-MoE, Nemotron-H, HunYuan V3/V4.
NEXTN_REWRITTEN_TO_ONE = (
    "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "Glm5NextForConditionalGeneration", "Qwen3NextForCausalLM",
    "Qwen3MoeForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen4ExpForConditionalGeneration", "ExaoneMoEForCausalLM",
    "ExaoneMoeForCausalLM", "NemotronH_Omni_Reasoning_V3", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "HYV3ForCausalLM", "HYV4ForCausalLM",
)
# configs/inkling.py: its MTP depths may be banded (mtp_local_layer_ids), which HybridSWAPoolConfigurator prices
# apart (_draft_swa_full_layers_num); kvplan does not read that key.
BANDED_MTP_ARCHITECTURE = "InklingForConditionalGeneration"
# speculative_hook.py:_auto_choose_speculative_params: (steps, topk, draft tokens); every other model (3, 1, 4).
_WIDE_TREE = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
SPEC_MAX_RUNNING_REQUESTS = 48  # _handle_eagle_family / _handle_ngram
NGRAM_MAX_BFS_BREADTH = 10  # arg_groups/fields/spec.py: speculative_ngram_max_bfs_breadth
NGRAM_DRAFT_TOKENS = 12  # _handle_ngram
_PAGE_TREE_SPEC_BACKENDS = ("flashinfer", "fa3", "triton")  # _handle_eagle_family


@dataclass(frozen=True)
class SpecDecode:
    """The speculative arguments SGLang resolves (speculative_hook.py)."""

    algorithm: str  # as resolved: NEXTN is EAGLE
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    draft_model_path: str | None  # the MTP architectures: the target's own path
    max_running_requests: int | None  # 48 when not given
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SpeculativeArgs:
    """SGLang's --speculative-* arguments and --max-running-requests as given (None: SGLang's default), what
    handle_speculative_decoding reads of the deployment (SglangDeployment's speculative_* fields: sglang/fit.py)."""

    algorithm: str
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    draft_model_path: str | None = None
    max_running_requests: int | None = None


class ResolvedServer(Protocol):
    """What the hook reads of the server arguments resolved before it (sglang/defaults.py:ServerDefaults)."""

    @property
    def attn_dp_size(self) -> int: ...

    @property
    def attention_backend(self) -> str: ...

    @property
    def page_size(self) -> int: ...


def canonical_algorithm(name: str) -> str:
    """handle_speculative_decoding's upper-casing and NEXTN → EAGLE; SGLang's words for an unknown name
    (spec_info.py:SpeculativeAlgorithm.from_string); kvplan's for a builtin it does not model."""
    upper = name.upper()
    if upper == "NEXTN":
        return "EAGLE"
    if upper in ALGORITHMS:
        return upper
    if upper in UNMODELLED_ALGORITHMS:
        raise InvalidParameter(f"SGLang 0.5.23 rules: speculative algorithm {upper} is not modelled yet",
                               hint=f"kvplan models {', '.join(ALGORITHMS)} and NEXTN")
    raise InvalidParameter(f"Unknown speculative algorithm name: {name}",
                           hint="SGLang 0.5.23's words (speculative/spec_info.py:SpeculativeAlgorithm.from_string)")


def default_backend_allows(topk: int | None, page_size: int | None) -> bool:
    """utils/common.py:is_no_spec_infer_or_topk_one on the arguments as given (get_default_attn_backend asks it
    before the speculative hook fills the top-k): fa3 on Hopper and trtllm_mha on SM100 need it."""
    return topk is None or (topk == 1 and page_size in (None, 1))


def sm100_trtllm_allowed(algorithm: str | None, topk: int | None, page_size: int | None) -> bool:
    """get_default_attn_backend's SM100 MHA condition: the above, and no speculative algorithm or a given
    top-k (an EAGLE run whose top-k SGLang chooses later gets flashinfer)."""
    return default_backend_allows(topk, page_size) and (algorithm is None or topk is not None)


def _eagle_family(algorithm: str, args: SpeculativeArgs, spec: ModelSpec, server: ResolvedServer) -> SpecDecode:
    """speculative_hook.py:_handle_eagle_family."""
    steps, topk, draft_tokens = args.num_steps, args.eagle_topk, args.num_draft_tokens
    draft_path, max_running = args.draft_model_path, args.max_running_requests
    attn_dp_size, backend, page_size = server.attn_dp_size, server.attention_backend, server.page_size
    architecture = spec.architectures[0] if spec.architectures else ""
    if algorithm == "STANDALONE" and attn_dp_size > 1:
        raise InvalidParameter("Currently standalone speculative decoding does not support dp attention.")
    warnings = []
    if max_running is None:
        max_running = SPEC_MAX_RUNNING_REQUESTS
        warnings.append("Max running requests is reset to 48 for speculative decoding. You can override this by "
                        "explicitly setting --max-running-requests.")
    if architecture in MTP_ARCHITECTURES and draft_path is None:
        draft_path = spec.name
    if steps is None:
        if topk is not None or draft_tokens is not None:  # SGLang asserts here (an AssertionError)
            raise InvalidParameter("SGLang 0.5.23 asserts that --speculative-eagle-topk and "
                                   "--speculative-num-draft-tokens are unset when --speculative-num-steps is",
                                   hint="give --speculative-num-steps too (speculative_hook.py:_handle_eagle_family)")
        if algorithm == "STANDALONE":
            steps, topk, draft_tokens = 3, 1, 4
        else:
            steps, topk, draft_tokens = (5, 4, 8) if architecture in _WIDE_TREE else (3, 1, 4)
    if topk is None:  # the hook compares `speculative_eagle_topk > 1` unguarded (its page-size check)
        raise InvalidParameter("SGLang 0.5.23 fails with TypeError: '>' not supported between instances of "
                               "'NoneType' and 'int' when --speculative-num-steps is given without "
                               "--speculative-eagle-topk", hint="give --speculative-eagle-topk too "
                                                                "(speculative_hook.py:_handle_eagle_family)")
    if backend == "trtllm_mha" and topk > 1:
        raise InvalidParameter("trtllm_mha backend only supports topk = 1 for speculative decoding.")
    if topk == 1 and draft_tokens != steps + 1:
        if draft_tokens is not None:
            warnings.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                            "speculative_eagle_topk == 1")
        draft_tokens = steps + 1
    assert draft_tokens is not None
    if topk > 1 and page_size > 1 and backend not in _PAGE_TREE_SPEC_BACKENDS:
        raise InvalidParameter(f"speculative_eagle_topk > 1 with page_size > 1 is only supported on "
                               f"{_PAGE_TREE_SPEC_BACKENDS}; got attention_backend={backend!r}. Use page_size == 1 "
                               "or one of those backends.")
    return SpecDecode(algorithm, steps, topk, draft_tokens, draft_path, max_running, tuple(warnings))


def _ngram(*, steps: int | None, draft_tokens: int | None, max_running: int | None, attn_dp_size: int,
           backend: str, page_size: int) -> SpecDecode:
    """speculative_hook.py:_handle_ngram (the default --speculative-ngram-max-bfs-breadth, 10)."""
    warnings = []
    if max_running is None:
        max_running = SPEC_MAX_RUNNING_REQUESTS
        warnings.append("Max running requests is reset to 48 for speculative decoding. You can override this by "
                        "explicitly setting --max-running-requests.")
    topk = NGRAM_MAX_BFS_BREADTH
    if draft_tokens is None:
        draft_tokens = NGRAM_DRAFT_TOKENS
    if steps is None:
        steps = draft_tokens // topk
    if topk > 1 and page_size > 1 and backend != "flashinfer":
        raise InvalidParameter(f"speculative_eagle_topk({topk}) > 1 with page_size({page_size}) > 1 is unstable and "
                               "produces incorrect results for paged attention backends. This combination is only "
                               "supported for the 'flashinfer' backend.")
    if attn_dp_size > 1:
        raise InvalidParameter("Currently ngram speculative decoding does not support dp attention.")
    return SpecDecode("NGRAM", steps, topk, draft_tokens, None, max_running, tuple(warnings))


def resolve_speculative(args: SpeculativeArgs, spec: ModelSpec, server: ResolvedServer) -> SpecDecode:
    """What handle_speculative_decoding resolves for one deployment of the target `spec` (see the module
    docstring), after the hooks that resolved `server`."""
    for flag, value in (("--speculative-num-steps", args.num_steps), ("--speculative-eagle-topk", args.eagle_topk),
                        ("--speculative-num-draft-tokens", args.num_draft_tokens)):
        if value is not None and value < 1:
            raise InvalidParameter(f"{flag} must be ≥ 1, got {value}")
    algorithm = canonical_algorithm(args.algorithm)
    if algorithm == "NGRAM":
        return _ngram(steps=args.num_steps, draft_tokens=args.num_draft_tokens, max_running=args.max_running_requests,
                      attn_dp_size=server.attn_dp_size, backend=server.attention_backend, page_size=server.page_size)
    return _eagle_family(algorithm, args, spec, server)


def draft_cell_bytes(cell_bytes: int, *, layers: int, draft_layers: int, indexer_bytes: int = 0,
                     indexer_row_bytes: int = 0) -> int:
    """pool_configurator.py:DefaultPoolConfigurator.__init__ (EAGLE/STANDALONE, no HiSparse, no DCP, no fused
    draft entry): the bytes per token the draft's KV adds, int(cell × draft_layers / layers). A DSA target
    (`indexer_bytes`: its index-K bytes per token in `cell_bytes`) prices the draft's latent rows at the target's
    latent share, int((cell − indexer) × draft_layers / layers), and gives every draft layer an index-K row
    (_compute_dsa_indexer_cell_size(num_layers=draft_layers, allocate_all_layers=True): no top-k skip)."""
    if draft_layers <= 0 or layers <= 0:
        return 0
    if indexer_bytes or indexer_row_bytes:
        return int((cell_bytes - indexer_bytes) * draft_layers / layers) + indexer_row_bytes * draft_layers
    return int(cell_bytes * draft_layers / layers)


def own_mtp_weights_bytes(spec: ModelSpec, *, algorithm: str | None, draft_path: str | None, tp: int,
                          stored_total: bool) -> int:
    """Bytes per GPU an EAGLE/NEXTN draft read from the target's own checkpoint adds to the weights SGLang measures
    before it sizes the pool (the draft model is its MTP modules). kvplan's analytic count leaves them out, so they
    are added, split over TP (kvplan/model/weights.py:mtp_module_stored_bytes, an estimate); a Hub safetensors
    total (`stored_total`) already holds them: 0 then, and 0 without such a draft."""
    layers = spec.facts.sglang.nextn_predict_layers
    if algorithm is None or stored_total or not layers or canonical_algorithm(algorithm) not in EAGLE_FAMILY:
        return 0
    path = draft_path
    arch = spec.architectures[0] if spec.architectures else ""
    if path not in (None, spec.name) or (path is None and arch not in MTP_ARCHITECTURES):
        return 0
    from kvplan.model.weights import mtp_module_stored_bytes

    return -(-layers * mtp_module_stored_bytes(spec) // tp)


class WeightsLayout(Protocol):
    """What the target's loaded weights depend on of a deployment (sglang/defaults.py:SglangDeployment's fields):
    its TP and PP split and the speculative draft it reads from the target's checkpoint."""

    @property
    def tp(self) -> int: ...

    @property
    def pp(self) -> int: ...

    @property
    def speculative_algorithm(self) -> str | None: ...

    @property
    def speculative_draft_model_path(self) -> str | None: ...


def target_weights_bytes(spec: ModelSpec, dep: WeightsLayout, *, arch: str | None, given: int | None,
                         total_bytes: int | None) -> tuple[int, int, int]:
    """(bytes, low, high) on the busiest GPU that SGLang has loaded for the target when it sizes the pool of
    deployment `dep` on a GPU of `arch`: the measured `given` exactly, else
    kvplan/vllm/memory/weights.py:given_or_estimated_weights (`total_bytes`: the safetensors total) plus the target's
    own MTP draft modules (own_mtp_weights_bytes). A separate draft checkpoint is the caller's to add."""
    from kvplan.vllm.memory.weights import given_or_estimated_weights

    tp = dep.tp
    best, low, high = given_or_estimated_weights(spec, given=given, tp=tp, pp=dep.pp, arch=arch,
                                                 total_bytes=total_bytes)
    if given is not None:
        return best, low, high
    extra = own_mtp_weights_bytes(spec, algorithm=dep.speculative_algorithm,
                                  draft_path=dep.speculative_draft_model_path, tp=tp,
                                  stored_total=total_bytes is not None)
    return best + extra, low + extra, high + extra
