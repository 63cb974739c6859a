"""DeepSeek-V4 under SGLang 0.5.23: kvplan.sglang.dsv4 (DSV4PoolConfigurator's arithmetic) against figures computed
by hand from SGLang's source, and against SGLang's own code on the corpus configs
(tests/fixtures/sglang/dsv4-oracle-goldens.json, tools/sglang_oracle/dsv4_regen.py)."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import sglang_goldens  # noqa: E402

from kvplan.errors import InvalidParameter  # noqa: E402
from kvplan.hardware.gpus import get_gpu  # noqa: E402
from kvplan.sglang.defaults import SglangDeployment  # noqa: E402
from kvplan.sglang.dsv4 import dsv4_part, kv_dtype, log_lines, size_dsv4  # noqa: E402
from kvplan.sglang.fit import plan_sglang_fit  # noqa: E402
from kvplan.sglang.pool import unsupported_reason  # noqa: E402
from kvplan.sglang.size import sglang_size  # noqa: E402

CASES = json.loads(sglang_goldens.DSV4_GOLDENS.read_text())["cases"]
FLASH = sglang_goldens.model_spec("deepseek-ai--DeepSeek-V4-Flash")
PRO = sglang_goldens.model_spec("deepseek-ai--DeepSeek-V4-Pro")
ROOT = Path(__file__).resolve().parents[1]


def test_flash_per_token_bytes_follow_the_source_by_hand() -> None:
    """Flash: 43 layers, 21 of ratio 4, 20 of ratio 128, two of ratio 0; head_dim 512, index_head_dim 128, page 256.
    KVLayout.V4 page_bytes(n) = ceil(n × 584 / 576) × 576: n = 256 → 149,760 (585 per slot); c4 pages hold 64 slots
    → 37,440 (585); c128 pages 2 slots → 1,728 (864). Indexer: 128 + 128 / 128 × 4 = 132.
    SWA slot: 43 × 585 + 8 / 256 × (2·2·512 + 2·2·128) × 4 B × 21 = 25,155 + 6,720 = 31,875.
    Full token: 0.1 × 31,875 + 21 × (585 + 132) / 4 + 20 × 864 / 128 = 3,187.5 + 3,764.25 + 135 = 7,086.75."""
    part = dsv4_part(FLASH)
    assert (part.layers, part.c4_layers, part.c128_layers, part.page_size) == (43, 21, 20, 256)
    assert (part.paged_bytes(), part.paged_bytes(4), part.paged_bytes(128), part.index_bytes) == (585, 585, 864, 132)
    assert part.bytes_per_swa_token == 31_875
    assert part.bytes_per_full_token == 7_086.75
    # c128 state for 256 requests: rows ceil((257 × 128 + 128 + 1) / 128) × 128 = 33,152, × 2 × 512 × 4 B × 20 layers
    assert part.c128_state_fixed_bytes(256) == 33_152 * 2 * 512 * 4 * 20 == 2_715_811_840


def test_pro_per_token_bytes_follow_the_source_by_hand() -> None:
    """Pro: 61 layers, 30 of ratio 4, 31 of ratio 128 (its first two are 128): SWA slot 61 × 585 + 0.03125 × 10,240
    × 30 = 35,685 + 9,600 = 45,285; full token 4,528.5 + 30 × 179.25 + 31 × 6.75 = 10,115.25."""
    part = dsv4_part(PRO)
    assert (part.layers, part.c4_layers, part.c128_layers) == (61, 30, 31)
    assert part.bytes_per_swa_token == 45_285
    assert part.bytes_per_full_token == 10_115.25


def test_a_budget_is_split_as_dsv4_pool_configurator_splits_it() -> None:
    """100 GiB for Flash, 256 requests: full = int((107,374,182,400 − 2,715,811,840) / 7,086.75) = 14,768,175,
    paged down to 14,768,128; SWA int(0.1 × full) // 256 × 256 = 1,476,608; c4 full / 4, c128 full / 128, c4 state
    5,768 SWA pages × ring 8, c128 state 257 × 128."""
    s = size_dsv4(dsv4_part(FLASH), 100 << 30, max_running=None)
    assert math.floor((100 * 2**30 - 2_715_811_840) / 7_086.75) == 14_768_175
    assert (s.full_tokens, s.swa_tokens, s.c4_tokens, s.c128_tokens) == (14_768_128, 1_476_608, 3_692_032, 115_376)
    assert (s.c4_state_pool_size, s.c128_state_pool_size, s.max_running_requests) == (46_144, 32_896, 256)
    assert log_lines(dsv4_part(FLASH), s)[2] == ("DSV4 pool sizes: full=14768128, swa=1476608, c4=3692032, "
                                                  "c128=115376, c4_state=46144, c128_state=0")


def test_a_swa_pool_below_one_request_is_refused_in_sglangs_words() -> None:
    """validate_swa_pool_size runs before MemoryPoolConfig's check: a budget under the c128 state gives 0 tokens,
    and the SWA pool of 0 tokens is what SGLang reports."""
    with pytest.raises(InvalidParameter, match=r"SWA pool \(0 tokens\) cannot hold even one request"):
        size_dsv4(dsv4_part(FLASH), 1 << 30, max_running=None)


def test_kv_cache_dtype_auto_is_fp8_and_others_are_refused_as_sglang_asserts() -> None:
    """overrides.py:_deepseek_v4_kv_cache_dtype: auto → fp8_e4m3; only fp8_e4m3 and bfloat16 pass."""
    assert kv_dtype("auto") == "fp8_e4m3" and kv_dtype("bfloat16") == "bfloat16"
    with pytest.raises(InvalidParameter, match="AssertionError: fp8_e5m2 is not supported for DeepseekV4ForCausalLM"):
        kv_dtype("fp8_e5m2")


def test_deepseek_v4_is_no_longer_refused() -> None:
    assert unsupported_reason(FLASH) is None and unsupported_reason(PRO) is None


def test_every_dsv4_golden_is_exact_or_refused_as_sglang_refuses() -> None:
    """Each corpus DeepSeek-V4 case (4 configs × 6 GPUs × TP 1/2/4/8, attention DP, flag variants): resolved
    defaults, budget, every pool size, running requests and SGLang's DSV4 log lines equal, or both refuse alike."""
    classes = {c["id"]: sglang_goldens.classify(sglang_goldens.replay(c)) for c in CASES}
    assert set(classes.values()) <= {"exact", "refused-sglang"}
    assert sum(v == "exact" for v in classes.values()) == 174 and len(classes) == 186


def test_bfloat16_is_sized_then_refused_when_the_pool_is_built() -> None:
    """DeepSeekV4SingleKVPool.create_buffer asserts store_dtype == torch.uint8: SGLang sizes a bfloat16 pool (the
    V4 layout ignores the dtype), logs `Initialize DeepSeekV4TokenToKVPool …`, then raises AssertionError."""
    case = next(c for c in CASES if c["id"] == "deepseek-ai--DeepSeek-V4-Flash__h200__tp8__kv-cache-dtype_bfloat16")
    assert case["pool"]["pool_build_error"] == "AssertionError: "
    o = sglang_goldens.replay(case)
    assert o.fit is not None and o.fit.pool is not None and o.fit.startup.startswith("AssertionError: ")
    assert o.fit.pool.max_total_num_tokens == case["pool"]["max_total_num_tokens"] == 15_328_256
    assert sglang_goldens.classify(o) == "refused-sglang"


def test_a_given_attention_backend_is_overridden_to_dsv4() -> None:
    """model_overrides/deepseek_v4.py declares attention_backend dsv4 and page 256 over the flags (oracle run with
    --attention-backend flashinfer: dsv4)."""
    wanted = "deepseek-ai--DeepSeek-V4-Flash__h200__tp8__attention-backend_flashinfer"
    case = next(c for c in CASES if c["id"] == wanted)
    assert case["resolved"]["attention_backend"] == "dsv4"
    o = sglang_goldens.replay(case)
    assert o.fit is not None and o.fit.defaults.attention_backend == "dsv4" and o.mismatches == []


def test_h200_tp8_flash_matches_sglangs_own_log_lines() -> None:
    case = next(c for c in CASES if c["id"] == "deepseek-ai--DeepSeek-V4-Flash__h200__tp8")
    o = sglang_goldens.replay(case)
    assert o.fit is not None and o.fit.pool is not None
    assert list(o.fit.pool.log_lines) == case["pool"]["log"]
    assert case["pool"]["log"][2] == ("DSV4 pool sizes: full=15328256, swa=1532672, c4=3832064, c128=119752, "
                                      "c4_state=47896, c128_state=0")
    assert (o.fit.defaults.page_size, o.fit.defaults.attention_backend, o.fit.kv_cache_dtype) == (256, "dsv4",
                                                                                                  "fp8_e4m3")


def test_pipeline_parallel_dsv4_stays_refused_with_or_without_a_draft() -> None:
    """PP splits DSV4's compressed pools per stage (DSV4PoolConfigurator's stage_owner_layers): not ported, nor
    with the MTP draft."""
    chip = get_gpu("h200")
    for dep in (SglangDeployment(tp=4, pp=2),
                SglangDeployment(tp=4, pp=2, speculative_algorithm="EAGLE", speculative_eagle_topk=1,
                                 speculative_num_steps=3, speculative_num_draft_tokens=4)):
        with pytest.raises(InvalidParameter, match="not modelled"):
            plan_sglang_fit(FLASH, chip, dep, weights_bytes=0, weights_range=(0, 0))


def test_flash_with_its_mtp_draft_follows_the_source_by_hand() -> None:
    """DSV4PoolConfigurator.__init__ with speculative decoding (no encoder replay, SGLang 0.5.23's default):
    get_compress_state_ring_size gives rings 16 / 256 (not 8 / 128), then both per-token figures × (43 + 1) / 43.
    SWA slot: 43 × 585 + 16 / 256 × 10,240 × 21 = 25,155 + 13,440 = 38,595, × 44 / 43.
    Full token: 0.1 × 38,595 + 3,764.25 + 135 = 7,758.75, × 44 / 43 = 7,939.19 (the log's 2 decimals).
    c128 state, 256 requests: rows ceil((257 × 256 + 256 + 1) / 128) × 128 = 66,176, × 2 × 512 × 4 B × 20 layers.
    100 GiB: full = int((107,374,182,400 − 5,421,137,920) / (7,758.75 × 44 / 43)) = 12,841,750 → 12,841,728;
    SWA 1,284,096; c4 state 5,016 pages × 16; c128 state 257 × 256."""
    part = dataclasses.replace(dsv4_part(FLASH), draft_tokens=4)
    assert (part.ring(4), part.ring(128)) == (16, 256)
    assert part.bytes_per_swa_token == 38_595 * 44 / 43
    assert part.bytes_per_full_token == 7_758.75 * 44 / 43
    assert part.c128_state_fixed_bytes(256) == 66_176 * 2 * 512 * 4 * 20 == 5_421_137_920
    s = size_dsv4(part, 100 << 30, max_running=None)
    assert (s.full_tokens, s.swa_tokens, s.c4_tokens, s.c128_tokens) == (12_841_728, 1_284_096, 3_210_432, 100_326)
    assert (s.c4_state_pool_size, s.c128_state_pool_size, s.max_running_requests) == (5_016 * 16, 257 * 256, 256)
    lines = log_lines(part, s)
    assert "bytes_per_full_token=7939.19" in lines[1] and "c128_state_fixed=5.05 GB" in lines[1]
    assert lines[2] == ("DSV4 pool sizes: full=12841728, swa=1284096, c4=3210432, c128=100326, c4_state=80256, "
                        "c128_state=0")


def test_dsv4_speculative_arguments_are_refused_as_deepseek_v4_hook_asserts() -> None:
    """arg_groups/deepseek_v4_hook.py:apply_deepseek_v4_defaults checks the algorithm and top-k as given, before
    the speculative hook aliases NEXTN to EAGLE (the oracle, SGLang 0.5.23 with --speculative-algorithm NEXTN:
    this AssertionError); _assert_ring_serves_draft_tokens caps draft tokens at 16 − 8 + 2 = 10."""
    chip = get_gpu("h200")
    for dep, words in ((SglangDeployment(tp=8, speculative_algorithm="NEXTN"), "Only EAGLE and DSPARK"),
                       (SglangDeployment(tp=8, speculative_algorithm="EAGLE"), "with topk == 1"),
                       (SglangDeployment(tp=8, speculative_algorithm="EAGLE", speculative_eagle_topk=1,
                                         speculative_num_steps=10, speculative_num_draft_tokens=11),
                        "ring_size=16 serves at most 10 draft tokens")):
        with pytest.raises(InvalidParameter, match=words):
            plan_sglang_fit(FLASH, chip, dep, weights_bytes=0, weights_range=(0, 0))


def test_dsv4_eagle_keeps_deepseek_v4s_256_requests() -> None:
    """apply_deepseek_v4_defaults sets max_running_requests 256 before the speculative hook, which then leaves it
    (no reset to 48): the oracle resolves 256 for Flash, TP 8, EAGLE 2 steps, top-k 1, 3 draft tokens."""
    dep = SglangDeployment(tp=8, speculative_algorithm="EAGLE", speculative_eagle_topk=1, speculative_num_steps=2,
                           speculative_num_draft_tokens=3)
    plan = plan_sglang_fit(FLASH, get_gpu("h200"), dep, weights_bytes=0, weights_range=(0, 0))
    assert plan.pool is not None and plan.pool.dsv4 is not None
    assert plan.pool.dsv4.max_running_requests == 256 and plan.pool.dsv4.c128_state_pool_size == 257 * 256


def test_size_engine_sglang_reports_the_dsv4_configurator() -> None:
    s = sglang_size(FLASH, tp=8)
    assert s.pool_configurator == "DSV4PoolConfigurator" and s.bytes_per_token == 7_086.75
    assert (s.swa_layers, s.swa_bytes_per_token, s.swa_full_tokens_ratio) == (43, 31_875, 0.1)


def test_fit_engine_sglang_answers_for_dsv4_on_the_command_line() -> None:
    model = ROOT / "tests/fixtures/corpus/configs/deepseek-ai--DeepSeek-V4-Flash"
    r = subprocess.run([sys.executable, "-m", "kvplan", "fit", str(model), "--engine", "sglang", "--gpu", "h200",
                        "--tp", "8", "--json"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["pool"]["dsv4"]["c128_state_pool_size"] == 32_896 and out["fits"] is True


def test_check_judges_dsv4_and_words_a_pool_build_refusal(tmp_path: Path) -> None:
    """kvplan check: DeepSeek-V4 under `engine: sglang` is planned (Flash, 8 × H200: 15,328,256 tokens at the
    default estimate); with bfloat16 KV the failed `starts` says SGLang's pool-build refusal, not `SGLang starts`."""
    model = ROOT / "tests/fixtures/corpus/configs/deepseek-ai--DeepSeek-V4-Flash"
    plan = tmp_path / "plan.yaml"
    plan.write_text("deployments:\n"
                    f"  - name: fp8\n    engine: sglang\n    model: {model}\n    gpu: h200\n    sglang: {{tp: 8}}\n"
                    "    require:\n      starts: true\n      min_kv_tokens: 10000000\n"
                    f"  - name: bf16\n    engine: sglang\n    model: {model}\n    gpu: h200\n"
                    "    sglang: {tp: 8, kv-cache-dtype: bfloat16}\n    require:\n      starts: true\n")
    r = subprocess.run([sys.executable, "-m", "kvplan", "check", str(plan)], capture_output=True, text=True,
                       cwd=ROOT, check=False)
    text = " ".join(r.stdout.split())
    assert r.returncode == 1, r.stderr
    assert "1 of 3 requirements fail." in text
    assert "bf16 starts: SGLang would not start: AssertionError:" in text
