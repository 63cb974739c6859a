#!/usr/bin/env python3
"""DeepSeek-V4 wrapper around /work/shared/tools/sglang-oracle/sglang_oracle.py (unmodified), batch form.

The shared oracle sizes a DeepSeek-V4 pool with SGLang's own DSV4PoolConfigurator (model_executor/
pool_configurator.py) and builds the real DeepSeekV4TokenToKVPool on torch's meta device, then fails reading
it: `AttributeError: 'DeepSeekV4SingleKVPool' object has no attribute 'get_kv_size_bytes'` (its kv_pool_sizes
asks each sub-pool for the K/V byte counts MHA/MLA pools have). SGLang prints no `KV Cache is allocated` line for
this pool. This wrapper replaces kv_pool_sizes: it builds the same pool and reports what SGLang logs while
sizing and building it (`DSV4 SWA sizing: …`, `DSV4 memory calculation: …`, `DSV4 pool sizes: …`,
`Initialize DeepSeekV4TokenToKVPool with …`), the MemoryPoolConfig's pool sizes and the configurator's
per-token figures (bytes_per_full_token, bytes_per_swa_token, swa_cap_tokens).
Runs in the oracle's venv, one process per GPU, as tools/sglang_oracle/batch.py does (same CASES.json):

    VENV/bin/python tools/sglang_oracle/dsv4_batch.py ORACLE_DIR CASES.json GPU OUT.json
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time

PREFIXES = ("DSV4 ", "Initialize DeepSeekV4TokenToKVPool", "DeepSeek-V4 ", "Setting max_running_requests")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith(PREFIXES):
            self.lines.append(msg)


def main() -> int:
    oracle_dir, cases_path, gpu, out_path = sys.argv[1:5]
    from batch import start_oracle  # this folder is on sys.path when the script runs

    so, sglang = start_oracle(oracle_dir, gpu)

    capture = _Capture()
    for name in ("sglang.srt.model_executor.pool_configurator", "sglang.srt.mem_cache.deepseek_v4_memory_pool",
                 "sglang.srt.arg_groups.deepseek_v4_hook"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.INFO)
        lg.addHandler(capture)
    state: dict[str, object] = {}

    def kv_pool_sizes(kvc, config):
        """Build the DSV4 pool on meta (SGLang's own _build_token_to_kv_pool); report its sizes, not K/V bytes."""
        import torch
        from sglang.srt.configs.model_config import is_deepseek_dsa, is_deepseek_v4
        from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator

        so._register_meta_device_module()
        c = create_memory_pool_configurator(kvc)
        state["configurator"] = {"class": type(c).__name__,
                                 **{k: getattr(c, k, None) for k in (
                                     "bytes_per_full_token", "bytes_per_swa_token", "swa_cap_tokens",
                                     "swa_prefix_tails", "kv_bytes", "indexer_bytes_per_token", "ring_sizes",
                                     "num_layers_total", "swa_ratio", "sliding_window_size",
                                     "requested_max_running_requests_per_worker")},
                                 "stage_owner_layers": {str(k): len(v) for k, v in c.stage_owner_layers.items()}}
        state["config"] = {k: getattr(config, k) for k in (
            "max_total_num_tokens", "max_running_requests", "full_max_total_num_tokens", "swa_max_total_num_tokens",
            "c4_max_total_num_tokens", "c128_max_total_num_tokens", "c4_state_pool_size", "c128_state_pool_size")}
        sizes = kvc._derive_pool_sizes(config=config)
        rows = config.max_running_requests + 1
        fake_req_pool = type("R", (), {"req_to_token": torch.empty((rows, 1), device="meta"), "size": rows - 1})()
        try:
            p = kvc._build_token_to_kv_pool(
                sizes=sizes, is_dsa_model=is_deepseek_dsa(kvc.model_config.hf_config),
                is_dsv4_model=is_deepseek_v4(kvc.model_config.hf_config), req_to_token_pool=fake_req_pool)
        except Exception as e:  # SGLang's own refusal while building the pool
            import traceback

            where = [ln.strip() for ln in traceback.format_exc().splitlines() if ln.strip().startswith("File ")]
            return {"error": f"{type(e).__name__}: {e}"[:300], "raised_at": where[-1][-200:] if where else None}
        return [{"pool": "dsv4", "class": type(p).__name__, "size_tokens": getattr(p, "size", None),
                 "page_size": getattr(p, "page_size", None)}]

    so.kv_pool_sizes = kv_pool_sizes
    cases = [c for c in json.load(open(cases_path)) if c["gpu"] == gpu]
    results = []
    environment = dict(os.environ)  # each case starts from the batch's environment (batch.py)
    for i, case in enumerate(cases):
        os.environ.clear()
        os.environ.update(environment)
        capture.lines.clear()
        state.clear()
        t0 = time.time()
        a = so.parse_args([case["model_dir"], "--gpu", gpu, *case["args"]])
        kw = so.server_kwargs(a)
        result = {"id": case["id"], "sglang_version": sglang.__version__, "args": case["args"]}
        try:
            sa, view, resolved = so.resolve(a, kw)
            resolved["disable_overlap_schedule"] = so._get(view, "disable_overlap_schedule")
            resolved["dsv4_attn_backend"] = so._get(view, "dsv4_attn_backend")
            resolved["swa_prefix_tails"] = so._get(view, "swa_prefix_tails")
            result["resolved"] = resolved
            result["pool"] = so.pool(a, sa)
        except BaseException as e:  # SGLang's own refusal text, or what the oracle cannot run
            result["error"] = f"{type(e).__name__}: {e}"[:400]
        result["dsv4"] = dict(state)
        result["dsv4_log"] = list(capture.lines)
        result["seconds"] = round(time.time() - t0, 1)
        results.append(result)
        print(f"[{i + 1}/{len(cases)}] {case['id']} {result.get('error', '')[:80]}", file=sys.stderr, flush=True)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
