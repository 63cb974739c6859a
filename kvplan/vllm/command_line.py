"""Read a pasted `vllm serve MODEL --flag …` command line into kvplan settings.

Pure: a string in, a `VllmCommand` out. Flag names and aliases follow vLLM's CLI
(vllm/engine/arg_utils.py:EngineArgs.add_cli_args): `--flag value`, `--flag=value`, underscores or
dashes, `-tp`/`-pp`/`-dp` short forms, `--no-…` negations. Flags that do not change the KV-cache
plan are ignored and reported back, so the caller can say so on stderr.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kvplan.errors import ParseError

# vLLM flag (canonical, dashes) → kvplan setting name. Values stay strings here; the CLI parses them.
VALUE_FLAGS: dict[str, str] = {
    "--model": "model",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--device-memory-utilization": "gpu_memory_utilization",
    "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--block-size": "block_size",
    "--kv-cache-memory-bytes": "kv_cache_memory_bytes",
    "--kv-cache-memory": "kv_cache_memory_bytes",
    "--revision": "revision",
    "--performance-mode": "performance_mode",
    "--speculative-config": "speculative_config",
    "--decode-context-parallel-size": "decode_context_parallel_size",
    "--prefill-context-parallel-size": "prefill_context_parallel_size",
    "--data-parallel-size": "data_parallel_size",
    "--hf-overrides": "hf_overrides",
    "--compilation-config": "compilation_config",
    "--kv-transfer-config": "kv_transfer_config",
    "--dtype": "dtype",
    "--mamba-cache-dtype": "mamba_cache_dtype",
    "--mamba-ssm-cache-dtype": "mamba_ssm_cache_dtype",
    "--num-gpu-blocks-override": "num_gpu_blocks_override",
    "--cpu-offload-gb": "cpu_offload_gb",
    "--kv-offloading-size": "kv_offloading_size",
    "--kv-offloading-backend": "kv_offloading_backend",
    "--quantization": "quantization",
    "--max-loras": "max_loras",
    "--max-lora-rank": "max_lora_rank",
    "--limit-mm-per-prompt": "limit_mm_per_prompt",
}
BOOL_FLAGS: dict[str, tuple[str, bool]] = {
    "--enforce-eager": ("enforce_eager", True),
    "--no-enforce-eager": ("enforce_eager", False),
    "--enable-prefix-caching": ("enable_prefix_caching", True),
    "--no-enable-prefix-caching": ("enable_prefix_caching", False),
    "--disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", True),
    "--no-disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", False),
    "--enable-expert-parallel": ("enable_expert_parallel", True),
    "--no-enable-expert-parallel": ("enable_expert_parallel", False),
    "--trust-remote-code": ("trust_remote_code", True),
    "--enable-lora": ("enable_lora", True),
    "--async-scheduling": ("async_scheduling", True),
    "--no-async-scheduling": ("async_scheduling", False),
    "--language-model-only": ("language_model_only", True),
    "--no-language-model-only": ("language_model_only", False),
    "--enable-mm-embeds": ("enable_mm_embeds", True),
    "--no-enable-mm-embeds": ("enable_mm_embeds", False),
}
# vLLM's dotted spelling of a JSON option (utils/argparse_utils.py:FlexibleArgumentParser.parse_args):
# `--limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video.num_frames=8` is merged into one JSON object.
DOTTED_FLAGS = frozenset({"--limit-mm-per-prompt"})
SHORT_FLAGS = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-cc": "--compilation-config",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-q": "--quantization",
}
# vLLM boolean flags that take no value and do not affect the plan (so they must not swallow the next word).
IGNORED_BOOL_FLAGS = frozenset(
    {
        "--enable-chunked-prefill",
        "--disable-log-requests",
        "--disable-log-stats",
        "--enable-auto-tool-choice",
        "--async-scheduling",
        "--disable-custom-all-reduce",
        "--enable-log-requests",
        "--headless",
        "--disable-frontend-multiprocessing",
        "--enable-sleep-mode",
        "--enable-prompt-tokens-details",
        "--enable-force-include-usage",
        "--disable-fastapi-docs",
        "--enable-request-id-headers",
        "--enable-server-load-tracking",
        "--kv-cache-metrics",
        "--enable-log-outputs",
        "--skip-tokenizer-init",
        "--enable-prompt-embeds",
    }
)
# vLLM flags whose value is a secret: it never reaches `ignored`, which callers print.
SECRET_FLAGS = frozenset({"--hf-token", "--api-key"})
REDACTED = "***"
# Entry points whose next word is the sub-command or the model.
_PROGRAMS = ("vllm", "python", "python3")


# Options that do not change KV capacity or speed as kvplan models them: accepted and ignored, so a
# real `vllm serve` line or --config file can be used as it is. Checked against vLLM 0.33's EngineArgs and API
# server arguments: the API server (host … middleware, api_server_count), logging and metrics (…log…,
# otlp_traces_endpoint, enable_server_load_tracking), the tokenizer and chat templates, where the weights come
# from (download_dir, load_format, code_revision, hf_token), sampling defaults (seed, generation_config,
# override_generation_config, max_logprobs), the scheduling order (scheduling_policy), the worker process
# (worker_cls, distributed_executor_backend: Ray or mp changes no KV memory), and enable_chunked_prefill
# (always on in V1; max_num_batched_tokens is what counts). disable_log_requests,
# disable_frontend_multiprocessing and hf_overrides_path are older vLLM's: 0.33 has none of them.
VLLM_IGNORED = frozenset({
    "host", "port", "served_model_name", "api_key", "uvicorn_log_level", "disable_log_requests",
    "disable_log_stats", "enable_log_requests", "tokenizer", "tokenizer_mode",
    "tokenizer_revision", "code_revision", "download_dir", "load_format", "seed", "chat_template",
    "chat_template_content_format", "enable_auto_tool_choice", "tool_call_parser", "reasoning_parser",
    "generation_config", "disable_uvicorn_access_log", "allowed_origins", "allowed_methods", "allowed_headers",
    "ssl_keyfile", "ssl_certfile", "ssl_ca_certs", "root_path", "middleware", "response_role", "max_logprobs",
    "disable_fastapi_docs", "enable_prompt_tokens_details", "otlp_traces_endpoint", "hf_token",
    "api_server_count", "enable_force_include_usage", "enable_server_load_tracking", "disable_frontend_multiprocessing",
    "worker_cls", "distributed_executor_backend", "scheduling_policy", "enable_chunked_prefill",
    "override_generation_config", "hf_overrides_path", "log_config_file",
})
# Options that change memory or speed in ways kvplan does not model: a warning says the plan ignores them.
VLLM_UNMODELLED: Mapping[str, str] = {
    # V0's CPU swap space: vLLM 0.33's EngineArgs has no swap_space (its CLI rejects --swap-space); the V1
    # engine preempts by recomputation, so it held no GPU memory on 0.8–0.10 either.
    "swap_space": "vLLM 0.33 has no --swap-space (V1 preempts by recomputing; no GPU memory)",
}


@dataclass(frozen=True)
class VllmCommand:
    """What a pasted vLLM command says about the deployment."""

    model: str | None
    options: dict[str, str | bool] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # flags (with values) that do not change the KV plan
    env: dict[str, str] = field(default_factory=dict)  # leading `VLLM_…=value` words (others, e.g. tokens, dropped)


def classify_ignored(words: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """A command's unused flags as (truly ignored: no memory effect, changes memory but not modelled — with
    the reason —, unknown to kvplan)."""
    ignored, unmodelled, unknown = [], [], []
    for word in words:
        flag = word.split("=", 1)[0].split(" ", 1)[0]
        name = _canonical(flag)[2:].replace("-", "_") if flag.startswith("-") else ""
        if name in VLLM_UNMODELLED:
            unmodelled.append(f"{word}: {VLLM_UNMODELLED[name]}")
        elif name in VLLM_IGNORED or flag in IGNORED_BOOL_FLAGS:
            ignored.append(word)
        else:
            unknown.append(word)
    return ignored, unmodelled, unknown


def _canonical(flag: str) -> str:
    if flag in SHORT_FLAGS:
        return SHORT_FLAGS[flag]
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _takes_no_value(flag: str) -> bool:
    return flag in IGNORED_BOOL_FLAGS or flag.startswith(("--no-", "--enable-", "--disable-"))


def parse_vllm_command(text: str) -> VllmCommand:
    """Parse `vllm serve MODEL --flag v …` (also `python -m vllm.entrypoints.openai.api_server --model M …`,
    leading `ENV=value` words, backslash-newline continuations)."""
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError as exc:
        raise ParseError(f"--vllm-cmd: cannot split the command line: {exc}") from None
    # Environment assignments (vLLM's own variables are kept, anything else — a token — is dropped), then the
    # program / sub-command.
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        variable, _, setting = words.pop(0).partition("=")
        if variable.startswith("VLLM_"):
            env[variable] = setting
    if words and words[0].rsplit("/", 1)[-1] in _PROGRAMS:
        prog = words.pop(0).rsplit("/", 1)[-1]
        if prog.startswith("python") and words[:1] == ["-m"]:
            words = words[2:]
        elif words[:1] == ["serve"]:
            words.pop(0)
    model: str | None = None
    options: dict[str, str | bool] = {}
    ignored: list[str] = []
    dotted: dict[str, dict[str, object]] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-":
            if model is None:
                model = word
            else:
                ignored.append(word)
            continue
        flag, eq, inline = word.partition("=")
        head, dot, keys = flag.partition(".")  # vLLM turns underscores into dashes before the first dot only
        flag = _canonical(head) + dot + keys
        if dot and _canonical(head) in DOTTED_FLAGS:
            if not eq and i >= len(words):
                raise ParseError(f"--vllm-cmd: {flag} needs a value")
            value_text = inline if eq else words[i]
            i += 0 if eq else 1
            _merge_dotted(dotted, flag, value_text)
            continue
        if flag in BOOL_FLAGS:
            name, value = BOOL_FLAGS[flag]
            options[name] = value if not eq else inline.lower() not in ("0", "false", "no")
            continue
        if flag in VALUE_FLAGS:
            if eq:
                value_text = inline
            elif i < len(words):
                value_text = words[i]
                i += 1
            else:
                raise ParseError(f"--vllm-cmd: {flag} needs a value")
            name = VALUE_FLAGS[flag]
            if name == "model":
                model = value_text
            else:
                options[name] = value_text
            continue
        # A flag kvplan does not use: keep its value out of the way.
        secret = flag in SECRET_FLAGS
        if eq or _takes_no_value(flag):
            ignored.append(word if not eq else f"{flag}={REDACTED if secret else inline}")
        elif i < len(words) and not words[i].startswith("-"):
            ignored.append(f"{flag} {REDACTED if secret else words[i]}")
            i += 1
        else:
            ignored.append(flag)
    for flag, merged in dotted.items():  # vLLM appends them as JSON after the other arguments: they win
        options[VALUE_FLAGS[flag]] = json.dumps(merged)
    return VllmCommand(model, options, tuple(ignored), env)


def _merge_dotted(dotted: dict[str, dict[str, object]], flag: str, value_text: str) -> None:
    """One `--flag.key[.key…] value`: the value as JSON when it is JSON, else the text."""
    name, *keys = flag.split(".")
    try:
        value: object = json.loads(value_text)
    except json.JSONDecodeError:
        value = value_text
    node = dotted.setdefault(name, {})
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value
