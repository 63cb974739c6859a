"""SGLang 0.5.23 rules the sizing goldens' grid does not reach, each pinned to one oracle run of SGLang's own code
(tests/fixtures/sglang/oracle-runs.json) or to the source line it follows (paths relative to sglang/srt/)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import get_gpu
from kvplan.sglang.architectures import heads_refusal
from kvplan.sglang.budget import FreeMemory
from kvplan.sglang.defaults import SglangDeployment
from kvplan.sglang.fit import SglangFit, plan_sglang_fit, resolve_server_args
from kvplan.sglang.pool import PoolLimits, size_pool
from kvplan.sglang.pp import pp_layer_ranges

sys.path.insert(0, str(Path(__file__).parent))
import sglang_goldens  # noqa: E402

RUNS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "fixtures" / "sglang" / "oracle-runs.json").read_text())["runs"]}


def _plan(run: dict[str, Any], **dep: Any) -> SglangFit:
    spec = sglang_goldens.model_spec(run["model"])
    measured = FreeMemory(run["pre_gib"], run["avail_gib"], (run["pre_gib"],) * 2, (run["avail_gib"],) * 2, "given")
    return plan_sglang_fit(spec, get_gpu(sglang_goldens.GPU_IDS[run["gpu"]]), SglangDeployment(**dep),
                           weights_bytes=0, weights_range=(0, 0), measured=measured)


def _assert_run(fit: SglangFit, run: dict[str, Any]) -> None:
    r, p = run["resolved"], run["pool"]
    assert fit.defaults.mem_fraction_static == pytest.approx(r["mem_fraction_static"], abs=1e-9)
    assert (fit.defaults.page_size, fit.defaults.attention_backend) == (r["page_size"], r["attention_backend"])
    assert fit.geometry is not None and fit.geometry.cell_size == p["cell_size_bytes"]
    assert fit.budget.budget_bytes == p["profiled_budget_bytes"]
    assert fit.pool is not None
    assert (fit.pool.max_total_num_tokens, fit.pool.max_running_requests) == (p["max_total_num_tokens"],
                                                                             p["max_running_requests"])
    assert list(fit.pool.log_lines) == p["log"]


def test_dsa_fp8_on_rocm_is_the_raw_fnuz_row() -> None:
    # HIP's default DSA backends are triton (overrides.py:_dsa_split_backend_resolution), which read the raw
    # layout (kv_cache_configurator.py:calculate_mla_kv_cache_dim): (512 + 64) × 1 B × 61 layers + the indexer's
    # 132 B × 61 = 43,188 B per token; torch.float8_e4m3fnuz on gfx942; page size 1
    run = RUNS["deepseek-ai--DeepSeek-V3.2__mi300x__tp_8_kv-cache-dtype_fp8_e4m3"]
    _assert_run(_plan(run, tp=8, kv_cache_dtype="fp8_e4m3"), run)


def test_dsa_on_rocm_pages_by_token_in_sglangs_default_environment() -> None:
    # model_overrides/deepseek_v2.py: page size 1 while aiter's preshuffle paged-MQA path is off
    # (layers/attention/dsa/utils.py:aiter_can_use_preshuffle_paged_mqa, False with SGLANG_USE_AITER unset); with
    # SGLANG_USE_AITER=1 and Triton ≥ 3.5 SGLang pages by 64 (the oracle's run below), which kvplan does not model
    case = next(c for c in sglang_goldens.load_cases() if c["id"] == "deepseek-ai--DeepSeek-V3.2__mi300x__tp8")
    fit = sglang_goldens.replay(case).fit
    assert fit is not None and fit.defaults.page_size == 1 and fit.max_total_num_tokens == 1162823
    aiter = RUNS["deepseek-ai--DeepSeek-V3.2__mi300x__tp_8_env_SGLANG_USE_AITER=1"]
    assert (aiter["resolved"]["page_size"], aiter["pool"]["max_total_num_tokens"]) == (64, 1162816)
    assert any("SGLANG_USE_AITER" in n for n in fit.notes)


def test_gemma4_mtp_draft_alone_sizes_sglangs_pool_then_fails_its_first_forward() -> None:
    # the oracle's pool: DefaultPoolConfigurator, 4 layers at the full-attention shape (global_head_dim 512, 1 KV
    # head: _apply_gemma4_attention_overrides), 8,192 B per token; then models/gemma4_mtp.py:forward raises
    case = next(c for c in sglang_goldens.load_cases() if c["id"] == "google--gemma-4-E2B-it-assistant__h100__tp1")
    outcome = sglang_goldens.replay(case)
    assert outcome.mismatches == [] and outcome.fit is not None
    assert outcome.fit.geometry is not None and outcome.fit.geometry.cell_size == 8192
    assert outcome.fit.max_total_num_tokens == 8571590 and not outcome.fit.fits
    assert outcome.fit.startup == ("RuntimeError: Gemma4AssistantForCausalLM requires set_embed_and_head() before "
                                   "token-id forward.")
    assert sglang_goldens.classify(outcome) == "refused-sglang"


BLOCK_SCALED = [r for r in RUNS.values() if "kv-cache-dtype_" in r["id"] and r["model"].startswith("meta-llama")]


@pytest.mark.parametrize("run", BLOCK_SCALED, ids=[r["id"] for r in BLOCK_SCALED])
def test_block_scaled_kv_dtypes_are_sglangs(run: dict[str, Any]) -> None:
    # arg_groups/kv_cache_hook.py accepts or refuses; pool_configurator.py:_compute_cell_size: mxfp8 132 B per
    # 128-wide row (a scale per 32), FP4 72 B (64 packed + a scale per 16) on trtllm_mha; the oracle's budget 1e11 B
    dtype = run["args"][run["args"].index("--kv-cache-dtype") + 1]
    spec = sglang_goldens.model_spec(run["model"])
    chip = get_gpu(sglang_goldens.GPU_IDS[run["gpu"]])
    dep = SglangDeployment(kv_cache_dtype=dtype)
    if "error" in run:
        with pytest.raises(InvalidParameter) as err:
            plan_sglang_fit(spec, chip, dep, weights_bytes=0, weights_range=(0, 0))
        assert run["error"] == f"{run['error'].split(':', 1)[0]}: {err.value}"
        return
    fit = plan_sglang_fit(spec, chip, dep, weights_bytes=0, weights_range=(0, 0))
    r, p = run["resolved"], run["pool"]
    assert fit.defaults.mem_fraction_static == pytest.approx(r["mem_fraction_static"], abs=1e-9)
    assert (fit.defaults.attention_backend, fit.defaults.page_size, fit.defaults.chunked_prefill_size) == (
        r["attention_backend"], r["page_size"], r["chunked_prefill_size"])
    assert fit.geometry is not None and fit.geometry.cell_size == p["cell_size_bytes"]
    pool = size_pool(fit.geometry, p["kv_budget_bytes"], PoolLimits(page_size=fit.defaults.page_size,
                                                                    context_len=fit.context_len))
    assert (pool.max_total_num_tokens, pool.max_running_requests) == (p["max_total_num_tokens"],
                                                                     p["max_running_requests"])
    if "log" in p:  # the oracle could not build nvfp4's pool object (its log): tokens and cell only
        assert list(pool.log_lines) == p["log"] and pool.k_bytes == p["k_bytes"]


def test_attention_backend_outside_sglangs_choices_is_refused_in_argparses_words() -> None:
    # arg_groups/choices.py:ATTENTION_BACKEND_CHOICES; the line SGLang's own parser printed
    run = RUNS["argparse__attention-backend_flash_attn"]
    spec = sglang_goldens.model_spec("meta-llama--Llama-3.1-8B-Instruct")
    with pytest.raises(InvalidParameter) as err:
        plan_sglang_fit(spec, get_gpu("h100-sxm"), SglangDeployment(attention_backend="flash_attn"), weights_bytes=0,
                        weights_range=(0, 0))
    assert run["stderr"] == f"launch_server.py: error: {err.value}"


def test_deprecated_attention_backend_spellings_are_renamed() -> None:
    # arg_groups/serving_hook.py:_handle_deprecated_args: tokenspeed_mla → cutedsl_mla (with an fp8_e4m3 KV
    # cache), compressed → dsv4
    spec = sglang_goldens.model_spec("deepseek-ai--DeepSeek-V3-0324")
    fit = plan_sglang_fit(spec, get_gpu("b200"), SglangDeployment(tp=8, attention_backend="tokenspeed_mla"),
                          weights_bytes=0, weights_range=(0, 0))
    assert fit.defaults.attention_backend == "cutedsl_mla" and fit.kv_cache_dtype == "fp8_e4m3"


def test_tp_not_splitting_the_heads_fails_the_model_classs_assertion() -> None:
    # models/qwen2.py:Qwen2Attention.__init__: tp_size = get_parallel().tp_size; assert self.total_num_heads %
    # tp_size == 0 (28 heads at TP 8 fail, also under attention DP: the module splits by --tp-size)
    spec = sglang_goldens.model_spec("Qwen--Qwen2.5-7B-Instruct")
    for dep in (SglangDeployment(tp=8), SglangDeployment(tp=8, dp=8, enable_dp_attention=True)):
        with pytest.raises(InvalidParameter) as err:
            plan_sglang_fit(spec, get_gpu("h100-sxm"), dep, weights_bytes=0, weights_range=(0, 0))
        assert str(err.value) == ("AssertionError: assert self.total_num_heads % tp_size == 0 (models/qwen2.py; "
                                  "28 attention heads, 4 KV heads, tp_size 8)")
    plan_sglang_fit(spec, get_gpu("h100-sxm"), SglangDeployment(tp=4), weights_bytes=0, weights_range=(0, 0))


def test_head_split_rules_by_module() -> None:
    # models/qwen3.py splits by attn_tp_size: 64 heads, 8 KV heads at attention TP 16 → kv 8 < 16 and 16 % 8 == 0
    assert heads_refusal(["Qwen3ForCausalLM"], heads=64, kv_heads=8, tp=16, attn_tp=16) is None
    assert heads_refusal(["Qwen3ForCausalLM"], heads=40, kv_heads=8, tp=16, attn_tp=2) is None  # attention TP 2
    assert heads_refusal(["Qwen3ForCausalLM"], heads=40, kv_heads=8, tp=16, attn_tp=16) == (
        "AssertionError: assert self.total_num_heads % attn_tp_size == 0 (models/qwen3.py; 40 attention heads, 8 KV "
        "heads, attn_tp_size 16)")
    # models/llama.py: kv heads ≥ tp must divide by it; fewer must divide tp
    assert heads_refusal(["LlamaForCausalLM"], heads=48, kv_heads=6, tp=4, attn_tp=4) == (
        "AssertionError: assert self.total_num_kv_heads % tp_size == 0 (models/llama.py; 48 attention heads, 6 KV "
        "heads, tp_size 4)")
    assert heads_refusal(["LlamaForCausalLM"], heads=48, kv_heads=3, tp=8, attn_tp=8) == (
        "AssertionError: assert tp_size % self.total_num_kv_heads == 0 (models/llama.py; 48 attention heads, 3 KV "
        "heads, tp_size 8)")
    assert heads_refusal(["DeepseekV3ForCausalLM"], heads=7, kv_heads=7, tp=8, attn_tp=8) is None  # no record


@pytest.mark.parametrize(("run_id", "dep"), [
    ("google--gemma-4-26B-A4B-it__h100__tp1__set_swa_full_tokens_ratio=0.5", {"swa_full_tokens_ratio": 0.5}),
    ("Qwen--Qwen3-Next-80B-A3B-Instruct-FP8__h100__tp4__set_mamba_full_memory_ratio=0.5",
     {"tp": 4, "mamba_full_memory_ratio": 0.5}),
])
def test_swa_and_mamba_ratios_beyond_the_defaults_are_sglangs(run_id: str, dep: dict[str, Any]) -> None:
    # HybridSWAPoolConfigurator: cell = full + ratio × sliding (0.5 → 122,880 B; the sliding pool 50,031 tokens);
    # _handle_max_mamba_cache: state slots from rest × r / (1 + r) (r 0.5 → 164 requests, 2,587,926 tokens)
    run = RUNS[run_id]
    fit = _plan(run, **dep)
    p = run["pool"]
    assert fit.geometry is not None and fit.geometry.cell_size == p["cell_size_bytes"]
    assert fit.budget.budget_bytes == p["profiled_budget_bytes"] and fit.pool is not None
    assert (fit.pool.max_total_num_tokens, fit.pool.max_running_requests) == (p["max_total_num_tokens"],
                                                                             p["max_running_requests"])
    if "log" in p:  # the oracle's meta pool cannot build the Mamba pool object: no log line there
        assert list(fit.pool.log_lines) == p["log"]


def test_swa_ratio_outside_sglangs_range_is_refused_in_its_words() -> None:
    spec = sglang_goldens.model_spec("google--gemma-4-26B-A4B-it")
    with pytest.raises(InvalidParameter, match=r"^--swa-full-tokens-ratio should be in range \(0, 1\.0\]\.$"):
        plan_sglang_fit(spec, get_gpu("h100-sxm"), SglangDeployment(swa_full_tokens_ratio=1.5), weights_bytes=0,
                        weights_range=(0, 0))


PP_RUNS = [r for r in RUNS.values() if r["id"].endswith("__pp2")]


@pytest.mark.parametrize("run", PP_RUNS, ids=[r["id"] for r in PP_RUNS])
def test_pp_server_arguments_are_sglangs(run: dict[str, Any]) -> None:
    # cuda_graph_hook.py: PP turns the breakable prefill graph off by default, so its reserve leaves the fraction
    spec = sglang_goldens.model_spec(run["model"])
    tp = int(run["args"][1])
    d = resolve_server_args(spec, get_gpu(sglang_goldens.GPU_IDS[run["gpu"]]), SglangDeployment(tp=tp, pp=2))[3]
    r = run["resolved"]
    assert d.mem_fraction_static == pytest.approx(r["mem_fraction_static"], abs=1e-9)
    assert (d.chunked_prefill_size, d.page_size, d.attention_backend, d.decode_graph_max_bs, d.decode_graph_sizes,
            d.prefill_graph) == (r["chunked_prefill_size"], r["page_size"], r["attention_backend"],
                                 r["decode_max_bs"], r["decode_num_bs"], r["prefill_backend"])


def test_pp_stages_split_the_layers_and_keep_the_min() -> None:
    # distributed/utils.py:get_pp_indices: 61 layers over 4 stages → 15, 15, 15, 16 (the last `remainder` stages
    # one more); kv_cache_configurator.py:_apply_token_constraints: MIN over stages, so the 16-layer stage decides
    assert pp_layer_ranges(61, 4) == [(0, 15), (15, 30), (30, 45), (45, 61)]
    assert pp_layer_ranges(32, 2) == [(0, 16), (16, 32)]
    spec = sglang_goldens.model_spec("deepseek-ai--DeepSeek-V3-0324")
    measured = FreeMemory(140.0, 60.0, (140.0, 140.0), (60.0, 60.0), "given")
    fit = plan_sglang_fit(spec, get_gpu("h200"), SglangDeployment(tp=8, pp=4), weights_bytes=0,
                          weights_range=(0, 0), measured=measured)
    assert fit.budget.budget_bytes is not None and fit.geometry is not None and fit.pool is not None
    cell_16 = 576 * 2 * 16  # MLA row (512 + 64) × bf16 × the last stage's 16 layers
    assert fit.pool.max_total_num_tokens == fit.budget.budget_bytes // cell_16
    stage0 = (fit.pool.max_total_num_tokens + 1) * 576 * 2 * 15  # stage 0's line: its 15 layers, rows = tokens + page
    assert fit.pool.log_lines[0].endswith(f"KV size: {stage0 / 2**30:.2f} GB")
