"""vLLM 0.11.0's dummy sampler: FlashInfer's top-k/top-p path by default, unlike 0.11.1+ (patch-level rule).

Read in the wheels (pip download --no-deps vllm==0.11.0 / 0.11.1): v1/sample/ops/topk_topp_sampler.py
TopKTopPSampler.__init__ takes `forward_cuda` → flashinfer_sample in 0.11.0 whenever flashinfer imports and
VLLM_USE_FLASHINFER_SAMPLER is not 0; 0.11.1 opts in only with VLLM_USE_FLASHINFER_SAMPLER=1 (PR #26859). The
calibration record llmd-h100-mistral-small-32-24b (vllm/vllm-openai:v0.11.0, H100) logs 2.12 GiB of peak activation,
below the 4.7 GiB the sort path costs for its 1,024 rows × 131,072 logits.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.vllm.defaults import VllmVersion, flashinfer_sampler_by_default
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.memory.activation import (
    ProfileRun,
    estimate_activation,
    forward_activation_bytes,
    sampler_bytes_per_logit,
)
from kvplan.vllm.settings import ServeSettings

CORPUS = Path(__file__).parent / "fixtures" / "corpus" / "configs"
MISTRAL_SMALL_32 = CORPUS / "mistralai--Mistral-Small-3.2-24B-Instruct-2506"
V011 = VllmVersion(0, 11)
# vllm serve on an H100 (engine/arg_utils.py:_set_default_args, ≥ 70 GiB and not A100): 8,192 tokens, 1,024 seqs
SERVE_H100 = ProfileRun(8192, 1024)
# v1/worker/gpu_model_runner.py:_dummy_sampler_run → Sampler.forward → flashinfer_sample
# (flashinfer 0.3.1 sampling.py:top_k_top_p_sampling_from_logits, top_k_first): the bf16 logits (2 B) the runner
# holds, their fp32 copy (4 B), top_k_mask_logits' output (4 B) and its softmax (4 B), per logit.
FLASHINFER_BYTES = 1024 * 131072 * (2 + 4 + 4 + 4)  # 1,879,048,192 B = 1.75 GiB
HIDDEN_BYTES = 8192 * 5120 * 2  # _dummy_run's hidden states (tokens × hidden, bf16), alive through the sampler
SORT_BYTES = int(1024 * 131072 * 38.4)  # the 0.11.1+ sort path, SAMPLER_BYTES_PER_LOGIT


@pytest.mark.parametrize(("text", "default"), [
    ("0.11.0", True), ("v0.11.0", True), ("0.11.0rc1", True), ("0.11", None), ("0.11.1", None), ("0.11.2", None),
    ("0.10.1.1", None), ("0.33.0", None), (None, None)])
def test_only_0110_named_with_its_patch_samples_with_flashinfer_by_default(text: str | None,
                                                                           default: bool | None) -> None:
    """A bare "0.11" keeps the sort path (the larger peak, and the llm-d :latest rows'); before 0.11 the band
    already samples with FlashInfer (None: the band decides)."""
    assert flashinfer_sampler_by_default(text) is default


def test_0110_profile_peak_is_flashinfers_14_bytes_a_logit_with_the_sort_path_as_high_end() -> None:
    model = load_local(str(MISTRAL_SMALL_32))
    assert (model.vocab_size, model.hidden_size) == (131072, 5120)
    assert forward_activation_bytes(model, tp=1, num_tokens=8192) < FLASHINFER_BYTES  # the sampler sets the peak
    assert sampler_bytes_per_logit(V011, flashinfer_default=True) == 14.0
    t = estimate_activation(model, SERVE_H100, version=V011, flashinfer_default=True)
    assert t.bytes == FLASHINFER_BYTES + HIDDEN_BYTES == 1_962_934_272
    # flashinfer is the wheel's [flashinfer] extra in 0.11.0: without it the sort path runs, the range's top
    assert t.high == int((SORT_BYTES + HIDDEN_BYTES) * 1.1)
    assert "the patch release's default" in t.assumption
    # 0.11 without a patch, or VLLM_USE_FLASHINFER_SAMPLER=0 on 0.11.0: the sort path (kvplan's 4.88 GiB before)
    assert estimate_activation(model, SERVE_H100, version=V011).bytes == SORT_BYTES + HIDDEN_BYTES == 5_237_846_835
    assert estimate_activation(model, SERVE_H100, version=V011, flashinfer_sampler=False,
                               flashinfer_default=True).bytes == SORT_BYTES + HIDDEN_BYTES


def test_fit_reads_the_patch_from_the_version_text() -> None:
    """The record's flags (H100, util 0.95, max len 16,000): 0.11.0 plans FlashInfer's peak, 0.11 the sort path
    (compared as a difference too, which stays exact if the encoder profile is later added to both)."""
    model = load_local(str(MISTRAL_SMALL_32))

    def activation(version: str) -> int:
        s = ServeSettings.of(gpu_memory_utilization=0.95, max_model_len=16000, vllm_version=version)
        terms = {t.name: t for t in plan_fit(model, get_gpu("h100"), s, advise=False).memory.terms}
        return terms["activation"].bytes

    assert activation("0.11") - activation("0.11.0") == SORT_BYTES - FLASHINFER_BYTES == 3_274_912_563
    assert activation("0.11") == activation("0.11.2")


def test_the_llmd_mistral_small_record_is_planned_on_0110s_sampler() -> None:
    """benchmarks/accuracy.py plans the record with its own release ("0.11.0 (V1)"): 28.25 GiB against the logged
    28.20 (was 25.47, −9.7 %, on the sort path; 28.52 before the 0.11.0 encoder profile, vllm/encoder_pixtral.py),
    inside kvplan's range; the other llm-d rows state none and stay on the 0.11 band."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("kvplan_accuracy_benchmark_sampler", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    records = {r["id"]: r for r in bench.load_records()}
    rec = records["llmd-h100-mistral-small-32-24b"]
    assert bench._version(rec) == "0.11.0" and bench._version(records["llmd-h100-llama31-8b"]) == "0.11"
    row = bench.predict_available(rec)
    assert not isinstance(row, str)
    assert round(row.predicted_gib, 2) == 28.25 and row.in_range and row.low_end_holds
    assert round(row.residuals["activation"], 2) == 0.02  # 2.12 logged − 2.10 (1.83 + the encoder's 0.27)
