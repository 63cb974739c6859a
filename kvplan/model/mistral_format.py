"""Mistral-format checkpoints (`params.json`): which file vLLM 0.33 reads, and what kvplan's config.json misses.

vLLM 0.33 `transformers_utils/config.py:get_config`, `config_format="auto"`: a repository with
`consolidated*.safetensors` (`repo_utils.py:is_mistral_model_repo`) and `params.json` is read in Mistral format
(MistralConfigParser → `configs/mistral.py:adapt_config_dict`), whatever config.json says; otherwise config.json
(HF format); neither is an error. kvplan reads config.json only, so it says when vLLM would not. Pure.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.model.spec import ModelSpec

PARAMS_NAME = "params.json"
CONSOLIDATED_GLOB = "consolidated*.safetensors"
# configs/mistral.py:_remap_general_mistral_args (Mistral key → HF key), with what kvplan's ModelSpec holds.
_COMPARED: tuple[tuple[str, str, str], ...] = (
    ("n_layers", "num_hidden_layers", "num_layers"),
    ("dim", "hidden_size", "hidden_size"),
    ("n_heads", "num_attention_heads", "num_attention_heads"),
    ("n_kv_heads", "num_key_value_heads", "num_kv_heads"),
    ("head_dim", "head_dim", "head_size"),
    ("vocab_size", "vocab_size", "vocab_size"),
)
# _remap_general_mistral_args: `max_position_embeddings` defaults to 128_000 when params.json has none (and the
# HF config gives none either: config.py:_maybe_retrieve_max_pos_from_hf).
MISTRAL_DEFAULT_MAX_POSITIONS = 128_000


def only_params_json_message(folder: str) -> str:
    """A folder with params.json and no config.json: what vLLM reads there and what kvplan needs instead."""
    return (f"{folder} has {PARAMS_NAME} (Mistral format) and no config.json: vLLM 0.33 reads {PARAMS_NAME} "
            f"(config_format auto picks mistral when {CONSOLIDATED_GLOB} is beside it; "
            "transformers_utils/configs/mistral.py:adapt_config_dict turns it into an HF config), which kvplan "
            "does not read. Give kvplan the checkpoint's HF-format config.json (its transformers conversion)")


def params_json_note(params: Mapping[str, Any], spec: ModelSpec, *, vllm_reads_it: bool) -> str:
    """The note for a checkpoint that has params.json beside config.json: which file vLLM reads and, field by
    field, where params.json (what vLLM would use) differs from the config.json kvplan planned from."""
    diffs = []
    for mistral_key, hf_key, attr in _COMPARED:
        value = params.get(mistral_key)
        if isinstance(value, int) and not isinstance(value, bool) and value != getattr(spec, attr):
            diffs.append(f"{mistral_key} {value} (config.json {hf_key}: {getattr(spec, attr)})")
    positions = params.get("max_position_embeddings", params.get("max_seq_len"))
    if isinstance(positions, int) and not isinstance(positions, bool) and positions != spec.max_model_len:
        diffs.append(f"max_position_embeddings {positions} (kvplan's max_model_len: {spec.max_model_len})")
    agreement = (f"it differs from config.json in {'; '.join(diffs)}, so vLLM's plan differs too" if diffs
                 else "its layers, heads, KV heads, head size, width, vocabulary and length agree with config.json")
    if vllm_reads_it:
        return (f"vLLM 0.33 reads {PARAMS_NAME} for this checkpoint, not config.json ({CONSOLIDATED_GLOB} and "
                f"{PARAMS_NAME}: config_format mistral); kvplan planned from config.json: {agreement}")
    return (f"{PARAMS_NAME} is here too: vLLM 0.33 reads it instead of config.json when {CONSOLIDATED_GLOB} is "
            f"beside it (config_format mistral); {agreement}")
