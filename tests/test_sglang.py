"""SGLang 0.5.23's rules (kvplan/sglang/) pinned to SGLang's own code (the oracle's goldens) and to public logs."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from kvplan.errors import InvalidParameter, ParseError
from kvplan.hardware.gpus import get_gpu
from kvplan.model.config import parse_config
from kvplan.sglang.budget import FreeMemory, free_memory_from_log, profile_budget, refusal_text
from kvplan.sglang.command_line import parse_sglang_command
from kvplan.sglang.defaults import SglangDeployment, decode_graph_batch_sizes, prefill_graph_batch_sizes
from kvplan.sglang.fit import plan_sglang_fit, resolve_server_args
from kvplan.sglang.mamba import mamba_ratio, mamba_state
from kvplan.sglang.multimodal import (
    breakable_prefill_graph_kept,
    is_multimodal,
    mm_reservation_gib,
    vlm_fraction_factor,
)
from kvplan.sglang.pool import PoolLimits, geometry, kv_dtype_name, size_pool

sys.path.insert(0, str(Path(__file__).parent))
import sglang_goldens  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = yaml.safe_load((FIXTURES / "sglang" / "startup-logs.yaml").read_text())
CASES = sglang_goldens.load_cases()


def _spec(rel: str) -> object:
    path = FIXTURES / rel / "config.json"
    return parse_config(json.loads(path.read_text()), name=path.parent.name)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_oracle_case_is_exact_or_refused(case: dict[str, object]) -> None:
    outcome = sglang_goldens.replay(case)
    if case["model"] in sglang_goldens.ORACLE_FAULTS:  # still disagreeing, or the entry is stale
        assert outcome.mismatches != [] or "error" in case
        return
    assert outcome.mismatches == []


def test_golden_counts_exact_refused_wrong() -> None:
    # exact: every figure equal; refused-sglang: both refuse, kvplan in SGLang's words (a config transformers
    # cannot read without the repository's code, no room for a hybrid's Mamba state); refused-kvplan: a pool this
    # slice does not model, said so.
    counts: Counter[str] = Counter()
    for case in CASES:
        o = sglang_goldens.replay(case)
        cls = sglang_goldens.classify(o)
        if cls == "refused-kvplan":
            assert o.refusal and ("not modelled" in o.refusal or "give --mem-fraction-static" in o.refusal)
        counts[cls] += 1
    # refused-kvplan: 0. DeepSeek-V4 (dsv4-oracle-goldens.json): 174 exact, 12 refused-sglang (bfloat16 KV's
    # pool-build assertion, --max-total-tokens 2000's SWA-pool ValueError), 6 GPUs each
    assert counts == {"exact": 1786 + 174, "refused-sglang": 106 + 12, "refused-source": 40, "oracle-fault": 6}


def test_goldens_cover_gpus_tp_and_attention_dp() -> None:
    assert {c["gpu"] for c in CASES} == {"h100", "h200", "b200", "a100-80", "mi300x", "mi355x"}
    assert {c["tp"] for c in CASES} == {1, 2, 4, 8}
    assert any("--enable-dp-attention" in c["flags"] for c in CASES)
    assert any("refusal" in c.get("pool", {}) for c in CASES)  # SGLang's startup refusal is pinned too


@pytest.mark.parametrize("log", LOGS["pool_logs"], ids=[f"row{x['row']}" for x in LOGS["pool_logs"]])
def test_public_logs_token_count_and_kv_sizes(log: dict[str, object]) -> None:
    spec = _spec(str(log["config"]))
    geo = geometry(spec, attn_tp=int(str(log["tp"])), kv_dtype=kv_dtype_name("auto", spec))
    n, page = int(str(log["tokens"])), int(str(log["page_size"]))
    for budget in (n * geo.cell_bytes, (n + page) * geo.cell_bytes - 1):  # the interval the log's N implies
        pool = size_pool(geo, budget, PoolLimits(page_size=page, context_len=40960))
        assert pool.max_total_num_tokens == n
        assert round(pool.k_bytes / 2**30, 2) == log["k_gb"]
        assert round(pool.v_bytes / 2**30, 2) == log["v_gb"]
        assert f"#tokens: {n}, K size: {log['k_gb']:.2f} GB, V size: {log['v_gb']:.2f} GB" in pool.log_line


def test_public_refusal_log_minimum_fraction() -> None:
    log = LOGS["refusal_logs"][0]
    b = profile_budget(avail_gib=log["avail_gib"], pre_gib=log["pre_gib"],
                       mem_fraction_static=log["mem_fraction_static"])
    assert b.budget_bytes is None and b.refusal is not None
    assert abs(b.minimum_fraction - log["minimum_fraction"]) < 0.001
    assert b.refusal.startswith("Loaded weights leave no GPU memory for the KV cache under "
                                "--mem-fraction-static=0.88. Raise --mem-fraction-static above 0.912 (minimum "
                                "viable = 1 - available/pre = 0.9112).")


def test_refusal_text_is_sglangs() -> None:
    assert refusal_text(0.83, 10.0, 80.0) == (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.83. Raise "
        "--mem-fraction-static above 0.875 (minimum viable = 1 - available/pre = 0.8750). If using speculative "
        "decoding, draft weights are now counted.")


@pytest.mark.parametrize(("gpu", "config", "dep", "fraction"), [
    # The oracle's recorded runs (shared sglang-oracle results/*.json), SGLang 0.5.23.
    ("h100-sxm", "configs/Qwen--Qwen2.5-7B", SglangDeployment(tp=1), 0.83),
    ("h100-sxm", "configs/Qwen--Qwen2.5-7B", SglangDeployment(tp=8), 0.812),
    ("h200", "configs/deepseek-ai--DeepSeek-V3", SglangDeployment(tp=8), 0.886),
    ("h200", "configs/deepseek-ai--DeepSeek-V3", SglangDeployment(tp=8, dp=8, enable_dp_attention=True), 0.758),
    ("mi300x", "configs/Qwen--Qwen2.5-7B", SglangDeployment(tp=1), 0.73695),  # 0.867 × 0.85 (aiter, ctx > 8192)
    ("mi355x", "configs/Qwen--Qwen2.5-7B", SglangDeployment(tp=1), 0.77435),  # 0.911 × 0.85
])
def test_mem_fraction_static_matches_the_oracle_runs(gpu: str, config: str, dep: SglangDeployment,
                                                      fraction: float) -> None:
    # the resolved server arguments (Qwen2.5-7B's 28 heads then fail models/qwen2.py's TP-8 assertion)
    defaults = resolve_server_args(_spec(config), get_gpu(gpu), dep)[3]  # type: ignore[arg-type]
    assert defaults.mem_fraction_static == pytest.approx(fraction, abs=1e-9)


def test_oracle_run_qwen_h100_pool_at_60e9_bytes() -> None:
    # results/qwen2.5-7b_h100_tp1.json: 1,046,316 tokens, 4087 requests, K 27.94 GB
    spec = _spec("configs/Qwen--Qwen2.5-7B")
    pool = size_pool(geometry(spec, attn_tp=1, kv_dtype="bfloat16"), 60_000_000_000,  # type: ignore[arg-type]
                     PoolLimits(page_size=1, context_len=131072))
    assert (pool.max_total_num_tokens, pool.max_running_requests) == (1046316, 4087)
    assert pool.log_line == ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1046316, K size: 27.94 GB, "
                             "V size: 27.94 GB")


def test_graph_batch_size_lists() -> None:
    assert len(decode_graph_batch_sizes(256)) == 36 and len(decode_graph_batch_sizes(512)) == 52
    assert len(prefill_graph_batch_sizes(8192)) == 58 and len(prefill_graph_batch_sizes(16384)) == 74


def test_pasted_launch_server_line_reads_sglang_flags() -> None:
    cmd = parse_sglang_command("SGLANG_X=1 HF_TOKEN=hf_abc python -m sglang.launch_server --model-path "
                               "deepseek-ai/DeepSeek-V3 --tp 8 --dp=8 --enable-dp-attention --mem-fraction-static 0.8 "
                               "--api-key sk-secret --host 0.0.0.0 --trust-remote-code")
    assert cmd.model == "deepseek-ai/DeepSeek-V3"
    assert cmd.options == {"tp_size": "8", "dp_size": "8", "enable_dp_attention": True, "mem_fraction_static": "0.8",
                           "trust_remote_code": True}  # SGLang reads a custom config with it (fit.py)
    assert "--api-key ***" in cmd.ignored and "sk-secret" not in " ".join(cmd.ignored)
    assert cmd.env == {"SGLANG_X": "1"}


def test_pasted_line_refuses_what_argparse_refuses() -> None:
    with pytest.raises(ParseError, match="ambiguous option: --pp could match"):
        parse_sglang_command("python -m sglang.launch_server --model-path m --pp 2")
    with pytest.raises(ParseError, match="ambiguous option: --cuda-graph-max-bs"):
        parse_sglang_command("python -m sglang.launch_server --model-path m --cuda-graph-max-bs 128")
    with pytest.raises(ParseError, match="unrecognized arguments: --max-model-len"):
        parse_sglang_command("python -m sglang.launch_server --model-path m --max-model-len 4096")


def test_a_model_sglang_has_no_class_for_is_refused_in_its_words() -> None:
    # SGLang 0.5.23 has no BambaForCausalLM, and transformers' Bamba sets no _supports_attention_backend:
    # model_loader/utils.py:resolve_transformers_arch raises this ValueError at model load
    spec = _spec("corpus/configs/ibm-ai-platform--Bamba-9B")
    with pytest.raises(InvalidParameter, match=r"^BambaForCausalLM has no SGlang implementation and the Transformers "
                                               r"implementation is not compatible with SGLang\.$"):
        plan_sglang_fit(spec, get_gpu("h100"), SglangDeployment(tp=4), weights_bytes=0,  # type: ignore[arg-type]
                        weights_range=(0, 0))


def test_mamba_state_per_request_is_sglangs() -> None:
    # SGLang's own refusal prints mamba_cache_per_req: 73.69 MB for Qwen3-Next at TP 1 and 725.27 MB for
    # Nemotron-H-47B (oracle goldens, Qwen--Qwen3-Next-80B-A3B-Instruct-FP8__h100__tp1 and
    # nvidia--Nemotron-H-47B-Reasoning-128K__h100__tp1). GDN: 36 layers × (conv 8192 × 3 × 2 B + ssm 32 × 128 ×
    # 128 × 4 B (float32 by default)).
    qwen = mamba_state(_spec("corpus/configs/Qwen--Qwen3-Next-80B-A3B-Instruct-FP8"), attn_tp=1, tp=1)  # type: ignore[arg-type]
    assert qwen is not None and qwen.per_req_bytes == 36 * (8192 * 3 * 2 + 32 * 128 * 128 * 4) == 77266944
    nemotron = mamba_state(_spec("corpus/configs/nvidia--Nemotron-H-47B-Reasoning-128K"), attn_tp=1, tp=1)  # type: ignore[arg-type]
    assert nemotron is not None and f"{nemotron.per_req_bytes / (1 << 20):.2f}" == "725.27"
    # Mamba-1 splits over the whole TP group, not attention TP (configs/mamba.py:_mamba1_cache_params).
    mamba1 = _spec("corpus/configs/state-spaces--mamba-130m-hf")
    assert mamba_state(mamba1, attn_tp=1, tp=8) == mamba_state(mamba1, attn_tp=8, tp=8)  # type: ignore[arg-type]


def test_mamba_ratio_is_five_with_the_extra_buffer_else_three() -> None:
    assert mamba_ratio("Qwen3NextForCausalLM") == 5 and mamba_ratio("NemotronHForCausalLM") == 5
    assert mamba_ratio("Lfm2MoeForCausalLM") == 3 and mamba_ratio("FalconMambaForCausalLM") == 3


def test_mamba_slots_come_out_of_the_budget_first() -> None:
    # Qwen--Qwen3-Next-80B-A3B-Instruct-FP8__h200__tp1 (oracle golden): budget 28843260373, 1173635 tokens,
    # max_running_requests 66 = K // 5.
    state = mamba_state(_spec("corpus/configs/Qwen--Qwen3-Next-80B-A3B-Instruct-FP8"), attn_tp=1, tp=1)  # type: ignore[arg-type]
    assert state is not None
    b = profile_budget(avail_gib=64.4725, pre_gib=139.21, mem_fraction_static=0.903, mamba=state, mamba_ratio=5)
    assert b.budget_bytes == 28843260373 and b.mamba is not None and b.mamba.max_mamba_cache_size // 5 == 66
    size = b.mamba.max_mamba_cache_size
    assert b.mamba.log_line.startswith(f"Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: ")


def test_pure_mamba_pool_holds_context_len_tokens() -> None:
    # No full-attention layer: cell 0, DefaultPoolConfigurator's _zero_kv_max_tokens = context_len (2048 for
    # mamba-130m), max_running_requests = tokens // 2 (golden state-spaces--mamba-130m-hf__h100__tp1).
    spec = _spec("corpus/configs/state-spaces--mamba-130m-hf")
    fit = plan_sglang_fit(spec, get_gpu("h100"), SglangDeployment(), weights_bytes=0,  # type: ignore[arg-type]
                          weights_range=(0, 0), measured=FreeMemory(78.68, 78.3674, (78.68,) * 2, (78.3674,) * 2,
                                                                    "given"))
    assert fit.geometry.cell_bytes == 0 and fit.max_total_num_tokens == 2048 and fit.max_running_requests == 1024


def test_mamba_refusal_is_a_startup_verdict_in_sglangs_words() -> None:
    r = _kvplan("fit", str(FIXTURES / "corpus/configs/Qwen--Qwen3-Next-80B-A3B-Instruct-FP8"), "--gpu", "h100",
                "--engine", "sglang")
    assert r.returncode == 1, r.stderr
    assert "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=" \
        in " ".join(r.stdout.split())


def _kvplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, check=False)


def test_cli_fit_engine_sglang_json_kind_and_engine() -> None:
    r = _kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine", "sglang", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "fit-sglang" and doc["engine"] == "sglang" and doc["sglang_version"] == "0.5.23"
    assert doc["defaults"]["mem_fraction_static"] == 0.83
    assert doc["pool"]["log_line"].startswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: ")


def test_cli_says_which_engine_and_refuses_mixed_flags() -> None:
    r = _kvplan("fit", "--sglang-cmd", f"python -m sglang.launch_server --model-path "
                f"{FIXTURES / 'configs/Qwen--Qwen2.5-7B'} --tp 2 --context-length 8192", "--gpu", "h100")
    assert r.returncode == 0, r.stderr
    assert "engine: SGLang 0.5.23" in " ".join(r.stdout.split())
    r = _kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--mem-fraction-static", "0.8")
    assert r.returncode == 2 and "Error: --mem-fraction-static is an SGLang flag" in r.stderr
    r = _kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine", "sglang",
                "--max-model-len", "4096")
    assert r.returncode == 2 and "--max-model-len is a vLLM flag" in r.stderr and "Traceback" not in r.stderr


def test_cli_startup_refusal_is_exit_1() -> None:
    r = _kvplan("fit", str(FIXTURES / "configs/meta-llama--Meta-Llama-3.1-70B"), "--gpu", "h100", "--engine",
                "sglang", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["fits"] is False and doc["startup"].startswith("Loaded weights leave no GPU memory for the KV cache")


def test_public_log_row3_end_to_end_within_the_estimated_range() -> None:
    # sglang PR #11716: Llama-3.x-70B on 8 × H200, SGLang's defaults, logged #tokens 2,795,207. The whole chain
    # (fraction 0.893, kvplan's weights and baseline estimates, budget, pool) lands within 0.5% and its range
    # holds the log. Not independent of the baseline: its multi-GPU high end (2.43 GiB) is this log's.
    log = next(x for x in LOGS["pool_logs"] if x["row"] == 3)
    r = _kvplan("fit", str(FIXTURES / str(log["config"])), "--gpu", "h200", "--engine", "sglang", "--tp", "8", "--json")
    doc = json.loads(r.stdout)
    assert doc["defaults"]["mem_fraction_static"] == 0.893
    low, high = doc["max_total_num_tokens_range"]
    assert low <= log["tokens"] <= high
    assert abs(doc["max_total_num_tokens"] / log["tokens"] - 1) < 0.005


def test_vlm_fraction_factor_follows_the_vision_tower() -> None:
    # adjust_mem_fraction_for_vlm: 0.95 × clamp(1 − 0.1 × (L·H² / (24·1024²) − 1), 0.8, 1.05). Qwen2.5-VL's
    # vision config names its depth `depth` (no num_hidden_layers: 24), width 1280 → ratio 1.5625; the golden
    # Qwen--Qwen2.5-VL-3B-Instruct__h100__tp1 resolves 0.835 × that = 0.7486296875.
    qwen = _spec("corpus/configs/Qwen--Qwen2.5-VL-3B-Instruct")
    assert vlm_fraction_factor(qwen) == 0.95 * (1 - 0.1 * (1.5625 - 1))  # type: ignore[arg-type]
    gemma_e2b = _spec("corpus/configs/google--gemma-4-E2B")  # 16 × 768: capped at 1.05
    assert vlm_fraction_factor(gemma_e2b) == 0.95 * 1.05  # type: ignore[arg-type]
    # Kimi-K2.5: SGLang's own vision config class defaults, 27 × 1152 (its JSON's vt_* keys are not read).
    kimi = _spec("corpus/configs/moonshotai--Kimi-K2.5")
    assert vlm_fraction_factor(kimi) == 0.95 * (1 - 0.1 * (27 * 1152 ** 2 / (24 * 1024 ** 2) - 1))  # type: ignore[arg-type]


def test_llama4_is_served_as_its_language_model() -> None:
    # configs/model_config.py: multimodal is off by default for Llama-4 (mm_disabled_models): no VLM factor,
    # prefill graphs kept, no multimodal reservation.
    llama4 = _spec("corpus/configs/RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic")
    assert not is_multimodal(llama4) and vlm_fraction_factor(llama4) is None  # type: ignore[arg-type]
    assert breakable_prefill_graph_kept(llama4)  # type: ignore[arg-type]


def test_qwen3_vl_on_hopper_reserves_the_cuda_ipc_feature_pool() -> None:
    # model_overrides/qwen3_vl.py: on a ≥ 60 GiB SM90 GPU the embedding cache is 0 and the transport cuda_ipc, so
    # mm_runtime_reservation_gb is SGLANG_MM_FEATURE_CACHE_MB (1024 MiB); elsewhere the 100 MiB embedding cache.
    spec = _spec("corpus/configs/Qwen--Qwen3-VL-8B-Instruct")
    assert mm_reservation_gib(spec, hopper=True, gpu_mem_mib=81559, max_running_requests=None) == 1.0  # type: ignore[arg-type]
    assert mm_reservation_gib(spec, hopper=True, gpu_mem_mib=81559, max_running_requests=512) == 3.0  # type: ignore[arg-type]
    assert mm_reservation_gib(spec, hopper=False, gpu_mem_mib=183359,  # type: ignore[arg-type]
                              max_running_requests=None) == 100 / 1024


def test_sliding_window_hybrid_splits_full_and_swa_pools() -> None:
    # google--gemma-4-26B-A4B-it__h100__tp1 (oracle golden): cell 5 full layers × 2 heads × (512+512) × 2 B +
    # 0.8 × 25 sliding layers × 8 heads × (256+256) × 2 B = 184320.0; budget 12295652870 → 66708 full tokens,
    # int(66708 × 0.8) = 53366 sliding tokens, one `KV Cache is allocated` line each.
    geo = geometry(_spec("corpus/configs/google--gemma-4-26B-A4B-it"), attn_tp=1, kv_dtype="bfloat16")  # type: ignore[arg-type]
    assert geo.swa is not None and geo.cell_size == 184320.0
    pool = size_pool(geo, 12295652870, PoolLimits(page_size=1, context_len=262144))
    assert (pool.max_total_num_tokens, pool.swa_tokens, pool.max_running_requests) == (66708, 53366, 2048)
    assert pool.log_lines == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 66708, K size: 0.64 GB, V size: 0.64 GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 53366, K size: 5.09 GB, V size: 5.09 GB")


def test_shared_kv_layers_keep_rows_on_their_side() -> None:
    # Gemma-4-E4B: 24 layers own their KV, 18 share it; SGLang's layer_info still counts all 42 on the side
    # layer_types names (7 full, 35 sliding): cell 7 × 2 × 1024 × 2 + 0.8 × 35 × 2 × 512 × 2 = 86016.0 (golden).
    geo = geometry(_spec("corpus/configs/google--gemma-4-E4B"), attn_tp=1, kv_dtype="bfloat16")  # type: ignore[arg-type]
    assert geo.swa is not None and (geo.layers, geo.swa.layers, geo.cell_size) == (7, 35, 86016.0)


def test_swa_pool_too_small_is_refused_in_sglangs_words() -> None:
    geo = geometry(_spec("corpus/configs/google--gemma-4-26B-A4B-it"), attn_tp=1, kv_dtype="bfloat16")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match=r"SWA pool \(819 tokens\) cannot hold even one request: the prefill "
                                               r"admission floor is sliding_window_size \(1024\) \+ page_size \(1\)"):
        size_pool(geo, 1024 * 184320, PoolLimits(page_size=1, context_len=262144))


def test_dsa_cell_is_the_latent_row_plus_the_index_k() -> None:
    # Oracle goldens deepseek-ai--DeepSeek-V3.2__h100__* and __b200__*: bf16 on Hopper (auto below SM100):
    # 61 × (576 × 2 + 132) = 78324; fp8 on SM100 with trtllm's raw layout: 61 × (576 + 132) = 43188. The index-K
    # is ceil(128 + 128 / 128 × 4, index_kpool 1) = 132 bytes a layer. Hopper fp8 (flashmla_kv) has the scaled
    # row 512 + 512 / 128 × 4 + 64 × 2 = 656 bytes (calculate_mla_kv_cache_dim).
    spec = _spec("corpus/configs/deepseek-ai--DeepSeek-V3.2")
    assert geometry(spec, attn_tp=8, kv_dtype="bfloat16", sm_major=9).cell_bytes == 78324  # type: ignore[arg-type]
    assert geometry(spec, attn_tp=8, kv_dtype="fp8_e4m3", sm_major=10).cell_bytes == 43188  # type: ignore[arg-type]
    assert geometry(spec, attn_tp=8, kv_dtype="fp8_e4m3", sm_major=9).cell_bytes == 61 * (656 + 132)  # type: ignore[arg-type]


def test_dsa_defaults_follow_the_gpu() -> None:
    spec = _spec("corpus/configs/deepseek-ai--DeepSeek-V3.2")
    h200 = plan_sglang_fit(spec, get_gpu("h200"), SglangDeployment(tp=8), weights_bytes=0,  # type: ignore[arg-type]
                           weights_range=(0, 0), measured=FreeMemory(137.59, 59.2182, (137.59,) * 2, (59.2182,) * 2,
                                                                     "given"))
    assert (h200.defaults.attention_backend, h200.defaults.page_size, h200.kv_cache_dtype) == ("dsa", 64, "bfloat16")
    # golden deepseek-ai--DeepSeek-V3.2__h200__tp8: 596736 tokens, KV size (rows × cell) 43.53 GB
    assert h200.pool is not None and h200.pool.log_line == \
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 596736, KV size: 43.53 GB"
    with pytest.raises(InvalidParameter, match="DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3"):
        plan_sglang_fit(spec, get_gpu("h200"), SglangDeployment(tp=8, kv_cache_dtype="fp8_e5m2"),  # type: ignore[arg-type]
                        weights_bytes=0, weights_range=(0, 0))


def test_public_refusal_log_is_predicted_from_sglangs_own_weight_line() -> None:
    # Row 10 (InferenceX #2128): DeepSeek-V4-Pro, 8 × H200, TP 8, --mem-fraction-static 0.88. Its pool
    # (DSV4PoolConfigurator, kvplan.sglang.dsv4) is never sized: _profile_available_bytes refuses first: from
    # the logged `Load weight end` line kvplan gives SGLang's refusal, minimum viable 0.9112 (the log: 0.9113,
    # from unrounded figures), within 0.001; exit 1, a capacity verdict.
    log = LOGS["refusal_logs"][0]
    r = _kvplan("fit", str(FIXTURES / "corpus/configs/deepseek-ai--DeepSeek-V4-Pro"), "--gpu", "h200", "--tp", "8",
                "--engine", "sglang", "--mem-fraction-static", "0.88", "--json", "--sglang-weight-log", log["log"])
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert abs(doc["budget"]["minimum_fraction"] - log["minimum_fraction"]) < 0.001
    assert doc["startup"].startswith("Loaded weights leave no GPU memory for the KV cache under "
                                     "--mem-fraction-static=0.88. Raise --mem-fraction-static above 0.912")
    assert doc["geometry"]["kind"] == "dsv4" and doc["pool"] is None and doc["free_memory"]["source"] == "log"


def test_unmodelled_pool_that_would_start_is_refused_as_not_modelled() -> None:
    # DeepSeek-V4 under PP (no CLI flag yet): DSV4PoolConfigurator's per-stage split of its pools is not ported
    spec = _spec("corpus/configs/deepseek-ai--DeepSeek-V4-Pro")
    with pytest.raises(InvalidParameter, match="pipeline parallelism with a sliding-window, Mamba or DSA pool"):
        plan_sglang_fit(spec, get_gpu("h200"), SglangDeployment(tp=4, pp=2, mem_fraction_static=0.88),  # type: ignore[arg-type]
                        weights_bytes=0, weights_range=(0, 0))


def test_weight_log_line_gives_the_measured_free_memory() -> None:
    free = free_memory_from_log("Load weight end. elapsed=1.2 s, type=X, avail mem=131.08 GB, mem usage=8.13 GB.")
    assert (round(free.pre_gib, 2), free.avail_gib, free.source) == (139.21, 131.08, "log")
    with pytest.raises(InvalidParameter, match="no 'avail mem=A GB, mem usage=W GB'"):
        free_memory_from_log("Load weight end.")


def test_engine_both_puts_each_engines_own_answer_side_by_side() -> None:
    r = _kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine", "both", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    alone_v = json.loads(_kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--json").stdout)
    alone_s = json.loads(_kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine",
                                 "sglang", "--json").stdout)
    # each side is exactly what that engine's plan says alone
    assert doc["kind"] == "fit-compare"
    assert (doc["vllm"]["kv_tokens"], doc["vllm"]["requests_at_once"]) == (alone_v["cache"]["kv_cache_tokens"],
                                                                          alone_v["scheduler"]["max_num_seqs"])
    assert (doc["sglang"]["kv_tokens"], doc["sglang"]["requests_at_once"]) == (alone_s["total_tokens"],
                                                                              alone_s["total_running_requests"])
    assert doc["token_ratio"] == doc["sglang"]["kv_tokens"] / doc["vllm"]["kv_tokens"]
    assert doc["reasons"][0].startswith("vLLM keeps ") and "SGLang keeps " in doc["reasons"][0]


def test_engine_both_shares_tp_and_context_and_refuses_two_tps() -> None:
    args = ["fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine", "both", "--json"]
    doc = json.loads(_kvplan(*args, "-tp", "2", "--max-model-len", "8192").stdout)
    assert (doc["tp"], doc["vllm"]["context"], doc["sglang"]["context"]) == (2, 8192, 8192)
    r = _kvplan(*args, "-tp", "2", "--tp", "4")  # one option in two spellings (kvplan.cli.options), two values
    assert r.returncode == 2 and r.stderr == ("Error: -tp/--tensor-parallel-size 2 and --tp/--tp-size 4 set the "
                                              "tensor-parallel size twice, to different values: they are one "
                                              "setting, give one of them (see 'kvplan fit -h')\n"), r.stderr


def test_size_engine_sglang_gives_the_configurators_cell_and_the_mamba_slot() -> None:
    # Qwen3-Next at TP 4: 12 full layers × 1 head (2 // 4 → 1) × (256 + 256) × 2 B = 12,288; the GDN state slot
    # 36 × (conv 8192 / 4 × 3 × 2 B + ssm 32 / 4 × 128 × 128 × 4 B) (configs/mamba_utils.py).
    r = _kvplan("size", str(FIXTURES / "configs/Qwen--Qwen3-Next-80B-A3B-Instruct"), "--engine", "sglang", "-tp", "4",
                "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "size-sglang" and doc["pool_configurator"] == "DefaultPoolConfigurator"
    assert doc["bytes_per_token"] == 12288
    assert doc["mamba_state_bytes_per_request"] == 36 * (8192 // 4 * 3 * 2 + 32 // 4 * 128 * 128 * 4)
    swa = json.loads(_kvplan("size", str(FIXTURES / "corpus/configs/google--gemma-4-26B-A4B-it"), "--engine",
                             "sglang", "--json").stdout)
    assert (swa["pool_configurator"], swa["bytes_per_token"], swa["swa_full_tokens_ratio"]) == (
        "HybridSWAPoolConfigurator", 184320.0, 0.8)  # the golden's cell_size_bytes


PLAN = FIXTURES / "plans" / "sglang.yaml"


def test_check_judges_an_sglang_deployment_by_sglangs_plan() -> None:
    from kvplan.ci.checks import evaluate_deployment
    from kvplan.ci.plan import load_plan
    from kvplan.model.hub import load_local

    plan = load_plan(PLAN)
    assert [d.engine for d in plan.deployments] == ["vllm", "sglang", "sglang"]
    dep = plan.deployments[1]
    assert dep.sglang is not None and (dep.sglang.context_length, dep.sglang.mem_fraction_static) == (32768, 0.85)
    result = evaluate_deployment(dep, load_local(str(FIXTURES / "configs/Qwen--Qwen2.5-7B")), get_gpu("h100"))
    alone = json.loads(_kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine",
                               "sglang", "--context-length", "32768", "--mem-fraction-static", "0.85",
                               "--json").stdout)
    tokens = {c.requirement: c.measured for c in result.checks}
    assert result.engine == "sglang" and tokens["min_kv_tokens"] == alone["total_tokens"]
    # requests of 32,768 tokens at once: the pool ÷ 32,768 (page 1), under max_running_requests
    assert tokens["min_concurrency"] == min(alone["max_total_num_tokens"] // 32768, alone["max_running_requests"])
    pasted = plan.deployments[2]
    assert pasted.sglang is not None and (pasted.sglang.tp, pasted.num_gpus) == (2, 2)


def test_check_exits_1_on_a_failed_sglang_requirement() -> None:
    r = _kvplan("check", str(PLAN))
    assert r.returncode == 1, r.stderr
    text = " ".join(r.stdout.split())
    assert "sglang-pasted min_concurrency:" in text and "run at once in SGLang" in text
    assert "1 of 5 requirements fail." in text


@pytest.mark.parametrize(("body", "message"), [
    ("engine: sglang\n    vllm: {max-model-len: 4096}", "a vLLM key: this deployment is `engine: sglang`"),
    ("engine: sglang\n    sglang: {gpu-memory-utilization: 0.9}", "is not an SGLang flag kvplan models"),
    ("sglang: {tp: 2}", "SGLang flags need `engine: sglang`"),
    ("engine: tgi", "tgi"),
])
def test_plan_refuses_what_an_sglang_deployment_cannot_mean(tmp_path: Path, body: str, message: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: x\n    model: {FIXTURES / 'configs/Qwen--Qwen2.5-7B'}\n    gpu: h100\n"
                    f"    {body}\n    require:\n      starts: true\n")
    r = _kvplan("check", str(plan))
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_plan_refuses_requirements_sglangs_plan_cannot_judge(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    model = FIXTURES / "configs/Qwen--Qwen2.5-7B"
    plan.write_text(f"deployments:\n  - name: x\n    engine: sglang\n    model: {model}\n"
                    "    gpu: h100\n    require:\n      no_preemption: true\n")
    r = _kvplan("check", str(plan))
    assert r.returncode == 2 and "not judged for `engine: sglang`" in r.stderr, r.stderr


def test_sweep_engine_sglang_gives_each_gpus_smallest_starting_tp() -> None:
    r = _kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--engine", "sglang", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "fit-sweep-sglang" and doc["engine"] == "sglang"
    h100 = next(row for row in doc["rows"] if row["gpu"] == "h100-sxm")
    alone = json.loads(_kvplan("fit", str(FIXTURES / "configs/Qwen--Qwen2.5-7B"), "--gpu", "h100", "--engine",
                               "sglang", "--json").stdout)
    assert (h100["tp"], h100["total_tokens"], h100["max_running_requests"]) == (1, alone["total_tokens"],
                                                                              alone["max_running_requests"])
    assert h100["command"] == "python -m sglang.launch_server --model-path Qwen--Qwen2.5-7B --tp 1"


def test_roofline_engine_sglang_takes_sglangs_capacity_and_caps() -> None:
    model = str(FIXTURES / "configs/meta-llama--Meta-Llama-3.1-8B")
    r = _kvplan("roofline", model, "--gpu", "h100", "--context", "4096", "--batch", "1,64", "--engine", "sglang",
                "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    fit = json.loads(_kvplan("fit", model, "--gpu", "h100", "--engine", "sglang", "--json").stdout)
    assert doc["kv_capacity_batch"] == min(fit["max_total_num_tokens"] // 4096, fit["max_running_requests"])
    assert doc["max_num_seqs"] == fit["max_running_requests"]


def test_rocm_goldens_pin_hip_rules() -> None:
    # MI300X (gfx942) / MI355X (gfx950) goldens: aiter backend, × 0.85 for context > 8192, no prefill graphs,
    # fp8 logged as float8_e4m3fnuz on gfx942, MLA on aiter when the config's KV heads per TP rank are 16 or 128.
    by_id = {c["id"]: c for c in CASES}
    llama = by_id["meta-llama--Llama-3.1-8B-Instruct__mi300x__tp1__kv-cache-dtype_fp8_e4m3"]
    assert llama["resolved"]["attention_backend"] == "aiter" and llama["resolved"]["prefill_backend"] == "disabled"
    assert "dtype: torch.float8_e4m3fnuz" in llama["pool"]["log"][0]
    assert sglang_goldens.classify(sglang_goldens.replay(llama)) == "exact"
    v3 = by_id["deepseek-ai--DeepSeek-V3-0324__mi355x__tp8"]
    assert (v3["resolved"]["attention_backend"], v3["resolved"]["mem_fraction_static"]) == ("aiter", 0.7718)
    assert sglang_goldens.classify(sglang_goldens.replay(v3)) == "exact"


def test_launch_server_line_reads_back_as_the_same_deployment() -> None:
    """engine_args.launch_server_line is parse_sglang_command's inverse: every field that differs from SGLang's
    default is written as its flag (speculative, PP, chunk, DP attention, ratios, switches)."""
    from dataclasses import asdict

    from kvplan.sglang.engine_args import deployment_fields, launch_server_line

    dep = SglangDeployment(tp=4, pp=2, dp=2, enable_dp_attention=True, ep=4, mem_fraction_static=0.81,
                           chunked_prefill_size=4096, max_prefill_tokens=8192, max_running_requests=96,
                           max_total_tokens=300_000, page_size=32, kv_cache_dtype="fp8_e4m3", context_length=32768,
                           attention_backend="triton", cuda_graph_max_bs=64, disable_cuda_graph=True,
                           speculative_algorithm="EAGLE", speculative_num_steps=2, speculative_eagle_topk=4,
                           speculative_num_draft_tokens=6, speculative_draft_model_path="org/draft",
                           trust_remote_code=True, swa_full_tokens_ratio=0.5, mamba_full_memory_ratio=0.7,
                           use_aiter=True, disable_hybrid_swa_memory=True, max_mamba_cache_size=100,
                           mamba_ssm_dtype="bfloat16", json_model_override_args='{"num_hidden_layers":2}')
    line = launch_server_line("org/model", asdict(dep), asdict(SglangDeployment()), revision="main")
    cmd = parse_sglang_command(line)
    assert (cmd.model, cmd.revision, cmd.ignored, cmd.unmodelled) == ("org/model", "main", (), ())
    assert SglangDeployment(**deployment_fields(cmd.options)) == dep  # type: ignore[arg-type]
    plain = launch_server_line("m", asdict(SglangDeployment()), asdict(SglangDeployment()))
    assert plain == "python -m sglang.launch_server --model-path m --tp 1"


@pytest.mark.parametrize(("model", "flags"), [
    ("deepseek-ai--DeepSeek-V3", "--speculative-algorithm NEXTN --speculative-num-steps 2 --speculative-eagle-topk 1 "
                                 "--chunked-prefill-size 4096"),
    ("Qwen--Qwen2.5-7B", "--pp-size 2 --chunked-prefill-size 2048 --max-running-requests 64"),
    ("Qwen--Qwen2.5-7B", "--tp 2 --dp 2 --enable-dp-attention --kv-cache-dtype fp8_e4m3 --page-size 16"),
])
def test_sweep_rows_command_replans_to_the_same_numbers(model: str, flags: str) -> None:
    """Each no-GPU sweep row's launch_server line, pasted back into `fit --gpu` with SGLang's rules, plans the row's
    own numbers (the line used to drop the speculative, PP and chunk flags)."""
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    config = str(FIXTURES / "configs" / model)
    sweep = CliRunner().invoke(app, ["fit", config, "--json", "--sglang-cmd",
                                     f"python -m sglang.launch_server --model-path {config} {flags}"])
    assert sweep.exit_code == 0, sweep.output
    rows = json.loads(sweep.stdout)["rows"]
    assert rows
    for row in rows[:3]:
        for flag in flags.split(" --")[1:]:
            assert f"--{flag}" in row["command"] or flag.startswith("tp "), row["command"]
        again = CliRunner().invoke(app, ["fit", config, "--gpu", row["gpu"], "--json", "--sglang-cmd", row["command"]])
        assert again.exit_code == 0, again.output
        fit = json.loads(again.stdout)
        assert (fit["tp"], fit["total_tokens"], fit["max_running_requests"], fit["defaults"]["mem_fraction_static"]) \
            == (row["tp"], row["total_tokens"], row["max_running_requests"], row["mem_fraction_static"])


@pytest.mark.parametrize("flag", ["--dsv4-attn-backend trtllm", "--enable-hisparse", "--hisparse-config {}",
                                  "--swa-prefix-tails 64", "--disaggregation-mode decode"])
def test_flags_that_change_deepseek_v4s_pools_are_said_unmodelled_not_ignored(flag: str) -> None:
    """SGLang 0.5.23's pool_configurator.py reads these while sizing (DSV4PoolConfigurator, the decode worker's
    slots): a pasted line that carries one is planned with a warning, never listed as having no effect."""
    from kvplan.sglang.command_line import parse_sglang_command

    cmd = parse_sglang_command(f"python -m sglang.launch_server --model-path org/model {flag}")
    assert cmd.ignored == () and len(cmd.unmodelled) == 1 and cmd.unmodelled[0].startswith(flag.split()[0])
