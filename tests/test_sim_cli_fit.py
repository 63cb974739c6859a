"""`kvplan simulate prefix|serve --model M --gpu G [fit flags]`: pool, limits and step times from a deployment."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.hardware import roofline as rl
from kvplan.hardware.gpus import get_gpu
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from tests.conftest import load_fixture

runner = CliRunner()
CONFIGS = Path(__file__).parent / "fixtures" / "configs"
QWEN_15B = str(CONFIGS / "Qwen--Qwen2.5-1.5B")
LLAMA_8B = str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B")
# The starting document's pool: 'GPU KV cache size: 21,520 tokens' = 1,345 blocks of 16 tokens; one
# Qwen2.5-1.5B block is 28 layers × 2 KV heads × 128 × (K, V) × 2 bytes × 16 tokens = 458,752 bytes.
DOC_KV_BYTES = 1345 * 458_752
DOC_WORKLOAD = ["simulate", "prefix", "--scenario", "cyclic", "--docs", "10", "--doc-tokens", "5033"]
DOC_DEPLOYMENT = ["--model", QWEN_15B, "--gpu", "l4", "--kv-cache-memory-bytes", str(DOC_KV_BYTES),
                  "--max-model-len", "8192", "--max-num-seqs", "4", "--max-num-batched-tokens", "2048"]


def run_json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.stdout
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


# --- prefix ---------------------------------------------------------------------------------------


def test_document_scenario_sized_by_fit_equals_the_logged_pool() -> None:
    fitted = run_json([*DOC_WORKLOAD, *DOC_DEPLOYMENT])
    given = run_json([*DOC_WORKLOAD, "--num-gpu-blocks", "1345"])
    assert fitted["deployment"]["num_gpu_blocks"] == fitted["num_gpu_blocks"] == 1345
    assert fitted["deployment"]["kv_cache_tokens"] == 21_520
    assert [p["hit_tokens"] for p in fitted["passes"]] == [0, 0, 21_488]
    assert fitted["passes"] == given["passes"] and fitted["no_eviction"] == given["no_eviction"]
    assert given["deployment"] is None


def test_prefix_with_fit_reads_kv_bytes_per_token_for_the_cpu_tier() -> None:
    data = run_json([*DOC_WORKLOAD, *DOC_DEPLOYMENT, "--cpu-offload-bytes", "2GiB"])
    assert data["offload"]["cpu_offload_tokens"] == 2**31 // 28_672


def test_prefix_human_output_says_where_the_pool_came_from() -> None:
    result = runner.invoke(app, [*DOC_WORKLOAD, *DOC_DEPLOYMENT], catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert "Deployment (kvplan fit): " in result.stdout
    assert "num_gpu_blocks 1,345 × 16 tokens, 'GPU KV cache size: 21,520 tokens'" in result.stdout
    assert "Pool mapping: one KV-cache group: the simulator's pool is vLLM's 1,345 blocks" in result.stdout


def test_documents_longer_than_max_model_len_are_refused_as_vllm_does() -> None:
    err = one_line_error([*DOC_WORKLOAD, *DOC_DEPLOYMENT[:-6], "--max-model-len", "4096"])
    assert "request 0: prompt + output = 5,034 tokens exceeds max_model_len 4,096" in err


# --- pool sources ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["prefix", "serve"])
def test_pool_sources_are_exclusive(command: str) -> None:
    base = ["simulate", command]
    assert "--model and --gpu go together" in one_line_error([*base, "--model", QWEN_15B])
    assert "not several" in one_line_error([*base, "--model", QWEN_15B, "--gpu", "l4", "--num-gpu-blocks", "1345"])
    assert "not several" in one_line_error([*base, "--model", QWEN_15B, "--gpu", "l4", "--kv-tokens", "21520"])
    assert one_line_error(base).startswith("Error: give the pool size as one of --num-gpu-blocks, --kv-tokens, or "
                                           "--model with --gpu")
    stray = one_line_error([*base, "--num-gpu-blocks", "1345", "--kv-cache-dtype", "fp8"])
    assert "--kv-cache-dtype describes a deployment: it needs --model and --gpu" in stray


def test_models_the_simulator_cannot_represent_are_refused() -> None:
    err = one_line_error(["simulate", "serve", "--model", str(CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Instruct"),
                          "--gpu", "h100", "-tp", "4"])
    assert "Mamba/linear-attention state" in err and "--num-gpu-blocks" in err


def test_a_deployment_that_does_not_start_is_refused_with_vllms_message() -> None:
    err = one_line_error(["simulate", "serve", "--model", LLAMA_8B, "--gpu", "l4"])
    assert "vLLM would not start" in err and "max seq len (131072)" in err


# --- serve: pool and limits from fit --------------------------------------------------------------


LLAMA_L4 = ["simulate", "serve", "--model", LLAMA_8B, "--gpu", "l4", "--max-model-len", "8192"]
# 13 requests of 1,000 prompt + 1,000 output tokens, all at t = 0: each ends holding the KV of 1,999 tokens,
# cdiv(1,999, 16) = 125 blocks, so all 13 together need 1,625 blocks.
BURST = ["--num-requests", "13", "--prompt-len", "1000", "--output-len", "1000"]
BURST_BLOCKS = 13 * -(-1999 // 16)


def _blocks(**settings: Any) -> int:
    fit = plan_fit(load_fixture("meta-llama--Meta-Llama-3.1-8B"), get_gpu("l4"),
                   ServeSettings.of(max_model_len=8192, **settings), advise=False)
    return fit.cache.num_gpu_blocks


def test_serve_takes_pool_block_size_and_vllm_limits_from_fit() -> None:
    data = run_json([*LLAMA_L4, "--gpu-memory-utilization", "0.85", *BURST])
    dep, config = data["deployment"], data["config"]
    assert config["num_gpu_blocks"] == dep["num_gpu_blocks"] == _blocks(gpu_memory_utilization=0.85)
    assert config["block_size"] == dep["block_size"] == 16
    # vLLM's defaults for a GPU under 70 GiB (engine/arg_utils.py:get_batch_defaults): 256 and 2,048.
    assert (config["max_num_seqs"], config["max_num_batched_tokens"], config["max_model_len"]) == (256, 2048, 8192)
    given = run_json([*LLAMA_L4, "--gpu-memory-utilization", "0.85", "--max-num-seqs", "8",
                      "--max-num-batched-tokens", "4K", "--num-requests", "2"])["config"]
    assert (given["max_num_seqs"], given["max_num_batched_tokens"]) == (8, 4096)


def test_preemption_follows_fits_block_arithmetic_and_goes_with_more_memory_or_fp8() -> None:
    low, high = _blocks(gpu_memory_utilization=0.85), _blocks(gpu_memory_utilization=0.91)
    fp8 = _blocks(gpu_memory_utilization=0.85, kv_cache_dtype="fp8")
    # The burst outgrows the usable blocks at 0.85 and fits at 0.91 or with FP8 (half the bytes per block); 0.90's
    # 1,571 blocks stopped holding it when MRV2_UNSEEN_BYTES went from 0.40 to 0.53 GiB (memory/activation.py).
    assert low - 1 < BURST_BLOCKS <= min(high, fp8) - 1
    preempted = run_json([*LLAMA_L4, "--gpu-memory-utilization", "0.85", *BURST])
    assert preempted["num_preemptions"] > 0 and preempted["kv_cache_usage_perc"]["blocks_used_max"] > 0
    assert run_json([*LLAMA_L4, "--gpu-memory-utilization", "0.91", *BURST])["num_preemptions"] == 0
    fp8_run = run_json([*LLAMA_L4, "--gpu-memory-utilization", "0.85", "--kv-cache-dtype", "fp8", *BURST])
    assert fp8_run["deployment"]["num_gpu_blocks"] == fp8 and fp8_run["num_preemptions"] == 0


def test_serve_human_output_shows_the_deployment_and_the_roofline() -> None:
    result = runner.invoke(app, [*LLAMA_L4, "--gpu-memory-utilization", "0.85", *BURST], catch_exceptions=False,
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert "max_num_seqs 256 [default" in result.stdout
    _, roof = rl.deployment_roofline(load_fixture("meta-llama--Meta-Llama-3.1-8B"), get_gpu("l4"))
    assert "Step cost: roofline of " in result.stdout
    assert f"bf16 matmuls at {roof.compute_efficiency:.0%} of 121 TFLOP/s" in result.stdout
    assert "num_preemptions: 0." not in result.stdout


def test_hybrid_mapping_is_said_plainly() -> None:
    result = runner.invoke(app, ["simulate", "serve", "--model", str(CONFIGS / "openai--gpt-oss-20b"), "--gpu",
                                 "h100", "--max-model-len", "8192", "--num-requests", "4", "--output-len", "4"],
                           catch_exceptions=False, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.stderr
    assert "2 KV-cache groups share vLLM's" in result.stdout
    assert "optimistic by up to 513 blocks per running request" in result.stdout


# --- serve: step times ----------------------------------------------------------------------------


def test_lone_request_ttft_is_the_roofline_prefill_step() -> None:
    data = run_json(["simulate", "serve", "--model", QWEN_15B, "--gpu", "h100", "--max-model-len", "8192",
                     "--num-requests", "1", "--prompt-len", "2048", "--output-len", "1"])
    assert data["cost_model"] == "roofline"
    assert data["cost_model_params"]["peak_flops"] == 989.4e12
    assert data["deployment"]["compute_dtype"] == "bf16"
    gpu = get_gpu("h100")
    costs, roof = rl.deployment_roofline(load_fixture("Qwen--Qwen2.5-1.5B"), gpu)
    prefill = rl.RooflineCost(costs, roof).step_time(2048, 0, 0)
    assert data["time_to_first_token_seconds"]["max"] == prefill
    # By hand (tests/test_sim_fit.py): (2 × 1,543,626,752 × 2,048 + 2,098,176 causal pairs × 172,032) FLOPs
    # at the speed model's share of 989.4 TFLOP/s, plus its overheads of one step of 28 layers.
    assert roof.overheads is not None
    overhead = roof.overheads.time_s(layers=28, moe_layers=0, all_reduces=0)
    assert prefill == pytest.approx((2 * 1_543_626_752 * 2048 + 2_098_176 * 172_032)
                                    / (989.4e12 * roof.compute_efficiency) + overhead, rel=1e-12)


def test_efficiencies_tune_the_roofline() -> None:
    base = ["simulate", "serve", "--model", QWEN_15B, "--gpu", "h100", "--max-model-len", "8192", "--num-requests",
            "1", "--prompt-len", "2048", "--output-len", "1"]
    half = run_json([*base, "--compute-efficiency", "0.38"])
    full = run_json(base)
    assert half["cost_model_params"]["compute_efficiency"] == 0.38
    # The compute-bound prefill's roof scales with the efficiency; the per-step overheads do not.
    overhead = full["cost_model_params"]["step_overhead_s"] + 28 * full["cost_model_params"]["layer_overhead_s"]
    roof_s = full["time_to_first_token_seconds"]["max"] - overhead
    scale = full["cost_model_params"]["compute_efficiency"] / 0.38
    assert half["time_to_first_token_seconds"]["max"] == pytest.approx(scale * roof_s + overhead)


def test_fixed_cost_flags_replace_the_roofline() -> None:
    base = ["simulate", "serve", "--model", QWEN_15B, "--gpu", "h100", "--max-model-len", "8192", "--num-requests",
            "1", "--prompt-len", "2048", "--output-len", "1"]
    data = run_json([*base, "--step-ms", "10", "--ms-per-token", "0", "--ms-per-context-ktok", "0"])
    assert data["cost_model"] == "FixedCost" and data["deployment"]["num_gpu_blocks"] > 0
    assert data["time_to_first_token_seconds"]["max"] == pytest.approx(0.010)
    assert "which --step-ms" in one_line_error([*base, "--step-ms", "10", "--compute-efficiency", "0.5"])
