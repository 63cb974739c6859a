"""benchmarks/accuracy.py against the recorded vLLM startup logs: regression guards on kvplan's accuracy.

Records: tests/fixtures/data/vllm-startup-logs.yaml and tests/fixtures/startup-logs/records.yaml, each in
its calibration or validation half (fixed by hash before any fitting). Tolerances are the logs' own
rounding (GiB printed with 2 decimals) plus what the benchmark reports today, so a change that makes
kvplan worse fails here. Each budget term is pinned on at least one real log.
"""
from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.units import GiB
from kvplan.vllm.defaults import parse_vllm_version
from kvplan.vllm.memory.activation import MRV2_UNSEEN_BYTES, ProfileRun, estimate_activation
from kvplan.vllm.memory.non_torch import estimate_non_torch
from kvplan.vllm.memory.weights import MoeBackend, estimate_weights

ROOT = Path(__file__).resolve().parent.parent


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvplan_accuracy_benchmark", ROOT / "benchmarks" / "accuracy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()
RECORDS: list[dict[str, Any]] = BENCH.load_records()
BY_ID = {r["id"]: r for r in RECORDS}
ROWS = [r for r in (BENCH.predict_available(rec) for rec in RECORDS) if not isinstance(r, str)]
ROW = {r.record: r for r in ROWS}
# Validation records whose logged KV memory lies below kvplan's printed low end: Qwen3-VL MoE startups whose log
# profiles the vision encoder with a video of the maximum feature size, which kvplan's activation term omits.
ENCODER_PROFILE_RECORDS = ("zp-4x3090-qwen3-vl-30b-a3b-instruct-tp4-v0110",
                          "joshi-8xh100-qwen3-vl-235b-thinking-fp8-tp8-ep-v0112",
                          "joshi-8xh100-qwen3-vl-235b-thinking-fp8-tp8-ep-v0151")


def test_every_record_has_the_split_its_id_hashes_to() -> None:
    assert all(r["split"] == BENCH.split_of(r["id"]) for r in RECORDS)
    assert {r["split"] for r in RECORDS} == {"calibration", "validation"}


def test_every_logged_block_or_token_count_is_reproduced_exactly() -> None:
    rows = [r for r in (BENCH.check_tokens(rec, False) for rec in RECORDS) if not isinstance(r, str)]
    assert len(rows) >= 15
    # At TP > 1 the log may quote a rank with more memory than the smallest one, whose count vLLM keeps.
    assert all(r.exact or r.smallest_rank for r in rows), [r for r in rows if not r.exact]
    assert sum(r.exact for r in rows) >= 21  # incl. MLA Kimi-K2 at TP 8 and with DCP 8, hybrid granite on 0.19


# The two PP records ran vLLM 0.15, whose check takes the whole model's layers (tests/test_pp_stages.py).
@pytest.mark.parametrize("record", ["vllm-34076-5070ti-5090d-qwen3-coder-30b-fp8-pp2-failed",
                                    "xinference-4926-qwen3-vl-instruct-262k-failed",
                                    "vllm-32105-8xa100-glm-4.7-fp8-pp8-v0150rc1-failed",
                                    "recipes-pr12-h20-qwen3-coder-480b-fp8-dp8-ep-failed",
                                    "recipes-pr12-h20-qwen3-coder-480b-fp8-dp8-ep-util095-failed"])
def test_failed_startups_are_refusals_with_vllms_needed_memory_and_max_length(record: str) -> None:
    """'To serve at least one request … (X GiB KV cache is needed …) … estimated maximum model length is M':
    kvplan refuses at the logged available memory, needs X within 1 %, and M falls in the rounding interval."""
    from kvplan.model.kv_cache import kv_cache_specs
    from kvplan.vllm.block_plan import BlockPlanSettings, plan_kv_cache

    rec = BY_ID[record]
    model, _ = BENCH._model(rec)
    specs = kv_cache_specs(model, tp=rec.get("tp") or 1)
    plan = plan_kv_cache(specs, int(rec["available_kv_gib"] * GiB), BlockPlanSettings(16, rec["max_model_len"], 8192))
    assert not plan.fits and plan.refusal is not None
    assert abs(plan.needed_bytes / GiB - rec["kv_needed_gib"]) <= 0.01 * rec["kv_needed_gib"]
    assert plan.estimated_max_model_len is not None
    assert abs(plan.estimated_max_model_len - rec["estimated_max_model_len"]) <= 64  # ±0.005 GiB of rounding
    row = BENCH.check_tokens(rec, False)
    assert not isinstance(row, str) and row.exact


@pytest.mark.parametrize(("record", "backend"), [
    ("llmd-h100-llama31-8b", None),
    ("llmd-h100-llama33-70b-fp8-tp2", None),
    ("llmd-h100-llama33-70b-fp8-tp1-failed", None),
    ("vllm-23278-h100-gpt-oss-120b", "marlin"),  # the log names the Marlin kernel
    # The llm-d gpt-oss runs used the Triton kernel (their weights match no other layout; see the report
    # of benchmarks/accuracy.py): the backend is given here, not inferred by kvplan.
    ("llmd-h100-gpt-oss-20b", "triton"),
    ("llmd-h100-gpt-oss-120b", "triton"),
    ("dennislee-a100-qwen2-7b-util025", None),  # A100, 0.10.1.1
    ("dennislee-a100x2-qwen2-7b-tp2-util025", None),
    ("dennislee-a100x4-gpt-oss-120b-tp4", "marlin"),  # the log names the Marlin kernel
    ("myoceane-a100-gpt-oss-20b-131k-util065", None),  # A100, 0.19.0: Marlin by default
])
def test_loaded_weights_match_model_loading_took(record: str, backend: MoeBackend | None) -> None:
    """Within 0.06 GiB of "Model loading took": kernel layout + rope cache explain the rest of the gap
    (gpt-oss keeps ~0.04 GiB that no cited mechanism accounts for)."""
    rec = BY_ID[record]
    model, _ = BENCH._model(rec)
    gpu = BENCH._gpu(rec) or get_gpu("h100")
    estimate = estimate_weights(model, tp=rec.get("tp") or 1, pp=1, arch=gpu.arch,
                                version=parse_vllm_version(BENCH._version(rec)), moe_backend=backend)
    assert abs(estimate.bytes / GiB - rec["model_weights_gib"]) < 0.06
    assert estimate.low_bytes <= rec["model_weights_gib"] * GiB <= estimate.high_bytes


@pytest.mark.parametrize(("record", "tp", "seqs", "logged"), [
    ("llmd-h100-llama31-8b", 1, 1024, 4.76),  # vLLM 0.11, V1 runner sampler: 38.4 B/logit
    ("llmd-h100-gpt-oss-20b", 1, 1024, 7.38),
])
def test_activation_matches_the_logged_peak(record: str, tp: int, seqs: int, logged: float) -> None:
    rec = BY_ID[record]
    model, _ = BENCH._model(rec)
    t = estimate_activation(model, ProfileRun(8192, seqs, tp=tp), version=parse_vllm_version("0.11"))
    assert abs(t.bytes / GiB - logged) < 0.05
    assert t.low_bytes <= logged * GiB <= t.high_bytes


@pytest.mark.parametrize("record", ["dennislee-a100-qwen2-7b-util025", "dennislee-a100-qwen2-7b-util050",
                                    "dennislee-a100x2-qwen2-7b-tp2-util025", "dennislee-a100x2-qwen2-7b-tp2-util050",
                                    "dennislee-a100x4-gpt-oss-120b-tp4"])
def test_v010_flashinfer_sampler_and_non_torch_explain_the_non_weight_memory(record: str) -> None:
    """vLLM 0.10.1.1 on A100 ("Using FlashInfer for top-p & top-k sampling."): requested − "Model loading
    took" − "Available KV cache memory" is the 14 B/logit sampler + the 0.10 non-torch term within 0.07 GiB
    (38.4 B/logit would be ~0.9 GiB more on Qwen2-7B)."""
    row = ROW[record]
    assert abs(row.residuals["rest"]) < 0.07, row.terms


@pytest.mark.parametrize(("record", "tp"), [("llmd-h100-llama31-8b", 1), ("llmd-h100-llama33-70b-fp8-tp2", 2)])
def test_non_torch_matches_the_logged_value(record: str, tp: int) -> None:
    t = estimate_non_torch(tp=tp, pp=1, version=parse_vllm_version("0.11"))
    assert abs(t.bytes / GiB - BY_ID[record]["non_torch_gib"]) < 0.015
    assert t.low_bytes <= BY_ID[record]["non_torch_gib"] * GiB <= t.high_bytes


def test_non_torch_by_version_band_and_tp() -> None:
    v010, v011 = parse_vllm_version("0.10"), parse_vllm_version("0.11")
    assert (estimate_non_torch(tp=2, pp=1, version=v010, pcie_only=True).bytes
            < estimate_non_torch(tp=2, pp=1, version=v011).bytes)
    assert "0.8–0.9" in estimate_non_torch(tp=1, pp=1, version=parse_vllm_version("0.8")).assumption


def test_available_kv_predictions_do_not_regress() -> None:
    assert len(ROWS) >= 15
    cal = [r for r in ROWS if r.split == "calibration"]
    val = [r for r in ROWS if r.split == "validation"]
    assert len(cal) >= 6 and len(val) >= 9
    errors = {r.record: abs(r.error_pct) for r in ROWS}
    assert statistics.median(errors.values()) < 2.0
    assert all(e < 0.5 for r, e in errors.items() if BY_ID[r]["available_kv_gib"] > 10 and r.startswith(
        ("llmd", "dennislee-a100x")) and r not in BENCH.UNEXPLAINED)
    s = BENCH.summarize(val)
    assert s is not None
    assert s.median_abs_pct < 2.0 and abs(s.signed_median_pct) < 1.0
    assert s.in_range >= 7


def test_the_printed_range_holds_the_logged_value_on_the_calibration_half() -> None:
    cal = [r for r in ROWS if r.split == "calibration" and r.record not in BENCH.UNEXPLAINED]
    assert all(r.in_range for r in cal), [r.record for r in cal if not r.in_range]


def test_up_to_vllm_0_20_the_kv_cache_size_is_blocks_per_group_times_the_block() -> None:
    """granite-4.0-h-1b on vLLM 0.19 logs 53,200 tokens at 66.95× for 4,096 tokens (the two do not multiply
    out): 0.20 and older printed num_blocks // len(groups) × min block size (kv_cache_utils.py:
    _report_kv_cache_config); 0.21+ print max_concurrency × max_model_len (~274k here)."""
    row = BENCH.check_tokens(BY_ID["ghlog-rtx3060-granite-4.0-h-1b-util060-eager-v0190"], False)
    assert not isinstance(row, str) and row.exact and row.logged == "53,200 tokens"


def test_a_record_logging_every_pp_stage_is_planned_stage_by_stage() -> None:
    """Qwen3-30B-A3B-2507 at TP 4 × PP 2 on 2 × 4 GH200 (vLLM 0.10.1): each stage logs its own "Available KV
    cache memory" (76.15 and 70.58 GiB); kvplan plans both and the report keeps the tightest (the last: the
    sampler's dummy run), as vLLM keeps the smallest block count. The PP 1 stage's 6,167,536 tokens are exact."""
    rec = BY_ID["isambard-2x4gh200-qwen3-30b-a3b-2507-tp4-pp2-v0101"]
    a = BENCH.check_tokens(rec, False)
    assert not isinstance(a, str) and a.exact, a
    row = ROW[rec["id"]]
    assert "pp" in row.families and "moe_tp2+" in row.families
    stages = [tuple(float(x) for x in pair.split("/")) for pair in
              row.terms.split("stages ")[1].split(", rest")[0].split(", ")]
    assert [logged for _, logged in stages] == [76.15, 70.58]
    assert all(abs(ours - logged) / logged < 0.015 for ours, logged in stages), stages  # +0.3 %, +1.2 %
    assert row.logged_gib == 70.58 and row.low_end_holds and row.in_range


def test_vllm_0_10_on_hopper_charges_the_distributed_init_as_non_torch_memory() -> None:
    """0.10.1.1's init_device takes init_snapshot before init_worker_distributed_environment: the logged
    "1.38 GiB for non-torch memory" on 2 × H200 (0.10.2) is kvplan's value over NVLink; A100s without NVLink keep
    the 0.17 their 0.10.1.1 logs imply, and 0.11+ (snapshot after the distributed init) the H100 logs' 0.54."""
    v010, v011 = parse_vllm_version("0.10"), parse_vllm_version("0.11")
    hopper = estimate_non_torch(tp=2, pp=1, version=v010, arch="hopper")
    assert hopper.bytes == round(1.38 * GiB)
    assert BY_ID["ghlog-2xh200-qwen3-next-80b-a3b-instruct-tp2-v0102"]["non_torch_gib"] == 1.38
    assert estimate_non_torch(tp=2, pp=1, version=v010, arch="ampere", pcie_only=True).bytes == round(0.17 * GiB)
    assert estimate_non_torch(tp=2, pp=1, version=v011, arch="hopper").bytes == round(0.54 * GiB)
    assert estimate_non_torch(tp=1, pp=1, version=v010, arch="hopper").bytes == round(0.05 * GiB)
    assert hopper.low_bytes < hopper.bytes < hopper.high_bytes


def test_the_big_moe_breakdown_log_names_its_non_weight_terms() -> None:
    """GLM-5.2-NVFP4 at TP 4 with EP on four 184.31 GiB GPUs (vLLM 0.26.0) prints vLLM's breakdown: of 12.25 GiB
    of non-weight memory, 6.31 is the profile run's activation peak and 4.99 the CUDA-graph estimate (the 4.13
    captured is not what is subtracted); non-torch is 0.95, inside kvplan's multi-GPU range. The big-MoE
    residual of issue 20 is not a non-torch term here."""
    rec = BY_ID["gb200x4-glm-5.2-nvfp4-tp4-ep4-v0260"]
    requested = 169.56  # "Desired GPU memory utilization is (0.92, 169.56 GiB)"
    terms = rec["model_weights_gib"] + rec["activation_peak_gib"] + rec["non_torch_gib"] + rec["cuda_graph_gib"]
    assert round(requested - terms, 2) == rec["available_kv_gib"] == 50.62
    t = estimate_non_torch(tp=4, pp=1, version=parse_vllm_version("0.26"), arch="blackwell")
    assert t.low_bytes <= rec["non_torch_gib"] * GiB <= t.high_bytes
    assert rec["activation_peak_gib"] + rec["cuda_graph_gib"] > 10 * rec["non_torch_gib"]


def test_the_printed_low_end_holds_on_every_validation_moe_record_at_tp_2_and_more() -> None:
    """Predicting too much memory is the worse error. DeepSeek-V4-Flash on 2 × GH200 with EP (vllm#44376,
    5.44 GiB logged, 10.65 predicted with the V1 runner's ported profile run) lies inside the range once the
    CUDA-graph estimate's MoE part is not divided by TP under EP (it was 12.30 with its low end at 5.88);
    the Qwen3-VL MoE records hold once their encoder profile is counted (vllm/encoder_profile.py): Qwen3-VL-30B-A3B
    (2.31 logged; low end 3.31 before), and Qwen3-VL-235B-A22B-Thinking-FP8 at TP 8 with EP on 8 × H100 (issue
    20's eighth pass), 35.80 logged on 0.11.2 (one video of the maximum feature size, budget 153,600 tokens: 6.07 GiB
    of non-KV memory above kvplan's before) and 40.07 on 0.15.1 (one image, budget 16,384: 1.79 GiB above)."""
    rows = [r for r in ROWS if r.split == "validation" and "moe_tp2+" in r.families]
    assert len(rows) >= 10
    missed = [r.record for r in rows if not r.low_end_holds]
    assert missed == [], missed
    dsv4 = ROW["vllm-44376-2xgh200-deepseek-v4-flash-failed"]
    # 7.86 since the DeepSeek-V4 weights count the replicated linears, fp32 mixers and load-time buffers
    # (74.28 GiB at 16,384 batched tokens, as the ptocu LLM(...) log's 74.35 on H200) and its profile forward the
    # hc_mult residual streams and the padded attention buffers (activation.py:dsv4_forward_phase_bytes); 7.79 since
    # the GH200's CUDA total is the measured 95.00 GiB (torch's "total capacity of 95.00 GiB"), not 95.08 from NVML
    assert dsv4.low_gib <= 5.44 and round(dsv4.predicted_gib, 2) == 7.79


def test_a_record_quoting_one_pp_stage_is_compared_with_that_stage() -> None:
    """Qwen3-32B at PP 2 on two RTX PRO 6000 Blackwell (vLLM 0.27.1, utilization 0.426): the log quotes PP rank
    0's worker (6.92 GiB) and the replica's 56,640 tokens, which that memory gives exactly; kvplan's stage 0 has
    no sampler, no CUDA-graph estimate (0.27.1's Model Runner V2 returns 0) and no penalty state (Model Runner V2
    builds its Sampler on the last PP rank only, v1/worker/gpu/model_runner.py:load_model): its non-weight memory
    is the ported forward 1.48 + the non-torch figure 0.54 + MRV2_UNSEEN_BYTES 0.53 = 2.55 GiB against the log's
    3.02. It was 3.02, −0.1 %, while the 0.60 GiB penalty state was charged here and the constant (then 0.40) was
    read on this record alone; it is now the mean of this record's +0.99 and the RTX 4090 record's +0.06."""
    rec = BY_ID["saiyam-2xrtxpro6000-qwen3-32b-pp2-util0426"]
    a = BENCH.check_tokens(rec, False)
    assert not isinstance(a, str) and a.exact, a
    row = ROW[rec["id"]]
    assert round(row.predicted_gib, 2) == 7.38 and row.in_range and row.low_end_holds
    assert round(row.residuals["rest"], 2) == 0.46, row.terms


def test_mrv2_unseen_bytes_is_the_mean_of_the_calibration_halfs_mrv2_readings() -> None:
    """MRV2_UNSEEN_BYTES (memory/activation.py) as read: log − kvplan's ported terms on the calibration half's two
    Model Runner V2 records, +0.99 GiB on Qwen3-32B PP 2's stage 0 (no penalty state there) and +0.06 on
    Qwen2.5-0.5B on an RTX 4090 (vllm.LLM, 0.27.1); the constant is their mean."""
    ids = ("saiyam-2xrtxpro6000-qwen3-32b-pp2-util0426", "enginrect-rtx4090-qwen2.5-0.5b-instruct-llm-util092-v0271")
    assert all(BY_ID[i]["split"] == "calibration" for i in ids)
    readings = [round(ROW[i].residuals["rest"] + MRV2_UNSEEN_BYTES / GiB, 2) for i in ids]
    assert readings == [0.99, 0.06]
    assert round(statistics.mean(readings), 2) == round(MRV2_UNSEEN_BYTES / GiB, 2) == 0.53


def test_the_printed_low_end_holds_on_the_validation_half() -> None:
    """Every validation record's logged available KV memory is at or above the low end kvplan prints, the Qwen3-VL
    MoE ones (ENCODER_PROFILE_RECORDS) included since their encoder profile is counted: all of them. The last one
    below was Qwen2.5-VL-3B on an L4 under Ray Data (vLLM 0.11.0: 9.26 GiB logged against a low end of 9.29), until
    0.11's float32 vision rotary was counted (test_qwen2_5_vl_float32_rotary_releases)."""
    val = [r for r in ROWS if r.split == "validation"]
    assert len(val) >= 28
    assert [r.record for r in val if not r.low_end_holds] == []
    assert all(ROW[r].low_end_holds and ROW[r].in_range for r in ENCODER_PROFILE_RECORDS)


def test_qwen2_5_vl_float32_rotary_releases() -> None:
    """The two Qwen2.5-VL validation logs of releases that rotate the vision q and k in float32 (encoder_qwen2_5_vl.
    fp32_rotary_attention_bytes), one 65,536-patch image each: 0.11.0 (cat([q, k]): 20 × [S, 1280] bf16 at the peak,
    was 11) 10.58 → 9.16 GiB against 9.26 logged; 0.9.0.1 (q, then k: 13) 2.21 → 1.88 against 1.81. Both in range."""
    ray, rhoai = ROW["raydocs-l4-qwen2.5-vl-3b-instruct-v0110"], ROW["rhoai-l4-qwen2.5-vl-7b-instruct-len2048-v0901"]
    assert (round(ray.predicted_gib, 2), round(rhoai.predicted_gib, 2)) == (9.16, 1.88)
    assert ray.in_range and ray.low_end_holds and rhoai.in_range and rhoai.low_end_holds


def test_qwen2_5_vl_served_023_video() -> None:
    """The calibration Qwen2.5-VL-7B log (vLLM 0.23.0 served compiled, one 458,752-patch dummy video): the ViT's
    native fused_add_rms_norm (out of place under Inductor, encoder_qwen2_5_vl.native_vision_ops) and the lru_cache'd
    GPU rotary move kvplan from −12.93 to −14.09 GiB against −14.28 logged."""
    row = ROW["wcs-a100-qwen2.5-vl-7b-instruct-util022-v0230-failed"]
    assert round(row.predicted_gib, 2) == -14.09 and row.in_range and row.low_end_holds


def test_qwen3_32b_tp2_on_mrv2_0_27_is_inside_the_range() -> None:
    """Qwen3-32B TP 2 on two RTX PRO 6000 (vLLM 0.27.1, Model Runner V2): 0.27's MRV2 dummy sampler is greedy (the
    model-dtype logits only) and it subtracts no CUDA-graph estimate, so kvplan no longer charges 20 B per logit and
    0.65 GiB of graphs (it was 5.17 GiB against the logged 8.22, −37 %, outside its range); 7.42, on the
    pessimistic side, then 7.29 with MRV2_UNSEEN_BYTES read on both calibration MRV2 records (0.53 GiB, was 0.40)."""
    row = ROW["saiyam-2xrtxpro6000-qwen3-32b-tp2-util0426"]
    assert row.in_range and round(row.predicted_gib, 2) == 7.29 and row.low_end_holds


def test_qwen3_vl_moe_tp4_0_11_counts_its_encoder_profile() -> None:
    """Qwen3-VL-30B-A3B on 4 × RTX 3090, vLLM 0.11 ("budget of 153600 tokens, and profiled with 1 video items"): the
    2.81 GiB the encoder profile leaves allocated (vllm/encoder_profile.py) bring kvplan from 4.75 GiB predicted
    (+105%, outside its range) to 1.91, inside [0.47 … 2.64]; what remains (rest 4.75 kvplan / 4.14 logged) is on
    kvplan's side of the sampler and non-torch terms, the encoder's share being read in vLLM's code."""
    row = ROW["zp-4x3090-qwen3-vl-30b-a3b-instruct-tp4-v0110"]
    # 1.89 since the weights hold the replicated router (+0.02 GiB at TP 4, tests/test_weights_replicated.py);
    # 2.22 (−3.8 %) since four PCIe-only 3090s (the log: "Custom allreduce is disabled because it's not supported on
    # more than two PCIe-only GPUs") take the PCIe non-torch figure, 0.21 GiB instead of NVLink's 0.54; 2.03
    # (−11.9 %) since 0.11's MRoPE cache covers 4 × 262,144 positions (rotary_embedding/mrope.py, +0.19 GiB): the
    # weights now equal the log's 14.77 GiB, and the 0.28 GiB the weights had hidden is the rest's
    assert round(row.predicted_gib, 2) == 2.03 and row.in_range and row.low_end_holds
    assert round(row.residuals["weights"], 2) == 0.00
    # what remains, 0.28 GiB on kvplan's (pessimistic) side, is the PCIe bound's headroom and the sampler's
    assert round(row.residuals["rest"], 2) == -0.28


def test_deepseek_v4_records_count_as_mla() -> None:
    """DeepSeek-V4's caches are vLLM's MLA specs (MLAAttentionSpec, SlidingWindowMLASpec): its records are the MLA
    family's, as records.yaml files them."""
    assert "mla" in ROW["ptocu-2xh200nvl-dsv4-flash-tp2-llm-4k"].families
    assert "mla" in ROW["vllm-44376-2xgh200-deepseek-v4-flash-failed"].families


@pytest.mark.parametrize("record", ["glmbisect-8xh200-glm-5.1-fp8-tp8-eager-v0191",
                                    "glmbisect-8xh200-glm-5.1-fp8-tp8-eager-v0201"])
def test_glm_5_1_fp8_at_tp8_on_h200_eager_misses_by_its_weights_only(record: str) -> None:
    """GLM-5.1-FP8 (DeepSeek sparse attention: MLA latent + indexer, 64-token blocks) at TP 8 on 8 × H200,
    eager, vLLM's default utilization (0.9 before 0.20, 0.92 from it: the two releases' logs differ by exactly
    0.02 × 139.8 GiB of KV memory). The token count follows from the logged memory, and the non-weight memory
    the log implies equals kvplan's: what kvplan predicts above the log is its weights estimate (89.04 GiB
    against the logged 89.39; 86.78 before the replicated MLA down-projection, DSA indexer and router and the
    dequantized kv_b_proj were counted)."""
    a = BENCH.check_tokens(BY_ID[record], False)
    assert not isinstance(a, str) and a.exact, a
    row = ROW[record]
    assert "mla" in row.families and "moe_tp2+" in row.families
    assert abs(row.residuals["rest"]) < 0.05, row.terms
    assert row.residuals["weights"] > 0 and row.low_end_holds and row.in_range
    assert row.with_logged_weights_pct is not None and abs(row.with_logged_weights_pct) < 0.2


def test_qwen3_235b_fp8_at_tp8_with_ep_on_pcie_l40s_matches_the_logged_breakdown() -> None:
    """Qwen3-235B-A22B-Instruct-2507-FP8 at TP 8 + EP on 8 × L40S (PCIe, no custom all-reduce), vLLM 0.10.2: the log
    prints every term. kvplan's activation (1.41 against 1.40 GiB) and the block count (14,834, the smallest rank's)
    match; non-torch is 0.17 against the logged 0.21."""
    rec = BY_ID["l40sx8-qwen3-235b-a22b-2507-fp8-tp8-ep-v0102"]
    a = BENCH.check_tokens(rec, False)
    assert not isinstance(a, str) and a.exact, a
    row = ROW[rec["id"]]
    assert abs(row.residuals["activation"]) < 0.05 and abs(row.residuals["non_torch"]) < 0.06, row.terms
    assert row.in_range and abs(row.error_pct) < 2.5


@pytest.mark.parametrize(("record", "predicted", "rest"), [
    # predicted 0.14 GiB lower since the weights hold the replicated router and KV heads (27.91 → 28.04 GiB), 0.19
    # lower since the multimodal rope caches 4 × 262,144 positions (rotary_embedding/mrope.py, vLLM ≤ 0.31: 28.23 GiB
    # of weights against the logged 28.24), and 0.49 lower since the pre-0.17 MoE point keeps whole experts under EP
    # (6.52 → 7.01 GiB of rest)
    ("joshi-8xh100-qwen3-vl-235b-thinking-fp8-tp8-ep-v0112", 36.03, 7.01),
    # 0.15.1 runs the FP8 MoE through FlashInfer's CUTLASS kernel (memory/flashinfer_moe.py): 2.21 → 2.67 GiB of rest
    ("joshi-8xh100-qwen3-vl-235b-thinking-fp8-tp8-ep-v0151", 40.36, 2.67),
])
def test_qwen3_vl_235b_at_tp8_counts_its_release_s_encoder_profile(record: str, predicted: float, rest: float) -> None:
    """Qwen3-VL-235B-A22B-Thinking-FP8, TP 8 + EP on 8 × H100: 0.11.2 profiles one video (budget 153,600 tokens: the
    153,600 × 16,384 bf16 copy, the original output and the float32 pixels, 5.34 GiB held through the run), 0.15.1
    one image (budget 16,384: its 0.88 GiB of outputs and float32 pixels held on top of the dummy run, above the
    vision tower's own 1.67 GiB forward).
    Both inside kvplan's range now; on 0.11.2 the MoE point keeps whole experts under EP (1,536 wide, the log's
    "E=16,N=1536"; 0.57 → 1.06 GiB), which leaves 0.23 GiB of non-KV memory kvplan does not see (rest log −
    kvplan), not the encoder's; on 0.15.1, whose block-FP8 MoE runs through FlashInfer's CUTLASS kernel with EP
    (select_fp8_moe_backend), its workspace (1.20 GiB at the MoE call) leaves 0.29 GiB."""
    row = ROW[record]
    assert row.in_range and row.low_end_holds
    assert round(row.predicted_gib, 2) == predicted
    assert abs(float(row.terms.split("rest ")[1].split("/")[0]) - rest) < 0.005
    low, high = (0.15, 0.35) if record.endswith("v0112") else (0.2, 0.4)
    assert low < row.residuals["rest"] < high, row.terms


def test_a_pp_record_is_compared_on_the_stage_whose_block_count_vllm_keeps() -> None:
    """DeepSeek-V2-Lite at TP 2 × PP 2 on 4 × L4 (vllm#20665): stage 0 logs 12.13 GiB, stage 1 11.33 GiB and both
    print 807,792 tokens. Stage 0 has 14 MLA layers against 13, so it holds fewer blocks in more memory: vLLM keeps
    its count, kvplan's headline is that stage's budget, and the benchmark compares it with stage 0's 12.13, not
    with the smaller 11.33 of the other stage."""
    rec = BY_ID["vllm-pr20665-4xl4-deepseek-v2-lite-tp2-pp2-eager"]
    a = BENCH.check_tokens(rec, False)
    assert not isinstance(a, str) and a.exact and a.logged == "807,792 tokens", a
    row = ROW[rec["id"]]
    assert row.logged_gib == 12.13 and "mla" in row.families and "pp" in row.families
    # stage 0 holds the dense layer 0 (kvplan/model/weights.py:stage_stored_bytes counts each stage's own layers)
    assert row.in_range and row.low_end_holds and abs(row.error_pct) < 0.5, row


def test_the_0_27_memory_summary_records_are_planned_and_exact() -> None:
    """vLLM 0.27.1 on 4 × RTX PRO 6000 (a blog post): Qwen3-235B-A22B-Instruct-2507-FP8 at TP 4, 621,392 tokens from
    27.85 GiB ("Current kv cache memory in use", the 0.27 summary line), and at TP 4 + EP 623,696 from 27.96."""
    for rid, tokens in (("utho-4xrtxpro6000-qwen3-235b-a22b-2507-fp8-tp4-v0271", "621,392 tokens"),
                        ("utho-4xrtxpro6000-qwen3-235b-a22b-2507-fp8-tp4-ep-v0271", "623,696 tokens")):
        a = BENCH.check_tokens(BY_ID[rid], False)
        assert not isinstance(a, str) and a.exact and a.logged == tokens, a
        row = ROW[rid]
        assert row.in_range and abs(row.error_pct) < 1.5, row
    # Qwen2.5-0.5B-Instruct on an RTX 4090 (WSL2, 23.99 GiB), vllm serve and the vllm.LLM class: exact token counts,
    # and the available memory inside the range (−0.4 %, −2.2 %: +0.3 % and −1.6 % before MRV2_UNSEEN_BYTES went
    # from 0.40 to 0.53 GiB, the mean of the PP 2 record's +0.99 and the vllm.LLM record's own +0.06).
    for rid, tokens, error in (("enginrect-rtx4090-qwen2.5-0.5b-instruct-util085-v0271-failed", "1,629,520 tokens",
                                -0.4),
                               ("enginrect-rtx4090-qwen2.5-0.5b-instruct-llm-util092-v0271", "1,793,232 tokens",
                                -2.2)):
        a = BENCH.check_tokens(BY_ID[rid], False)
        assert not isinstance(a, str) and a.exact and a.logged == tokens, a
        assert ROW[rid].in_range and ROW[rid].low_end_holds and round(ROW[rid].error_pct, 1) == error, ROW[rid]
