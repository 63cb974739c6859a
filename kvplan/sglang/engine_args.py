"""SGLang 0.5.23's server flags: the ones that change the KV plan, and how `launch_server` spells them.

Every SGLang flag (560 long options with their argparse `dest`) is in launch_server_flags.json, read
from the parser `server_args.py:ServerArgs.add_cli_args` builds. That parser keeps argparse's
`allow_abbrev=True`, so a unique prefix names a flag: `--tp 8` is `--tp-size 8` and `--dp 2` is
`--dp-size 2`, while `--pp` (`--pp-size`, `--pp-max-micro-batch-size`, …) and `--cuda-graph-max-bs`
(`--cuda-graph-max-bs-decode` / `-prefill`) are ambiguous and refused, as argparse refuses them.
`SGLANG_ARGS` maps the `dest` of each flag kvplan models to how it is read.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from kvplan.errors import ParseError

ArgKind = Literal["int", "float", "text", "switch", "json"]


@dataclass(frozen=True)
class SglangArg:
    """One SGLang server argument kvplan models: its `dest`, canonical flag and value kind."""

    dest: str
    flag: str
    kind: ArgKind
    help: str


SGLANG_ARGS: tuple[SglangArg, ...] = (
    SglangArg("model_path", "--model-path", "text", "The model (alias --model)."),
    SglangArg("tp_size", "--tp-size", "int", "Tensor parallel size (--tp, --tensor-parallel-size)."),
    SglangArg("pp_size", "--pp-size", "int", "Pipeline parallel size (--pipeline-parallel-size)."),
    SglangArg("dp_size", "--dp-size", "int", "Data-parallel replicas, or attention-DP groups with "
                                              "--enable-dp-attention (--dp, --data-parallel-size)."),
    SglangArg("attn_dp_size", "--attn-dp-size", "int", "Attention data-parallel groups inside the TP group."),
    SglangArg("enable_dp_attention", "--enable-dp-attention", "switch", "Deprecated spelling of --attn-dp-size "
                                                                        "--dp-size."),
    SglangArg("ep_size", "--ep-size", "int", "Expert parallel size (--ep, --expert-parallel-size)."),
    SglangArg("mem_fraction_static", "--mem-fraction-static", "float", "(weights + KV pool) / free memory."),
    SglangArg("chunked_prefill_size", "--chunked-prefill-size", "int", "Tokens per prefill chunk."),
    SglangArg("max_prefill_tokens", "--max-prefill-tokens", "int", "Prefill tokens per batch (16384)."),
    SglangArg("max_running_requests", "--max-running-requests", "int", "Running requests at most."),
    SglangArg("max_total_tokens", "--max-total-tokens", "int", "Cap on the pool's tokens."),
    SglangArg("page_size", "--page-size", "int", "Tokens per page (1)."),
    SglangArg("kv_cache_dtype", "--kv-cache-dtype", "text", "auto, bf16, fp8_e4m3, fp8_e5m2."),
    SglangArg("context_length", "--context-length", "int", "Context length (the model's by default)."),
    SglangArg("attention_backend", "--attention-backend", "text", "Attention backend (SGLang's choice)."),
    SglangArg("cuda_graph_max_bs_decode", "--cuda-graph-max-bs-decode", "int", "Largest decode CUDA graph."),
    SglangArg("disable_cuda_graph", "--disable-cuda-graph", "switch", "No CUDA graphs."),
    SglangArg("speculative_algorithm", "--speculative-algorithm", "text", "EAGLE, EAGLE3, NEXTN, STANDALONE, "
                                                                          "NGRAM."),
    SglangArg("speculative_num_steps", "--speculative-num-steps", "int", "Draft steps (SGLang's choice: 3)."),
    SglangArg("speculative_eagle_topk", "--speculative-eagle-topk", "int", "Draft tokens per step (1)."),
    SglangArg("speculative_num_draft_tokens", "--speculative-num-draft-tokens", "int", "Tokens verified per "
                                                                                        "step (steps + 1)."),
    SglangArg("speculative_draft_model_path", "--speculative-draft-model-path", "text", "The draft checkpoint "
                                                                                        "(MTP models: their own)."),
    SglangArg("swa_full_tokens_ratio", "--swa-full-tokens-ratio", "float", "Sliding-window pool / full pool "
                                                                          "tokens (0.8)."),
    SglangArg("mamba_full_memory_ratio", "--mamba-full-memory-ratio", "float", "Mamba state / KV pool memory "
                                                                              "(0.9)."),
    SglangArg("disable_hybrid_swa_memory", "--disable-hybrid-swa-memory", "switch", "One KV pool for a "
              "sliding-window hybrid, every layer at the full-attention shape."),
    SglangArg("max_mamba_cache_size", "--max-mamba-cache-size", "int", "Mamba state slots (over all attention-DP "
                                                                      "workers); default from the memory ratio."),
    SglangArg("mamba_ssm_dtype", "--mamba-ssm-dtype", "text", "SSM state dtype: float32, bfloat16, float16 "
                                                              "(default: the config's, else float32)."),
    SglangArg("json_model_override_args", "--json-model-override-args", "json", "A JSON object applied to the "
              "model's config key by key (sglang/model_override.py)."),
    SglangArg("trust_remote_code", "--trust-remote-code", "switch", "Read a config that needs the repository's "
                                                                   "code (kvplan still runs none of it)."),
)
MODELLED = {arg.dest: arg for arg in SGLANG_ARGS}
# dests that change memory in ways this slice does not model: the caller warns.
UNMODELLED = {
    "quantization": "quantizing at load changes the weights; kvplan sizes the checkpoint as stored",
    "cpu_offload_gb": "weights offloaded to CPU are not subtracted",
    "enable_hierarchical_cache": "HiCache's host tier is not modelled",
    "moe_a2a_backend": "DeepEP all-to-all reserves 2 GiB more in mem_fraction_static (not modelled)",
    "mamba_radix_cache_strategy": "the Mamba slots per request are modelled for the default strategy (auto)",
    "disable_radix_cache": "the radix cache is modelled on (it changes the Mamba slots per request)",
    "disable_overlap_schedule": "the overlap scheduler is modelled on (it changes the Mamba slots per request)",
    "dcp_size": "decode context parallelism is not modelled",
    "attn_cp_size": "attention context parallelism is not modelled",
}


@cache
def launch_server_flags() -> dict[str, tuple[str, bool]]:
    """Every long flag of SGLang 0.5.23's server parser: flag -> (dest, takes a value)."""
    text = resources.files("kvplan.sglang").joinpath("launch_server_flags.json").read_text(encoding="utf-8")
    return {flag: (dest, bool(takes)) for flag, (dest, takes) in json.loads(text)["flags"].items()}


def resolve_flag(word: str) -> tuple[str, bool] | None:
    """(dest, takes a value) of a flag as argparse resolves it: exact, else a unique prefix (allow_abbrev);
    None for a flag SGLang does not have; ParseError for an ambiguous prefix, in argparse's words."""
    flags = launch_server_flags()
    if word in flags:
        return flags[word]
    matches = sorted(f for f in flags if f.startswith(word))
    if len(matches) > 1:
        raise ParseError(f"--sglang-cmd: ambiguous option: {word} could match {', '.join(matches)}")
    return flags[matches[0]] if matches else None


# SglangDeployment field ← SGLang dest, and how its value is read.
_DEPLOYMENT_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("tp", "tp_size", int), ("pp", "pp_size", int), ("dp", "dp_size", int), ("ep", "ep_size", int),
    ("enable_dp_attention", "enable_dp_attention", bool), ("mem_fraction_static", "mem_fraction_static", float),
    ("chunked_prefill_size", "chunked_prefill_size", int), ("max_prefill_tokens", "max_prefill_tokens", int),
    ("max_running_requests", "max_running_requests", int), ("max_total_tokens", "max_total_tokens", int),
    ("page_size", "page_size", int), ("kv_cache_dtype", "kv_cache_dtype", str),
    ("context_length", "context_length", int), ("attention_backend", "attention_backend", str),
    ("cuda_graph_max_bs", "cuda_graph_max_bs_decode", int), ("disable_cuda_graph", "disable_cuda_graph", bool),
    ("speculative_algorithm", "speculative_algorithm", str), ("trust_remote_code", "trust_remote_code", bool),
    ("speculative_num_steps", "speculative_num_steps", int), ("speculative_eagle_topk", "speculative_eagle_topk", int),
    ("speculative_num_draft_tokens", "speculative_num_draft_tokens", int),
    ("speculative_draft_model_path", "speculative_draft_model_path", str),
    ("swa_full_tokens_ratio", "swa_full_tokens_ratio", float),
    ("mamba_full_memory_ratio", "mamba_full_memory_ratio", float),
    ("disable_hybrid_swa_memory", "disable_hybrid_swa_memory", bool),
    ("use_aiter", "use_aiter", bool),  # SGLANG_USE_AITER in a pasted line's environment (command_line.py)
    ("max_mamba_cache_size", "max_mamba_cache_size", int), ("mamba_ssm_dtype", "mamba_ssm_dtype", str),
    ("json_model_override_args", "json_model_override_args", dict),
)


def _cast(value: object, kind: type, dest: str) -> object:
    if kind is dict:  # JSON text (a pasted line's) or a plan's mapping: kept as canonical JSON text, None for {}
        from kvplan.sglang.model_override import parse_model_override_args

        parsed = parse_model_override_args(value)
        return json.dumps(parsed, separators=(",", ":")) if parsed else None
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise ParseError(f"--{dest.replace('_', '-')}: invalid value {value!r} (a switch: true or false)")
    if kind is int and (isinstance(value, bool) or (isinstance(value, float) and not value.is_integer())):
        # argparse's type=int refuses "2.5" and "true"; int() would read a plan's 2.5 as 2 and true as 1
        raise ParseError(f"--{dest.replace('_', '-')}: invalid value {value!r} (a whole number)")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ParseError(f"--{dest.replace('_', '-')}: invalid value {value!r}") from None


def deployment_fields(options: Mapping[str, object]) -> dict[str, object]:
    """SglangDeployment fields from SGLang options by `dest` (a pasted line's, a plan's `sglang:` mapping's);
    `attn_dp_size N` is the new spelling of `--dp N --enable-dp-attention`."""
    fields: dict[str, object] = {}
    for field_name, dest, kind in _DEPLOYMENT_FIELDS:
        if options.get(dest) is not None and (cast := _cast(options[dest], kind, dest)) is not None:
            fields[field_name] = cast
    if options.get("attn_dp_size") is not None:
        fields.update(dp=_cast(options["attn_dp_size"], int, "attn_dp_size"), enable_dp_attention=True)
    return fields


# Short spellings launch_server_line writes (unique prefixes or aliases argparse resolves: resolve_flag).
_SHORT = {"tp_size": "--tp", "dp_size": "--dp", "ep_size": "--ep"}


def launch_server_line(model: str, fields: Mapping[str, object], defaults: Mapping[str, object],
                       revision: str | None = None) -> str:
    """The `python -m sglang.launch_server` line of a deployment: every SglangDeployment field in `fields` that
    differs from `defaults` (SglangDeployment()'s) as its canonical flag, so that parse_sglang_command and
    deployment_fields read back the same deployment (--tp always; --dp N --enable-dp-attention as typed)."""
    words = ["SGLANG_USE_AITER=1"] if fields.get("use_aiter") else []
    words += ["python -m sglang.launch_server --model-path", shlex.quote(model)]
    if revision is not None:
        words.append(f"--revision {shlex.quote(revision)}")
    for field_name, dest, _kind in _DEPLOYMENT_FIELDS:
        value = fields[field_name]
        if value == defaults[field_name] and field_name != "tp" or value is None or value is False \
                or field_name == "use_aiter":
            continue
        flag = _SHORT.get(dest, MODELLED[dest].flag)
        words.append(flag if value is True else f"{flag} {shlex.quote(str(value))}")
    return " ".join(words)
