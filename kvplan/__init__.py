"""kvplan: KV-cache sizing and capacity planning for vLLM-style LLM serving.

The core is importable as a library; results are the same objects the CLI renders::

    import kvplan
    spec = kvplan.load_model("Qwen/Qwen2.5-7B")           # config.json from the Hub or a folder
    report = kvplan.size_report(spec)                     # bytes per token, layers, weights
    fit = kvplan.plan_fit(spec, kvplan.get_gpu("h100"), kvplan.ServeSettings(max_model_len=32768))
    fit.kv_cache_tokens, fit.max_concurrency, fit.fits    # what vLLM would log, and whether it starts
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it: dynamic = ["version"])

# Public names, resolved lazily so `import kvplan` stays cheap for the CLI.
_LAZY = {
    "load_model": "kvplan.model.hub",
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
    "ServeSettings": "kvplan.vllm.settings",
    "FitReport": "kvplan.vllm.report",
    "plan_fit": "kvplan.vllm.fit",
    "plan_kv_cache": "kvplan.vllm.block_plan",
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
