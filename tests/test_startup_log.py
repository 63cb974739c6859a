"""The startup-log parser against every record of the public calibration set, and against each log line
format of vllm-reference.md §1.2/§3 (V1) and of V0 worker.py.

Records whose excerpt lacks a figure are listed in ABSENT with the reason; for those the parser must
find nothing (so the list stays honest), for every other figure it must equal the record.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.units import GiB
from kvplan.vllm.startup_log import StartupLog, parse_startup_log

DATA = Path(__file__).parent / "fixtures" / "data" / "vllm-startup-logs.yaml"
RECORDS: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["records"]


def _gib(value: int | None) -> float | None:
    # Every GiB figure in the logs has ≤ 4 decimals, so rounding to 4 gives back the printed number.
    return None if value is None else round(value / GiB, 4)


def _weights(log: StartupLog) -> int | None:
    # The records copy the profiler's 2-decimal figure ("model weights take 5.20GiB") when a log has both
    # it and the load line ("Loading model weights took 5.2032 GB").
    memory = log.memory
    return memory.weights_profiled_bytes if memory.weights_profiled_bytes is not None else memory.weights_loaded_bytes


# record field → the parser's value in the record's unit
FIELD_MAP: dict[str, Callable[[StartupLog], Any]] = {
    "total_gpu_memory_gib": lambda s: _gib(s.memory.total_gpu_memory_bytes),
    "model_weights_gib": lambda s: _gib(_weights(s)),
    "activation_peak_gib": lambda s: _gib(s.memory.activation_peak_bytes),
    "non_torch_gib": lambda s: _gib(s.memory.non_torch_bytes),
    "available_kv_gib": lambda s: _gib(s.memory.available_kv_bytes),
    "kv_needed_gib": lambda s: _gib(s.failure.kv_needed_bytes),
    "kv_cache_tokens": lambda s: s.capacity.kv_cache_tokens,
    "num_gpu_blocks": lambda s: s.capacity.num_gpu_blocks,
    "max_concurrency": lambda s: s.capacity.max_concurrency,
    "max_concurrency_len": lambda s: s.capacity.concurrency_max_model_len,
    "estimated_max_model_len": lambda s: s.failure.estimated_max_model_len,
    "gpu_memory_utilization": lambda s: s.settings.cache_config.gpu_memory_utilization,
    "max_model_len": lambda s: s.settings.model_config.max_model_len,
    "tp": lambda s: s.settings.parallel_config.tensor_parallel_size,
    "pp": lambda s: s.settings.parallel_config.pipeline_parallel_size,
    "block_size": lambda s: s.settings.cache_config.block_size,
    "max_num_seqs": lambda s: s.settings.scheduler_config.max_num_seqs,
}
# Numeric record fields that no vLLM log line prints.
UNMAPPED = {
    "num_gpus": "the number of GPUs is the collector's note, not a vLLM log figure",
    "cuda_graph_delta_gib": "an llm-d table column; every excerpt has it only in that table",
}

LLMD_TABLE = "only in llm-d's summary table row, not a vLLM log line"
NOT_IN_EXCERPT = "not in the stored excerpt (the record took it from elsewhere in the source)"
LLMD_ALL = dict.fromkeys(
    ["tp", "max_model_len", "activation_peak_gib", "non_torch_gib", "total_gpu_memory_gib",
     "model_weights_gib", "available_kv_gib"],
    LLMD_TABLE,
) | {"gpu_memory_utilization": NOT_IN_EXCERPT}
LLMD_WITH_BULLETS = {k: v for k, v in LLMD_ALL.items() if k not in ("model_weights_gib", "available_kv_gib")}
LLMD_WITH_FREE_LINE = {k: v for k, v in LLMD_WITH_BULLETS.items() if k != "total_gpu_memory_gib"}

ABSENT: dict[str, dict[str, str]] = {
    "vllm-pr10511-llama3-8b-tp2": {"gpu_memory_utilization": NOT_IN_EXCERPT},
    "vllm-10517-rtx3090-llama31-8b-29k": {"model_weights_gib": "the excerpt starts at the profiling line"},
    "llmd-h100-gpt-oss-20b": LLMD_WITH_FREE_LINE,
    "llmd-h100-gpt-oss-120b": LLMD_ALL,
    "llmd-h100-llama33-70b-fp8-tp2": LLMD_WITH_FREE_LINE,
    "llmd-h100-llama33-70b-fp8-tp1-failed": LLMD_WITH_BULLETS,
    "llmd-h100-llama31-8b": LLMD_WITH_FREE_LINE,
    "llmd-h100-qwen3-0.6b-16k": LLMD_WITH_BULLETS,
    "llmd-h100-qwen3-0.6b-32k": LLMD_WITH_BULLETS,
    "llmd-h100-qwen3-32b-tp1-16k": LLMD_ALL,
    "llmd-h100-qwen3-32b-tp1-32k-failed": LLMD_ALL,
    "llmd-h100-qwen3-32b-tp2": LLMD_ALL,
    # Its "Maximum concurrency for 16,000 tokens" bullet prints max_model_len, so that one is present.
    "llmd-h100-mistral-small-32-24b": {
        k: v for k, v in LLMD_WITH_FREE_LINE.items() if k != "max_model_len"
    } | {
        "block_size": "llm-d's bullet and '(1,444 blocks x 128 tokens/block)' annotation, not vLLM lines",
        "num_gpu_blocks": "llm-d's '(1,444 blocks x 128 tokens/block)' annotation, not a vLLM line",
    },
    "hf-cookbook-t4-llama32-3b": {
        "tp": "the engine-config line is cut off before tensor_parallel_size",
        "pp": "the engine-config line is cut off before pipeline_parallel_size",
        "max_num_seqs": NOT_IN_EXCERPT,
    },
}
# Figures the log prints rounded: (record id, field) → what the log says.
PRINTED_ROUNDED = {
    ("hf-cookbook-t4-llama32-3b", "gpu_memory_utilization"): 0.89,  # V0 prints util with 2 decimals
}


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_every_numeric_record_field_is_mapped_or_explained() -> None:
    fields = {k for r in RECORDS for k, v in r.items() if _numeric(v)}
    assert fields - FIELD_MAP.keys() - UNMAPPED.keys() == set()


def test_absent_lists_name_real_records_and_fields() -> None:
    ids = {r["id"] for r in RECORDS}
    assert ABSENT.keys() <= ids
    assert all(f in FIELD_MAP for fields in ABSENT.values() for f in fields)


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_figures_equal_what_the_parser_reads(record: dict[str, Any]) -> None:
    log = parse_startup_log(record["log_excerpt"])
    absent = ABSENT.get(record["id"], {})
    for field, read in FIELD_MAP.items():
        expected = record.get(field)
        if expected is None:
            continue
        got = read(log)
        if field in absent:
            assert got is None, f"{field}: listed as absent ({absent[field]}) but the parser read {got}"
            continue
        expected = PRINTED_ROUNDED.get((record["id"], field), expected)
        assert got == expected, f"{field}: record {expected}, parsed {got}"


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_version_matches_when_the_log_prints_it(record: dict[str, Any]) -> None:
    log = parse_startup_log(record["log_excerpt"])
    if log.settings.vllm_version is not None:
        assert str(record["vllm_version"]).startswith(log.settings.vllm_version)


def _record(record_id: str) -> StartupLog:
    return parse_startup_log(next(r for r in RECORDS if r["id"] == record_id)["log_excerpt"])


def test_v0_engine_config_line_gives_the_settings() -> None:
    log = _record("vllm-15815-2xl40s-qwen25-32b")
    assert (log.settings.vllm_version, log.settings.engine_version) == ("0.7.1", "V0")
    assert log.settings.model_config.model == "../models/qwen25_32b_instruct_HF/"
    assert (log.settings.model_config.dtype, log.settings.model_config.max_model_len) == ("bfloat16", 10000)
    assert (log.settings.parallel_config.tensor_parallel_size,
            log.settings.parallel_config.pipeline_parallel_size) == (2, 1)
    assert (log.settings.model_config.quantization, log.settings.model_config.enforce_eager,
            log.settings.cache_config.kv_cache_dtype) == (None, False, "auto")
    assert log.memory.requested_memory_bytes == round(39.98 * GiB)


def test_v0_log_keeps_both_weight_figures() -> None:
    log = _record("vllm-13882-rtx4060-qwen25-7b")
    assert log.memory.weights_loaded_bytes == round(5.2032 * GiB)  # "Loading model weights took 5.2032 GB" (GiB)
    assert log.memory.weights_profiled_bytes == round(5.20 * GiB)
    assert log.memory.model_weights_bytes == round(5.2032 * GiB)  # the load line has more digits
    assert log.memory.available_kv_bytes == -round(1.05 * GiB)
    assert log.failure.reason is None


def test_v0_max_len_error_gives_kv_tokens_and_failure() -> None:
    log = _record("vllm-10517-rtx3090-llama31-8b-29k")
    assert (log.failure.reason, log.settings.model_config.max_model_len,
            log.capacity.kv_cache_tokens) == ("max_len_exceeds_kv", 29000, 23648)
    assert log.memory.peak_torch_bytes == round(17.98 * GiB)


def test_echoed_command_line_gives_model_and_flags() -> None:
    log = _record("vllm-27508-h100-gpt-oss-120b")
    assert log.settings.model_config.model == "openai/gpt-oss-120b"
    assert (log.settings.cache_config.gpu_memory_utilization,
            log.settings.scheduler_config.max_num_batched_tokens) == (0.95, 1024)
    assert (log.failure.reason, log.failure.kv_error_available_bytes) == ("max_len_exceeds_kv", round(1.71 * GiB))
    assert _record("vllm-pr10511-llama3-8b-tp2").settings.parallel_config.tensor_parallel_size == 2  # "-tp 2"


# ---- V1 formats (vllm-reference.md §1.2, §3.2, §3.3): one synthetic log in vLLM 0.33's wording.
_E = "(EngineCore pid=2) INFO 11-02 10:00:00"
V1_LOG = "\n".join([
    "(APIServer pid=1) INFO [api_server.py:1839] vLLM API server version 0.33.0",
    "(APIServer pid=1) INFO [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen2.5-7B', "
    "'model': 'Qwen/Qwen2.5-7B', 'max_model_len': 32768, 'gpu_memory_utilization': 0.9, "
    "'kv_cache_dtype': 'fp8', 'lora_modules': [LoRAModulePath(name='a', path='b')], 'max_num_seqs': 256}",
    "(APIServer pid=1) INFO [model.py:1500] Using max model len 32768",
    f"{_E} [core.py:90] Initializing a V1 LLM engine (v0.33.0) with config: model='Qwen/Qwen2.5-7B', "
    "speculative_config=None, tokenizer='Qwen/Qwen2.5-7B', dtype=torch.bfloat16, max_seq_len=32768, "
    "tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=False, "
    'kv_cache_dtype=fp8, compilation_config={"level":3,"cudagraph_capture_sizes":[512,504]}, '
    "enable_prefix_caching=True",
    f"{_E} [model_runner.py:407] Model loading took 14.25 GiB memory and 5.420225 seconds",
    f"{_E} [gpu_worker.py:280] Initial free memory: 78.84 GiB; Requested memory: 0.9 (util), 71.27 GiB",
    f"{_E} [gpu_worker.py:291] Free memory after profiling: 62.5 GiB (total), 54.2 GiB (within requested)",
    f"{_E} [gpu_worker.py:297] Memory profiling takes 7.29 seconds. Total non KV cache memory: 16.32GiB; "
    "torch peak memory increase: 1.44GiB; total consumed (from mem_get_info): 14.88GiB; "
    "weights memory: 14.25GiB.",
    f"{_E} [gpu_worker.py:300] CUDA graph memory profiling is enabled (default since v0.21.0). The current "
    "--gpu-memory-utilization=0.9000 is equivalent to --gpu-memory-utilization=0.8971 without CUDA graph "
    "memory profiling. To maintain the same effective KV cache size as before, increase "
    "--gpu-memory-utilization to 0.9029. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
    f"{_E} [gpu_worker.py:298] Available KV cache memory: 54.72 GiB",
    f"{_E} [kv_cache_utils.py:1087] GPU KV cache size: 1,992,640 tokens, Maximum concurrency for "
    "32,768 tokens per request: 60.81x",
    f"{_E} [model_runner.py:791] Graph capturing finished in 6 secs, took 0.45 GiB",
    f"{_E} [gpu_worker.py:790] CUDA graph pool memory: 0.45 GiB (actual), 0.23 GiB (estimated), "
    "difference: 0.22 GiB (95.7%).",
    f"{_E} [gpu_worker.py:955] Free memory on device (78.84/79.19 GiB) on startup. Desired GPU memory "
    "utilization is (0.9, 71.27 GiB). Actual usage is 14.88 GiB for consumed memory (weights + non-torch), "
    "1.67 GiB for peak activation, and 0.45 GiB for CUDAGraph memory. Replace gpu_memory_utilization "
    "config with --kv-cache-memory=58333988249 (54.33 GiB) to fit into requested memory, or "
    "--kv-cache-memory=66273897472 (61.72 GiB) to fully utilize gpu memory. Current kv cache memory in "
    "use is 54.72 GiB.",
    f"{_E} [core.py:218] init engine (profile, create kv cache, warmup model) took 21.82 s",
])


def test_v1_log_every_figure() -> None:
    log = parse_startup_log(V1_LOG)
    assert (log.settings.vllm_version, log.settings.engine_version,
            log.settings.model_config.model) == ("0.33.0", "V1", "Qwen/Qwen2.5-7B")
    assert (log.settings.model_config.max_model_len, log.settings.cache_config.gpu_memory_utilization) == (32768, 0.9)
    assert (log.settings.cache_config.kv_cache_dtype, log.settings.scheduler_config.max_num_seqs,
            log.settings.model_config.dtype) == ("fp8", 256, "bfloat16")
    assert (log.settings.parallel_config.tensor_parallel_size, log.settings.model_config.enforce_eager,
            log.settings.cache_config.enable_prefix_caching) == (1, False, True)
    assert log.memory.weights_loaded_bytes == round(14.25 * GiB) and log.timings.model_load_seconds == 5.420225
    assert log.memory.free_at_init_bytes == round(78.84 * GiB)
    assert log.memory.requested_memory_bytes == round(71.27 * GiB)
    assert log.memory.free_after_profile_bytes == round(62.5 * GiB)
    assert (log.timings.profile_seconds, log.memory.non_kv_cache_bytes) == (7.29, round(16.32 * GiB))
    # 0.27+: the usage line's peak activation is the transient peak (non-KV − consumed = 1.44) plus the
    # CUDA-graph estimate (0.23), v1/worker/gpu_worker.py:determine_available_memory.
    assert (log.memory.activation_peak_bytes,
            log.memory.activation_with_graphs_bytes) == (round(1.44 * GiB), round(1.67 * GiB))
    assert log.memory.consumed_memory_bytes == round(14.88 * GiB)
    assert log.memory.weights_profiled_bytes == round(14.25 * GiB)
    assert log.memory.available_kv_bytes == round(54.72 * GiB)
    assert (log.capacity.kv_cache_tokens, log.capacity.concurrency_max_model_len) == (1_992_640, 32768)
    assert log.capacity.max_concurrency == 60.81
    assert log.timings.graph_capture_seconds == 6.0
    assert (log.memory.cuda_graph_bytes, log.memory.cuda_graph_estimate_bytes) == (round(0.45 * GiB), round(0.23 * GiB))
    assert log.memory.total_gpu_memory_bytes == round(79.19 * GiB)
    assert (log.memory.kv_cache_memory_fit_bytes,
            log.memory.kv_cache_memory_full_bytes) == (58_333_988_249, 66_273_897_472)
    assert log.timings.init_engine_seconds == 21.82
    assert log.failure.reason is None
    assert [ln.number for ln in log.lines] == list(range(1, 16))  # all 15 lines tell something


def test_v1_older_wordings() -> None:
    # 0.10: separate capacity lines, "non-torch forward increase memory", "GiB for weight", KV in bytes.
    log = parse_startup_log("\n".join([
        "INFO [gpu_worker.py:297] Memory profiling takes 14.40 seconds. Total non KV cache memory: "
        "10.22GiB; torch peak memory increase: 1.40GiB; non-torch forward increase memory: 0.02GiB; "
        "weights memory: 8.80GiB.",
        "INFO [kv_cache_utils.py:864] GPU KV cache size: 62,608 tokens",
        "INFO [kv_cache_utils.py:868] Maximum concurrency for 1,024 tokens per request: 61.14x",
        "INFO [gpu_worker.py:391] Free memory on device (78.66/79.19 GiB) on startup. Desired GPU memory "
        "utilization is (0.9, 71.27 GiB). Actual usage is 14.08 GiB for weight, 1.97 GiB for peak "
        "activation, 0.07 GiB for non-torch memory, and 0.67 GiB for CUDAGraph memory. Replace "
        "gpu_memory_utilization config with `--kv-cache-memory=58333988249` to fit into requested memory, "
        "or `--kv-cache-memory=66273897472` to fully utilize gpu memory. Current kv cache memory in use is "
        "59212694937 bytes.",
        "INFO [gpu_model_runner.py:2007] Model loading took 65.9651 GiB and 12.799889 seconds",
    ]))
    assert (log.capacity.kv_cache_tokens, log.capacity.concurrency_max_model_len,
            log.settings.model_config.max_model_len) == (62608, 1024, 1024)
    assert log.capacity.max_concurrency == 61.14
    assert log.memory.weights_profiled_bytes == round(14.08 * GiB)  # the later "Actual usage" line wins over 8.80
    assert log.memory.non_torch_bytes == round(0.07 * GiB)
    assert log.memory.activation_peak_bytes == round(1.97 * GiB)
    assert log.memory.available_kv_bytes == 59_212_694_937
    assert log.memory.kv_cache_memory_fit_bytes == 58_333_988_249
    assert log.memory.weights_loaded_bytes == round(65.9651 * GiB)


def test_v1_max_len_error_with_estimate() -> None:
    log = parse_startup_log(
        "ValueError: To serve at least one request with the model's max seq len (131072), (16.0 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (9.32 GiB). Based on the "
        "available memory, the estimated maximum model length is 76288. Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
        "`max_model_len` when initializing the engine."
    )
    assert (log.failure.reason, log.settings.model_config.max_model_len) == ("max_len_exceeds_kv", 131072)
    assert log.failure.estimated_max_model_len == 76288
    assert (log.failure.kv_needed_bytes, log.failure.kv_error_available_bytes) == (16 * GiB, round(9.32 * GiB))
    assert log.settings.cache_config.gpu_memory_utilization is None  # the advice names the flag; it gives no value


FREE_MEMORY_ERROR = (
    "ValueError: Free memory on device cuda:0 (7.34/139.72 GiB) on startup is less than desired GPU "
    "memory utilization (0.9, 125.75 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
    "other processes."
)


@pytest.mark.parametrize(
    ("line", "failure"),
    [
        ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
         "when initializing the engine.", "no_kv_memory"),
        (FREE_MEMORY_ERROR, "insufficient_free_memory"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda_oom"),
    ],
)
def test_startup_failures_are_named(line: str, failure: str) -> None:
    assert parse_startup_log(line).failure.reason == failure


def test_free_memory_error_gives_free_total_util_and_request() -> None:
    log = parse_startup_log(FREE_MEMORY_ERROR)
    assert (log.memory.free_at_init_bytes,
            log.memory.total_gpu_memory_bytes) == (round(7.34 * GiB), round(139.72 * GiB))
    assert (log.settings.cache_config.gpu_memory_utilization,
            log.memory.requested_memory_bytes) == (0.9, round(125.75 * GiB))


def test_block_size_and_override_lines() -> None:
    log = parse_startup_log("\n".join([
        "INFO [interface.py:180] Setting kv cache block size to 64 for FLASHMLA backend(s).",
        "INFO [kv_cache_planning.py:300] Overriding num_gpu_blocks=9000 with num_gpu_blocks_override=512",
        "INFO [gpu_worker.py:250] Initial free memory 78.2 GiB, reserved 40.0 GiB memory for KV Cache as "
        "specified by kv_cache_memory_bytes config and skipped memory profiling.",
    ]))
    assert (log.settings.cache_config.block_size, log.capacity.num_gpu_blocks) == (64, 512)
    assert (log.memory.free_at_init_bytes, log.memory.available_kv_bytes) == (round(78.2 * GiB), 40 * GiB)


def test_last_of_repeated_figures_wins_and_every_line_is_kept() -> None:
    log = parse_startup_log(
        "(Worker TP0 pid=1) INFO Available KV cache memory: 30.1 GiB\n"
        "(Worker TP1 pid=2) INFO Available KV cache memory: 29.9 GiB\n"
    )
    assert log.memory.available_kv_bytes == round(29.9 * GiB)
    assert [(ln.number, ln.rule) for ln in log.lines] == [(1, "available_kv"), (2, "available_kv")]


def test_colour_codes_and_markdown_emphasis_are_ignored() -> None:
    log = parse_startup_log(
        "\x1b[32mINFO\x1b[0m Available KV cache memory: 3.5 GiB\n"
        "- **Model loading took:** 1.5 GiB memory and 2.0 seconds\n"
    )
    assert (log.memory.available_kv_bytes, log.memory.weights_loaded_bytes) == (round(3.5 * GiB), round(1.5 * GiB))


def test_vllm_serve_flags_forms() -> None:
    log = parse_startup_log("$ vllm serve --model m/x --max-model-len=8192 --enforce-eager "
                            "--no-enable-prefix-caching -tp 4 --block-size 32 --quantization fp8")
    assert (log.settings.model_config.model, log.settings.model_config.max_model_len) == ("m/x", 8192)
    assert (log.settings.model_config.enforce_eager, log.settings.cache_config.enable_prefix_caching) == (True, False)
    assert (log.settings.parallel_config.tensor_parallel_size, log.settings.cache_config.block_size,
            log.settings.model_config.quantization) == (4, 32, "fp8")


def test_prose_mentioning_vllm_serve_sets_nothing() -> None:
    assert not parse_startup_log("WARNING please use `vllm serve` instead of the api_server module").found


def test_unrelated_text_finds_nothing() -> None:
    log = parse_startup_log("hello\nworld\n")
    assert not log.found
    assert log == StartupLog()


# ---- the keyword prefilter: skips lines no rule can match, changes nothing else


def _corpus() -> list[str]:
    root = Path(__file__).parent
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for p in sorted((root / "fixtures" / "startup-logs" / "raw").iterdir())]
    texts += [str(r.get("log_excerpt", "")) for r in RECORDS]
    texts.append((root.parent / "examples" / "vllm-startup.log").read_text(encoding="utf-8"))
    texts.append((root / "test_startup_log.py").read_text(encoding="utf-8"))  # every hand-written line above
    return texts


def test_every_rule_match_holds_one_of_its_keys() -> None:
    from kvplan.vllm import startup_log as sl

    checked = 0
    for text in _corpus():
        for line in text.splitlines():
            lower = line.lower()
            for rule in sl._RULES:
                if rule.pattern.search(line):
                    checked += 1
                    assert any(k in (lower if rule.ignore_case else line) for k in rule.keys), (rule.name, line)
                    assert sl._PREFILTER.search(line) or any(k in lower for k in sl._CASELESS_KEYS)
    assert checked > 200


def test_the_prefilter_changes_no_result(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses
    import re

    from kvplan.vllm import startup_log as sl

    corpus = _corpus()
    filtered = [parse_startup_log(text) for text in corpus]
    monkeypatch.setattr(sl, "_PREFILTER", re.compile(""))  # every line passes, every rule runs
    monkeypatch.setattr(sl, "_RULES", tuple(dataclasses.replace(r, keys=("",)) for r in sl._RULES))
    monkeypatch.setattr(sl, "_ENGINE_CONFIG_KEYS", ("",))
    monkeypatch.setattr(sl, "_NON_DEFAULT_KEY", "")
    monkeypatch.setattr(sl, "_COMMAND_KEYS", ("",))
    assert [parse_startup_log(text) for text in corpus] == filtered


def test_request_lines_are_skipped_fast() -> None:
    import time

    filler = 'INFO 10-08 12:01:00 [logger.py:43] Received request cmpl-1: prompt: "hello", params: ...'
    lines = [filler] * 100_000 + ["INFO Available KV cache memory: 58.73 GiB"]
    start = time.process_time()  # CPU time: other processes loading the machine do not count
    log = parse_startup_log(lines)
    assert log.memory.available_kv_bytes == round(58.73 * GiB)
    # ~0.2 s here; without the prefilter ~2.4 s (every one of ~50 regexes on every line)
    assert time.process_time() - start < 1.5


def test_a_hard_wrapped_non_default_args_dict_is_read_whole() -> None:
    # dennislee22's committed log wraps at 129 columns inside the dict: "… 'model': 'Qwe" / "n2-7B-Instruct',
    # 'max_model_len': 16384, 'gpu_memory_utilization': 0.25}".
    raw = Path(__file__).parent / "fixtures" / "startup-logs" / "raw" / "dennislee-a100-qwen2-7b-util025.log"
    log = parse_startup_log(raw.read_text(encoding="utf-8"))
    assert (log.settings.model_config.model, log.settings.model_config.max_model_len,
            log.settings.cache_config.gpu_memory_utilization) == ("Qwen2-7B-Instruct", 16384, 0.25)
    # An unclosed dict stops at the line bound instead of swallowing the log.
    lines = ["INFO non-default args: {'max_model_len': 4096, 'model': 'x"] + ["y"] * 100 + [
        "INFO Available KV cache memory: 1.50 GiB"]
    assert parse_startup_log(lines).memory.available_kv_bytes == round(1.5 * GiB)


def test_the_0_19_logo_line_gives_the_version() -> None:
    raw = Path(__file__).parent / "fixtures" / "startup-logs" / "raw" / "myoceane-a100-gpt-oss-20b-131k-util065.log"
    assert parse_startup_log(raw.read_text(encoding="utf-8")).settings.vllm_version == "0.19.0"
    assert parse_startup_log(["INFO vLLM server version 0.21.1, serving model m"]).settings.vllm_version == "0.21.1"


NEW_RAW = Path(__file__).parent / "fixtures" / "startup-logs" / "raw"


def test_the_resolved_chunked_prefill_budget_is_read_and_the_last_line_wins() -> None:
    """vLLM 0.11.2's API server prints "Chunked prefill is enabled with max_num_batched_tokens=2048." for a
    default SchedulerConfig, then 8192 for the one it serves with (MiniMax-M2 at TP 4 on H100, a committed log)."""
    text = (NEW_RAW / "joshi-4xh100-minimax-m2-fp8-tp4-v0112.log").read_text(encoding="utf-8")
    first = next(line for line in text.splitlines() if "Chunked prefill is enabled" in line)
    assert parse_startup_log(first).settings.scheduler_config.max_num_batched_tokens == 2048
    log = parse_startup_log(text)
    assert log.settings.scheduler_config.max_num_batched_tokens == 8192
    assert (log.settings.scheduler_config.max_num_seqs, log.settings.cache_config.gpu_memory_utilization,
            log.settings.parallel_config.tensor_parallel_size) == (16, 0.95, 4)
    assert (log.capacity.kv_cache_tokens, log.memory.available_kv_bytes) == (338_272, round(20.00 * GiB))


def test_a_log_tail_that_says_enforce_eager_set_ran_eager() -> None:
    """A GLM-5.1-FP8 bisect report keeps only the server log's tail (no engine-config line): vLLM 0.20's
    "Enforce eager set, disabling torch.compile and CUDAGraphs" still says the server ran eager."""
    log = parse_startup_log((NEW_RAW / "glmbisect-8xh200-glm-5.1-fp8-tp8-eager-v0201.log").read_text(encoding="utf-8"))
    assert log.settings.model_config.enforce_eager is True
    assert (log.settings.cache_config.block_size, log.capacity.kv_cache_tokens,
            log.capacity.concurrency_max_model_len) == (64, 373_696, 202_752)
    assert log.memory.weights_loaded_bytes == round(89.39 * GiB) and log.memory.available_kv_bytes == round(34.86 * GiB)
    cudagraph_off = parse_startup_log("INFO [vllm.py:1081] Cudagraph is disabled under eager mode")
    assert cudagraph_off.settings.model_config.enforce_eager is None


def test_a_wrapped_engine_config_line_is_not_read_as_the_engine_line() -> None:
    """A write-up that wraps vLLM's engine line leaves "(v…) with config: model='…'" on a line of its own: only
    a line naming the LLM engine is the engine-config line (so the prefilter changes no result)."""
    log = parse_startup_log((NEW_RAW / "joshi-4xh100-minimax-m2.5-fp8-tp4-v0191.log").read_text(encoding="utf-8"))
    assert (log.settings.model_config.model, log.settings.vllm_version,
            log.settings.model_config.quantization) == (None, None, None)
    assert (log.capacity.kv_cache_tokens, log.settings.scheduler_config.max_num_batched_tokens) == (307_184, 8192)
    line = ("(EngineCore_DP0 pid=1) INFO 11-26 12:41:59 [core.py:93] Initializing a V1 LLM engine (v0.11.2) with "
            "config: model='MiniMaxAI/MiniMax-M2', tensor_parallel_size=4, quantization=fp8, enforce_eager=False")
    assert (parse_startup_log(line).settings.model_config.model,
            parse_startup_log(line).settings.parallel_config.tensor_parallel_size) == ("MiniMaxAI/MiniMax-M2", 4)


def test_the_replica_block_count_of_the_metrics_logger_line_is_read() -> None:
    """vLLM 0.10.2 at TP 8 on 8 × L40S prints each rank's "GPU KV cache size" (237,344 to 238,256 tokens) and then
    the replica's count, unified to the smallest rank: "num_gpu_blocks is: 14834" (14,834 × 16 = 237,344)."""
    log = parse_startup_log((NEW_RAW / "l40sx8-qwen3-235b-a22b-2507-fp8-tp8-ep-v0102.log").read_text(encoding="utf-8"))
    assert log.capacity.num_gpu_blocks == 14_834 and log.capacity.num_gpu_blocks * 16 == 237_344
    assert (log.settings.parallel_config.tensor_parallel_size, log.settings.scheduler_config.max_num_batched_tokens,
            log.settings.flashinfer_sampler) == (8, 2048, False)
    assert (log.memory.weights_profiled_bytes, log.memory.non_torch_bytes) == (round(27.72 * GiB), round(0.21 * GiB))
    assert log.memory.available_kv_bytes == 11_425_235_660  # TP1's "Current kv cache memory in use", the excerpt's last


# ---- the nesting: each figure in one group, the settings where ServeSettings keeps them


def test_logged_settings_sit_under_the_config_servesettings_keeps_them_in() -> None:
    """StartupLog.settings.cache_config.block_size is ServeSettings' cache_config.block_size: every logged
    setting that is a ServeSettings field has the same config and name (kvplan/vllm/configs.py:SETTING_PATHS)."""
    from kvplan.vllm.configs import SETTING_PATHS
    from kvplan.vllm.startup_log import FIGURE_PATHS

    configs = [path for path in FIGURE_PATHS.values() if path[0] == "settings" and len(path) == 3]
    assert len(configs) == 13
    for _, config, name in configs:
        if name != "model":  # ServeSettings holds no model name (the model is its own argument)
            assert SETTING_PATHS[name] == (config, name)


def test_every_rule_writes_figures_of_startup_log() -> None:
    from kvplan.vllm import startup_log as sl

    written = {group for rule in sl._RULES for group in rule.pattern.groupindex}
    written |= {name for rule in sl._RULES for name in rule.fixed} | set(sl._SETTING_KEYS.values())
    assert written <= set(sl.FIGURE_PATHS)
    assert set(sl.FIGURE_PATHS) - written == {"lines"}  # and every figure has a rule


def test_the_calibrate_table_shows_every_figure_once_under_its_group() -> None:
    """One section per StartupLog group; the 0.27+ peak activation with graphs is only a source of the
    comparison's activation term (observe/calibration.py:_observed), not a row of the table."""
    from kvplan.render.calibrate import SECTIONS
    from kvplan.vllm.startup_log import SCHEMA_1_KEYS

    shown = [f"{group}.{path}" for _, group, rows in SECTIONS for _, path, _ in rows]
    assert len(shown) == len(set(shown))
    assert set(path for _, path in SCHEMA_1_KEYS) - set(shown) == {"memory.activation_with_graphs_bytes"}
    assert set(shown) <= set(path for _, path in SCHEMA_1_KEYS)
    assert len(SCHEMA_1_KEYS) == 45  # StartupLog's 46 flat fields of schema_version 1, less `lines`


def test_the_0_27_summary_line_alone_gives_the_kv_memory_and_the_profile_terms() -> None:
    """vLLM 0.27.1 (4 × RTX PRO 6000, Qwen3-235B-A22B-Instruct-2507-FP8 at TP 4; a blog post's excerpt) prints no
    "Available KV cache memory" line there: the gpu_worker summary gives the device total, the budget, consumed
    memory (weights + non-torch), the peak activation, the CUDA graphs and the KV memory in use."""
    log = parse_startup_log((NEW_RAW / "utho-4xrtxpro6000-qwen3-235b-a22b-2507-fp8-tp4-v0271.log").read_text(
        encoding="utf-8"))
    m = log.memory
    assert m.available_kv_bytes == round(27.85 * GiB) and m.total_gpu_memory_bytes == round(95.01 * GiB)
    assert (m.consumed_memory_bytes, m.activation_with_graphs_bytes, m.cuda_graph_bytes) == (
        round(56.89 * GiB), round(0.76 * GiB), round(0.32 * GiB))
    assert (m.weights_loaded_bytes, log.capacity.kv_cache_tokens, log.capacity.max_concurrency) == (
        round(55.19 * GiB), 621_392, 18.96)
    # 0.27's "Model loading took 0.93 GiB and 2.078159 seconds" (no "memory" word) is read as well
    log = parse_startup_log((NEW_RAW / "enginrect-rtx4090-qwen2.5-0.5b-instruct-util085-v0271-failed.log").read_text(
        encoding="utf-8"))
    assert (log.settings.vllm_version, log.memory.weights_loaded_bytes, log.memory.available_kv_bytes) == (
        "0.27.1", round(0.93 * GiB), round(18.65 * GiB))
