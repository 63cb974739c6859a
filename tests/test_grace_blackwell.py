"""Grace-Blackwell parts: GB200 / GB300 in NVL72 racks and DGX Spark (GB10) — fits from their catalog
figures, their node shapes, and how the "which GPUs to rent" sweep lays TP out on them."""
from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.hardware.gpus import GPUS_FILE_ENV, get_gpu
from kvplan.hardware.nodes import PCIE_SERVER, node_shape
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from kvplan.vllm.sweep import _layouts, sweep_gpus
from tests.conftest import load_fixture

QWEN_7B_BLOCK_BYTES = 28 * 16 * 4 * 128 * 2 * 2  # layers × block × KV heads × head size × (K, V) × bf16


@pytest.fixture(autouse=True)
def _no_env_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GPUS_FILE_ENV, raising=False)


# --------------------------------------------------------------------------- fits from the figures


@pytest.mark.parametrize(("gpu_id", "requested"), [
    ("gb200", 182_069_247_135),  # ceil(184.31 GiB × 0.92)
    ("gb300", 273_138_445_190),  # ceil(276.50 GiB × 0.92)
])
def test_nvl72_fit_is_the_b200_budget_on_a_larger_total(gpu_id: str, requested: int) -> None:
    model, settings = load_fixture("Qwen--Qwen2.5-7B"), ServeSettings.of(max_model_len=32768)
    gpu = get_gpu(gpu_id)
    r, b200 = plan_fit(model, gpu, settings), plan_fit(model, get_gpu("b200"), settings)
    assert r.memory.requested_bytes == math.ceil(gpu.cuda_total_bytes * 0.92) == requested
    # Same SM100-family rules as B200: every term but the total is the same.
    terms = ("weights_bytes", "activation_bytes", "cuda_graph_bytes", "non_torch_bytes")
    assert [getattr(r.memory, t) for t in terms] == [getattr(b200.memory, t) for t in terms]
    assert r.memory.available_kv_bytes == requested - sum(getattr(r.memory, t) for t in terms)
    # So the KV memory grows by exactly the larger total × 0.92 (B200: ceil(178.35 GiB × 0.92)).
    assert b200.memory.requested_bytes == 176_181_705_966
    assert r.memory.available_kv_bytes - b200.memory.available_kv_bytes == requested - 176_181_705_966
    assert r.cache.bytes_per_block == QWEN_7B_BLOCK_BYTES == 917_504
    assert r.cache.num_gpu_blocks == r.memory.available_kv_bytes // 917_504
    assert r.cache.kv_cache_tokens == r.cache.num_gpu_blocks * 16
    assert (r.deployment.attention_backend, r.cache.block_size) == ("FLASHINFER", 16)
    assert (r.scheduler.max_num_seqs, r.scheduler.max_num_batched_tokens) == (1024, 16384)  # NVML ≥ 160 GiB tier
    assert r.verdict.fits and r.verdict.startup == "ok"


def test_dgx_spark_fit_uses_the_unified_total_and_vllms_small_gb10_tier() -> None:
    model = load_fixture("Qwen--Qwen2.5-7B")
    gpu = get_gpu("dgx-spark")
    r = plan_fit(model, gpu, ServeSettings.of(max_model_len=32768))
    assert r.deployment.gpu == "gb10" and r.memory.cuda_total_bytes == 130_599_218_053  # 121.63 GiB
    assert r.memory.requested_bytes == math.ceil(gpu.cuda_total_bytes * 0.92) == 120_151_280_609
    # 121.63 GiB is above the 70 GiB tier, but vLLM keeps cc 12.1 on the small one.
    assert (r.scheduler.max_num_seqs, r.scheduler.max_num_batched_tokens) == (256, 2048)
    # SM12x: FLASH_ATTN first (platforms/cuda.py:_get_backend_priorities), 16-token blocks.
    assert (r.deployment.attention_backend, r.cache.block_size) == ("FLASH_ATTN", 16)
    m = r.memory
    assert m.available_kv_bytes == (m.requested_bytes - m.weights_bytes - m.activation_bytes - m.cuda_graph_bytes
                                    - m.non_torch_bytes)
    assert r.cache.num_gpu_blocks == r.memory.available_kv_bytes // 917_504
    assert r.cache.kv_cache_tokens == r.cache.num_gpu_blocks * 16


def test_mla_on_each_capability_takes_vllms_backend() -> None:
    model = load_fixture("deepseek-ai--DeepSeek-V2-Lite")
    backends = {g: plan_fit(model, get_gpu(g), ServeSettings.of(max_model_len=8192))
                for g in ("gb200", "gb300", "gb10")}
    assert {g: (r.deployment.attention_backend, r.cache.block_size) for g, r in backends.items()} == {
        "gb200": ("FLASHINFER_MLA", 32), "gb300": ("FLASHINFER_MLA", 32), "gb10": ("TRITON_MLA", 16)}


def test_cli_fit_takes_the_new_gpus_by_id_alias_and_device_name() -> None:
    runner = CliRunner()
    for name, gpu_id in (("gb200", "gb200"), ("GB300 NVL72", "gb300"), ("NVIDIA GB10", "gb10")):
        result = runner.invoke(app, ["fit", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--gpu", name,
                                     "--max-model-len", "32768", "--json"])
        # DGX Spark at vLLM's default 0.92: refused, as the logged hosts' MemAvailable makes vLLM refuse (exit 1).
        assert result.exit_code == (1 if gpu_id == "gb10" else 0), result.output
        data = json.loads(result.stdout)
        assert data["deployment"]["gpu"] == gpu_id
        assert data["memory"]["cuda_total_bytes"] == get_gpu(gpu_id).cuda_total_bytes


# --------------------------------------------------------------------------- node shapes and the sweep


def test_node_shapes_of_nvl72_and_dgx_spark() -> None:
    for gpu_id in ("gb200", "gb300"):
        shape = node_shape(gpu_id)
        assert (shape.gpus_per_node, shape.tp_domain, shape.max_tp) == (4, 72, 72)
        assert "MNNVL" in shape.tp_source
    spark = node_shape("gb10")
    assert (spark.gpus_per_node, spark.max_tp) == (1, 2)
    # The other shapes keep TP inside the node.
    assert (node_shape("b200").gpus_per_node, node_shape("b200").max_tp) == (8, 8)
    assert (node_shape("gh200").max_tp, node_shape("l40s")) == (1, PCIE_SERVER)


def test_sweep_runs_tp_across_nvl72_trays_and_counts_trays_as_nodes() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-405B")
    r = sweep_gpus(model, [get_gpu("gb200"), get_gpu("b200")], ServeSettings.of(max_model_len=8192))
    rows = {row.gpu: row for row in r.rows}
    gb200, b200 = rows["gb200"], rows["b200"]
    # 756 GiB of weights need 8 GPUs: one TP group of 8 over two 4-GPU trays of one NVLink domain.
    assert (gb200.tp, gb200.pp, gb200.replicas, gb200.num_gpus, gb200.nodes, gb200.gpus_per_node) == (8, 1, 1, 8, 2, 4)
    assert (b200.tp, b200.pp, b200.num_gpus, b200.nodes, b200.gpus_per_node) == (8, 1, 8, 1, 8)
    assert gb200.command == "vllm serve meta-llama--Meta-Llama-3.1-405B -tp 8 --max-model-len 8192"
    # Same layout, larger total: more KV per GPU than on B200.
    assert gb200.available_kv_bytes > b200.available_kv_bytes and gb200.num_gpu_blocks > b200.num_gpu_blocks


def test_sweep_keeps_dgx_spark_tp_within_a_linked_pair() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-70B")
    # 0.85: what Spark users run (0.92 exceeds a host's MemAvailable, see test_memory).
    settings = ServeSettings.of(max_model_len=32768, concurrency=16, gpu_memory_utilization=0.85)
    failures: dict[str, list[str]] = {}
    layouts = _layouts(model, get_gpu("gb10"), settings, 16, node_shape("gb10"), failures)
    assert {row.tp for row in layouts} == {1, 2}  # 140 GiB of weights: never one box, never TP 4
    assert all(row.nodes == row.num_gpus for row in layouts)  # one GPU per box
    best = sweep_gpus(model, [get_gpu("gb10")], settings).rows[0]
    assert (best.tp, best.pp, best.replicas, best.num_gpus, best.nodes) == (2, 2, 1, 4, 4)
    assert best.command == ("vllm serve meta-llama--Meta-Llama-3.1-70B -tp 2 -pp 2 --max-model-len 32768 "
                            "--gpu-memory-utilization 0.85")
    assert best.requests_at_context >= 8 and best.kv_cache_tokens == best.num_gpu_blocks * 16


# --------------------------------------------------------------------------- sparse MLA on SM12x


@pytest.mark.parametrize("gpu_id", ["rtx-pro-6000", "rtx-5090", "gb10"])
def test_deepseek_sparse_attention_runs_on_sm12x_with_flashinfers_sm120_backend(gpu_id: str) -> None:
    """vLLM 0.33 platforms/cuda.py gives SM12x MLA [TRITON_MLA, FLASHINFER_MLA_SPARSE_SM120]; the sparse one
    takes DeepSeek-V3.2 (bf16, index_topk 2048), 64-token blocks, and serves the latent as fp8_ds_mla: 61 layers
    × (656 B latent + 132 B indexer key) per token."""
    from kvplan.model.hub import load_local

    model = load_local("tests/fixtures/corpus/configs/deepseek-ai--DeepSeek-V3.2")
    r = plan_fit(model, get_gpu(gpu_id), ServeSettings.of(tp=8, max_model_len=8192, kv_cache_memory_bytes=20 * 2**30),
                 advise=False)
    assert (r.deployment.attention_backend, r.cache.block_size, r.cache.kv_cache_dtype) == (
        "FLASHINFER_MLA_SPARSE_SM120", 64, "fp8_ds_mla")
    assert r.cache.bytes_per_block == 61 * (656 + 132) * 64
    assert r.cache.num_gpu_blocks == 20 * 2**30 // r.cache.bytes_per_block


def test_sm120_sparse_mla_refuses_a_float16_model_as_vllm_does() -> None:
    from kvplan.errors import NotServed
    from kvplan.model.hub import load_local

    model = load_local("tests/fixtures/corpus/configs/deepseek-ai--DeepSeek-V3.2")
    with pytest.raises(NotServed, match="FLASHINFER_MLA_SPARSE_SM120: dtype not supported"):
        plan_fit(model, get_gpu("rtx-pro-6000"), ServeSettings.of(tp=8, dtype="float16", max_model_len=8192,
                                                               kv_cache_memory_bytes=2**34), advise=False)


def test_gdn_checkpoints_align_to_flashinfers_64_tokens_on_sm90_sm10x_and_sm12x() -> None:
    """_resolve_gdn_prefill_backend (vLLM 0.33): FlashInfer's GDN prefill on SM90, and on SM10x/SM12x when
    linear_key_head_dim is 128 (CUDA 13 assumed); Triton (no alignment) elsewhere."""
    from kvplan.vllm import defaults as vd

    assert [vd.gdn_checkpoint_alignment(a) for a in ("hopper", "blackwell", "blackwell-rtx", "ada", "ampere")] == [
        64, 64, 64, 1, 1]
    assert vd.gdn_checkpoint_alignment("blackwell", head_k_dim=64) == 1
    assert vd.gdn_checkpoint_alignment("hopper", head_k_dim=64) == 64
    assert vd.prefill_checkpoint_blocks("gdn", "blackwell-rtx") == 1
