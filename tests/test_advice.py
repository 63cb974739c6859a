"""Advice searches every lever that changes vLLM's budget, re-plans each, and ranks them by what is given up."""
from __future__ import annotations

from kvplan.hardware.gpus import get_gpu
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from tests.conftest import load_fixture


def test_a_smaller_sampler_peak_is_advised_before_more_gpus_or_a_shorter_context() -> None:
    """gpt-oss-120b on one H100: the profiling run's sampler (1,024 rows × 201,088 logits) leaves too little KV
    memory for one 131,072-token request; fewer max_num_seqs shrink it, at full context."""
    r = plan_fit(load_fixture("openai--gpt-oss-120b"), get_gpu("h100"), ServeSettings())
    assert not r.verdict.fits
    changes = [a.change for a in r.verdict.advice]
    seqs = next(c for c in changes if c.startswith("--max-num-seqs"))
    assert changes.index(seqs) < changes.index("--tensor-parallel-size 2")
    assert changes.index(seqs) < next(i for i, c in enumerate(changes) if c.startswith("--max-model-len"))
    fixed = plan_fit(load_fixture("openai--gpt-oss-120b"), get_gpu("h100"),
                     ServeSettings.of(max_num_seqs=int(seqs.split()[1])), advise=False)
    assert fixed.verdict.fits and fixed.scheduler.max_model_len == r.scheduler.max_model_len
