"""The profile-run rule of each vLLM release and runner (kvplan/vllm/memory/activation.py:PROFILE_RULES,
memory/cuda_graphs.py:MRV2_GRAPH_ESTIMATE_SINCE), as read in the wheels."""
from __future__ import annotations

from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.memory.activation import (
    MRV2_UNSEEN_BYTES,
    ProfileRun,
    estimate_activation,
    mrv2_default_sampler_phase_bytes,
    ported_profile_rule,
    v1_forward_phase_bytes,
)
from kvplan.vllm.memory.cuda_graphs import GraphCapture, estimate_cuda_graphs
from tests.conftest import load_fixture


def test_each_release_and_runner_has_its_profile_rule() -> None:
    """V1 runner: the ported run from 0.17 (the Triton top-k/top-p kernel, no penalties in the dummy run); Model
    Runner V2: the default pass only on 0.22–0.32, the warmup pass on 0.33; older releases keep the fitted figures."""
    def rule(minor: int, v2: bool) -> str | None:
        r = ported_profile_rule(VllmVersion(0, minor), model_runner_v2=v2)
        return None if r is None else r.sampler
    assert [rule(m, False) for m in (11, 16, 17, 22, 27, 33)] == [None, None, "v1", "v1", "v1", "v1"]
    assert [rule(m, True) for m in (21, 22, 27, 31, 32, 33)] == [None, "mrv2_default", "mrv2_default",
                                                                 "mrv2_default", "mrv2_default", "mrv2_warmup"]
    assert ported_profile_rule(VllmVersion(0, 27), model_runner_v2=None) is None


def test_mrv2_default_pass_holds_only_the_logits_and_gumbel_blocks() -> None:
    """v1/worker/gpu/sample/gumbel.py:gumbel_sample on the model-dtype logits: Qwen3-8B (151,936 vocab), 1,024 rows:
    the bf16 logits and two [1,024, 149] buffers (int64 argmax, fp32 max)."""
    model = load_fixture("Qwen--Qwen3-8B")
    assert model.vocab_size == 151_936
    assert mrv2_default_sampler_phase_bytes(model, num_reqs=1024) == 1024 * 151_936 * 2 + 1024 * 149 * 12


def test_mrv2_on_0_27_peaks_in_the_forward_plus_the_unseen_term() -> None:
    """Qwen3-8B on 0.27 (MRV2, 8,192 tokens / 1,024 sequences): the greedy dummy pass is below the forward, so the
    term is the ported forward plus MRV2_UNSEEN_BYTES, its low end the forward − 10 %."""
    model = load_fixture("Qwen--Qwen3-8B")
    t = estimate_activation(model, ProfileRun(8192, 1024, tp=1), version=VllmVersion(0, 27), model_runner_v2=True)
    forward = v1_forward_phase_bytes(model, tp=1, num_tokens=8192)
    assert t.bytes == forward + MRV2_UNSEEN_BYTES and t.low_bytes == int(forward * 0.9)
    assert "default pass" in t.assumption


def test_mrv2_subtracts_no_cuda_graph_estimate_before_0_29() -> None:
    """v1/worker/gpu/model_runner.py:profile_cudagraph_memory returns 0 in 0.22–0.28; 0.29 estimates."""
    capture = GraphCapture(1024, 8192, arch="hopper", enforce_eager=False)
    assert estimate_cuda_graphs(capture, version=VllmVersion(0, 28), model_runner_v2=True).bytes == 0
    v1 = estimate_cuda_graphs(capture, version=VllmVersion(0, 28), model_runner_v2=False).bytes
    assert v1 > 0 and estimate_cuda_graphs(capture, version=VllmVersion(0, 29), model_runner_v2=True).bytes == v1


def test_the_moe_workspace_is_not_split_by_tp_under_expert_parallelism() -> None:
    """fused_moe/config.py:FusedMoEParallelConfig.make: with --enable-expert-parallel each rank owns whole experts
    (their tp_size is 1), so TritonExperts' N is 2 × the full width. Mixtral-8x7B (hidden 4,096, experts 14,336
    wide, top-2) over 8,192 tokens: at TP 2 N = 14,336 (workspace 8,192 × 2 × (7,168 + 14,336) × 2 B); with EP at
    TP 2, N = 28,672 (8,192 × 2 × (14,336 + 28,672) × 2 B); fit passes the experts' split."""
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.memory.activation import triton_moe_workspace_bytes
    from kvplan.vllm.settings import ServeSettings

    model = load_fixture("mistralai--Mixtral-8x7B-v0.1")
    assert triton_moe_workspace_bytes(model, tp=2, num_tokens=8192) == 8192 * 2 * (7168 + 14336) * 2
    assert triton_moe_workspace_bytes(model, tp=1, num_tokens=8192) == 8192 * 2 * (14336 + 28672) * 2
    tp2 = v1_forward_phase_bytes(model, tp=2, num_tokens=8192)
    ep = v1_forward_phase_bytes(model, tp=2, num_tokens=8192, moe_tp=1)
    assert ep - tp2 == 8192 * 2 * (7168 + 14336) * 2
    from kvplan.hardware.gpus import get_gpu
    h100 = get_gpu("h100")
    kw = dict(tp=2, max_model_len=4096, vllm_version="0.33", use_v2_model_runner=False)
    plain = plan_fit(model, h100, ServeSettings.of(**kw), advise=False)  # type: ignore[arg-type]
    with_ep = plan_fit(model, h100, ServeSettings.of(enable_expert_parallel=True, **kw), advise=False)  # type: ignore[arg-type]
    assert with_ep.activation_bytes - plain.activation_bytes == 8192 * 2 * (7168 + 14336) * 2
