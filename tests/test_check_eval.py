"""`kvplan check` evaluation: each requirement's measurement, pinned with numbers computed by hand, and
equal to what the core functions (`kvplan fit`, `roofline`, `simulate serve`) give on the same settings.

The reference deployment: Qwen2.5-7B (28 layers × 4 KV heads × 128 × 2 (K,V) × 2 B = 57,344 B/token)
with --kv-cache-memory-bytes 1GiB (vLLM then uses exactly that, no profile) and max_model_len 4,096:
  bytes per block = 16 × 57,344 = 917,504 → num_gpu_blocks = 2³⁰ // 917,504 = 1,170, usable 1,169;
  a 4,096-token request holds 256 blocks → 1,169 // 256 = 4 run at once;
  GPU KV cache size = int(1,170 / 256 × 4,096) = 18,720 tokens;
  headroom with 4 × 4,096: (1,169 − 1,024) / 1,169 = 12.4038…%.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvplan.ci.checks import CheckResult, DeploymentResult, check_report, evaluate_deployment
from kvplan.ci.plan import load_plan
from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import get_gpu
from tests.conftest import CONFIGS, load_fixture

QWEN7 = str(CONFIGS / "Qwen--Qwen2.5-7B")
BASE_VLLM = "{max-model-len: 4096, kv-cache-memory-bytes: 1GiB, max-num-seqs: 8}"


def evaluate(tmp_path: Path, require: str, vllm: str = BASE_VLLM, extra: str = "") -> DeploymentResult:
    path = tmp_path / "plan.yaml"
    path.write_text(f"deployments:\n  - name: chat\n    model: {QWEN7}\n    gpu: h100\n    vllm: {vllm}\n{extra}"
                    f"    require:\n      {require}\n", encoding="utf-8")
    dep = load_plan(path).deployments[0]
    return evaluate_deployment(dep, load_fixture("Qwen--Qwen2.5-7B"), get_gpu(dep.gpu))


def only(result: DeploymentResult) -> CheckResult:
    assert len(result.checks) == 1
    return result.checks[0]


def test_headline_numbers_match_the_hand_computation(tmp_path: Path) -> None:
    r = evaluate(tmp_path, "starts: true")
    assert (r.num_gpu_blocks, r.kv_cache_tokens, r.max_model_len, r.max_num_seqs, r.startup) == (
        1170, 18720, 4096, 8, "ok")
    c = only(r)
    assert (c.passed, c.measured, c.line) == (True, "starts", 7)
    assert c.message == ("vLLM starts: GPU KV cache size: 18,720 tokens, Maximum concurrency for 4,096 tokens per "
                         "request: 4.57x")


def test_min_concurrency_at_the_boundary(tmp_path: Path) -> None:
    ok = only(evaluate(tmp_path, "min_concurrency: {value: 4, context: 4096}"))
    assert (ok.passed, ok.measured, ok.required, ok.margin, ok.margin_pct) == (True, 4, 4, 0, 0.0)
    short = only(evaluate(tmp_path, "min_concurrency: {value: 5, context: 4096}"))
    assert (short.passed, short.measured, short.margin, short.margin_pct) == (False, 4, -1, -20.0)
    assert short.message == ("4 requests of 4,096 tokens run at once (1,169 usable blocks ÷ 256 per request); "
                             "required ≥ 5")


def test_min_concurrency_is_capped_by_max_num_seqs(tmp_path: Path) -> None:
    # 1,024 tokens = 64 blocks: 1,169 // 64 = 18 fit, but max_num_seqs 8 run at once.
    c = only(evaluate(tmp_path, "min_concurrency: {value: 10, context: 1024}"))
    assert (c.passed, c.measured) == (False, 8)
    assert c.message.startswith("8 requests of 1,024 tokens run at once (max_num_seqs 8 caps it)")


def test_min_concurrency_defaults_to_max_model_len(tmp_path: Path) -> None:
    c = only(evaluate(tmp_path, "min_concurrency: 4"))
    assert (c.context, c.measured, c.passed) == (4096, 4, True)


def test_no_preemption_counts_what_fits_against_the_running_requests(tmp_path: Path) -> None:
    ok = only(evaluate(tmp_path, "no_preemption: {concurrency: 4, context: 4096}"))
    assert (ok.passed, ok.measured, ok.required) == (True, 4, 4)
    bad = only(evaluate(tmp_path, "no_preemption: {concurrency: 5, context: 4096}"))
    assert (bad.passed, bad.measured, bad.required, bad.margin) == (False, 4, 5, -1)
    assert bad.message == ("5 requests of 4,096 tokens need 1,280 blocks but only 1,169 are usable: preemption is "
                           "possible from the 5th such request running at once.")


def test_no_preemption_beyond_max_num_seqs_judges_the_requests_that_run(tmp_path: Path) -> None:
    # 100 asked, max_num_seqs 8 run: 8 × 64 = 512 ≤ 1,169 blocks, the other 92 wait (no preemption).
    c = only(evaluate(tmp_path, "no_preemption: {concurrency: 100, context: 1024}"))
    assert (c.passed, c.required, c.concurrency, c.measured) == (True, 8, 100, 18)
    assert c.message.endswith("(100 asked; max_num_seqs 8 run at once, the rest wait in the queue)")


def test_no_preemption_true_uses_max_num_seqs_and_max_model_len(tmp_path: Path) -> None:
    c = only(evaluate(tmp_path, "no_preemption: true"))
    assert (c.context, c.concurrency, c.passed, c.measured, c.required) == (4096, 8, False, 4, 8)


def test_min_kv_tokens(tmp_path: Path) -> None:
    ok = only(evaluate(tmp_path, "min_kv_tokens: 18720"))
    assert (ok.passed, ok.measured, ok.margin) == (True, 18720, 0)
    bad = only(evaluate(tmp_path, "min_kv_tokens: 32k"))  # 32,000
    assert (bad.passed, bad.required, bad.margin) == (False, 32000, 18720 - 32000)


def test_fp8_cache_doubles_the_blocks(tmp_path: Path) -> None:
    # 458,752 B per block: 2³⁰ // 458,752 = 2,340 blocks → 2,339 usable // 256 = 9 requests; 37,440 tokens.
    vllm = "{max-model-len: 4096, kv-cache-memory-bytes: 1GiB, kv-cache-dtype: fp8}"
    r = evaluate(tmp_path, "min_concurrency: 9", vllm)
    assert (r.num_gpu_blocks, r.kv_cache_tokens, only(r).measured, only(r).passed) == (2340, 37440, 9, True)


def test_headroom_is_the_share_of_usable_blocks_left(tmp_path: Path) -> None:
    c = only(evaluate(tmp_path, "min_headroom_pct: {value: 12, concurrency: 4, context: 4096}"))
    assert c.passed and c.measured == pytest.approx(145 / 1169 * 100)
    assert c.message == ("4 requests of 4,096 tokens use 1,024 of 1,169 usable KV blocks: 12.4% left; "
                         "required ≥ 12% left")
    over = only(evaluate(tmp_path, "min_headroom_pct: {value: 0, concurrency: 5, context: 4096}"))
    assert not over.passed and over.measured == pytest.approx(-111 / 1169 * 100)
    assert "need 1,280 KV blocks but only 1,169 are usable (111 short)" in over.message


def test_context_above_max_model_len_fails_as_unrunnable(tmp_path: Path) -> None:
    c = only(evaluate(tmp_path, "min_concurrency: {value: 1, context: 8192}"))
    assert (c.passed, c.measured) == (False, None)
    assert c.message == "context 8,192 is above max_model_len 4,096: vLLM rejects such requests"


def test_a_deployment_that_does_not_start_fails_every_requirement(tmp_path: Path) -> None:
    # 32,768 tokens need 2,048 blocks (1.75 GiB) > 1 GiB − one block: vLLM refuses; estimated 18,704 tokens
    # = (1,170 − 1 null-block reserve − 1) × 16.
    r = evaluate(tmp_path, "starts: true\n      min_kv_tokens: 1",
                 "{max-model-len: 32768, kv-cache-memory-bytes: 1GiB}")
    start, tokens = r.checks
    assert (r.passed, r.startup, start.passed, start.measured) == (False, "refuses: max_model_len", False,
                                                                    "refuses: max_model_len")
    assert "the estimated maximum model length is 18704" in start.message
    assert (tokens.passed, tokens.measured, tokens.message) == (
        False, None, "vLLM would not start (refuses: max_model_len)")


def test_decode_requirements_equal_the_roofline(tmp_path: Path) -> None:
    from kvplan.hardware import roofline as rl

    r = evaluate(tmp_path, "min_decode_throughput: {value: 100, batch: 4, context: 2048}\n"
                           "      max_itl_ms: {value: 1, batch: 4, context: 2048}")
    tput, itl = r.checks
    gpu = get_gpu("h100")
    point = rl.decode_point(*rl.deployment_roofline(load_fixture("Qwen--Qwen2.5-7B"), gpu), 4, 2048)
    assert tput.measured == point.tokens_per_s and tput.passed
    assert itl.measured == point.itl_s * 1000 and not itl.passed  # a 7B model cannot decode in 1 ms
    assert itl.margin == pytest.approx(1 - point.itl_s * 1000)
    assert itl.message.startswith(f"inter-token latency {point.itl_s * 1000:,.2f} ms at batch 4 × 2,048 tokens "
                                  "(memory-bound roofline)")


def test_decode_batch_that_cannot_run_fails_with_the_reason(tmp_path: Path) -> None:
    over_seqs = only(evaluate(tmp_path, "min_decode_throughput: {value: 1, batch: 16, context: 1024}"))
    assert not over_seqs.passed and isinstance(over_seqs.measured, float)
    assert over_seqs.message.endswith("but the batch cannot run: batch 16 is above max_num_seqs 8")
    over_kv = only(evaluate(tmp_path, "min_decode_throughput: {value: 1, batch: 6, context: 4096}"))
    assert over_kv.message.endswith("but the batch cannot run: the KV cache holds only 4 requests of 4,096 tokens")


def test_ttft_is_seeded_and_equals_the_simulator(tmp_path: Path) -> None:
    from kvplan.hardware import roofline as rl
    from kvplan.sim.scheduler import SchedulerConfig, simulate_serve
    from kvplan.sim.workloads import SyntheticLoad, parse_length_dist, synthetic_serve_requests

    extra = ("    workload: {num_requests: 60, request_rate: 20, prompt_len: 'uniform:256:1024', output_len: 64, "
             "seed: 3}\n")
    first = only(evaluate(tmp_path, "max_p99_ttft_ms: 10000", extra=extra))
    again = only(evaluate(tmp_path, "max_p99_ttft_ms: 10000", extra=extra))
    assert first.measured == again.measured and first.passed

    gpu = get_gpu("h100")
    requests = synthetic_serve_requests(SyntheticLoad(60, request_rate=20, arrival="poisson",
                                                      prompt_len=parse_length_dist("uniform:256:1024"),
                                                      output_len=parse_length_dist("64"), seed=3), block_size=16)
    sim = simulate_serve(requests, SchedulerConfig(num_gpu_blocks=1170, block_size=16, max_num_seqs=8,
                                                   max_num_batched_tokens=8192, max_model_len=4096),
                         rl.RooflineCost(*rl.deployment_roofline(load_fixture("Qwen--Qwen2.5-7B"), gpu)))
    assert first.measured == sim.time_to_first_token_seconds.p99 * 1000
    assert first.message.startswith(f"simulated p99 TTFT {sim.time_to_first_token_seconds.p99 * 1000:,.1f} ms over "
                                    "60 requests (20 req/s poisson, prompt uniform:256:1024, output 64, seed 3)")


def test_workload_longer_than_max_model_len_is_bad_input_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameter) as info:
        evaluate(tmp_path, "max_p99_ttft_ms: {value: 100, workload: {prompt_len: 5000}}")
    assert str(info.value) == (f"{tmp_path / 'plan.yaml'}:7: deployments[0].require.max_p99_ttft_ms: request 0: "
                               "prompt + output = 5,128 tokens exceeds max-model-len 4,096")


def test_settings_vllm_refuses_point_at_the_vllm_key(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameter) as info:
        evaluate(tmp_path, "starts: true", "{tensor-parallel-size: 3}")
    assert str(info.value).startswith(f"{tmp_path / 'plan.yaml'}:5: deployments[0].vllm: --tensor-parallel-size 3 "
                                      "does not divide the 28 attention heads")


def test_report_counts_failures_in_plan_order(tmp_path: Path) -> None:
    r = evaluate(tmp_path, "starts: true\n      min_kv_tokens: 99999\n      min_concurrency: 5")
    report = check_report("plan.yaml", [r])
    assert (report.passed, report.num_requirements, report.num_failed) == (False, 3, 2)
    assert [c.requirement for _, c in report.failures] == ["min_kv_tokens", "min_concurrency"]
    assert math.isclose(report.deployments[0].checks[1].margin_pct or 0, (18720 - 99999) / 99999 * 100)
