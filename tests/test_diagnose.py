"""The pure half of `kvplan diagnose`: parsing vLLM expositions, PromQL quantiles, figures and rules.

Expositions are made by prometheus_client with vLLM's names, labels and buckets
(tests/fixtures/metrics/exposition.py); every expected figure below is computed by hand.
"""
from __future__ import annotations

import math

import pytest

from kvplan.errors import InvalidParameter, ParseError
from kvplan.observe.diagnose import (
    DiagnoseReport,
    Thresholds,
    compare_with_plan,
    diagnose,
    engine_figures,
    plan_diagnosis,
)
from kvplan.observe.metrics import Histogram, Quantile, histogram_quantile, parse_exposition
from tests.fixtures.metrics.exposition import EngineState, exposition

INF = math.inf
# le: 0.5, 0.75, 1.0, +Inf with cumulative counts 2, 6, 9, 10 (TTFT-like bounds).
H = Histogram(((0.5, 2.0), (0.75, 6.0), (1.0, 9.0), (INF, 10.0)), count=10.0, sum=7.0)


def _codes(report: DiagnoseReport) -> list[tuple[str, str]]:
    return [(d.code, d.severity) for d in report.diagnoses]


def _one(text: str, thresholds: Thresholds | None = None) -> DiagnoseReport:
    return diagnose(parse_exposition(text), thresholds=thresholds)


def _two(first: str, second: str, window_s: float, thresholds: Thresholds | None = None) -> DiagnoseReport:
    return diagnose(parse_exposition(second), parse_exposition(first), window_s, thresholds)


# ---- histogram_quantile: PromQL's interpolation


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.1, Quantile(0.1, 0.25, 0.0, 0.5)),  # rank 1 of 2 in the first bucket: 0 + 0.5 × 1/2
        (0.5, Quantile(0.5, 0.6875, 0.5, 0.75)),  # rank 5: 0.5 + 0.25 × (5−2)/4
        (0.9, Quantile(0.9, 1.0, 0.75, 1.0)),  # rank 9 = the bucket's top
        (0.95, Quantile(0.95, 1.0, 1.0, INF)),  # rank 9.5 in +Inf: the highest finite bound, a floor
    ],
)
def test_quantile_interpolates_within_the_bucket_as_promql(q: float, expected: Quantile) -> None:
    assert histogram_quantile(q, H) == expected


def test_quantile_makes_cumulative_counts_monotonic_first() -> None:
    # Counts 4, 3(!), 8, 8: PromQL's ensureMonotonic reads the second as 4; rank 6 → 0.75 + 0.25 × 2/4.
    h = Histogram(((0.5, 4.0), (0.75, 3.0), (1.0, 8.0), (INF, 8.0)), count=8.0, sum=5.0)
    assert histogram_quantile(0.75, h) == Quantile(0.75, 0.875, 0.75, 1.0)


def test_quantile_of_an_empty_histogram_is_none() -> None:
    assert histogram_quantile(0.5, Histogram(((1.0, 0.0), (INF, 0.0)), 0.0, 0.0)) is None


def test_quantile_outside_0_1_is_refused() -> None:
    with pytest.raises(InvalidParameter):
        histogram_quantile(1.5, H)


def test_histogram_since_subtracts_and_a_reset_keeps_the_new_counts() -> None:
    earlier = Histogram(((0.5, 1.0), (0.75, 2.0), (1.0, 4.0), (INF, 5.0)), count=5.0, sum=3.0)
    assert H.since(earlier) == Histogram(((0.5, 1.0), (0.75, 4.0), (1.0, 5.0), (INF, 5.0)), 5.0, 4.0)
    assert earlier.since(H) == earlier  # the count went down: the server restarted


# ---- parsing


def test_exposition_is_read_per_engine_with_vllm_buckets() -> None:
    text = exposition(
        EngineState(running=4, waiting=2, kv_usage=0.5, preemptions=7, prefix_queries=1000, prefix_hits=250,
                    success={"stop": 3, "length": 2}, ttft=[0.3, 0.6, 0.7, 2.0]),
        EngineState(model_name="meta-llama/Llama-3.1-8B", engine="1", running=1,
                    cache_config={"block_size": "32", "num_gpu_blocks": "900", "enable_prefix_caching": "False"}),
    )
    snap = parse_exposition(text)
    assert [e.key for e in snap.engines] == [("Qwen/Qwen2.5-7B", "0"), ("meta-llama/Llama-3.1-8B", "1")]
    a, b = snap.engines
    assert (a.num_requests_running, a.num_requests_waiting, a.kv_cache_usage) == (4, 2, 0.5)
    assert (a.num_preemptions, a.prefix_cache_queries, a.prefix_cache_hits) == (7, 1000, 250)
    assert a.request_success == 5  # summed over finished_reason
    ttft = a.histograms["ttft"]
    assert (ttft.count, ttft.sum) == (4, pytest.approx(3.6))
    assert len(ttft.buckets) == 23  # vLLM's 22 TTFT bounds + Inf
    assert dict(ttft.buckets)[0.75] == 3 and dict(ttft.buckets)[2.5] == 4
    assert a.cache_config["num_gpu_blocks"] == "1345" and b.cache_config["block_size"] == "32"
    assert b.num_requests_running == 1 and b.histograms["ttft"].count == 0


def test_older_metric_names_are_read_when_current_ones_are_absent() -> None:
    text = (
        '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name="m"} 0.42\n'
        '# TYPE vllm:gpu_prefix_cache_queries counter\nvllm:gpu_prefix_cache_queries_total{model_name="m"} 10\n'
        '# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total{model_name="m"} 20\n'
        '# TYPE vllm:time_per_output_token_seconds histogram\n'
        'vllm:time_per_output_token_seconds_bucket{le="0.1",model_name="m"} 3\n'
        'vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 4\n'
        'vllm:time_per_output_token_seconds_count{model_name="m"} 4\n'
        'vllm:time_per_output_token_seconds_sum{model_name="m"} 0.5\n'
    )
    (e,) = parse_exposition(text).engines
    assert (e.model_name, e.engine, e.kv_cache_usage) == ("m", None, 0.42)
    assert e.prefix_cache_queries == 20  # the current name wins over the old one
    assert e.histograms["itl"].buckets == ((0.1, 3.0), (INF, 4.0))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('vllm:num_requests_running{engine="0"} 1', "truncated"),
        ("<html><body>Not here</body></html>\n", "not a Prometheus text exposition"),
        ("# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 3.0\n", "no vLLM metrics"),
        ("", "no vLLM metrics"),
    ],
)
def test_unreadable_bodies_are_parse_errors(body: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_exposition(body)


# ---- figures over a window


def test_two_scrapes_give_rates_window_hit_rate_and_window_quantiles() -> None:
    before = EngineState(waiting=2, kv_usage=0.80, preemptions=10, prefix_queries=1000, prefix_hits=100,
                         prompt_tokens=5000, generation_tokens=800, ttft=[0.3] * 4)
    after = EngineState(waiting=5, kv_usage=0.95, preemptions=16, prefix_queries=3000, prefix_hits=150,
                        prompt_tokens=9000, generation_tokens=1800, ttft=[0.3] * 4 + [0.6, 0.6, 2.0, 2.0])
    now, then = parse_exposition(exposition(after)).engines[0], parse_exposition(exposition(before)).engines[0]
    f = engine_figures(now, then, 2.0)
    assert (f.preemptions, f.preemptions_per_s, f.preemptions_total) == (6, 3.0, 16)
    assert (f.waiting_change, f.kv_cache_usage_first) == (3, 0.80)
    assert (f.prefix_cache_queries, f.prefix_cache_hits, f.prefix_hit_rate) == (2000, 50, 0.025)
    assert (f.prompt_tokens_per_s, f.generation_tokens_per_s) == (2000.0, 500.0)
    ttft = f.latency("ttft")
    assert ttft is not None and ttft.count == 4  # only the 4 requests of the window
    # window buckets: ≤0.75: 2, ≤2.5: 4 → p50 = rank 2 → 0.5 + 0.25 × 2/2 = 0.75
    assert ttft.quantile(0.5) == Quantile(0.5, 0.75, 0.5, 0.75)


def test_a_counter_reset_counts_everything_now_as_new() -> None:
    now = parse_exposition(exposition(EngineState(preemptions=3))).engines[0]
    then = parse_exposition(exposition(EngineState(preemptions=50))).engines[0]
    assert engine_figures(now, then, 10.0).preemptions == 3


# ---- rules, one case per diagnosis


def test_kv_full_waiting_growing_and_preempting_is_a_critical_kv_shortage() -> None:
    first = exposition(EngineState(running=64, waiting=3, kv_usage=0.97, preemptions=10))
    second = exposition(EngineState(running=64, waiting=9, kv_usage=0.99, preemptions=14))
    report = _two(first, second, 2.0)
    assert _codes(report) == [("kv_shortage", "critical")]
    d = report.diagnoses[0]
    assert d.evidence["preemptions_per_s"] == 2.0 and d.evidence["waiting_change"] == 6
    assert any("--kv-cache-dtype fp8" in a for a in d.actions)
    assert any("--gpu-memory-utilization" in a for a in d.actions)
    assert any("--tensor-parallel-size" in a for a in d.actions)


def test_single_scrape_kv_shortage_is_critical_on_totals_and_asks_for_interval() -> None:
    report = _one(exposition(EngineState(waiting=4, kv_usage=0.93, preemptions=2)))
    assert _codes(report) == [("kv_shortage", "critical")]
    assert "--interval" in report.diagnoses[0].message


def test_full_kv_with_a_queue_that_does_not_grow_is_a_warning() -> None:
    first = exposition(EngineState(waiting=9, kv_usage=0.97, preemptions=10))
    second = exposition(EngineState(waiting=9, kv_usage=0.97, preemptions=12))
    assert _codes(_two(first, second, 5.0)) == [("kv_shortage", "warning")]


def test_old_preemptions_alone_are_not_a_finding() -> None:
    assert _codes(_one(exposition(EngineState(kv_usage=0.3, preemptions=40)))) == [("healthy", "ok")]


def test_waiting_with_low_kv_usage_is_a_batch_limit() -> None:
    report = _one(exposition(EngineState(running=256, waiting=30, kv_usage=0.35)))
    assert _codes(report) == [("batch_limit", "warning")]
    assert "--max-num-batched-tokens" in report.diagnoses[0].message


def test_batch_limit_names_max_num_seqs_when_running_reaches_it() -> None:
    report = _one(exposition(EngineState(running=256, waiting=30, kv_usage=0.35)), Thresholds(max_num_seqs=256))
    assert "is the limit" in report.diagnoses[0].message
    assert report.diagnoses[0].actions == ("raise --max-num-seqs (KV has room for more requests)",)


def test_kv_high_threshold_is_inclusive_and_configurable() -> None:
    text = exposition(EngineState(waiting=1, kv_usage=0.9))
    assert _codes(_one(text))[0][0] == "kv_shortage"  # 0.9 ≥ --kv-high 0.9
    assert _codes(_one(text, Thresholds(kv_high=0.95)))[0][0] == "batch_limit"


def test_low_prefix_hit_rate_lists_what_to_check() -> None:
    report = _one(exposition(EngineState(prefix_queries=50_000, prefix_hits=1_000)))
    assert _codes(report) == [("low_prefix_hit_rate", "warning")]
    d = report.diagnoses[0]
    assert d.evidence["prefix_hit_rate"] == 0.02
    text = " ".join(d.actions)
    for words in ("cache_salt", "system prompt", "timestamp", "full blocks of 16 tokens", "cyclic"):
        assert words in text


def test_hit_rate_is_not_judged_on_few_queries_or_with_caching_off() -> None:
    assert _codes(_one(exposition(EngineState(prefix_queries=500, prefix_hits=0)))) == [("healthy", "ok")]
    off = EngineState(prefix_queries=50_000, prefix_hits=0,
                      cache_config={"block_size": "16", "enable_prefix_caching": "False"})
    assert _codes(_one(exposition(off))) == [("healthy", "ok")]
    assert _codes(_one(exposition(EngineState(prefix_queries=50_000, prefix_hits=5_000)))) == [("healthy", "ok")]


def test_queue_time_p95_above_threshold_is_reported_with_its_bucket() -> None:
    # queue buckets …1.0, 1.5, 2.0…: 19 requests at 0.2 s, one at 1.8 s → rank 19 of 20 is in ≤0.3
    report = _one(exposition(EngineState(queue=[0.2] * 19 + [1.8])))
    assert _codes(report) == [("healthy", "ok")]
    # 10 at 0.2 s, 10 at 1.8 s → p95 rank 19 in (1.5, 2.0]: 1.5 + 0.5 × 9/10 = 1.95
    report = _one(exposition(EngineState(queue=[0.2] * 10 + [1.8] * 10)))
    assert _codes(report) == [("high_queue_time", "warning")]
    assert report.diagnoses[0].evidence["queue_p95_s"] == pytest.approx(1.95)
    assert (report.diagnoses[0].evidence["bucket_lower_s"], report.diagnoses[0].evidence["bucket_upper_s"]) == (
        1.5, 2.0)


def test_a_quiet_server_is_healthy() -> None:
    report = _one(exposition(EngineState(running=3, kv_usage=0.2, prefix_queries=10_000, prefix_hits=6_000)))
    assert _codes(report) == [("healthy", "ok")]
    assert report.diagnoses[0].message.startswith("3 running, 0 waiting, KV cache 20.0% used")


def test_engines_are_diagnosed_separately() -> None:
    report = _one(exposition(
        EngineState(model_name="a", engine="0", waiting=5, kv_usage=0.99, preemptions=1),
        EngineState(model_name="b", engine="0", kv_usage=0.1),
    ))
    assert [(d.model_name, d.code) for d in report.diagnoses] == [("a", "kv_shortage"), ("b", "healthy")]


def test_missing_kv_gauge_is_said_not_guessed() -> None:
    report = _one('# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0"} 0\n')
    assert _codes(report) == [("missing_metrics", "info")]


@pytest.mark.parametrize("kwargs", [{"kv_high": 0}, {"kv_high": 1.5}, {"hit_rate_low": -0.1},
                                    {"queue_p95_high_s": 0}, {"max_num_seqs": 0}])
def test_thresholds_out_of_range_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidParameter):
        Thresholds(**kwargs)  # type: ignore[arg-type]


# ---- plan comparison


def test_plan_comparison_in_tokens() -> None:
    c = compare_with_plan({"num_gpu_blocks": "1345", "block_size": "16"}, 1300, 16)
    assert (c.observed_tokens, c.predicted_tokens, c.difference_tokens) == (21_520, 20_800, 720)
    assert c.relative_difference == pytest.approx(720 / 21_520)
    assert c.block_size_matches
    assert plan_diagnosis(c, "m", "0").code == "plan_mismatch"  # 3.3% > 2%
    assert plan_diagnosis(c, "m", "0", tolerance=0.05).code == "plan_matches"
    other = compare_with_plan({"num_gpu_blocks": "1345", "block_size": "16"}, 168, 128)
    assert (other.predicted_tokens, other.block_size_matches) == (21_504, False)


def test_plan_comparison_needs_the_servers_figures() -> None:
    with pytest.raises(InvalidParameter, match="num_gpu_blocks"):
        compare_with_plan({"block_size": "16"}, 100, 16)


def test_core_modules_import_no_cli_or_network_libraries() -> None:
    import subprocess
    import sys

    code = ("import sys, kvplan.observe.diagnose, kvplan.vllm.startup_log, kvplan.observe.calibration; "
            "print(sorted(m for m in ('typer', 'rich', 'prometheus_client', 'urllib.request', 'yaml') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- impossible samples: reported as invalid, never diagnosed


def _raw(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


@pytest.mark.parametrize(("line", "metric"), [
    ('vllm:kv_cache_usage_perc{engine="0"} +Inf', "vllm:kv_cache_usage_perc"),
    ('vllm:kv_cache_usage_perc{engine="0"} NaN', "vllm:kv_cache_usage_perc"),
    ('vllm:kv_cache_usage_perc{engine="0"} 1.5', "vllm:kv_cache_usage_perc"),
    ('vllm:num_preemptions_total{engine="0"} -5', "vllm:num_preemptions_total"),
    ('vllm:num_requests_waiting{engine="0"} +Inf', "vllm:num_requests_waiting"),
    ('vllm:num_requests_running{engine="0"} -1', "vllm:num_requests_running"),
])
def test_impossible_samples_are_invalid_not_diagnosed(line: str, metric: str) -> None:
    base = {"vllm:kv_cache_usage_perc": 'vllm:kv_cache_usage_perc{engine="0"} 0.99',
            "vllm:num_requests_waiting": 'vllm:num_requests_waiting{engine="0"} 7',
            "vllm:num_preemptions_total": 'vllm:num_preemptions_total{engine="0"} 0',
            "vllm:num_requests_running": 'vllm:num_requests_running{engine="0"} 4'}
    base[metric] = line
    report = _one(_raw(*base.values()))
    codes = [d.code for d in report.diagnoses]
    assert codes[0] == "invalid_metrics"
    assert "healthy" not in codes and "missing_metrics" not in codes
    assert metric in report.diagnoses[0].message
    f = report.engines[0]
    assert metric in f.invalid
    for value in (f.kv_cache_usage, f.waiting, f.preemptions, f.running):
        assert value is None or (math.isfinite(value) and value >= 0)
    if metric == "vllm:num_requests_waiting":  # "inf requests waiting" never makes a kv_shortage
        assert "kv_shortage" not in codes and f.waiting is None


def test_inf_waiting_and_negative_preemptions_render_as_invalid_not_as_figures() -> None:
    from rich.console import Console

    from kvplan.render.diagnose import render_diagnose

    report = _one(_raw('vllm:kv_cache_usage_perc{engine="0"} +Inf', 'vllm:num_requests_waiting{engine="0"} +Inf',
                       'vllm:num_preemptions_total{engine="0"} -5'))
    assert [d.code for d in report.diagnoses] == ["invalid_metrics"]
    console = Console(width=200, record=True, color_system=None)
    console.print(render_diagnose(report))
    text = console.export_text()
    assert "inf%" not in text and "-5 (" not in text and "inf requests" not in text
    assert "invalid_metrics" in text


def test_an_impossible_histogram_is_dropped_and_named() -> None:
    report = _one(_raw('vllm:kv_cache_usage_perc{engine="0"} 0.1', 'vllm:num_requests_waiting{engine="0"} 0',
                       'vllm:request_queue_time_seconds_bucket{engine="0",le="1.0"} -3',
                       'vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf"} -3',
                       'vllm:request_queue_time_seconds_count{engine="0"} -3'))
    assert [d.code for d in report.diagnoses] == ["invalid_metrics"]
    assert report.engines[0].latency("queue") is None
    assert "vllm:request_queue_time_seconds" in report.engines[0].invalid


def test_an_impossible_first_scrape_is_named_as_such() -> None:
    first = _raw('vllm:kv_cache_usage_perc{engine="0"} 0.1', 'vllm:num_preemptions_total{engine="0"} -2')
    second = _raw('vllm:kv_cache_usage_perc{engine="0"} 0.1', 'vllm:num_preemptions_total{engine="0"} 2',
                  'vllm:num_requests_waiting{engine="0"} 0')
    report = _two(first, second, 10.0)
    assert report.diagnoses[0].code == "invalid_metrics"
    assert "at the first scrape" in report.engines[0].invalid["vllm:num_preemptions_total"]
