"""--kv-offloading-size: the GPU plan unchanged (vLLM 0.33's CUDA planner with `kv_offloading_size=64`,
tests/fixtures/oracle-cuda/extra/*-offload), the CPU tier as vLLM's OffloadingConnector sizes it
(v1/kv_offload/cpu/spec.py: cpu_bytes // page-aligned (bytes per block × copies)), from flags, pasted lines,
plan files and `simulate prefix`."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.vllm.offload import cpu_tier
from tests.conftest import CONFIGS

runner = CliRunner()
EXTRA = CONFIGS.parent / "oracle-cuda" / "extra"
QWEN = str(CONFIGS / "Qwen--Qwen2.5-7B")
KV20 = ["--kv-cache-memory-bytes", "21474836480", "--weights-memory", "0"]


def _fit(*args: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["fit", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("folder", "case"), [
    ("Qwen--Qwen2.5-7B", "Qwen--Qwen2.5-7B__h100-mml8192-offload"),
    ("openai--gpt-oss-20b", "openai--gpt-oss-20b__h100-mml8192-offload"),  # the hybrid manager stays on
])
def test_offloading_leaves_the_gpu_plan_as_vllm_does(folder: str, case: str) -> None:
    golden = json.loads((EXTRA / f"{case}.json").read_text())
    assert golden["request"]["engine_arg"] == ["kv_offloading_size=64"]
    r = _fit(str(CONFIGS / folder), "--gpu", "h100", "--max-model-len", "8192", *KV20, "--kv-offloading-size", "64")
    assert r["verdict"]["log_line"] == golden["plan"]["kv_cache_config"]["log_line"]
    assert r["cache"]["num_gpu_blocks"] == golden["plan"]["kv_cache_config"]["num_blocks"]


def test_the_cpu_tier_holds_what_the_offloading_connector_allocates() -> None:
    """Qwen2.5-7B: 28 layers × 16 tokens × 4 KV heads × 128 × 2 (K, V) × 2 bytes = 917,504 bytes a block (a
    multiple of the 4,096-byte page); 64 GiB hold 74,898 such chunks of 16 tokens."""
    r = _fit(QWEN, "--gpu", "h100", "--max-model-len", "8192", *KV20, "--kv-offloading-size", "64")
    assert r["cache"]["kv_offload"] == {"backend": "native", "connector": "OffloadingConnector",
                                        "cpu_bytes": 64 * 2**30, "chunk_bytes": 917_504, "num_chunks": 74_898,
                                        "tokens": 74_898 * 16}
    assert any("1,198,368 tokens in the CPU tier" in n for n in r["notes"])
    assert _fit(QWEN, "--gpu", "h100", "--max-model-len", "8192", *KV20)["cache"]["kv_offload"] is None


def test_tp_ranks_share_the_size_and_an_mla_latent_is_stored_once() -> None:
    """--kv-offloading-size is the total over the TP ranks: each chunk holds every worker's block, except for
    MLA at TP > 1 (replicated_layout: every rank has the same latent)."""
    tp2 = _fit(QWEN, "--gpu", "h100", "-tp", "2", "--max-model-len", "8192", *KV20, "--kv-offloading-size", "64")
    assert tp2["cache"]["kv_offload"]["chunk_bytes"] == 2 * tp2["cache"]["bytes_per_block"]
    ds = _fit(str(CONFIGS / "deepseek-ai--DeepSeek-V3"), "--gpu", "h200", "-tp", "8", "--max-model-len", "8192",
              *KV20, "--kv-offloading-size", "100")
    assert ds["cache"]["kv_offload"]["chunk_bytes"] == -(-ds["cache"]["bytes_per_block"] // 4096) * 4096
    dcp = _fit(str(CONFIGS / "deepseek-ai--DeepSeek-V3"), "--gpu", "h200", "-tp", "8", "-dcp", "2",
               "--max-model-len", "8192", *KV20, "--kv-offloading-size", "100")
    assert dcp["cache"]["kv_offload"]["chunk_bytes"] == -(-8 * dcp["cache"]["bytes_per_block"] // 4096) * 4096
    dcp_cache = dcp["cache"]
    assert dcp_cache["kv_offload"]["tokens"] == dcp_cache["kv_offload"]["num_chunks"] * dcp_cache["block_size"] * 2


def test_lmcache_sizes_its_own_store() -> None:
    r = _fit(QWEN, "--gpu", "h100", "--max-model-len", "8192", *KV20, "--kv-offloading-size", "64",
             "--kv-offloading-backend", "lmcache")
    assert r["cache"]["kv_offload"]["connector"] == "LMCacheMPConnector" and r["cache"]["kv_offload"]["tokens"] is None


def test_bad_sizes_and_backends_are_refused() -> None:
    for flags in (["--kv-offloading-size", "0"], ["--kv-offloading-size", "lots"],
                  ["--kv-offloading-size", "8", "--kv-offloading-backend", "disk"]):
        result = runner.invoke(app, ["fit", QWEN, "--gpu", "h100", *flags])
        assert result.exit_code == 2, flags
    with pytest.raises(Exception, match="positive number of GiB"):
        cpu_tier(-1, "native", bytes_per_block=1, block_size=16, world_size=1, replicated=False)


def test_pasted_vllm_serve_line_and_plan_file_take_it(tmp_path: object) -> None:
    cmd = f"vllm serve {QWEN} --max-model-len 8192 --kv-cache-memory-bytes 21474836480 --kv-offloading-size 64"
    r = _fit("--vllm-cmd", cmd, "--gpu", "h100", "--weights-memory", "0")
    assert r["cache"]["kv_offload"]["tokens"] == 74_898 * 16
    from kvplan.ci.plan import VLLM_OPTIONS, VLLM_UNMODELLED
    from kvplan.vllm.command_line import VALUE_FLAGS

    assert "kv_offloading_size" in VLLM_OPTIONS and "kv_offloading_size" not in VLLM_UNMODELLED
    assert VALUE_FLAGS["--kv-offloading-size"] == "kv_offloading_size"


def test_simulate_prefix_uses_it_as_its_cpu_tier() -> None:
    """8 GiB of CPU memory at 917,504 bytes a block: 9,362 chunks of 16 tokens."""
    result = runner.invoke(app, ["simulate", "prefix", "--model", QWEN, "--gpu", "h100", "--max-model-len", "8192",
                                 "--kv-cache-memory-bytes", "2GiB", "--scenario", "cyclic", "--docs", "200",
                                 "--kv-offloading-size", "8", "--json"])
    assert result.exit_code == 0, result.output
    offload = json.loads(result.stdout)["offload"]
    assert (offload["cpu_offload_tokens"], offload["chunk_tokens"]) == (9_362 * 16, 16)
    refused = runner.invoke(app, ["simulate", "prefix", "--num-gpu-blocks", "1000", "--scenario", "cyclic",
                                  "--kv-offloading-size", "8"])
    assert refused.exit_code == 2 and "needs --model and --gpu" in refused.output
