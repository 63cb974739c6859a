"""Read a pasted `vllm serve MODEL --flag …` command line into kvplan settings.

Pure: a string in, a `VllmCommand` out. Flag names and aliases follow vLLM's CLI
(vllm/engine/arg_utils.py:EngineArgs.add_cli_args): `--flag value`, `--flag=value`, underscores or
dashes, `-tp`/`-pp`/`-dp` short forms, `--no-…` negations. Flags that do not change the KV-cache
plan are ignored and reported back, so the caller can say so on stderr.
"""

from __future__ import annotations

import json
import shlex
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
    "--data-parallel-size": "data_parallel_size",
    "--hf-overrides": "hf_overrides",
    "--compilation-config": "compilation_config",
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


@dataclass(frozen=True)
class VllmCommand:
    """What a pasted vLLM command says about the deployment."""

    model: str | None
    options: dict[str, str | bool] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # flags (with values) that do not change the KV plan


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
    # Skip environment assignments and the program / sub-command.
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
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
    return VllmCommand(model, options, tuple(ignored))


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
