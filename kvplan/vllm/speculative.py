"""Speculative decoding as vLLM 0.33 plans its KV cache (`--speculative-config`).

MTP drafts (DeepSeek-V3/R1, GLM-4.5, Qwen3-Next, Qwen3.5, MiMo … — vLLM rewrites the per-model method names
such as `deepseek_mtp` or `qwen3_next_mtp` to `mtp`, config/speculative.py) run the checkpoint's own MTP
layers (`num_nextn_predict_layers`, `mtp_num_hidden_layers`). Their attention layers join the target's KV
cache (v1/worker/gpu/spec_decode/eagle/utils.py:load_eagle_model builds them; their specs land in the same
groups), and a hybrid model keeps `num_speculative_tokens` more state blocks per request in each Mamba group
(v1/kv_cache_interface.py:MambaSpec.num_speculative_blocks). Pinned against vLLM's CUDA planner
(tests/fixtures/oracle-cuda: DeepSeek-V3 MTP 1/3, Qwen3-Next MTP 1/3 at TP 1, 2 and 4).

EAGLE / EAGLE-3 drafts (`{"method": "eagle3", "model": "<draft>", …}`) are small models of their own: vLLM
builds them from the draft's config.json (model_executor/models/llama_eagle3.py numbers its layers from the
target's `num_hidden_layers` on), in the target's dtype and at the target's TP, and their attention layers join
the same KV cache with the draft's own KV heads and head size. The caller parses the draft's config (the CLI
loads it; speculators-format checkpoints are flattened by `speculators_layer_config`, as vLLM's
transformers_utils/configs/speculators does) and passes it here as a ModelSpec. Pinned against vLLM's CUDA
planner (tests/fixtures/oracle-cuda/extra: Llama-3.1-8B + EAGLE-3 draft, 3 tokens).

Draft models (`{"method": "draft_model", "model": "<draft>", …}`, also what vLLM infers for a `model` whose name
says neither eagle nor ngram) are whole smaller LMs of the target's vocabulary (Qwen3-0.6B for Qwen3-32B). vLLM
builds them in the target's dtype (config/speculative.py: `dtype=self.target_model_config.dtype`), with
`quant_config=None`, the speculative config's `kv_cache_dtype` if set, and loads them in the same
"Model loading took" (v1/worker/gpu/spec_decode/standalone_ar/speculator.py:load_draft_model, Model Runner
V2). Their attention layers are marked draft layers (spec_decode/speculator.py:DraftModelSpeculator.load_model)
and join the target's KV cache groups with the draft's own layers, KV heads and head size, sharded by the
worker's TP group. A draft whose max_model_len is shorter than the target's lowers the target's
(config/vllm.py:_limit_max_model_len_to_draft). Pinned against vLLM's CUDA planner
(tests/fixtures/oracle-cuda/extra: Qwen3-32B / Qwen3-8B + Qwen3-0.6B, 3 and 5 tokens, TP 1 and 2).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kvplan.errors import InvalidParameter
from kvplan.model.kv_cache import KV_CACHE_DTYPES, KVCacheSpec, kv_cache_specs
from kvplan.model.spec import ModelSpec
from kvplan.model.spelt import MTP_LAYER_KEYS

MAX_SPECULATIVE_TOKENS = 64  # far above what any deployment uses; bounds the per-request state blocks


@dataclass(frozen=True)
class SpecDecode:
    """The draft as the KV cache sees it."""

    method: str  # vLLM's normalized method name
    num_speculative_tokens: int
    draft_layers: int  # attention layers the draft adds to the KV cache
    draft: ModelSpec | None = None  # EAGLE / EAGLE-3 / draft_model: the draft's own model (KV heads, head size, layers)
    kv_cache_dtype: str | None = None  # the speculative config's `kv_cache_dtype` (None: the target's)
    max_model_len: int | None = None  # draft_model: the draft's max_model_len (the target's is capped to it)


def mtp_layers(model: ModelSpec) -> int:
    """The checkpoint's MTP layers (0: none): the count it states (kvplan.model.spelt.MTP_LAYER_KEYS), else its
    family's MTP module default (Qwen3-Next: qwen3_next_mtp.py `getattr(config, "num_nextn_predict_layers", 1)`)."""
    return model.facts.mtp_layers


# config/speculative.py: methods whose draft is a separate checkpoint named by `model`.
EAGLE_METHODS = ("eagle", "eagle3")
DRAFT_MODEL = "draft_model"
DRAFT_METHODS = (*EAGLE_METHODS, DRAFT_MODEL)


def speculative_method(config: Mapping[str, Any]) -> str:
    """vLLM's method name for `--speculative-config` (config/speculative.py:SpeculativeConfig.__post_init__):
    the per-model MTP names become `mtp`; with no method, a draft `model` whose name says `eagle-` / `eagle3` is
    EAGLE / EAGLE-3 and any other is `draft_model`."""
    method = str(config.get("method") or "").lower()
    model = str(config.get("model") or "")
    if not method and model:
        if model in ("ngram", "[ngram]"):
            return "ngram"
        lowered = model.lower()
        return "eagle" if "eagle-" in lowered else "eagle3" if "eagle3" in lowered else "draft_model"
    return "mtp" if method == "mtp" or method.endswith("_mtp") else method


def needs_draft_config(config: Mapping[str, Any] | None) -> bool:
    """Whether this `--speculative-config` names a draft checkpoint whose config.json kvplan must read."""
    return bool(config and config.get("model")) and speculative_method(config or {}) in DRAFT_METHODS


def speculators_layer_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A speculators-format draft config.json (`speculators_model_type`, `transformer_layer_config`) as the
    plain decoder config vLLM builds the draft from (transformers_utils/configs/speculators/base.py: the
    layer config, plus the EAGLE fields); any other config unchanged."""
    layer = config.get("transformer_layer_config")
    if not config.get("speculators_model_type") or not isinstance(layer, Mapping):
        return config
    flat = dict(layer)
    for key in ("draft_vocab_size", "target_hidden_size", "norm_before_residual"):
        if config.get(key) is not None:
            flat[key] = config[key]
    model_type = str(flat.get("model_type") or "llama")
    flat["architectures"] = [f"Eagle3{model_type.capitalize()}ForCausalLM"
                             if config.get("speculators_model_type") == "eagle3" else "EagleLlamaForCausalLM"]
    return flat


def _tokens(config: Mapping[str, Any], method: str, draft: ModelSpec | None, mtp_layers: int) -> int:
    """num_speculative_tokens. Without it vLLM takes the draft config's `n_predict` (an MTP draft's is the
    checkpoint's MTP layer count) and refuses a draft that has none (config/speculative.py:
    SpeculativeConfig.__post_init__, "A speculative model was provided, but `num_speculative_tokens` was not
    provided")."""
    tokens = config.get("num_speculative_tokens")
    if tokens is None and method == "mtp":
        tokens = mtp_layers or None
    elif tokens is None and method in DRAFT_METHODS:
        tokens = draft.facts.n_predict if draft is not None else None
        if tokens is None:
            raise InvalidParameter("--speculative-config: A speculative model was provided, but "
                                   "`num_speculative_tokens` was not provided")
    tokens = 1 if tokens is None else tokens
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_SPECULATIVE_TOKENS:
        raise InvalidParameter(f"--speculative-config: num_speculative_tokens must be 1–{MAX_SPECULATIVE_TOKENS}, "
                               f"got {tokens!r}")
    return tokens


def _positive(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidParameter(f"--speculative-config: {key} must be a whole number ≥ 1, got {value!r}")
    return value


def _check_draft_args(config: Mapping[str, Any], tp: int) -> str | None:
    """vLLM's checks of a separate draft's arguments; returns its `kv_cache_dtype` (None: the target's).
    config/speculative.py:SpeculativeConfig._verify_and_get_draft_tp: draft TP is 1 or the target's."""
    draft_tp = _positive(config, "draft_tensor_parallel_size")
    if draft_tp is not None and draft_tp not in (1, tp):
        raise InvalidParameter(f"--speculative-config: speculative_draft_tensor_parallel_size={draft_tp} cannot be "
                               "other value than 1 or target model tensor_parallel_size")
    kv = config.get("kv_cache_dtype")
    if kv is not None and kv not in KV_CACHE_DTYPES:
        raise InvalidParameter(f"--speculative-config: kv_cache_dtype {kv!r} is not one of "
                               f"{', '.join(KV_CACHE_DTYPES)}")
    return None if kv is None or kv == "auto" else str(kv)


def draft_max_model_len(config: Mapping[str, Any], draft: ModelSpec, target_max_model_len: int) -> int:
    """The draft model's max_model_len (config/speculative.py:_maybe_override_draft_max_model_len): the
    speculative config's `max_model_len`, which the draft's ModelConfig checks against its derived length
    (config/model.py:_get_and_verify_max_len) and which may not exceed the target's; else the shorter of the
    draft's derived length and the target's."""
    given = _positive(config, "max_model_len")
    if given is None:
        return min(draft.max_model_len, target_max_model_len)
    if given > draft.max_model_len:
        source = f", {draft.max_model_len_source}" if draft.max_model_len_source else ""
        raise InvalidParameter(f"--speculative-config: User-specified max_model_len ({given}) is greater than the "
                               f"derived max_model_len ({draft.max_model_len}{source}) of the draft {draft.name}")
    if given > target_max_model_len:
        raise InvalidParameter(f"--speculative-config: speculative_max_model_len={given} cannot be larger than "
                               f"target_max_model_len={target_max_model_len}")
    return given


def _draft_model(model: ModelSpec, config: Mapping[str, Any], draft: ModelSpec, tokens: int, kv: str | None,
                 target_max_model_len: int) -> SpecDecode:
    """`draft_model`: vLLM's vocabulary check (config/speculative.py:verify_equal_vocab_size_if_draft_model),
    then the draft's max_model_len. A heterogeneous vocabulary or parallel drafting (PARD) sends vLLM to Model
    Runner V1 (config/vllm.py:_get_v2_model_runner_unsupported_features), which kvplan does not model here."""
    for key in ("use_heterogeneous_vocab", "parallel_drafting"):
        if config.get(key):
            raise InvalidParameter(f"--speculative-config {key} is not modelled by kvplan yet",
                                   hint="vLLM serves it on Model Runner V1; kvplan models V2's draft model")
    if model.vocab_size != draft.vocab_size:
        raise InvalidParameter(
            "--speculative-config: Target and draft model should have the same vocabulary size. "
            f"Target model vocab_size={model.vocab_size}. Draft model vocab_size={draft.vocab_size}. "
            "Using models with different tokenizers can cause out-of-bounds errors during speculative decoding.")
    return SpecDecode(DRAFT_MODEL, tokens, draft.num_layers, draft, kv,
                      draft_max_model_len(config, draft, target_max_model_len))


def resolve_speculative(model: ModelSpec, config: Mapping[str, Any] | None, draft: ModelSpec | None = None, *,
                        tp: int = 1, max_model_len: int | None = None) -> SpecDecode | None:
    """`--speculative-config` for this model; None without one. MTP needs the checkpoint's MTP layers;
    EAGLE / EAGLE-3 and draft models need the draft's own config, parsed by the caller (`draft`); `tp` and
    `max_model_len` are the target's (a draft model's length is checked against it)."""
    if not config:
        return None
    if "tensor_parallel_size" in config:  # config/speculative.py:SpeculativeConfig._verify_args
        raise InvalidParameter("--speculative-config: 'tensor_parallel_size' is not a valid argument in the "
                               "speculative_config. Please pass 'draft_tensor_parallel_size' instead.")
    method = speculative_method(config)
    tokens = _tokens(config, method, draft, mtp_layers(model))
    if method == "mtp":
        layers = mtp_layers(model)
        if not layers:
            raise InvalidParameter(f"--speculative-config method {method!r}: {model.name} has no MTP layers "
                                   f"({' / '.join(MTP_LAYER_KEYS)} in config.json)")
        # DeepSeek-style MTP reuses its layers across steps: the draft keeps one KV layer per MTP layer.
        return SpecDecode("mtp", tokens, layers)
    if method in DRAFT_METHODS:
        if draft is None:
            raise InvalidParameter(f"--speculative-config method {method!r} needs the draft's checkpoint",
                                   hint='name it: {"method": "' + method + '", "model": "<hub id or folder>", …}')
        kv = _check_draft_args(config, tp)
        if method == DRAFT_MODEL:
            return _draft_model(model, config, draft, tokens, kv,
                                model.max_model_len if max_model_len is None else max_model_len)
        return SpecDecode(method, tokens, draft.num_layers, draft, kv)
    raise InvalidParameter(f"--speculative-config method {method or '(none)'!r} is not modelled by kvplan yet",
                           hint="MTP, EAGLE, EAGLE-3 and separate draft models (draft_model) are")


def draft_specs(stage: Sequence[KVCacheSpec], num_layers: int, spec: SpecDecode, *, tp: int = 1,
                kv_cache_dtype: str = "auto", dtype: str | None = None) -> list[KVCacheSpec]:
    """The draft's KV specs, numbered after the target's layers (vLLM places an MTP / EAGLE draft on the last
    pipeline stage). MTP: copies of the target's first full-attention (or MLA) layer's specs, one set per draft
    layer. EAGLE: the draft model's own specs (`own_draft_specs`) on the last stage."""
    if spec.draft is not None:
        return own_draft_specs(num_layers, spec, tp=tp, pp=1, kv_cache_dtype=kv_cache_dtype, dtype=dtype)[-1]
    windows = [s for s in stage if s.block_outermost and s.role == "sliding window"]
    if windows:  # DeepSeek-V4: an MTP layer's compress ratio is 1 (attention.py: layer_id ≥ num_hidden_layers):
        return [replace(windows[0], layer=num_layers + i) for i in range(spec.draft_layers)]  # its window only
    template_layer = next((s.layer for s in stage if s.kind in ("full", "mla")), None)
    if template_layer is None:
        raise InvalidParameter("--speculative-config: the target has no full-attention layer for the draft to copy")
    template = [s for s in stage if s.layer == template_layer]
    return [replace(s, layer=num_layers + i) for i in range(spec.draft_layers) for s in template]


def own_draft_specs(num_layers: int, spec: SpecDecode, *, tp: int, pp: int, kv_cache_dtype: str = "auto",
                    dtype: str | None = None) -> list[list[KVCacheSpec]]:
    """An EAGLE or draft model's own KV specs per pipeline stage, numbered after the target's layers: at the
    target's TP (the worker's TP group shards it, whatever `draft_tensor_parallel_size` says) and in the
    target's `dtype`, with the target's KV cache dtype unless the speculative config names its own
    (config/speculative.py:apply_draft_overrides; standalone_ar/speculator.py:load_draft_model). A draft
    model built under the worker's PP group splits its layers over the stages as the target's are
    (model_executor/models/utils.py:make_layers, get_pp_indices)."""
    assert spec.draft is not None
    draft = spec.draft if dtype is None else replace(spec.draft, dtype=dtype)
    stages = kv_cache_specs(draft, tp=tp, pp=pp, kv_cache_dtype=spec.kv_cache_dtype or kv_cache_dtype)
    return [[replace(s, layer=num_layers + s.layer) for s in own] for own in stages]


def eagle_head_params(draft: ModelSpec, spec: SpecDecode, target: ModelSpec) -> tuple[int, int]:
    """(parameters vLLM keeps for an EAGLE / EAGLE-3 head, and the embedding it may keep too).

    As model_executor/models/llama_eagle3.py builds EAGLE-3: its decoder layers (the first one's q/k/v read
    2·hidden: the embedding and the target's hidden state, plus a hidden_norm), the fc from the target's
    aux hidden states (3 × target hidden → hidden, eagle_aux_hidden_state_layer_ids default) and the final
    norm, and an LM head of `draft_vocab_size` rows of its own; llama_eagle.py's EAGLE: plain layers and an
    fc of 2·hidden → hidden, the target's LM head. spec_decode/eagle/utils.py:load_eagle_model then shares the
    target's embedding (and LM head when the shapes match), and "Model loading took" counts live tensors
    only (platforms/cuda.py:get_current_memory_usage: max_memory_allocated): whether the checkpoint carries
    its own embedding is not in config.json — the second figure is that embedding, the estimate's high end."""
    h, hd = draft.hidden_size, draft.head_size
    eagle3 = spec.method == "eagle3"
    total = 0
    for i in range(draft.num_layers):
        qkv_in = 2 * h if (eagle3 and i == 0) else h
        total += qkv_in * (draft.num_attention_heads + 2 * draft.num_kv_heads) * hd
        total += draft.num_attention_heads * hd * h + 3 * h * draft.intermediate_size
        total += (3 if (eagle3 and i == 0) else 2) * h
    total += (3 * target.hidden_size if eagle3 else 2 * h) * h + h
    draft_vocab = draft.facts.draft_vocab_size
    if eagle3 and draft_vocab and draft_vocab != target.vocab_size:
        total += draft_vocab * h
    return total, draft.vocab_size * h

