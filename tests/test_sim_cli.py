"""`kvplan simulate prefix|serve` from the command line: the document's scenario, JSON, errors, layering."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.sim.prefix import simulate_prefix
from kvplan.sim.scheduler import FixedCost, SchedulerConfig, simulate_serve
from kvplan.sim.workloads import SyntheticLoad, cyclic_documents, parse_length_dist, synthetic_serve_requests

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures" / "configs"
DOC_CALL = ["simulate", "prefix", "--scenario", "cyclic", "--docs", "10", "--doc-tokens", "5033",
            "--num-gpu-blocks", "1345", "--block-size", "16", "--json"]


def test_document_scenario_json_has_one_pass_object_per_pass() -> None:
    result = runner.invoke(app, DOC_CALL, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "simulate-prefix" and data["schema_version"] == 2
    assert [p["hit_tokens"] for p in data["passes"]] == [0, 0, 21_488]
    assert [p["name"] for p in data["passes"]] == ["in order", "same order", "reversed"]
    assert "cyclic access defeats LRU" in data["passes"][1]["reason"]
    assert data["usable_blocks"] == 1344
    assert data["no_eviction"]["num_gpu_blocks"] == 3142
    assert result.stderr == ""


def test_json_equals_the_core_result() -> None:
    data = json.loads(runner.invoke(app, DOC_CALL, catch_exceptions=False).stdout)
    core = simulate_prefix(cyclic_documents(10, 5033, 16), num_gpu_blocks=1345, block_size=16)
    for p, c in zip(data["passes"], core.passes, strict=True):
        assert (p["query_tokens"], p["hit_tokens"], p["evicted_blocks"]) == (c.query_tokens, c.hit_tokens,
                                                                              c.evicted_blocks)


def test_human_output_explains_the_zero_hits() -> None:
    result = runner.invoke(app, DOC_CALL[:-1], catch_exceptions=False, env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "21,488" in result.stdout
    assert "cyclic access defeats LRU" in result.stdout
    assert "3,142 blocks (50,272 tokens) never evict" in result.stdout


def test_kv_tokens_is_blocks_times_block_size() -> None:
    a = json.loads(runner.invoke(app, [*DOC_CALL[:8], "--kv-tokens", "21520", "--json"]).stdout)
    assert a["num_gpu_blocks"] == 1345
    assert [p["hit_tokens"] for p in a["passes"]] == [0, 0, 21_488]


def test_missing_pool_size_is_a_one_line_error() -> None:
    result = runner.invoke(app, ["simulate", "prefix"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: give the pool size as one of --num-gpu-blocks, --kv-tokens, or --model "
                                    "with --gpu")
    assert len(result.stderr.strip().splitlines()) == 1


def test_cpu_offload_in_bytes_needs_bytes_per_token() -> None:
    base = ["simulate", "prefix", "--num-gpu-blocks", "1345", "--json"]
    bad = runner.invoke(app, [*base, "--cpu-offload-bytes", "2GiB"])
    assert bad.exit_code == 2 and "--kv-bytes-per-token" in bad.stderr
    # Qwen2.5-1.5B: 28,672 bytes per token; 2 GiB hold 74,898 tokens, more than the 50,330 of all documents
    ok = json.loads(runner.invoke(app, [*base, "--cpu-offload-bytes", "2GiB", "--kv-bytes-per-token", "28672"]).stdout)
    assert ok["offload"]["cpu_offload_tokens"] == 2**31 // 28672
    assert ok["passes"][1]["cpu_hit_tokens"] == 10 * 4864
    both = runner.invoke(app, [*base, "--cpu-offload-bytes", "2GiB", "--cpu-offload-tokens", "64k"])
    assert both.exit_code == 2


def test_prefix_trace_file(tmp_path: Path) -> None:
    doc = list(range(100))
    lines = [{"timestamp": 0, "token_ids": doc, "phase": "first"},
             {"timestamp": 1, "token_ids": doc + [7, 8], "phase": "again"},
             {"timestamp": 2, "token_ids": doc, "cache_salt": "other-tenant", "phase": "again"}]
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines))
    data = json.loads(runner.invoke(app, ["simulate", "prefix", "--trace", str(f), "--num-gpu-blocks", "100",
                                          "--json"], catch_exceptions=False).stdout)
    assert data["scenario"] == "trace"
    # the 2nd request hits all 6 full blocks of the 100 tokens; the salted 3rd hits nothing
    assert [(p["name"], p["hit_tokens"]) for p in data["passes"]] == [("first", 0), ("again", 96)]


def test_bad_trace_line_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"prompt_len": 10}\n{"prompt_len": -1}\n')
    result = runner.invoke(app, ["simulate", "prefix", "--trace", str(f), "--num-gpu-blocks", "100"])
    assert result.exit_code == 2
    assert f"{f}:2:" in result.stderr


def test_serve_json_names_metrics_like_vllm() -> None:
    args = ["simulate", "serve", "--num-gpu-blocks", "600", "--num-requests", "64", "--max-num-seqs", "32",
            "--max-num-batched-tokens", "2048", "--prompt-len", "uniform:200:800", "--output-len", "uniform:100:600",
            "--seed", "7", "--step-ms", "10", "--ms-per-token", "0", "--ms-per-context-ktok", "0",
            "--ttft-slo", "2s", "--tpot-slo", "50", "--json"]
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "simulate-serve"
    for name in ("time_to_first_token_seconds", "inter_token_latency_seconds", "request_queue_time_seconds",
                 "e2e_request_latency_seconds", "request_time_per_output_token_seconds"):
        assert set(data[name]) == {"count", "mean", "p50", "p95", "p99", "max"}
    assert set(data["kv_cache_usage_perc"]) >= {"mean", "p95", "max", "timeline"}
    reqs = synthetic_serve_requests(SyntheticLoad(64, request_rate=float("inf"), arrival="poisson",
                                                  prompt_len=parse_length_dist("uniform:200:800"),
                                                  output_len=parse_length_dist("uniform:100:600"), seed=7),
                                    block_size=16)
    core = simulate_serve(reqs, SchedulerConfig(600, 16, 32, 2048), FixedCost(0.01, 0.0, 0.0),
                          ttft_slo_s=2.0, tpot_slo_s=0.05)
    assert data["num_preemptions"] == core.num_preemptions > 0
    assert data["goodput"]["good_requests"] == core.goodput.good_requests  # type: ignore[union-attr]
    assert data["goodput"]["tpot_slo_s"] == 0.05


def test_serve_human_output() -> None:
    result = runner.invoke(app, ["simulate", "serve", "--num-gpu-blocks", "321", "--num-requests", "4",
                                 "--max-num-seqs", "4", "--prompt-len", "1024", "--output-len", "257"],
                           catch_exceptions=False, env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "num_preemptions: 0." in result.stdout
    assert "TTFT" in result.stdout and "kv_cache_usage_perc" in result.stdout


def test_serve_empirical_lengths_and_trace(tmp_path: Path) -> None:
    lengths = tmp_path / "lens.txt"
    lengths.write_text("100\n200\n300\n")
    ok = runner.invoke(app, ["simulate", "serve", "--num-gpu-blocks", "500", "--num-requests", "10",
                             "--prompt-len", f"empirical:{lengths}", "--json"], catch_exceptions=False)
    assert json.loads(ok.stdout)["prompt_tokens"] % 100 == 0
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 1000, "input_length": 40, "output_length": 3, "hash_ids": [1]}\n'
                     '{"timestamp": 3000, "input_length": 40, "output_length": 3, "hash_ids": [1]}\n')
    data = json.loads(runner.invoke(app, ["simulate", "serve", "--num-gpu-blocks", "50", "--trace", str(trace),
                                          "--trace-block-size", "32", "--trace-timestamp-unit", "ms", "--json",
                                          "--step-ms", "1", "--ms-per-token", "0", "--ms-per-context-ktok", "0"],
                                    catch_exceptions=False).stdout)
    assert data["num_requests"] == 2
    assert data["prefix_cache_hits"] == 32  # the second request hits the first's two 16-token blocks
    assert data["duration_s"] == pytest.approx(2.003)  # arrivals 0 and 2 s; 3 steps of 1 ms each


def test_bad_length_spec_is_exit_2() -> None:
    result = runner.invoke(app, ["simulate", "serve", "--num-gpu-blocks", "500", "--prompt-len", "normal:5"])
    assert result.exit_code == 2
    assert "examples: 2048" in result.stderr


def test_core_simulators_do_not_import_the_cli_stack() -> None:
    code = ("import sys, kvplan.sim.prefix, kvplan.sim.scheduler, kvplan.sim.sizing; "
            "print(sorted(m for m in ('typer', 'rich', 'huggingface_hub', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_help_example_runs() -> None:
    import shlex

    from kvplan.cli import simulate

    # Hub ids in the examples, read from the fixture configs (no network in tests).
    local = {"Qwen/Qwen2.5-1.5B": "Qwen--Qwen2.5-1.5B", "meta-llama/Llama-3.1-8B": "meta-llama--Meta-Llama-3.1-8B"}
    examples = [line.strip() for _, _, _, epilog in simulate.COMMANDS for line in epilog.splitlines()
                if line.strip().startswith("kvplan ")]
    assert len(examples) == 6
    for line in examples:
        args = [str(FIXTURES / local[a]) if a in local else a for a in shlex.split(line)[1:]]
        result = runner.invoke(app, args if "--json" in args else [*args, "--json"])
        assert result.exit_code == 0, (line, result.stderr)
        json.loads(result.stdout)
