"""kvplan: KV-cache sizing and capacity planning for vLLM-style LLM serving.

The commands are importable as a library (kvplan/api.py): the same answers and the same refusals, as the same
objects the CLI renders::

    import kvplan
    report = kvplan.fit("Qwen/Qwen2.5-7B", "h100", max_model_len=32768)  # = kvplan fit … --gpu h100 …
    report.kv_cache_tokens, report.max_concurrency, report.fits         # what vLLM would log, whether it starts
    kvplan.size("Qwen/Qwen2.5-7B").kv_bytes_per_token                    # = kvplan size
    kvplan.check("deploy/plan.yaml").passed                              # = kvplan check

The core stages are public too: `load_model` (config.json from the Hub or a folder, refused as vLLM refuses
it), `size_report`, `plan_fit(spec, get_gpu("h100"), ServeSettings.of(max_model_len=32768))`, `roofline`, ….
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it: dynamic = ["version"])

# Public names, resolved lazily so `import kvplan` stays cheap for the CLI.
_LAZY = {
    "load_model": "kvplan.api",
    "size": "kvplan.api",
    "fit": "kvplan.api",
    "check": "kvplan.api",
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
    "plan_fit": "kvplan.vllm.fit",
    "plan_kv_cache": "kvplan.vllm.block_plan",
    "BlockPlanSettings": "kvplan.vllm.block_plan",
    "model_costs": "kvplan.hardware.roofline",
    "roof_from_gpu": "kvplan.hardware.roofline",
    "roofline": "kvplan.hardware.roofline",
    "simulate_prefix": "kvplan.sim.prefix",
    "simulate_serve": "kvplan.sim.scheduler",
    "parse_exposition": "kvplan.observe.metrics",
    "diagnose": "kvplan.observe.diagnose",
    "parse_startup_log": "kvplan.vllm.startup_log",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["__version__", *_LAZY]
