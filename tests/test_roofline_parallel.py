"""Data and expert parallelism in the roofline (kvplan/hardware/roofline.py) and `kvplan roofline`'s deployment
flags: experts spread whole over TP × DP ranks, every rank's tokens through each MoE layer, the collectives that
replace the MoE all-reduce, and the DeepSeek-R1 attention-DP deployment that ran 1,024 requests on 8 × H200."""
from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.hardware import model_costs as mc
from kvplan.model.hub import load_model
from kvplan.model.weights import (
    count_parameters,
    expert_parallel_bytes_saved,
    routed_expert_bytes,
    stored_weights_bytes,
    weights_bytes_per_gpu,
)
from tests.conftest import CONFIGS

runner = CliRunner()
R1 = CONFIGS.parent / "corpus" / "configs" / "deepseek-ai--DeepSeek-R1"


def roofline_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["roofline", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_expert_parallel_keeps_an_eighth_of_the_experts_whole_on_each_gpu() -> None:
    model = load_model(str(R1))
    costs = mc.model_costs(model, tp=1, dp=8, expert_parallel=True)
    assert (costs.ep, costs.dp, costs.local_experts) == (8, 8, 256 // 8)
    # One routed expert of DeepSeek-R1: gate, up and down projections of 7,168 × 2,048, FP8 (1 byte each).
    assert costs.expert_bytes == 3 * 7168 * 2048
    experts = routed_expert_bytes(model)
    assert expert_parallel_bytes_saved(model, tp=1, ep=8) == experts - experts // 8
    assert costs.weight_bytes == weights_bytes_per_gpu(model, tp=1) - (experts - experts // 8)


def test_mla_down_projections_are_whole_on_every_tp_rank() -> None:
    model = load_model(str(R1))
    # vLLM deepseek_v2.py: fused_qkv_a_proj (disable_tp=True), 7,168 × (1,536 + 512 + 64), in all 61 MLA layers.
    assert mc.mla_replicated_params(model) == 61 * 7168 * (1536 + 512 + 64) == 923_467_776
    one, eight = mc.model_costs(model, tp=1), mc.model_costs(model, tp=8)
    extra = 923_467_776 * 7 // 8
    assert eight.matmul_params_per_token == one.matmul_params_per_token // 8 + extra
    # The replicated share at the checkpoint's mean stored bytes per parameter (~1: FP8).
    per_param = stored_weights_bytes(model) / count_parameters(model).total
    assert eight.weight_bytes == weights_bytes_per_gpu(model, tp=8) + round(extra * per_param)
    assert mc.model_costs(load_model(str(CONFIGS / "Qwen--Qwen2.5-7B")), tp=4).weight_bytes == weights_bytes_per_gpu(
        load_model(str(CONFIGS / "Qwen--Qwen2.5-7B")), tp=4)


def test_every_dp_rank_s_tokens_reach_each_moe_layer() -> None:
    costs = mc.model_costs(load_model(str(R1)), tp=1, dp=8, expert_parallel=True)
    # One request per rank: each MoE layer serves 8 tokens, each expert hit with probability 1 − (1 − 8/256)^8.
    missed = 32 * (1 - 8 / 256) ** 8
    expected = costs.weight_bytes - costs.unread_weight_bytes - round(missed * costs.expert_bytes * 58)
    assert mc.weight_bytes_read(costs, 1) == expected
    no_dp = mc.model_costs(load_model(str(R1)), tp=8, expert_parallel=True)
    assert no_dp.moe_tokens(1) == 1 and costs.moe_tokens(1) == 8


def test_the_moe_all_reduce_becomes_an_all_gather_and_a_reduce_scatter_under_dp_attention() -> None:
    model = load_model(str(R1))
    # 61 layers: an all-reduce after each attention, after each of the 3 dense MLPs and each of the 58 MoE blocks.
    assert mc.collectives(mc.model_costs(model, tp=8)) == (2 * 61, 0)
    assert mc.collectives(mc.model_costs(model, tp=8, expert_parallel=True)) == (2 * 61, 0)
    dp = mc.model_costs(model, tp=1, dp=8, expert_parallel=True)
    assert mc.collectives(dp) == (0, 2 * 58)
    step = mc.step_cost(dp, decode_reqs=1, decode_context=100)
    # Each gathers 8 ranks' hidden states (7,168 × 2 bytes each) and receives 7/8 of them from the others.
    assert step.gather_bytes == round(2 * 58 * 8 * 7168 * 2 * 7 / 8) and step.all_reduces == 116


def test_dp_attention_holds_the_requests_the_engine_ran_per_rank() -> None:
    """TensorRT-LLM's DeepSeek-R1 max-throughput run on 8 × H200 (tests/fixtures/data/roofline-measured.yaml,
    trtllm-dsr1-fp8-h200-tp8-ep8-adp-c1024) kept 1,024 requests of 1,024 + 2,048 tokens running, 128 per
    attention-DP rank. Under vLLM's -dp 8 --enable-expert-parallel each rank holds its own requests' latent;
    at TP 8 the latent is replicated on all 8 GPUs and the cache holds fewer than the 1,024.
    At TP 1 vLLM also keeps kv_b_proj dequantized (mla_attention.py:MLAAttention.process_weights_after_loading:
    61 × 512 × 128 heads × 256 × 2 B = 1.91 GiB a GPU), so at the default utilization a rank holds 122 such
    requests (132 before the copy was counted) and needs --gpu-memory-utilization 0.95 for the engine's 128."""
    default = roofline_json(str(R1), "--gpu", "h200", "-dp", "8", "--enable-expert-parallel", "--context", "3072",
                            "--batch", "128")
    assert default["kv_capacity_batch"] == 122
    dp = roofline_json(str(R1), "--gpu", "h200", "-dp", "8", "--enable-expert-parallel", "--context", "3072",
                       "--batch", "128", "--gpu-memory-utilization", "0.95")
    assert (dp["dp"], dp["ep"]) == (8, 8)
    assert dp["kv_capacity_batch"] >= 128 and dp["batches"][0]["fits_kv_cache"]
    tp = roofline_json(str(R1), "--gpu", "h200", "-tp", "8", "--context", "3072", "--batch", "128")
    assert tp["kv_capacity_batch"] < 1024 <= 8 * dp["kv_capacity_batch"]


def test_a_pasted_vllm_serve_line_plans_the_same_deployment_as_the_flags() -> None:
    qwen = str(CONFIGS / "Qwen--Qwen2.5-7B")
    flags = roofline_json(qwen, "--gpu", "h100", "-tp", "2", "--kv-cache-dtype", "fp8", "--batch", "1,8")
    pasted = roofline_json("--gpu", "h100", "--vllm-cmd", f"vllm serve {qwen} -tp 2 --kv-cache-dtype fp8",
                           "--batch", "1,8")
    assert pasted == flags
    assert flags["tp"] == 2 and flags["kv_bytes_per_token"] == 28 * 2 * 2 * 128  # 4 KV heads ÷ 2 ranks, fp8
    # A flag given beside the pasted line wins over it.
    mixed = roofline_json("-tp", "1", "--gpu", "h100", "--vllm-cmd", f"vllm serve {qwen} -tp 2", "--batch", "1")
    assert mixed["tp"] == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu", "h100", "-dp", "0"], "data-parallel"),
    (["--vllm-cmd", "vllm serve"], "--gpu is needed"),
])
def test_bad_deployments_exit_2_with_one_error_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["roofline", str(CONFIGS / "Qwen--Qwen2.5-7B"), *args])
    assert result.exit_code == 2, result.stdout
    assert result.stderr.startswith("Error: ") and message in result.stderr


def test_fit_plans_each_attention_dp_rank_its_own_kv_pool_for_the_requests_the_engine_ran() -> None:
    """The same TensorRT-LLM DeepSeek-R1 run (1,024 requests of 1,024 + 2,048 tokens on 8 × H200, 128 per rank) as
    `kvplan fit` plans it: under -dp 8 --enable-expert-parallel every rank's pool holds its 128; at TP 8 the one
    replicated-latent pool holds fewer than the 1,024 the engine ran. With vLLM's dequantized kv_b_proj copy
    counted (1.91 GiB a GPU at TP 1, see above) the default utilization holds 122.8 of the 128; 0.95 holds them."""
    def fit_json(*args: str) -> dict[str, Any]:
        result = runner.invoke(app, ["fit", str(R1), "--gpu", "h200", "--max-model-len", "3072", *args, "--json"],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    assert 122 < fit_json("-dp", "8", "--enable-expert-parallel")["scheduler"]["max_concurrency"] < 123
    dp = fit_json("-dp", "8", "--enable-expert-parallel", "--gpu-memory-utilization", "0.95")
    assert (dp["deployment"]["tp"], dp["deployment"]["num_gpus"]) == (1, 8)
    assert dp["scheduler"]["max_concurrency"] >= 128
    tp = fit_json("-tp", "8")
    assert tp["scheduler"]["max_concurrency"] < 1024 <= 8 * dp["scheduler"]["max_concurrency"]
