"""`kvplan diagnose URL --plan MODEL --gpu …`: the server's cache_config_info (num_gpu_blocks, block_size,
gpu_memory_utilization, cache_dtype) against kvplan's prediction for MODEL with those settings, over a real
HTTP server on 127.0.0.1 serving vLLM-like expositions."""
from __future__ import annotations

from typing import Any

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.observe.diagnose import PlanComparison, plan_diagnosis, plan_settings
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.memory.activation import MRV2_UNSEEN_BYTES
from kvplan.vllm.settings import ServeSettings
from tests import test_diagnose_cli
from tests.conftest import CONFIGS, load_fixture
from tests.fixtures.metrics.exposition import DEFAULT_CACHE_CONFIG, EngineState, exposition
from tests.test_diagnose_cli import MetricsServer, run, run_json

QWEN7B = str(CONFIGS / "Qwen--Qwen2.5-7B")
# Qwen2.5-7B on an H100 at util 0.9 (vLLM 0.33 rules), kvplan's estimates (kvplan/vllm/memory/):
REQUESTED = 76_526_653_539  # ceil(85,029,615,043 × 0.9)
# Loaded weights: 7,615,616,512 parameters × 2 B (bf16) plus the rotary cos/sin cache vLLM builds at init,
# max_position_embeddings 131,072 × head 128 × 2 B = 32 MiB. The vocabulary (152,064 = 2,376 × 64) needs
# no padding to 64 rows.
WEIGHTS = 7_615_616_512 * 2 + 131_072 * 128 * 2
# Activation: Model Runner V2's profile run as ported from 0.33 (memory/activation.py): the warmup sampler pass over
# 1024 rows (max_num_seqs, H100 default) × 152,064 vocab × 14 B + FlashInfer's 1 MiB, on the 8192 retained hidden
# states and 1024 logits rows × 3584 × 2 B, plus MRV2_UNSEEN_BYTES; Model Runner V2's penalty state
# (1024 × 152,064 × 4.125 B) goes with the non-torch memory;
# non-torch 0.13 GiB (one GPU); CUDA graphs: vLLM's estimate extrapolates 50 + 50 of the 51 piecewise + 51 full
# graphs at 6 MiB each on a 64 MiB first capture (memory/cuda_graphs.py; tests/fixtures/data/cuda-graph-estimates.yaml).
ACTIVATION = (8192 + 1024) * 3584 * 2 + 1024 * 152_064 * 14 + 2**20 + MRV2_UNSEEN_BYTES
NON_TORCH = round(0.13 * 2**30) + int(1024 * 152_064 * (4 + 4 / 32))  # + Model Runner V2's penalty state
CUDA_GRAPHS = 64 * 2**20 + (50 + 50) * 6 * 2**20
PREDICTED_AVAILABLE = REQUESTED - WEIGHTS - ACTIVATION - NON_TORCH - CUDA_GRAPHS  # 56,967,525,312
# A bf16 block is 28 layers × 16 tokens × (K, V) × 4 KV heads × 128 × 2 B = 917,504 B.
BLOCK_BYTES = 917_504
PREDICTED_BLOCKS = PREDICTED_AVAILABLE // BLOCK_BYTES  # 62,089

server = test_diagnose_cli.server  # the same 127.0.0.1 metrics-server fixture


def serve_blocks(server: MetricsServer, blocks: int, **cache: str) -> str:
    config = {**DEFAULT_CACHE_CONFIG, "num_gpu_blocks": str(blocks), **cache}
    return server.serve(exposition(EngineState(running=3, kv_usage=0.2, cache_config=config)))


def plan_finding(data: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = [d for d in data["diagnoses"] if d["code"].startswith("plan_")]
    assert len(found) == 1
    return found[0]


def test_prediction_pinned() -> None:
    report = plan_fit(load_fixture("Qwen--Qwen2.5-7B"), get_gpu("h100"),
                      ServeSettings.of(gpu_memory_utilization=0.9, block_size=16), advise=False)
    m = report.memory
    assert (m.weights_bytes, m.activation_bytes, m.non_torch_bytes, m.cuda_graph_bytes) == (
        WEIGHTS, ACTIVATION, NON_TORCH, CUDA_GRAPHS) == (15_264_787_456, 2_816_181_534, 781_904_773, 696_254_464)
    assert (report.memory.available_kv_bytes, report.cache.bytes_per_block) == (PREDICTED_AVAILABLE, BLOCK_BYTES)
    assert PREDICTED_AVAILABLE == 56_967_525_312
    assert report.cache.num_gpu_blocks == PREDICTED_BLOCKS == 62_089


def test_server_with_the_predicted_blocks_matches(server: MetricsServer) -> None:
    url = serve_blocks(server, PREDICTED_BLOCKS)
    data = run_json(url, "--plan", QWEN7B, "--gpu", "h100")
    finding = plan_finding(data)
    assert (finding["code"], finding["severity"]) == ("plan_matches", "info")
    assert (finding["model_name"], finding["engine"]) == ("Qwen/Qwen2.5-7B", "0")
    assert finding["evidence"]["observed_tokens"] == finding["evidence"]["predicted_tokens"] == 62_089 * 16
    assert finding["evidence"]["relative_difference"] == 0
    [plan] = data["plan"]
    assert (plan["observed_num_gpu_blocks"], plan["predicted_num_gpu_blocks"], plan["predicted_block_size"]) == (
        62_089, 62_089, 16)
    # the settings the plan took from the server's cache_config_info
    assert plan["settings"] == {"gpu_memory_utilization": "0.9", "cache_dtype": "auto", "block_size": "16",
                                "enable_prefix_caching": "True"}
    assert [d["code"] for d in data["diagnoses"]] == ["healthy", "plan_matches"]


def test_server_with_20_percent_fewer_blocks_is_a_mismatch(server: MetricsServer) -> None:
    observed = PREDICTED_BLOCKS * 8 // 10  # 49,671
    url = serve_blocks(server, observed)
    data = run_json(url, "--plan", QWEN7B, "--gpu", "h100")
    finding = plan_finding(data)
    assert (finding["code"], finding["severity"]) == ("plan_mismatch", "warning")
    ev = finding["evidence"]
    assert (ev["observed_num_gpu_blocks"], ev["predicted_num_gpu_blocks"]) == (49_671, 62_089)
    assert (ev["observed_tokens"], ev["predicted_tokens"]) == (49_671 * 16, 62_089 * 16)
    assert ev["relative_difference"] == pytest.approx((49_671 - 62_089) / 49_671)  # -25.0% of the server's
    assert "-25.0% of the server's" in finding["message"] and "beyond 2%" in finding["message"]
    assert any("kvplan calibrate" in a for a in finding["actions"])
    text = " ".join(run(url, "--plan", QWEN7B, "--gpu", "h100").stdout.split())
    assert "WARNING plan_mismatch: server: 49,671 blocks × 16 = 794,736 tokens; plan: 62,089 × 16 = 993,424" in text


def test_the_servers_cache_settings_drive_the_prediction(server: MetricsServer) -> None:
    # fp8 KV halves the block (458,752 B): twice the blocks from the same memory.
    url = serve_blocks(server, 2 * PREDICTED_BLOCKS, cache_dtype="fp8")
    data = run_json(url, "--plan", QWEN7B, "--gpu", "h100", "--kv-cache-dtype", "auto")
    assert data["plan"][0]["predicted_num_gpu_blocks"] == PREDICTED_AVAILABLE // (BLOCK_BYTES // 2) == 124_179
    assert plan_finding(data)["code"] == "plan_matches"
    # utilization 0.5 on the server: 0.4 × total (34 GB) less KV, far fewer blocks than at 0.9.
    url = serve_blocks(server, PREDICTED_BLOCKS, gpu_memory_utilization="0.5")
    data = run_json(url, "--plan", QWEN7B, "--gpu", "h100")
    assert data["plan"][0]["predicted_num_gpu_blocks"] < PREDICTED_BLOCKS // 2
    assert plan_finding(data)["code"] == "plan_mismatch"


def test_fits_flags_reach_the_prediction(server: MetricsServer) -> None:
    # A measured activation 1 GiB larger than kvplan's estimate leaves exactly 1 GiB less for KV.
    base = plan_fit(load_fixture("Qwen--Qwen2.5-7B"), get_gpu("h100"),
                    ServeSettings.of(gpu_memory_utilization=0.9, block_size=16), advise=False)
    activation = base.memory.activation_bytes + 2**30
    url = serve_blocks(server, PREDICTED_BLOCKS)
    data = run_json(url, "--plan", QWEN7B, "--gpu", "h100", "--activation-memory", str(activation))
    assert data["plan"][0]["predicted_num_gpu_blocks"] == (PREDICTED_AVAILABLE - 2**30) // BLOCK_BYTES


@pytest.mark.parametrize(("args", "words"), [
    (("--plan", QWEN7B), "--plan needs the server's GPU"),
    (("--gpu", "h100"), "--gpu only applies with --plan"),
    (("--max-model-len", "4096"), "--max-model-len only applies with --plan"),
    (("--plan", QWEN7B, "--gpu", "no-such-gpu"), "unknown GPU"),
])
def test_plan_usage_errors(server: MetricsServer, args: tuple[str, ...], words: str) -> None:
    result = run(serve_blocks(server, PREDICTED_BLOCKS), *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_plan_settings_and_diagnosis_are_pure() -> None:
    settings, used = plan_settings({"gpu_memory_utilization": "0.85", "cache_dtype": "fp8", "block_size": "32",
                                    "enable_prefix_caching": "False", "kv_cache_memory_bytes": "None"},
                                   ServeSettings.of(tp=2))
    cache = settings.cache_config
    assert (settings.parallel_config.tensor_parallel_size, cache.gpu_memory_utilization, cache.kv_cache_dtype) == (
        2, 0.85, "fp8")
    assert (cache.block_size, cache.enable_prefix_caching, cache.kv_cache_memory_bytes) == (32, False, None)
    assert "kv_cache_memory_bytes" not in used
    c = PlanComparison(100, 16, 90, 32, 1600, 2880, -1280, -0.8)
    d = plan_diagnosis(c, "m", "0")
    assert (d.code, d.severity) == ("plan_mismatch", "warning")
    assert any("--block-size" in a for a in d.actions)
