"""kvplan: KV-cache sizing and capacity planning for vLLM-style LLM serving.

The commands are importable as a library (kvplan/api.py): the same answers and the same refusals, as the same
objects the CLI renders::

    import kvplan
    report = kvplan.fit("Qwen/Qwen2.5-7B", "h100", max_model_len=32768)  # = kvplan fit … --gpu h100 …
    report.cache.kv_cache_tokens, report.scheduler.max_concurrency     # what vLLM would log
    report.verdict.fits, report.memory.available_kv_bytes               # whether it starts, on how much KV memory
    kvplan.size("Qwen/Qwen2.5-7B").kv_bytes_per_token                    # = kvplan size
    kvplan.check("deploy/plan.yaml").passed                              # = kvplan check
    kvplan.roofline("Qwen/Qwen2.5-7B", "h100", context="8K").ridge_point  # = kvplan roofline
    kvplan.diagnose("http://localhost:8000/metrics").diagnoses          # = kvplan diagnose
    kvplan.simulate_serve(200, num_gpu_blocks=20000, request_rate=20)   # = kvplan simulate serve

The core stages are public too: `load_model` (config.json from the Hub or a folder, refused as vLLM refuses
it), `size_report`, `plan_fit(spec, get_gpu("h100"), ServeSettings.of(max_model_len=32768))`, `roofline_report`
(the roofline maths on model_costs and roof_from_gpu: what `kvplan.roofline` named before it became the command),
`diagnose_report` (the rules on a parse_exposition snapshot: likewise `kvplan.diagnose`'s former meaning),
`prefix_report` and `serve_report` (the simulators on a workload in hand: `kvplan.simulate_prefix` and
`kvplan.simulate_serve` named them before they became the commands), …. So are the result types' parts, for
annotations and isinstance: `FitReport`'s `DeploymentSummary`, `MemorySummary`, `CacheSummary`, `SchedulerSummary`,
`VerdictSummary` (and `GroupSummary`, `TowerSummary`, `StageSummary`, `Advice` inside them), and
`parse_startup_log`'s `StartupLog` with `LoggedSettings` (its `Logged…Config`s), `MemoryBudget`, `KVCapacity`,
`StartupFailure`, `Timings` and `LogLine`.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it: dynamic = ["version"])

# Public names, resolved lazily so `import kvplan` stays cheap for the CLI: name -> module (the attribute of that
# name), or "module:attribute" where the public name differs.
_LAZY = {
    "load_model": "kvplan.api",
    "size": "kvplan.api",
    "fit": "kvplan.api",
    "check": "kvplan.api",
    "roofline": "kvplan.api",
    "diagnose": "kvplan.api",
    "parse_config": "kvplan.model.config",
    "ModelSpec": "kvplan.model.spec",
    "LayerSpec": "kvplan.model.spec",
    "kv_cache_specs": "kvplan.model.kv_cache",
    "KVCacheSpec": "kvplan.model.kv_cache",
    "size_report": "kvplan.model.size",
    "SizeReport": "kvplan.model.size",
    "count_parameters": "kvplan.model.weights",
    "GpuSpec": "kvplan.hardware.gpus",
    "get_gpu": "kvplan.hardware.gpus",
    "load_catalog": "kvplan.hardware.gpus",
    "custom_gpu": "kvplan.hardware.gpus",
    "ServeSettings": "kvplan.vllm.configs",
    "FitReport": "kvplan.vllm.report",
    # FitReport's parts (report.deployment, .memory, .cache, .scheduler, .verdict) and what they hold
    "DeploymentSummary": "kvplan.vllm.report",
    "MemorySummary": "kvplan.vllm.report",
    "CacheSummary": "kvplan.vllm.report",
    "SchedulerSummary": "kvplan.vllm.report",
    "VerdictSummary": "kvplan.vllm.report",
    "GroupSummary": "kvplan.vllm.report",
    "TowerSummary": "kvplan.vllm.report",
    "StageSummary": "kvplan.vllm.report",
    "Advice": "kvplan.vllm.report",
    "plan_fit": "kvplan.vllm.fit",
    "plan_kv_cache": "kvplan.vllm.block_plan",
    "BlockPlanSettings": "kvplan.vllm.block_plan",
    "model_costs": "kvplan.hardware.roofline",
    "roof_from_gpu": "kvplan.hardware.roofline",
    "roofline_report": "kvplan.hardware.roofline:roofline",
    "simulate_prefix": "kvplan.api",
    "simulate_serve": "kvplan.api",
    "prefix_report": "kvplan.sim.prefix:simulate_prefix",
    "serve_report": "kvplan.sim.scheduler:simulate_serve",
    "parse_exposition": "kvplan.observe.metrics",
    "diagnose_report": "kvplan.observe.diagnose:diagnose",
    "parse_startup_log": "kvplan.vllm.startup_log",
    # what parse_startup_log returns, and its parts (log.settings and its configs, .memory, .capacity, .failure,
    # .timings, .lines); MemoryBudget is the logged budget (kvplan's own prediction is FitReport.memory)
    "StartupLog": "kvplan.vllm.startup_log",
    "LoggedSettings": "kvplan.vllm.startup_log",
    "LoggedModelConfig": "kvplan.vllm.startup_log",
    "LoggedCacheConfig": "kvplan.vllm.startup_log",
    "LoggedParallelConfig": "kvplan.vllm.startup_log",
    "LoggedSchedulerConfig": "kvplan.vllm.startup_log",
    "MemoryBudget": "kvplan.vllm.startup_log",
    "KVCapacity": "kvplan.vllm.startup_log",
    "StartupFailure": "kvplan.vllm.startup_log",
    "Timings": "kvplan.vllm.startup_log",
    "LogLine": "kvplan.vllm.startup_log",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib

    module, _, attribute = module.partition(":")
    return getattr(importlib.import_module(module), attribute or name)


__all__ = ["__version__", *_LAZY]
