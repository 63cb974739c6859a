#!/usr/bin/env python
"""Run one vllm-oracle Level A case and add the facts the goldens need.

Dev tool, run with the oracle venv's python (see tests/fixtures/oracle/README.md);
never imported by kvplan, its tests or CI.

    ORACLE_DIR=/path/to/vllm-oracle python run_case.py [--cuda-mamba-ssm-dtype] \
        MODEL_DIR [vllm_oracle.py options ...]

It runs ``vllm_oracle.main()`` unchanged in this process, with two read-only hooks:

* ``EngineArgs.create_engine_config`` is wrapped to keep the VllmConfig it returns, so the
  scheduler/cache facts the oracle does not print (async scheduling, max_concurrent_batches,
  max_in_flight_tokens, prefix caching, mamba cache mode and dtypes) can be recorded;
* ``vllm.v1.worker.gpu.attn_utils.get_kv_cache_spec`` is wrapped to keep every layer's full
  KVCacheSpec (window, chunk size, heads, head sizes, dtype, mamba shapes/dtypes).

``--cuda-mamba-ssm-dtype`` (the only behaviour change, off by default): vLLM's CPU platform
resets ``mamba_ssm_cache_dtype`` to float32 on AVX512-BF16 hosts
(``platforms/cpu.py:CpuPlatform.check_and_update_config``); CUDA does not. With the flag the
value from before that reset is restored, so mamba/GDN states get the dtype CUDA would use.

Prints the oracle's JSON with an added ``"run_case"`` object on stdout.
"""
from __future__ import annotations

import dataclasses
import enum
import io
import json
import os
import sys


def _jsonable(v):  # noqa: ANN001, ANN202
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v).replace("torch.", "")


def spec_to_dict(spec) -> dict:  # noqa: ANN001
    d = {"spec": type(spec).__name__}
    if dataclasses.is_dataclass(spec):
        for f in dataclasses.fields(spec):
            d[f.name] = _jsonable(getattr(spec, f.name))
    for prop in ("page_size_bytes", "real_page_size_bytes"):
        try:
            d[prop] = int(getattr(spec, prop))
        except Exception:  # noqa: BLE001
            pass
    return d


def main() -> int:
    argv = sys.argv[1:]
    cuda_mamba = "--cuda-mamba-ssm-dtype" in argv
    argv = [a for a in argv if a != "--cuda-mamba-ssm-dtype"]
    oracle_dir = os.environ.get("ORACLE_DIR")
    if not oracle_dir:
        sys.exit("run_case.py: set ORACLE_DIR to the folder holding vllm_oracle.py")
    sys.path.insert(0, oracle_dir)
    import vllm_oracle  # noqa: I001  (sets its env defaults before vllm is imported)
    import vllm.v1.worker.gpu.attn_utils as attn_utils
    from vllm.engine.arg_utils import EngineArgs

    configs: list = []
    specs_calls: list = []
    orig_create = EngineArgs.create_engine_config

    def create_engine_config(self, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        cfg = orig_create(self, *a, **kw)
        configs.append(cfg)
        return cfg

    EngineArgs.create_engine_config = create_engine_config  # type: ignore[method-assign]

    orig_get_spec = attn_utils.get_kv_cache_spec

    def get_kv_cache_spec(cfg, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        specs = orig_get_spec(cfg, *a, **kw)
        specs_calls.append({name: spec_to_dict(sp) for name, sp in specs.items()})
        return specs

    attn_utils.get_kv_cache_spec = get_kv_cache_spec

    import vllm.v1.core.kv_cache_utils as kcu
    from vllm.utils.math_utils import cdiv

    capacity: dict = {}
    orig_capacity = kcu.get_kv_cache_capacity

    def get_kv_cache_capacity(vllm_config, kv_cache_config):  # noqa: ANN001, ANN202
        res = orig_capacity(vllm_config, kv_cache_config)
        groups = []
        for g in kv_cache_config.kv_cache_groups:
            sp = g.kv_cache_spec
            need = sp.max_memory_usage_bytes(vllm_config)
            groups.append({
                "spec": type(sp).__name__,
                "layers": list(g.layer_names),
                "block_size": sp.block_size,
                "page_size_bytes": sp.page_size_bytes,
                "max_memory_usage_bytes_per_request": need,
                "blocks_per_request": cdiv(need, sp.page_size_bytes),
                "sliding_window": getattr(sp, "sliding_window", None),
                "attention_chunk_size": getattr(sp, "attention_chunk_size", None),
            })
        capacity["scheduler_groups"] = groups
        capacity["num_blocks"] = kv_cache_config.num_blocks
        capacity["blocks_per_request"] = sum(g["blocks_per_request"] for g in groups)
        return res

    kcu.get_kv_cache_capacity = get_kv_cache_capacity

    patches = []
    if cuda_mamba:
        from vllm.platforms.cpu import CpuPlatform

        orig_check = CpuPlatform.check_and_update_config.__func__

        def check_and_update_config(cls, vllm_config):  # noqa: ANN001, ANN202
            saved = vllm_config.cache_config.mamba_ssm_cache_dtype
            orig_check(cls, vllm_config)
            vllm_config.cache_config.mamba_ssm_cache_dtype = saved

        CpuPlatform.check_and_update_config = classmethod(check_and_update_config)
        patches.append("cuda_mamba_ssm_dtype: CpuPlatform's float32 reset of "
                       "mamba_ssm_cache_dtype undone")

    buf = io.StringIO()
    sys.argv = [os.path.join(oracle_dir, "vllm_oracle.py"), *argv]
    sys.stdout = buf
    try:
        rc = vllm_oracle.main()
    finally:
        sys.stdout = sys.__stdout__
    out = json.loads(buf.getvalue())

    extra: dict = {"patches": patches, "per_layer_specs_per_pp_rank": specs_calls,
                   "capacity": capacity}
    if configs:
        c = configs[0]
        sc, cc, pc = c.scheduler_config, c.cache_config, c.parallel_config
        extra["scheduler"] = {
            "max_num_batched_tokens": sc.max_num_batched_tokens,
            "max_num_seqs": sc.max_num_seqs,
            "async_scheduling": sc.async_scheduling,
            "enable_chunked_prefill": getattr(sc, "enable_chunked_prefill", None),
            "use_v2_model_runner": c.use_v2_model_runner,
            "max_concurrent_batches": c.max_concurrent_batches,
            "max_in_flight_tokens": c.max_in_flight_tokens,
            "distributed_executor_backend": str(pc.distributed_executor_backend),
        }
        extra["cache"] = {
            k: _jsonable(getattr(cc, k, None))
            for k in ("block_size", "user_specified_block_size", "cache_dtype",
                      "enable_prefix_caching", "mamba_cache_mode", "mamba_block_size",
                      "mamba_cache_dtype", "mamba_ssm_cache_dtype", "mamba_page_size_padded",
                      "sliding_window")
        }
        extra["device_type"] = str(c.device_config.device_type)
    out["run_case"] = extra
    print(json.dumps(out, indent=1, default=str))
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
