"""Parsing a pasted `vllm serve …` command line (kvplan/vllm/command_line.py)."""
from __future__ import annotations

import pytest

from kvplan.errors import ParseError
from kvplan.vllm.command_line import parse_vllm_command


def test_serve_command_with_short_and_long_flags() -> None:
    c = parse_vllm_command("vllm serve Qwen/Qwen2.5-7B --max-model-len 32768 -tp 2 --gpu-memory-utilization=0.95")
    assert c.model == "Qwen/Qwen2.5-7B"
    assert c.options == {"max_model_len": "32768", "tensor_parallel_size": "2", "gpu_memory_utilization": "0.95"}
    assert c.ignored == ()


def test_underscores_aliases_booleans_and_unknown_flags() -> None:
    c = parse_vllm_command(
        "CUDA_VISIBLE_DEVICES=0,1 vllm serve --trust-remote-code meta-llama/Llama-3.1-8B "
        "--max_num_seqs 64 --device-memory-utilization 0.8 --enforce-eager --no-enable-prefix-caching "
        "--port 8000 --served-model-name llama --kv-cache-memory=20G --quantization fp8 -dp 2")
    assert c.model == "meta-llama/Llama-3.1-8B"
    assert c.options == {"trust_remote_code": True, "max_num_seqs": "64", "gpu_memory_utilization": "0.8",
                         "enforce_eager": True, "enable_prefix_caching": False, "kv_cache_memory_bytes": "20G",
                         "quantization": "fp8", "data_parallel_size": "2"}
    assert c.ignored == ("--port 8000", "--served-model-name llama")


def test_big_deployment_flags_are_read() -> None:
    c = parse_vllm_command("vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dcp 2 --enable-expert-parallel "
                           "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}' "
                           "--hf-overrides '{\"max_position_embeddings\": 131072}'")
    assert c.options == {"tensor_parallel_size": "8", "decode_context_parallel_size": "2",
                         "enable_expert_parallel": True,
                         "speculative_config": '{"method": "mtp", "num_speculative_tokens": 1}',
                         "hf_overrides": '{"max_position_embeddings": 131072}'}
    assert c.ignored == ()


def test_python_module_entry_point_and_line_continuations() -> None:
    c = parse_vllm_command("python -m vllm.entrypoints.openai.api_server \\\n  --model mistralai/Mistral-7B-v0.1 \\\n"
                           "  --block-size 32 --kv-cache-dtype fp8")
    assert c.model == "mistralai/Mistral-7B-v0.1"
    assert c.options == {"block_size": "32", "kv_cache_dtype": "fp8"}


def test_bare_model_and_flags_without_the_program() -> None:
    c = parse_vllm_command("./models/qwen --pipeline-parallel-size 2")
    assert (c.model, c.options) == ("./models/qwen", {"pipeline_parallel_size": "2"})


@pytest.mark.parametrize("text", ['vllm serve "unterminated', "vllm serve m --max-model-len"])
def test_malformed_command_lines(text: str) -> None:
    with pytest.raises(ParseError):
        parse_vllm_command(text)
