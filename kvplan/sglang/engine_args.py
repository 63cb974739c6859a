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
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from kvplan.errors import ParseError

ArgKind = Literal["int", "float", "text", "switch"]


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
    SglangArg("speculative_algorithm", "--speculative-algorithm", "text", "EAGLE, EAGLE3, NEXTN, STANDALONE…"),
)
MODELLED = {arg.dest: arg for arg in SGLANG_ARGS}
# dests that change memory in ways this slice does not model: the caller warns.
UNMODELLED = {
    "quantization": "quantizing at load changes the weights; kvplan sizes the checkpoint as stored",
    "cpu_offload_gb": "weights offloaded to CPU are not subtracted",
    "enable_hierarchical_cache": "HiCache's host tier is not modelled",
    "moe_a2a_backend": "DeepEP all-to-all reserves 2 GiB more in mem_fraction_static (not modelled)",
    "disable_hybrid_swa_memory": "only dense and MLA pools are modelled",
    "swa_full_tokens_ratio": "only dense and MLA pools are modelled",
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
