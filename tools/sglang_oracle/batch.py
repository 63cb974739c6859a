#!/usr/bin/env python3
"""Run SGLang 0.5.23's own sizing (the sglang-oracle's code) over many cases in one process per GPU.

Runs inside the sglang-oracle venv (its setup_venv.sh); SGLang is imported once, after the GPU is faked,
so one process serves one GPU. Each case is the oracle's argument list (sglang_oracle.py's options);
the output is one JSON object per case, as sglang_oracle.py prints it.

    VENV/bin/python tools/sglang_oracle/batch.py ORACLE_DIR CASES.json GPU OUT.json

CASES.json: [{"id": ..., "model_dir": ..., "args": ["--tp", "8", ...]}, ...] (tools/sglang_oracle/regen.py).
Stdlib + the oracle only.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time


def _kv_quant_algo_of(stand_in):
    """The oracle's stand-in (sglang_oracle.py:_kv_quant_algo) reads `kv_cache_quant_algo` only. For a flat-format
    ModelOpt config (config.json quantization_config with quant_method modelopt* and quant_algo), ask SGLang's own
    loader instead: model_loader/weight_utils.py:get_quant_config builds the ModelOpt*Config whose from_config
    derives the algorithm from `kv_cache_scheme` (layers/quantization/modelopt_quant.py), as the model's
    quant_config carries it into configure_kv_cache_dtype."""

    def kv_quant_algo(model_config):
        q = getattr(model_config.hf_config, "quantization_config", None)
        # ModelConfig._verify_quantization has rewritten quant_method to the resolved one (modelopt_fp4, …)
        if isinstance(q, dict) and str(q.get("quant_method", "")).startswith("modelopt") and q.get("quant_algo"):
            from sglang.srt.configs.load_config import LoadConfig
            from sglang.srt.model_loader.weight_utils import get_quant_config

            return get_quant_config(model_config, LoadConfig(), {}).kv_cache_quant_algo
        return stand_in(model_config)

    return kv_quant_algo


def start_oracle(oracle_dir: str, gpu: str):
    """Import the shared oracle with `gpu` faked (8 devices) and SGLang after it: (sglang_oracle, sglang). SGLang
    reads the GPU when it is imported, so one process serves one GPU."""
    sys.path.insert(0, oracle_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    import fake_gpu
    import sgl_stubs
    import sglang_oracle as so

    sgl_stubs.install()
    fake_gpu.install(gpu, world=8)
    import sglang
    return so, sglang


def main() -> int:
    oracle_dir, cases_path, gpu, out_path = sys.argv[1:5]
    so, sglang = start_oracle(oracle_dir, gpu)

    so._kv_quant_algo = _kv_quant_algo_of(so._kv_quant_algo)

    cases = [c for c in json.load(open(cases_path)) if c["gpu"] == gpu]
    results = []
    # SGLang's argument hooks write process-wide environment variables (serving_hook.py sets
    # SGLANG_USE_CUDA_IPC_TRANSPORT on every run; model_overrides/qwen3_vl.py sets SGLANG_VLM_CACHE_SIZE_MB=0 on
    # Hopper, ...), which a real server, one process per launch, never carries over: each case starts from the
    # environment the batch started with.
    environment = dict(os.environ)
    for i, case in enumerate(cases):
        os.environ.clear()
        os.environ.update(environment)
        t0 = time.time()
        a = so.parse_args([case["model_dir"], "--gpu", gpu, *case["args"]])
        kw = so.server_kwargs(a)
        result = {"id": case["id"], "sglang_version": sglang.__version__, "args": case["args"]}
        try:
            sa, _view, resolved = so.resolve(a, kw)
            result["resolved"] = resolved
            result["pool"] = so.pool(a, sa)
        except BaseException as e:  # SGLang's own refusal text, or what the oracle cannot run
            result["error"] = f"{type(e).__name__}: {e}"[:400]
        result["seconds"] = round(time.time() - t0, 1)
        results.append(result)
        print(f"[{i + 1}/{len(cases)}] {case['id']} {result.get('error', '')[:80]}", file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
