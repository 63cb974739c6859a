#!/usr/bin/env python
"""Run vllm-cuda-oracle's golden_server.py unchanged, with read-only hooks (dev tool).

Runs with the CUDA-oracle venv's python (never imported by kvplan, its tests or CI):

    python hooked_server.py --oracle-dir /path/to/vllm-cuda-oracle -- \
        --gpu h100 --jobs JOBS.jsonl -j 2 [--extra] [--ext]

Everything after ``--`` goes to golden_server.py. In every forked child, before
``cuda_oracle.main()`` runs, three vLLM functions are wrapped (they are looked up inside
``cuda_oracle.plan`` at call time, so the wrappers are what it calls):

* ``vllm.v1.worker.gpu.attn_utils.get_kv_cache_spec``: record every layer's full KVCacheSpec
  (all dataclass fields) and the attention backend that layer chose
  (``layer.get_attn_backend().get_name()``), plus a few config facts the oracle does not print;
* ``vllm.v1.core.kv_cache_utils.generate_scheduler_kv_cache_config``: record the layer names of
  each scheduler KV-cache group;
* ``vllm.v1.core.kv_cache_utils.get_kv_cache_capacity``: after the real call, run vLLM's own
  ``update_kv_cache_capacity`` (the function the engine core uses to log the capacity) on a
  scratch copy of the cache config and keep the exact message it logs.

Nothing that decides a number is changed. The record is written to the child's stderr (the
``.log`` next to each job's ``out``) as one line ``KVPLAN_HOOK_JSON {...}``.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import enum
import json
import logging
import os
import runpy
import sys

MARK = "KVPLAN_HOOK_JSON "


def _js(v):  # noqa: ANN001, ANN202
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_js(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _js(x) for k, x in v.items()}
    s = str(v)
    return s.replace("torch.", "") if s.startswith("torch.") else s


def _spec_fields(sp) -> dict:  # noqa: ANN001
    d: dict = {"spec": type(sp).__name__}
    if dataclasses.is_dataclass(sp):
        for f in dataclasses.fields(sp):
            v = getattr(sp, f.name, None)
            if f.name == "kv_cache_specs":  # UniformTypeKVCacheSpecs: names only
                d["uniform_layers"] = sorted(v) if isinstance(v, dict) else None
                continue
            d[f.name] = _js(v)
    for prop in ("page_size_bytes", "real_page_size_bytes"):
        try:
            d[prop] = int(getattr(sp, prop))
        except Exception:  # noqa: BLE001
            pass
    return d


def install_hooks(record: dict) -> None:
    import vllm.v1.core.kv_cache_utils as kcu
    import vllm.v1.worker.gpu.attn_utils as au
    from vllm.config import get_layers_from_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    orig_spec = au.get_kv_cache_spec

    def get_kv_cache_spec(vllm_config):  # noqa: ANN001, ANN202
        specs = orig_spec(vllm_config)
        layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
        per_layer = {}
        for name, sp in specs.items():
            d = _spec_fields(sp)
            try:
                d["backend"] = layers[name].get_attn_backend().get_name()
            except Exception as e:  # noqa: BLE001
                d["backend"] = f"?{type(e).__name__}"
            d["is_draft_layer"] = bool(getattr(layers.get(name), "is_draft_layer", False))
            per_layer[name] = d
        shared = {n: getattr(m, "kv_sharing_target_layer_name", None) for n, m in layers.items()
                  if getattr(m, "kv_sharing_target_layer_name", None)}
        mc, cc, sc = vllm_config.model_config, vllm_config.cache_config, vllm_config.scheduler_config
        record.setdefault("per_pp_rank", []).append({"per_layer": per_layer, "kv_sharing": shared})
        record["facts"] = {
            "enable_chunked_prefill": getattr(sc, "enable_chunked_prefill", None),
            "mamba_cache_dtype": _js(getattr(cc, "mamba_cache_dtype", None)),
            "mamba_ssm_cache_dtype": _js(getattr(cc, "mamba_ssm_cache_dtype", None)),
            "calculate_kv_scales": getattr(cc, "calculate_kv_scales", None),
            "quantization": _js(getattr(mc, "quantization", None)),
            "architectures": _js(list(getattr(mc.hf_config, "architectures", None) or [])),
            "model_type": getattr(mc.hf_config, "model_type", None),
            "speculative_method": _js(getattr(vllm_config.speculative_config, "method", None)),
            "num_speculative_tokens": getattr(vllm_config.speculative_config,
                                              "num_speculative_tokens", None),
            "decode_context_parallel_size": getattr(vllm_config.parallel_config,
                                                    "decode_context_parallel_size", None),
            "enable_expert_parallel": getattr(vllm_config.parallel_config,
                                              "enable_expert_parallel", None),
            "lora": vllm_config.lora_config is not None,
        }
        return specs

    au.get_kv_cache_spec = get_kv_cache_spec

    orig_sched = kcu.generate_scheduler_kv_cache_config

    def generate_scheduler_kv_cache_config(kv_cache_configs):  # noqa: ANN001, ANN202
        cfg = orig_sched(kv_cache_configs)
        record["scheduler_groups"] = [
            {"layer_names": list(g.layer_names), "spec": _spec_fields(g.kv_cache_spec)}
            for g in cfg.kv_cache_groups]
        record["num_kv_cache_tensors_worker0"] = len(kv_cache_configs[0].kv_cache_tensors)
        try:
            record["kv_cache_tensor_bytes_worker0"] = sorted(
                {int(t.size) for t in kv_cache_configs[0].kv_cache_tensors})
        except Exception:  # noqa: BLE001
            pass
        return cfg

    kcu.generate_scheduler_kv_cache_config = generate_scheduler_kv_cache_config

    orig_cap = kcu.get_kv_cache_capacity

    class _Keep(logging.Handler):
        def emit(self, rec):  # noqa: ANN001, ANN202
            msg = rec.getMessage()
            if "KV cache size" in msg:
                record["vllm_log_line"] = msg

    busy = []

    def get_kv_cache_capacity(vllm_config, kv_cache_config):  # noqa: ANN001, ANN202
        res = orig_cap(vllm_config, kv_cache_config)
        if busy:  # the call made by update_kv_cache_capacity below
            return res
        busy.append(1)
        try:
            scratch = copy.copy(vllm_config)
            scratch.cache_config = copy.copy(vllm_config.cache_config)
            h = _Keep()
            kcu.logger.addHandler(h)
            try:
                kcu.update_kv_cache_capacity(scratch, kv_cache_config)
            finally:
                kcu.logger.removeHandler(h)
        except Exception as e:  # noqa: BLE001
            record["vllm_log_line_error"] = f"{type(e).__name__}: {e}"
        finally:
            busy.clear()
        return res

    kcu.get_kv_cache_capacity = get_kv_cache_capacity


LATE_STUBS_ENV = "KVPLAN_ORACLE_LATE_STUBS"


def install_late_stubs(prefixes: list[str]) -> list[str]:
    """DeepSeek-V4 only (``KVPLAN_ORACLE_LATE_STUBS=cutlass,quack``, with ``--extra``): permissive import
    stubs for the CuTe-DSL packages vLLM's DSv4 kernels import at layer build (nvidia-cutlass-dsl's
    ``cutlass``, quack-kernels' ``quack``), installed in the child through fake_cuda_extra's own
    ``install_late_stubs``. FlashInfer, and vLLM's fusion pass that imports it while the engine config is
    created, are imported first, so FlashInfer's own CuTe-DSL probe sees no ``cutlass`` (as on a machine
    without it) instead of walking into its kernels with a stub. No KV-cache code is stubbed."""
    import fake_cuda_extra  # noqa: PLC0415  (golden_server.py --extra imported it already)
    import flashinfer  # noqa: F401, PLC0415
    import vllm.compilation.passes.fusion.allreduce_rms_fusion  # noqa: F401, PLC0415

    fake_cuda_extra.install_late_stubs(tuple(prefixes))
    return list(prefixes)


def main() -> None:
    argv = sys.argv[1:]
    if "--" in argv:
        i = argv.index("--")
        own, rest = argv[:i], argv[i + 1:]
    else:
        own, rest = argv, []
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle-dir", required=True)
    a = ap.parse_args(own)
    odir = os.path.abspath(a.oracle_dir)
    sys.path.insert(0, odir)
    import cuda_oracle  # noqa: PLC0415  (imports fake_cuda first, as golden_server does)

    orig_main = cuda_oracle.main

    def hooked_main():  # noqa: ANN202
        record: dict = {}
        if os.environ.get(LATE_STUBS_ENV):
            record["late_stubs"] = install_late_stubs(os.environ[LATE_STUBS_ENV].split(","))
        try:
            install_hooks(record)
        except Exception as e:  # noqa: BLE001
            record["hook_error"] = f"{type(e).__name__}: {e}"
        try:
            return orig_main()
        finally:
            sys.stderr.flush()
            print(MARK + json.dumps(record, default=str), file=sys.stderr, flush=True)

    cuda_oracle.main = hooked_main  # cuda_oracle_ext.main is bound from this at its import
    server = os.path.join(odir, "golden_server.py")
    sys.argv = [server, *rest]
    runpy.run_path(server, run_name="__main__")


if __name__ == "__main__":
    main()
