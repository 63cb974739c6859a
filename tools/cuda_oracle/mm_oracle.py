#!/usr/bin/env python
"""Run vllm-cuda-oracle's cuda_oracle_ext.py unchanged, recording what multimodal limits change (dev tool).

Runs with the CUDA-oracle venv's python (never imported by kvplan, its tests or CI):

    python mm_oracle.py --oracle-dir /path/to/vllm-cuda-oracle -- CONFIG_DIR --gpu h100 \
        --kv-cache-memory-bytes 21474836480 --max-model-len 8192 \
        --engine-arg 'limit_mm_per_prompt={"image": 0, "video": 0}'

Everything after ``--`` goes to cuda_oracle_ext.py. Read-only wrappers record, in one stderr line
``KVPLAN_MM_JSON {...}``:

* ``initialize_model`` (the model vLLM builds on the meta device): its parameters (numel, deduplicated as
  ``named_parameters`` does, so tied embeddings count once) in all and per top-level child, and the
  children vLLM marked as tower models (``SupportsMultiModal._mark_tower_model``) — a tower skipped for
  all-zero limits holds no parameters;
* ``EngineArgs.create_engine_config``: whether vLLM kept the model multimodal (``is_mm_prefix_lm``,
  ``disable_chunked_mm_input``), and, when the processor can be built from the config alone,
  ``multimodal/encoder_budget.py:MultiModalBudget`` (per-item token ceilings of the active modalities, the
  encoder compute budget and cache size, or vLLM's refusal).

Nothing that decides a number is changed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

MARK = "KVPLAN_MM_JSON "


def _params(module) -> dict:  # noqa: ANN001
    children: dict[str, int] = {}
    for name, child in module.named_children():
        children[name] = sum(p.numel() for p in child.parameters())
    return {"total": sum(p.numel() for p in module.parameters()), "children": children,
            "tower_children": sorted(getattr(module, "_tower_model_names", None) or []),
            "class": type(module).__name__}


def _budget(cfg) -> dict:  # noqa: ANN001
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import MultiModalBudget

    mc = cfg.model_config
    out: dict = {"is_multimodal_model": bool(mc.is_multimodal_model), "is_mm_prefix_lm": bool(mc.is_mm_prefix_lm),
                 "disable_chunked_mm_input": bool(cfg.scheduler_config.disable_chunked_mm_input)}
    if not mc.is_multimodal_model:
        return out
    try:  # what MultiModalBudget.__init__ computes first, without the processor (no tokenizer here)
        from vllm.v1.core.encoder_cache_manager import compute_mm_encoder_budget

        info = MULTIMODAL_REGISTRY.get_processing_info(mc)
        allowed = info.allowed_mm_limits
        active = [m for m in info.supported_mm_limits if allowed.get(m, 0) > 0]
        toks = info.get_mm_max_tokens_per_item(seq_len=mc.max_model_len, mm_counts=dict.fromkeys(active, 1))
        out["info"] = {"supported": list(info.supported_mm_limits), "allowed": dict(allowed),
                       "max_tokens_per_item": None if toks is None else dict(toks)}
        if toks is not None:
            active_toks = {m: toks[m] for m in active if m in toks}
            try:
                out["info"]["encoder_budget"] = list(compute_mm_encoder_budget(cfg.scheduler_config, active_toks))
            except Exception as e:  # noqa: BLE001  (vLLM's refusal is an answer too)
                out["info"]["encoder_budget_error"] = f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001
        out["info"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        b = MultiModalBudget(cfg, MULTIMODAL_REGISTRY, enable_cache=False)
        out["budget"] = {"mm_max_toks_per_item": dict(b.mm_max_toks_per_item),
                         "encoder_compute_budget": b.encoder_compute_budget,
                         "encoder_cache_size": b.encoder_cache_size,
                         "mm_max_items_per_prompt": dict(b.mm_max_items_per_prompt),
                         "mm_max_items_per_batch": dict(b.mm_max_items_per_batch)}
    except Exception as e:  # noqa: BLE001  (vLLM's refusal is an answer too)
        out["budget"] = {"error": f"{type(e).__name__}: {e}"}
    return out


def main() -> int:
    argv = sys.argv[1:]
    i = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle-dir", required=True)
    a = ap.parse_args(argv[:i])
    sys.path.insert(0, os.path.abspath(a.oracle_dir))
    import cuda_oracle_ext  # noqa: PLC0415  (imports fake_cuda first)
    import vllm.model_executor.model_loader.utils as mlu
    from vllm.engine.arg_utils import EngineArgs

    record: dict = {"models": []}
    inner = mlu.initialize_model

    def initialize_model(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        model = inner(*args, **kwargs)
        record["models"].append(_params(model))
        return model

    mlu.initialize_model = initialize_model
    orig_create = EngineArgs.create_engine_config

    def create_engine_config(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        cfg = orig_create(self, *args, **kwargs)
        if "config" not in record:
            try:
                record["config"] = _budget(cfg)
            except Exception as e:  # noqa: BLE001
                record["config"] = {"error": f"{type(e).__name__}: {e}"}
        return cfg

    EngineArgs.create_engine_config = create_engine_config
    sys.argv = ["cuda_oracle_ext.py", *argv[i + 1:]]
    try:
        return int(cuda_oracle_ext.main() or 0)
    finally:
        print(MARK + json.dumps(record, default=str), file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
