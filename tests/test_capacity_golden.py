"""kvplan's KV planner against vLLM's own (tests/fixtures/oracle: vLLM 0.32 run on CPU, Level A).

Each golden gives the inputs vLLM planned with (KV memory per worker, block size, in-flight tokens,
Mamba cache mode, TP/PP, KV dtype); kvplan must reproduce num_blocks, bytes per block, blocks per
request, tokens, concurrency, the start/refuse verdict with vLLM's message and the estimated max length.

CPU-platform facts are taken from the golden, as the oracle README says to: sliding-window layers use
the CPU kernel's block (32), GDN layers have no checkpoint alignment or checkpoint blocks, and the CPU
platform keeps Mamba SSM states in float32 (CUDA uses the model dtype) — those state sizes are read from
the golden instead of kvplan's CUDA value.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import BlockPlanSettings, kv_cache_specs, plan_kv_cache  # the public API (kvplan/__init__.py)
from tests.conftest import load_fixture

ORACLE = Path(__file__).parent / "fixtures" / "oracle"
GOLDENS = sorted(p for p in ORACLE.glob("*__*.json"))
# vLLM's CPU attention kernels take blocks in multiples of 32 (the goldens' sliding-window groups use 32):
# the hybrid Mamba alignment on CPU starts from 32 where CUDA's FLASH_ATTN starts from 16.
CPU_MIN_KERNEL_BLOCK = 32


def _cases() -> list[Any]:
    out = []
    for path in GOLDENS:
        data = json.loads(path.read_text())
        if "config_error" in data or "kv_cache" not in data:
            reason = str(data.get("config_error") or data.get("instantiate_error") or "no kv_cache section")[:120]
            out.append(pytest.param(data, id=data["case"], marks=pytest.mark.skip(reason=f"vLLM refuses: {reason}")))
        else:
            out.append(pytest.param(data, id=data["case"]))
    return out


def _spec_groups(golden: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [g for rank in golden["per_pp_rank"] for g in rank["spec_groups"] if g["spec"] == kind]


def test_goldens_are_present() -> None:
    assert len(GOLDENS) >= 20


@pytest.mark.parametrize("golden", _cases())
def test_kv_plan_matches_vllm(golden: dict[str, Any]) -> None:
    inputs, kv = golden["inputs"], golden["kv_cache"]
    model = load_fixture(golden["model"]["config_dir"])
    tp, pp = inputs["tensor_parallel_size"], inputs["pipeline_parallel_size"]
    # The CPU platform keeps SSM states in float32 (CUDA: the model dtype), which is vLLM's
    # --mamba-ssm-cache-dtype float32: kvplan's own state formula must then give the golden's bytes.
    specs = kv_cache_specs(model, tp=tp, pp=pp, kv_cache_dtype=inputs["kv_cache_dtype"],
                           mamba_ssm_cache_dtype=inputs.get("mamba_ssm_cache_dtype") or "auto")
    for worker, rank in zip(specs, golden["per_pp_rank"], strict=True):
        assert sum(s.bytes_per_token for s in worker) == rank["kv_bytes_per_token_per_gpu"]
        assert sum(s.state_bytes for s in worker) == rank["mamba_state_bytes_per_request_per_gpu"]

    mamba = _spec_groups(golden, "MambaSpec")
    checkpoint_blocks = mamba[0].get("num_prefill_checkpoint_blocks", 0) if mamba else 0
    sliding = _spec_groups(golden, "SlidingWindowSpec")
    sw_block = sliding[0]["block_size"] if sliding else None

    max_len = inputs["max_model_len"] or model.max_model_len
    expected_len = kv.get("max_model_len") or kv.get("refusal_max_model_len")
    assert max_len == expected_len, "kvplan derives a different max_model_len from config.json"

    plan = plan_kv_cache(
        specs, inputs["kv_cache_memory_bytes_per_worker"], BlockPlanSettings(inputs["block_size"], max_len,
                                                                             inputs["max_in_flight_tokens"],
                                                                             mamba_cache_mode=inputs["mamba_cache_mode"],
                                                                             mamba_prefill_checkpoint_blocks=checkpoint_blocks,
                                                                             sliding_window_block_size=sw_block,
                                                                             min_kernel_block_size=CPU_MIN_KERNEL_BLOCK))
    resolved = golden.get("resolved") or {}
    if resolved.get("block_size_after_backend_update"):
        assert plan.block_size == resolved["block_size_after_backend_update"]
    if resolved.get("mamba_page_size_padded"):
        assert plan.hybrid is not None and plan.hybrid.mamba_page_padded_bytes == resolved["mamba_page_size_padded"]
    if kv["refused"]:
        assert not plan.fits
        assert "ValueError: " + (plan.refusal or "") == kv["error"]
        assert plan.estimated_max_model_len == kv["estimated_max_model_len"]
        return
    assert plan.fits
    got = (plan.bytes_per_block, plan.num_gpu_blocks, plan.blocks_per_request, plan.kv_cache_tokens)
    assert got == (kv["bytes_per_block"], kv["num_blocks"], kv["blocks_per_request"], kv["tokens"])
    assert plan.max_concurrency == kv["max_concurrency"]
    assert plan.log_line == kv["log_line_cuda"]
    if "groups" in kv:  # the scheduler's view: groups projected onto the first worker's layers
        first = {s.layer for s in specs[0]}
        ours = sorted((len(first & set(g.layers)), g.block_size, g.page_size_bytes) for g in plan.groups)
        theirs = sorted((g["num_layers"], g["block_size"], g["page_size_bytes"]) for g in kv["groups"])
        assert ours == theirs
