"""kvplan's profile-run terms against vLLM 0.33's own profile run (tests/fixtures/oracle-profile).

The goldens are the peaks vLLM 0.33's V1-runner profile_run reaches on meta tensors (the vllm-cuda-oracle kit's
profile_probe.py, run by tools/cuda_oracle/profile_goldens.py): the forward of the profile batch and
_dummy_sampler_run, every GPU tensor counted while it lives. Each must be reproduced within 2% or 64 MiB, whichever
is larger (issue 20); the forward phases kvplan does not reproduce are listed with their cause and must still miss,
so a fix shows up here.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.model.hub import load_local
from kvplan.model.spec import ModelSpec
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_profile import qwen3_vl_encoder_phase
from kvplan.vllm.encoder_qwen2_5_vl import qwen2_5_vl_encoder_phase
from kvplan.vllm.memory.activation import (
    ProfileRun,
    mrv2_sampler_phase_bytes,
    triton_moe_workspace_bytes,
    v1_forward_phase_bytes,
    v1_profile_peak_bytes,
    v1_sampler_phase_bytes,
)

FIXTURES = Path(__file__).parent / "fixtures"
GOLDENS = FIXTURES / "oracle-profile"
MIB = 2**20

# Forward phases kvplan does not reproduce, by cause (the totals still hold where the sampler's peak is higher).
_MAMBA = "Mamba-2 mixer intermediates (in_proj output, conv and SSM outputs) are not modelled"
_GDN = ("Gated DeltaNet intermediates (qwen3_next.py / qwen3_5.py: in_proj_qkvz/ba outputs, their casts and cat) "
        "are not modelled")
_MLA_MOE = ("DeepSeek MoE layer at TP 8: more hidden-sized buffers alive than the attention point counts (shared "
            "experts' output, the routed output, their sum and its all-reduce)")
FORWARD_MISSES = {
    "ibm-granite--granite-4.0-h-small__h100-tp1": _MAMBA,
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16__h100-tp1": _MAMBA,
    "Qwen--Qwen3-Next-80B-A3B-Instruct__h200-tp2_mml_262144": _GDN,
    "Qwen--Qwen3.5-35B-A3B__h100-tp2": _GDN,
    "Qwen--Qwen3-Next-80B-A3B-Instruct__h200-tp2-mrv2_mml_262144": _GDN,
    "deepseek-ai--DeepSeek-R1__h200-tp8-mrv2": _MLA_MOE,
    "deepseek-ai--DeepSeek-R1__h200-tp8": _MLA_MOE,
    "deepseek-ai--DeepSeek-V3-0324__h200-tp8": _MLA_MOE,
    "moonshotai--Kimi-K2-Instruct__h200-tp8": _MLA_MOE,
    "Qwen--Qwen3-30B-A3B-FP8__h100-tp1": "block-FP8 MoE: the experts' quantized input and the attention linears' "
                                         "FP8 input copies are not counted",
    "allenai--OLMo-2-1124-13B__h100-tp1_seqs_64": "olmo2.py: q/k norms over the whole projection and the native "
                                                  "rotary in float32 (four [heads, T, 128] fp32 tensors at the peak)",
    "unsloth--gemma-2-27b-it__h100-tp1_seqs_64": "gemma2.py: pre/post-feedforward norms (GemmaRMSNorm's casts) add "
                                                 "hidden-sized buffers",
    "google--gemma-4-31B-it__h100-tp2": "gemma4.py: the extra norms and the per-layer scaling (mul) add hidden-sized "
                                        "buffers",
}
# ... and where that forward is the profile's peak (a small max_num_seqs), the total misses with it.
PEAK_MISSES = ("allenai--OLMo-2-1124-13B__h100-tp1_seqs_64", "unsloth--gemma-2-27b-it__h100-tp1_seqs_64")
# The probe's own failures on these cases (no golden): the oracle's limits, not kvplan's.
ORACLE_FAILURES = {
    "FlashInfer TRT-LLM MoE on Blackwell downloads its cubins at first use (no network here)": (
        "Qwen--Qwen3-30B-A3B__b200-tp1", "Qwen--Qwen3-235B-A22B__b200-tp8", "deepseek-ai--DeepSeek-R1__b200-tp8"),
    "FlashInfer's CUTLASS MoE checks for a CUDA device (meta tensors here)": (
        "deepseek-ai--DeepSeek-V2-Lite-Chat__b200-tp1",),
    "the fp32 router GEMM on Blackwell imports CuTe DSL (nvidia-cutlass-dsl, not installed)": (
        "MiniMaxAI--MiniMax-M2.7__b200-tp2",),
    "ModelOpt NVFP4 linears read input_global_scale_inv, set by weight loading (load_format=dummy skips it)": (
        "nvidia--Qwen3-235B-A22B-NVFP4__b200-tp4",),
    "ModelOpt FP8 per-tensor linears: the CUTLASS scaled-mm path asserts an output size the meta run lacks": (
        "nvidia--Llama-3.1-70B-Instruct-FP8__h100-tp2_mml_16000",),
    "compressed-tensors / FP8 MoE permute scratch allocates on torch.cuda (CPU build)": (
        "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic__h100-tp4", "zai-org--GLM-4.5-Air-FP8__h100-tp2",
        # after the encoder phase, which ran (tests/test_encoder_llama4.py)
        "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic__h100-tp1-enc",
        "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic__h100-tp4-enc",
        "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic__h100-tp4-enc_engine-arg_mm_encoder_tp_modedata"),
    "DeepSeek-V4's sparse attention needs DeepGEMM, which the probe's fake does not satisfy (GB10 and H200)": (
        "deepseek-ai--DeepSeek-V4-Flash__gb10-tp1_mml_262144_seqs_1_mnbt_2048",
        "deepseek-ai--DeepSeek-V4-Flash__gb10-tp1_mml_262144_seqs_1_mnbt_8224",
        "deepseek-ai--DeepSeek-V4-Flash__h200-tp1_mml_262144_seqs_1_mnbt_2048",
        "deepseek-ai--DeepSeek-V4-Flash__h200-tp1_mml_262144_seqs_1_mnbt_8224"),
    "transformers' Gemma4 vision encoder (gemma4_mm.py runs it) asks padding_mask.all() of a meta tensor (masking_utils"
    "._ignore_bidirectional_mask_sdpa): data-dependent, after the processor built the dummy": (
        "google--gemma-4-31B-it__h100-tp2-enc", "google--gemma-4-31B-it__h100-tp2-enc_mm-limit_video0"),
    "FlashInfer's TRT-LLM MoE kernels (chosen for BF16 experts on B200 at TP 2) fetch their cubins from NVIDIA's "
    "artifactory at JIT time, and the oracle has no network": ("Qwen--Qwen3-30B-A3B__b200-tp2",),
    "MiniMax-M2's FP8 MoE under expert parallelism builds its modular kernel on the real device ('device must be a "
    "cuda device', the fake's meta tensors)": (
        "MiniMaxAI--MiniMax-M2.7__h200-tp2_engine-arg_enable_expert_parallelTrue",),
    "the fake device lacks shared_memory_per_block_optin (gpt-oss's Triton MoE kernels query it)": (
        "openai--gpt-oss-20b__h100-tp1_mml_16000", "openai--gpt-oss-120b__h100-tp1_mml_16000"),
}


def _cases() -> list[dict[str, Any]]:
    return [json.loads(f.read_text()) for f in sorted((GOLDENS / "cases").glob("*.json"))]


CASES = _cases()
GOOD = [c for c in CASES if not c.get("error") and c.get("phases")]


def _model(case: dict[str, Any]) -> ModelSpec:
    corpus = FIXTURES / "corpus" / "configs" / case["config"]
    return load_local(str(corpus if corpus.is_dir() else FIXTURES / "configs" / case["config"]))


def _fp8(case: dict[str, Any]) -> bool:
    """A block-FP8 checkpoint on SM ≥ 9.0 (W8A8: its linears quantize their inputs); an A100 runs it weight-only."""
    return "Fp8LinearMethod" in (case.get("linear_methods") or []) and case["gpu"] != "a100-80"


def _moe_tp(case: dict[str, Any]) -> int | None:
    """The ranks each expert is split over: 1 with --enable-expert-parallel (whole experts per rank,
    FusedMoEParallelConfig.make), else the TP size (None)."""
    return 1 if "enable_expert_parallel=True" in case["args"] else None


def _v2(case: dict[str, Any]) -> bool:
    """Model Runner V2's sampler (vLLM 0.33's default runner) rather than the V1 runner's."""
    return case.get("runner") == "v2"


def _encoder(case: dict[str, Any]) -> tuple[int, int]:
    """kvplan's encoder phase for a case with processor files (`-enc`): (the tower's peak, what the probe keeps
    after it: the outputs; vLLM's profile_run also keeps the pixels, which the probe drops: test_encoder_profile.py);
    (0, 0) for the language-model-only cases."""
    if not case.get("processor"):
        return 0, 0
    tower = next(t for t in _model(case).towers if t.geometry is not None)
    assert tower.geometry is not None
    image, video = (0 if f"{m}=0" in case["args"] else 999 for m in ("image", "video"))
    encoder_phase = qwen2_5_vl_encoder_phase if tower.geometry.kind == "qwen2_5_vl" else qwen3_vl_encoder_phase
    phase = encoder_phase(tower.geometry, VllmVersion(0, 33), model_runner_v2=False, tp=case["tp"],
                          max_num_batched_tokens=case["tokens"], max_num_seqs=case["max_num_seqs"],
                          max_model_len=case["max_model_len"], image_limit=image, video_limit=video,
                          data_parallel="mm_encoder_tp_mode=data" in case["args"])
    assert phase is not None
    pixels = phase.items * phase.item.patches * tower.geometry.patch_values
    return phase.forward_peak_bytes, phase.retained_bytes - pixels


def _tolerance(golden: int) -> float:
    return max(0.02 * golden, 64 * MIB)


def test_goldens_name_their_source_and_vllm_version() -> None:
    index = json.loads((GOLDENS / "index.json").read_text())
    assert index["vllm"] == "0.33.0"
    assert index["command"].startswith("python tools/cuda_oracle/profile_goldens.py")
    assert len(index["probe"]["sha256"]) == 64
    assert {c["id"] for c in index["cases"]} == {c["id"] for c in CASES}
    assert len(GOOD) >= 30


@pytest.mark.parametrize("case", GOOD, ids=[c["id"] for c in GOOD])
def test_peak_activation_reproduces_vllms_profile_run(case: dict[str, Any]) -> None:
    """The torch peak of profile_run (vLLM's "peak activation"): max over the forward and the sampler phases."""
    golden = max(p["peak_bytes"] for p in case["phases"].values())
    model, first = _model(case), case.get("pp_rank", 0) == 0
    if "sampler" in case["phases"]:
        got = v1_profile_peak_bytes(model, ProfileRun(case["tokens"], case["max_num_seqs"], tp=case["tp"],
                                                      first_stage=first, moe_tp=_moe_tp(case)),
                                    fp8_activations=_fp8(case), model_runner_v2=_v2(case))
    else:  # a PP stage before the last: no sampler (profile_run: "Only run sampler/pooler on last PP rank")
        got = v1_forward_phase_bytes(model, tp=case["tp"], num_tokens=case["tokens"], fp8_activations=_fp8(case),
                                     first_stage=first, moe_tp=_moe_tp(case))
    tower, kept = _encoder(case)  # the encoder's outputs stay through both phases; its tower may peak higher
    got = max(tower, got + kept)
    within = abs(got - golden) <= _tolerance(golden)
    assert within != (case["id"] in PEAK_MISSES), (case["id"], got / MIB, golden / MIB)


WITH_SAMPLER = [c for c in GOOD if "sampler" in c["phases"]]


@pytest.mark.parametrize("case", WITH_SAMPLER, ids=[c["id"] for c in WITH_SAMPLER])
def test_sampler_phase_is_vllms_dummy_sampler_run(case: dict[str, Any]) -> None:
    """What _dummy_sampler_run adds on top of what the forward leaves alive (the V1 runner's, or Model Runner V2's):
    exact to the dummy requests' per-request tensors (a few KiB)."""
    added = case["phases"]["sampler"]["peak_bytes"] - case["phases"]["forward"]["live_after_bytes"]
    rows = min(case["tokens"], case["max_num_seqs"])
    model = _model(case)
    got = mrv2_sampler_phase_bytes(model, num_reqs=rows) if _v2(case) else v1_sampler_phase_bytes(model, num_reqs=rows)
    assert abs(got - added) <= 64 * 1024, (got - added)


@pytest.mark.parametrize("case", GOOD, ids=[c["id"] for c in GOOD])
def test_forward_phase_reproduces_vllms_or_is_a_listed_miss(case: dict[str, Any]) -> None:
    golden = case["phases"]["forward"]["peak_bytes"]
    got = v1_forward_phase_bytes(_model(case), tp=case["tp"], num_tokens=case["tokens"], fp8_activations=_fp8(case),
                                 first_stage=case.get("pp_rank", 0) == 0, moe_tp=_moe_tp(case)) + _encoder(case)[1]
    within = abs(got - golden) <= _tolerance(golden)
    assert within != (case["id"] in FORWARD_MISSES), (case["id"], got / MIB, golden / MIB)


@pytest.mark.parametrize("case", [c for c in GOOD if c.get("moe_backends") == ["TritonExperts"]],
                         ids=[c["id"] for c in GOOD if c.get("moe_backends") == ["TritonExperts"]])
def test_triton_moe_workspace_is_the_one_vllm_keeps(case: dict[str, Any]) -> None:
    """WorkspaceManager's buffer after the profile run: TritonExperts.workspace_shapes, exactly."""
    assert triton_moe_workspace_bytes(_model(case), tp=_moe_tp(case) or case["tp"], num_tokens=case["tokens"]) == \
        case["moe_workspace_bytes"]


def test_peak_misses_are_forward_misses() -> None:
    assert set(PEAK_MISSES) <= set(FORWARD_MISSES)


def test_every_oracle_failure_is_listed_with_its_cause() -> None:
    failed = {c["id"] for c in CASES if c.get("error") or not c.get("phases")}
    listed = {i for ids in ORACLE_FAILURES.values() for i in ids}
    assert failed == listed, sorted(failed ^ listed)


def test_fit_uses_the_ported_peak_on_vllm_033_for_both_runners() -> None:
    """estimate_activation on 0.33 is the ported profile peak for the V1 runner and for Model Runner V2 (its warmup
    pass), each against its own golden (Qwen2.5-7B, H100, 8,192 tokens / 1,024 sequences); with the runner unknown,
    the older per-logit estimate."""
    from kvplan.vllm.defaults import VllmVersion
    from kvplan.vllm.memory.activation import MRV2_UNSEEN_BYTES, estimate_activation

    case = next(c for c in GOOD if c["id"] == "Qwen--Qwen2.5-7B-Instruct__h100-tp1")
    mrv2 = next(c for c in GOOD if c["id"] == "Qwen--Qwen2.5-7B-Instruct__h100-tp1-mrv2")
    model = _model(case)
    v1 = estimate_activation(model, ProfileRun(8192, 1024, tp=1), version=VllmVersion(0, 33), model_runner_v2=False)
    golden = case["phases"]["sampler"]["peak_bytes"]
    assert v1.bytes == v1_profile_peak_bytes(model, ProfileRun(8192, 1024, tp=1))
    assert abs(v1.bytes - golden) < MIB and "V1 runner" in v1.assumption
    v2 = estimate_activation(model, ProfileRun(8192, 1024, tp=1), version=VllmVersion(0, 33), model_runner_v2=True)
    ported = v1_profile_peak_bytes(model, ProfileRun(8192, 1024, tp=1), model_runner_v2=True)
    v2_golden = max(p["peak_bytes"] for p in mrv2["phases"].values())
    assert abs(ported - v2_golden) < MIB and "Model Runner V2" in v2.assumption and ported != v1.bytes
    # plus what MRV2 allocates that the meta-tensor run does not see (measured on a log), its range from 0
    assert v2.bytes == ported + MRV2_UNSEEN_BYTES and v2.low_bytes == int(ported * 0.9)
    unknown = estimate_activation(model, ProfileRun(8192, 1024, tp=1), version=VllmVersion(0, 33))
    assert unknown.bytes not in (v1.bytes, v2.bytes)
    stage = estimate_activation(model, ProfileRun(8192, 1024, tp=1, with_sampler=False), version=VllmVersion(0, 33),
                                model_runner_v2=False)
    assert stage.bytes == case["phases"]["forward"]["peak_bytes"]


def test_pp_stages_differ_as_vllm_builds_them() -> None:
    """PP 2 of Qwen2.5-7B on an H100: the first stage peaks in its forward (its residual stream is the embedding
    output), the last in the sampler; a later stage's residual arrives in the runner's persistent intermediate
    tensors, one hidden buffer (8,192 × 3,584 × 2 B) fewer in its forward."""
    by_id = {c["id"]: c for c in GOOD}
    first, last = by_id["Qwen--Qwen2.5-7B-Instruct__h100-tp1-pp2r0"], by_id["Qwen--Qwen2.5-7B-Instruct__h100-tp1-pp2r1"]
    assert "sampler" not in first["phases"] and "sampler" in last["phases"]
    assert first["phases"]["forward"]["peak_bytes"] - last["phases"]["forward"]["peak_bytes"] == 8192 * 3584 * 2
    model = _model(first)
    assert v1_forward_phase_bytes(model, tp=1, num_tokens=8192) == first["phases"]["forward"]["peak_bytes"]
    assert v1_forward_phase_bytes(model, tp=1, num_tokens=8192, first_stage=False) == \
        last["phases"]["forward"]["peak_bytes"]


def test_model_runner_v2_samples_with_less_than_the_v1_runner_on_the_same_forward() -> None:
    """vLLM 0.33, Qwen2.5-7B on an H100 (8,192 tokens, 1,024 rows): the same forward; MRV2's dummy sampler run draws
    no random hidden rows and keeps no Triton top-k/top-p buffer (FlashInfer's fused path), so its peak is lower by
    exactly those: 132 × 152,064 × 4 B + 1,024 × 3,584 × 2 B."""
    by_id = {c["id"]: c for c in GOOD}
    v1, v2 = by_id["Qwen--Qwen2.5-7B-Instruct__h100-tp1"], by_id["Qwen--Qwen2.5-7B-Instruct__h100-tp1-mrv2"]
    assert v1["phases"]["forward"] == v2["phases"]["forward"]
    gap = v1["phases"]["sampler"]["peak_bytes"] - v2["phases"]["sampler"]["peak_bytes"]
    assert abs(gap - (132 * 152_064 * 4 + 1024 * 3584 * 2)) <= 64 * 1024


def test_pipeline_stages_are_measured_at_tp_above_one_too() -> None:
    """PP × TP goldens (each stage's TP rank 0): dense, MoE and MLA at TP 2 × PP 2, and Qwen3-30B-A3B at TP 4 × PP 2 as
    the isambard GH200 log ran it; the peak tests above hold them to 2% or 64 MiB like every other case."""
    both = {c["id"] for c in GOOD if c["pp"] > 1 and c["tp"] > 1}
    assert {"Qwen--Qwen3-30B-A3B__h200-tp4-pp2r0", "Qwen--Qwen3-30B-A3B__h200-tp4-pp2r1",
            "deepseek-ai--DeepSeek-V2-Lite-Chat__h100-tp2-pp2r1",
            "meta-llama--Llama-3.1-8B-Instruct__h100-tp2-pp2r0_seqs_64"} <= both
    assert len(both) == 8
