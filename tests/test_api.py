"""The library surface: `import kvplan` is cheap and every public name resolves to the core objects
the CLI renders."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import kvplan
from tests.conftest import CONFIGS


def test_every_public_name_resolves() -> None:
    for name in kvplan.__all__:
        assert getattr(kvplan, name) is not None


def test_library_fit_equals_the_vllm_numbers() -> None:
    spec = kvplan.load_model(str(CONFIGS / "Qwen--Qwen2.5-1.5B"))
    report = kvplan.plan_fit(spec, kvplan.get_gpu("h100"),
                             kvplan.ServeSettings.of(max_model_len=32768, kv_cache_memory_bytes=60 * 2**30))
    # vllm-reference §10(a): 60 GiB of KV → 140,434 blocks, 2,246,944 tokens, 68.57x.
    got = (report.cache.num_gpu_blocks, report.cache.kv_cache_tokens, round(report.scheduler.max_concurrency, 2))
    assert got == (140_434, 2_246_944, 68.57)


def test_the_report_parts_are_public_names() -> None:
    from kvplan import (  # the names a library user annotates with (kvplan/__init__.py)
        Advice,
        CacheSummary,
        DeploymentSummary,
        GroupSummary,
        KVCapacity,
        LoggedCacheConfig,
        LoggedModelConfig,
        LoggedParallelConfig,
        LoggedSchedulerConfig,
        LoggedSettings,
        LogLine,
        MemoryBudget,
        MemorySummary,
        SchedulerSummary,
        StageSummary,
        StartupFailure,
        StartupLog,
        Timings,
        TowerSummary,
        VerdictSummary,
    )
    from kvplan.vllm import report as report_module
    from kvplan.vllm import startup_log

    spec = kvplan.load_model(str(CONFIGS / "Qwen--Qwen2.5-1.5B"))
    report = kvplan.plan_fit(spec, kvplan.get_gpu("h100"), kvplan.ServeSettings.of(max_model_len=32768))
    parts = (report.deployment, report.memory, report.cache, report.scheduler, report.verdict)
    assert [type(p) for p in parts] == [DeploymentSummary, MemorySummary, CacheSummary, SchedulerSummary,
                                        VerdictSummary]
    assert isinstance(report.cache.groups[0], GroupSummary)
    assert (Advice, TowerSummary, StageSummary) == (report_module.Advice, report_module.TowerSummary,
                                                    report_module.StageSummary)
    log = kvplan.parse_startup_log((ROOT / "examples/vllm-startup.log").read_text(encoding="utf-8"))
    assert type(log) is StartupLog and isinstance(log.lines[0], LogLine)
    assert [type(p) for p in (log.settings, log.memory, log.capacity, log.failure, log.timings)] == [
        LoggedSettings, MemoryBudget, KVCapacity, StartupFailure, Timings]
    assert [type(c) for c in (log.settings.model_config, log.settings.cache_config, log.settings.parallel_config,
                              log.settings.scheduler_config)] == [LoggedModelConfig, LoggedCacheConfig,
                                                                  LoggedParallelConfig, LoggedSchedulerConfig]
    # every class a report part is, or a startup log nests, is public (a new part must be exported too)
    nested = [f.default_factory for cls in (startup_log.StartupLog, startup_log.LoggedSettings)
              for f in dataclasses.fields(cls) if isinstance(f.default_factory, type)]
    for cls in (*report_module._PART_TYPES, *nested):
        assert getattr(kvplan, cls.__name__) is cls


def test_import_kvplan_loads_no_submodule() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, kvplan; print(sorted(m for m in sys.modules "
                          "if m.startswith('kvplan.')))"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- the library is what the CLI calls: same answers, same refusals ----------------------------------------------

ROOT = CONFIGS.parents[2]
QWEN_7B = str(CONFIGS / "Qwen--Qwen2.5-7B")


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _json(kind: str, report: object) -> str:
    from kvplan.render.json import dumps

    return dumps(kind, report)


def test_library_fit_is_the_fit_command() -> None:
    report = kvplan.fit(QWEN_7B, "h100", max_model_len=32768, kv_cache_dtype="fp8", max_num_seqs=64)
    code, out, _ = _cli("fit", QWEN_7B, "--gpu", "h100", "--max-model-len", "32768", "--kv-cache-dtype", "fp8",
                        "--max-num-seqs", "64", "--json")
    assert code == 0 and report.verdict.fits
    assert _json("fit", report) == out.strip()


def test_library_fit_reads_a_pasted_vllm_line_and_num_gpus_as_the_command_does() -> None:
    line = f"VLLM_USE_V2_MODEL_RUNNER=0 vllm serve {QWEN_7B} --max-model-len 16384 --port 8000"
    report = kvplan.fit(vllm_cmd=line, gpu="l40s", num_gpus=4, pipeline_parallel_size=2, environ={})
    code, out, _ = _cli("fit", "--vllm-cmd", line, "--gpu", "l40s", "--num-gpus", "4", "-pp", "2", "--json")
    assert code == 0 and (report.deployment.tp, report.deployment.pp) == (2, 2)
    assert _json("fit", report) == out.strip()


def test_library_fit_without_a_gpu_is_the_sweep() -> None:
    small = str(CONFIGS / "Qwen--Qwen2.5-1.5B")
    report = kvplan.fit(small, max_model_len=8192, concurrency=4)
    code, out, _ = _cli("fit", small, "--max-model-len", "8192", "--concurrency", "4", "--json")
    assert code == 0 and report.rows
    assert _json("fit-sweep", report) == out.strip()


def test_library_size_is_the_size_command() -> None:
    report = kvplan.size(QWEN_7B, kv_cache_dtype="fp8", tp=2)
    code, out, _ = _cli("size", QWEN_7B, "--kv-cache-dtype", "fp8", "-tp", "2", "--json")
    assert code == 0 and report.kv_bytes_per_token == 14_336  # 28 layers × 2 × 2 KV heads (4 ÷ TP 2) × 128 × 1 B
    assert _json("size", report) == out.strip()


def test_library_check_is_the_check_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plan = str(ROOT / "examples" / "plan.yaml")
    report = kvplan.check(plan)
    code, out, _ = _cli("check", plan, "--offline", "--json")
    assert code == 0 and report.passed and report.num_requirements == 15
    assert _json("check", report) == out.strip()


def _refusal(call: Callable[[], object], *cli_args: str) -> tuple[str, str]:
    """The library's error as the CLI words it, and the CLI's own `Error:` line."""
    from kvplan.errors import KvplanError

    try:
        call()
    except KvplanError as exc:
        library = f"Error: {exc}" + (f" ({exc.hint})" if exc.hint else "")
    else:
        raise AssertionError("the library did not refuse")
    code, _, err = _cli(*cli_args)
    assert code == 2
    return library, err.strip()


def test_library_refuses_bad_flags_as_the_command_does() -> None:
    library, cli = _refusal(lambda: kvplan.fit(QWEN_7B, "h100", max_model_len="32k tokens"),
                            "fit", QWEN_7B, "--gpu", "h100", "--max-model-len", "32k tokens")
    assert library == cli and "--max-model-len" in cli
    library, cli = _refusal(lambda: kvplan.fit(QWEN_7B, "h100", tensor_parallel_size=2, num_gpus=3),
                            "fit", QWEN_7B, "--gpu", "h100", "-tp", "2", "--num-gpus", "3")
    assert library == cli and "not a multiple of -tp 2" in cli
    library, cli = _refusal(lambda: kvplan.fit(QWEN_7B, "h100", tensor_parallel_size=3),
                            "fit", QWEN_7B, "--gpu", "h100", "-tp", "3")
    assert library == cli


def test_library_load_model_refuses_a_config_as_vllm_does(tmp_path: Path) -> None:
    """RecurrentGemma (test_model_rules): kvplan cannot read it, and vLLM would refuse it at layer 0: the library,
    like every command, gives vLLM's reason, not kvplan's."""
    raw = json.loads((CONFIGS.parent / "corpus" / "configs" / "unsloth--gemma-2-2b" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(
        {**raw, "model_type": "recurrent_gemma", "architectures": ["RecurrentGemmaForCausalLM"]}))
    library, cli = _refusal(lambda: kvplan.load_model(str(tmp_path)), "fit", str(tmp_path), "--gpu", "h100")
    assert library == cli
    assert cli.startswith("Error: Layer 0 does not dispatch through the Transformers attention interface")


def test_library_fit_names_an_unknown_option() -> None:
    from kvplan.errors import InvalidParameter

    try:
        kvplan.fit(QWEN_7B, "h100", max_model_lenn=4096)
    except InvalidParameter as exc:
        assert str(exc) == "unknown fit option 'max_model_lenn' (did you mean max_model_len?)"
    else:
        raise AssertionError("an unknown option was accepted")


def test_library_roofline_is_the_roofline_command() -> None:
    """kvplan.roofline gives `kvplan roofline --json`'s report, its KV capacity from the same fit."""
    report = kvplan.roofline(QWEN_7B, "h100", context="8K", batch="1,8,64", kv_cache_dtype="fp8",
                             tensor_parallel_size=2)
    code, out, _ = _cli("roofline", QWEN_7B, "--gpu", "h100", "--context", "8K", "--batch", "1,8,64",
                        "--kv-cache-dtype", "fp8", "-tp", "2", "--json")
    assert code == 0 and report.context == 8192 and [p.batch for p in report.batches] == [1, 8, 64]
    assert _json("roofline", report) == out.strip()
    assert kvplan.roofline(QWEN_7B, "h100", context=8192, batch=[1, 8, 64], kv_cache_dtype="fp8",
                           tensor_parallel_size=2) == report  # numbers as well as texts


def test_library_roofline_reads_a_pasted_line_and_sglang_as_the_command_does() -> None:
    line = f"vllm serve {QWEN_7B} -tp 2 --kv-cache-dtype fp8_e4m3"
    warnings: list[str] = []
    notes: list[str] = []
    report = kvplan.roofline(vllm_cmd=line, gpu="h100", engine="sglang", on_warning=warnings.append,
                             on_note=notes.append)
    code, out, err = _cli("roofline", "--vllm-cmd", line, "--gpu", "h100", "--engine", "sglang", "--json")
    assert code == 0 and report.engine == "sglang" and report.tp == 2
    assert _json("roofline", report) == out.strip()
    assert (warnings, [f"Note: {n}" for n in notes]) == ([], [err.strip()])
    assert notes[0].startswith("KV capacity, running-request cap")


def test_library_roofline_refuses_as_the_command_does() -> None:
    library, cli = _refusal(lambda: kvplan.roofline(QWEN_7B), "roofline", QWEN_7B)
    assert library == cli and "--gpu is needed" in cli
    library, cli = _refusal(lambda: kvplan.roofline(QWEN_7B, "h100", batch="1,0"),
                            "roofline", QWEN_7B, "--gpu", "h100", "--batch", "1,0")
    assert library == cli and "--batch" in cli
    library, cli = _refusal(lambda: kvplan.roofline(QWEN_7B, "h100", engine="sglang", max_num_seqs=8),
                            "roofline", QWEN_7B, "--gpu", "h100", "--engine", "sglang", "--max-num-seqs", "8")
    assert library == cli and "--max-num-seqs is a vLLM flag" in cli
    library, cli = _refusal(lambda: kvplan.roofline(QWEN_7B, "no-such-gpu"), "roofline", QWEN_7B, "--gpu",
                            "no-such-gpu")
    assert library == cli


def test_library_roofline_names_an_unknown_option() -> None:
    from kvplan.errors import InvalidParameter

    with pytest.raises(InvalidParameter,
                       match=r"^unknown roofline option 'max_num_seq' \(did you mean max_num_seqs\?\)$"):
        kvplan.roofline(QWEN_7B, "h100", max_num_seq=8)


def test_the_roofline_maths_keeps_a_public_name() -> None:
    """`kvplan.roofline` is the command since the library gained it; the maths on costs and roofs it named before
    is `kvplan.roofline_report` (kvplan.hardware.roofline.roofline, unchanged)."""
    from kvplan.hardware import roofline as rl

    assert kvplan.roofline_report is rl.roofline
    spec = kvplan.load_model(QWEN_7B)
    gpu = kvplan.get_gpu("h100")
    costs, roof = rl.deployment_roofline(spec, gpu, tp=1, kv_cache_dtype="auto", weights_bytes=None)
    report = kvplan.roofline_report(costs, roof, context=4096, batches=[1], prompt_tokens=4096,
                                    max_num_batched_tokens=8192, kv_capacity_batch=None, max_num_seqs=1024,
                                    gpu_flops=gpu.flops)
    assert report.batches[0].batch == 1


METRICS = str(ROOT / "examples" / "metrics.prom")


def test_library_diagnose_is_the_diagnose_command() -> None:
    report = kvplan.diagnose(METRICS, kv_high=0.8, max_num_seqs=64)
    code, out, _ = _cli("diagnose", METRICS, "--kv-high", "0.8", "--max-num-seqs", "64", "--json")
    assert code == 0 and report.diagnoses
    assert _json("diagnose", report) == out.strip()


def test_library_diagnose_with_a_plan_is_the_command_with_plan(tmp_path: Path) -> None:
    """A saved exposition whose cache_config_info shows the 62,241 blocks kvplan predicts for Qwen2.5-7B on an
    H100 (tests/test_diagnose_plan.py): the plan matches, through the library as through the command."""
    from tests.fixtures.metrics.exposition import DEFAULT_CACHE_CONFIG, EngineState, exposition

    saved = tmp_path / "metrics.txt"
    saved.write_text(exposition(EngineState(running=3, kv_usage=0.2, cache_config={
        **DEFAULT_CACHE_CONFIG, "num_gpu_blocks": "62241"})))
    report = kvplan.diagnose(str(saved), plan=QWEN_7B, gpu="h100")
    code, out, _ = _cli("diagnose", str(saved), "--plan", QWEN_7B, "--gpu", "h100", "--json")
    assert code == 0 and [d.code for d in report.diagnoses] == ["healthy", "plan_matches"]
    assert _json("diagnose", report) == out.strip()


def test_library_diagnose_refuses_as_the_command_does() -> None:
    library, cli = _refusal(lambda: kvplan.diagnose(METRICS, gpu="h100"), "diagnose", METRICS, "--gpu", "h100")
    assert library == cli and "only applies with --plan MODEL" in cli
    library, cli = _refusal(lambda: kvplan.diagnose(METRICS, interval=5), "diagnose", METRICS, "--interval", "5")
    assert library == cli and "--interval needs a URL" in cli
    library, cli = _refusal(lambda: kvplan.diagnose(METRICS, kv_high=1.5, gpu="h100"),
                            "diagnose", METRICS, "--kv-high", "1.5", "--gpu", "h100")
    assert library == cli and "--kv-high must be within" in cli  # the thresholds are checked before --plan's options
    library, cli = _refusal(lambda: kvplan.diagnose(METRICS, plan=QWEN_7B), "diagnose", METRICS, "--plan", QWEN_7B)
    assert library == cli and "--plan needs the server's GPU" in cli


def test_library_diagnose_names_an_unknown_option_and_keeps_the_rules_public() -> None:
    """`kvplan.diagnose` is the command; the rules on a parsed snapshot it named before are
    `kvplan.diagnose_report` (kvplan.observe.diagnose.diagnose, unchanged)."""
    from kvplan.errors import InvalidParameter
    from kvplan.observe.diagnose import diagnose as rules

    with pytest.raises(InvalidParameter, match=r"^unknown diagnose option 'gpu_mem' \(did you mean gpu_memory\?\)$"):
        kvplan.diagnose(METRICS, gpu_mem="80GB")
    assert kvplan.diagnose_report is rules
    snapshot = kvplan.parse_exposition(Path(METRICS).read_text(encoding="utf-8"))
    assert kvplan.diagnose_report(snapshot, source=METRICS) == kvplan.diagnose(METRICS)


# --- kvplan simulate prefix|serve -----------------------------------------------------------------------------------

QWEN_15B = str(CONFIGS / "Qwen--Qwen2.5-1.5B")
# The starting document's pool (tests/test_sim_cli_fit.py): 'GPU KV cache size: 21,520 tokens' = 1,345 blocks of 16
# tokens of Qwen2.5-1.5B, 458,752 bytes each.
DOC_DEPLOYMENT = {"model": QWEN_15B, "gpu": "l4", "kv_cache_memory_bytes": str(1345 * 458_752),
                  "max_model_len": "8192", "max_num_seqs": 4, "max_num_batched_tokens": "2048"}
DOC_DEPLOYMENT_ARGS = ["--model", QWEN_15B, "--gpu", "l4", "--kv-cache-memory-bytes", str(1345 * 458_752),
                       "--max-model-len", "8192", "--max-num-seqs", "4", "--max-num-batched-tokens", "2048"]


def test_library_simulate_prefix_is_the_command_on_the_documents_scenario() -> None:
    """The starting document's ten documents of 5,033 tokens through 1,345 blocks: no hits in order and again
    (cyclic access defeats LRU), 21,488 reversed; 3,142 blocks never evict (tests/test_sim_cli.py)."""
    report = kvplan.simulate_prefix("cyclic", docs=10, doc_tokens=5033, num_gpu_blocks=1345, block_size=16)
    code, out, _ = _cli("simulate", "prefix", "--scenario", "cyclic", "--docs", "10", "--doc-tokens", "5033",
                        "--num-gpu-blocks", "1345", "--block-size", "16", "--json")
    assert code == 0 and [p.hit_tokens for p in report.passes] == [0, 0, 21_488]
    assert report.usable_blocks == 1344 and report.no_eviction is not None
    assert report.no_eviction.num_gpu_blocks == 3142 and report.deployment is None
    assert _json("simulate-prefix", report) == out.strip()
    assert kvplan.simulate_prefix(kv_tokens="21520") == report  # the same pool in tokens, the command's defaults


def test_library_simulate_prefix_sized_by_fit_is_the_command() -> None:
    """--model/--gpu: fit's pool is the logged 1,345 blocks (21,520 tokens), and its 28,672 KV bytes per token turn
    --cpu-offload-bytes 2GiB into the CPU tier's tokens."""
    report = kvplan.simulate_prefix(docs=10, doc_tokens=5033, cpu_offload_bytes="2GiB", **DOC_DEPLOYMENT)
    code, out, _ = _cli("simulate", "prefix", "--docs", "10", "--doc-tokens", "5033", *DOC_DEPLOYMENT_ARGS,
                        "--cpu-offload-bytes", "2GiB", "--json")
    assert code == 0 and report.deployment is not None
    assert (report.deployment.num_gpu_blocks, report.deployment.kv_cache_tokens) == (1345, 21_520)
    assert report.offload.cpu_offload_tokens == 2**31 // 28_672
    assert [p.hit_tokens for p in report.passes] == [0, 0, 21_488]
    assert _json("simulate-prefix", report) == out.strip()


def test_library_simulate_serve_is_the_command() -> None:
    """64 requests at once through 600 blocks and 32 seats at a fixed 10 ms per step: the run preempts, as the
    scheduler alone (kvplan.serve_report) does on the same requests."""
    from kvplan.sim.scheduler import FixedCost, SchedulerConfig
    from kvplan.sim.workloads import SyntheticLoad, parse_length_dist, synthetic_serve_requests

    finished: list[tuple[int, int]] = []
    report = kvplan.simulate_serve(64, num_gpu_blocks=600, max_num_seqs=32, max_num_batched_tokens="2048",
                                   prompt_len="uniform:200:800", output_len="uniform:100:600", seed=7, step_ms=10,
                                   ms_per_token=0, ms_per_context_ktok=0, ttft_slo="2s", tpot_slo="50",
                                   on_progress=lambda done, total: finished.append((done, total)))
    code, out, _ = _cli("simulate", "serve", "--num-gpu-blocks", "600", "--num-requests", "64", "--max-num-seqs",
                        "32", "--max-num-batched-tokens", "2048", "--prompt-len", "uniform:200:800", "--output-len",
                        "uniform:100:600", "--seed", "7", "--step-ms", "10", "--ms-per-token", "0",
                        "--ms-per-context-ktok", "0", "--ttft-slo", "2s", "--tpot-slo", "50", "--json")
    assert code == 0 and _json("simulate-serve", report) == out.strip()
    requests = synthetic_serve_requests(SyntheticLoad(64, request_rate=float("inf"), arrival="poisson",
                                                      prompt_len=parse_length_dist("uniform:200:800"),
                                                      output_len=parse_length_dist("uniform:100:600"), seed=7),
                                        block_size=16)
    core = kvplan.serve_report(requests, SchedulerConfig(600, 16, 32, 2048), FixedCost(0.01, 0.0, 0.0),
                               ttft_slo_s=2.0, tpot_slo_s=0.05)
    assert report.num_preemptions == core.num_preemptions > 0 and report == core
    assert finished[-1] == (64, 64)


def test_library_simulate_serve_with_a_deployment_is_the_command() -> None:
    """Qwen2.5-1.5B on an H100: one request of 2,048 prompt tokens, timed by the roofline (989.4 TFLOP/s BF16)."""
    report = kvplan.simulate_serve(1, model=QWEN_15B, gpu="h100", max_model_len="8192", prompt_len="2048",
                                   output_len="1")
    code, out, _ = _cli("simulate", "serve", "--model", QWEN_15B, "--gpu", "h100", "--max-model-len", "8192",
                        "--num-requests", "1", "--prompt-len", "2048", "--output-len", "1", "--json")
    assert code == 0 and report.cost_model == "roofline" and report.cost_model_params["peak_flops"] == 989.4e12
    assert report.deployment is not None and report.deployment.compute_dtype == "bf16"
    assert _json("simulate-serve", report) == out.strip()


def test_library_simulate_serve_reads_a_trace_as_the_command_does(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 1000, "input_length": 40, "output_length": 3, "hash_ids": [1]}\n'
                     '{"timestamp": 3000, "input_length": 40, "output_length": 3, "hash_ids": [1]}\n')
    report = kvplan.simulate_serve(num_gpu_blocks=50, trace=trace, trace_block_size=32, trace_timestamp_unit="ms",
                                   step_ms=1, ms_per_token=0, ms_per_context_ktok=0)
    code, out, _ = _cli("simulate", "serve", "--num-gpu-blocks", "50", "--trace", str(trace), "--trace-block-size",
                        "32", "--trace-timestamp-unit", "ms", "--step-ms", "1", "--ms-per-token", "0",
                        "--ms-per-context-ktok", "0", "--json")
    assert code == 0 and (report.num_requests, report.prefix_cache_hits) == (2, 32)
    assert report.duration_s == pytest.approx(2.003)  # arrivals 0 and 2 s; 3 steps of 1 ms each
    assert _json("simulate-serve", report) == out.strip()


@pytest.mark.parametrize(("call", "args", "says"), [
    (lambda: kvplan.simulate_prefix(), [], "give the pool size as one of --num-gpu-blocks"),
    (lambda: kvplan.simulate_prefix(model=QWEN_15B), ["--model", QWEN_15B], "--model and --gpu go together"),
    (lambda: kvplan.simulate_prefix(model=QWEN_15B, gpu="l4", kv_tokens="21520"),
     ["--model", QWEN_15B, "--gpu", "l4", "--kv-tokens", "21520"], "not several"),
    (lambda: kvplan.simulate_prefix(num_gpu_blocks=1345, kv_cache_dtype="fp8"),
     ["--num-gpu-blocks", "1345", "--kv-cache-dtype", "fp8"], "--kv-cache-dtype describes a deployment"),
    (lambda: kvplan.simulate_prefix("trace", num_gpu_blocks=100), ["--scenario", "trace", "--num-gpu-blocks", "100"],
     "--scenario trace needs --trace FILE"),
    (lambda: kvplan.simulate_prefix(num_gpu_blocks=1345, cpu_offload_bytes="2GiB"),
     ["--num-gpu-blocks", "1345", "--cpu-offload-bytes", "2GiB"], "needs --kv-bytes-per-token"),
    (lambda: kvplan.simulate_prefix(num_gpu_blocks=1345, cpu_offload_bytes="2GiB", cpu_offload_tokens="64k"),
     ["--num-gpu-blocks", "1345", "--cpu-offload-bytes", "2GiB", "--cpu-offload-tokens", "64k"], "give one of"),
    (lambda: kvplan.simulate_prefix(num_gpu_blocks=1345, kv_offloading_size="8"),
     ["--num-gpu-blocks", "1345", "--kv-offloading-size", "8"], "--kv-offloading-size needs --model and --gpu"),
    (lambda: kvplan.simulate_prefix(kv_tokens="21k tokens"), ["--kv-tokens", "21k tokens"], "--kv-tokens"),
    (lambda: kvplan.simulate_prefix(docs=10, doc_tokens=5033, **{**DOC_DEPLOYMENT, "max_model_len": "4096"}),
     ["--docs", "10", "--doc-tokens", "5033", *DOC_DEPLOYMENT_ARGS[:-6], "--max-model-len", "4096"],
     "request 0: prompt + output = 5,034 tokens exceeds max_model_len 4,096"),
])
def test_library_simulate_prefix_refuses_as_the_command_does(call: Callable[[], object], args: list[str],
                                                             says: str) -> None:
    library, cli = _refusal(call, "simulate", "prefix", *args)
    assert library == cli and says in cli and len(cli.splitlines()) == 1


@pytest.mark.parametrize(("call", "args", "says"), [
    (lambda: kvplan.simulate_serve(), [], "give the pool size as one of --num-gpu-blocks"),
    (lambda: kvplan.simulate_serve(10_000_000, num_gpu_blocks=100), ["--num-requests", "10000000",
                                                                      "--num-gpu-blocks", "100"],
     "--num-requests: 10,000,000 is more than kvplan's serve simulation runs"),
    (lambda: kvplan.simulate_serve(num_gpu_blocks=100, compute_efficiency=0.5),
     ["--num-gpu-blocks", "100", "--compute-efficiency", "0.5"], "--compute-efficiency describes a deployment"),
    (lambda: kvplan.simulate_serve(model=QWEN_15B, gpu="h100", max_model_len="8192", step_ms=10,
                                   compute_efficiency=0.5),
     ["--model", QWEN_15B, "--gpu", "h100", "--max-model-len", "8192", "--step-ms", "10", "--compute-efficiency",
      "0.5"], "which --step-ms"),
    (lambda: kvplan.simulate_serve(num_gpu_blocks=100, request_rate="fast"),
     ["--num-gpu-blocks", "100", "--request-rate", "fast"], "--request-rate: cannot read 'fast'"),
    (lambda: kvplan.simulate_serve(num_gpu_blocks=100, trace_timestamp_unit="us"),
     ["--num-gpu-blocks", "100", "--trace-timestamp-unit", "us"], "--trace-timestamp-unit must be s or ms"),
    (lambda: kvplan.simulate_serve(num_gpu_blocks=500, prompt_len="normal:5"),
     ["--num-gpu-blocks", "500", "--prompt-len", "normal:5"], "examples: 2048"),
    (lambda: kvplan.simulate_serve(num_gpu_blocks=100, ttft_slo="soon"),
     ["--num-gpu-blocks", "100", "--ttft-slo", "soon"], "--ttft-slo: cannot read 'soon'"),
    (lambda: kvplan.simulate_serve(num_gpu_blocks=100, max_num_batched_tokens="0"),
     ["--num-gpu-blocks", "100", "--max-num-batched-tokens", "0"], "--max-num-batched-tokens"),
    (lambda: kvplan.simulate_serve(model=str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), gpu="l4"),
     ["--model", str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--gpu", "l4"], "vLLM would not start"),
])
def test_library_simulate_serve_refuses_as_the_command_does(call: Callable[[], object], args: list[str],
                                                            says: str) -> None:
    library, cli = _refusal(call, "simulate", "serve", *args)
    assert library == cli and says in cli and len(cli.splitlines()) == 1


def test_library_simulate_names_an_unknown_option_and_keeps_the_simulators_public() -> None:
    """`kvplan.simulate_prefix` / `simulate_serve` are the commands; the simulators on a workload in hand they named
    before are `kvplan.prefix_report` and `kvplan.serve_report` (kvplan/sim/, unchanged)."""
    from kvplan.errors import InvalidParameter
    from kvplan.sim import prefix, scheduler
    from kvplan.sim.workloads import cyclic_documents

    with pytest.raises(InvalidParameter, match=r"^unknown simulate serve option 'kv_cache_dtyp' \(did you mean "
                                               r"kv_cache_dtype\?\)$"):
        kvplan.simulate_serve(num_gpu_blocks=100, kv_cache_dtyp="fp8")
    with pytest.raises(InvalidParameter, match=r"^unknown simulate prefix option 'bandwidth_efficiency'$"):
        kvplan.simulate_prefix(num_gpu_blocks=100, bandwidth_efficiency=0.5)
    assert kvplan.prefix_report is prefix.simulate_prefix and kvplan.serve_report is scheduler.simulate_serve
    assert kvplan.prefix_report(cyclic_documents(10, 5033, 16), num_gpu_blocks=1345, block_size=16) == \
        kvplan.simulate_prefix(num_gpu_blocks=1345)
