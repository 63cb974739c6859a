"""FlashInfer's CUTLASS fused-MoE kernel: which vLLM releases pick it, its workspace (memory/flashinfer_moe.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvplan.model.hub import load_local
from kvplan.vllm.defaults import parse_vllm_version
from kvplan.vllm.memory.activation import ProfileRun, estimate_activation, v1_forward_phase_bytes
from kvplan.vllm.memory.flashinfer_moe import (
    flashinfer_cutlass_moe_point_bytes,
    flashinfer_cutlass_moe_selected,
    flashinfer_cutlass_workspace_bytes,
)
from tests.test_accuracy import ROW

CONFIGS = Path(__file__).parent / "fixtures"
MINIMAX_M2 = load_local(str(CONFIGS / "corpus" / "configs" / "MiniMaxAI--MiniMax-M2"))
QWEN3_30B_BF16 = load_local(str(CONFIGS / "configs" / "Qwen--Qwen3-30B-A3B"))
H100 = (9, 0)


def test_minimax_m2_at_tp_4_over_8192_tokens_needs_the_hand_counted_workspace() -> None:
    """getWorkspaceDeviceBufferSizes with use_deepseek_fp8_block_scale, R = 8,192 × 8 = 65,536 rows, H = 3,072,
    I = 1,536 / 4 = 384, E = 256:
    inputs  max(R·H·2, R·I·2)                                     = 402,653,184
    outputs 2·R·I·2 (blockscale fc1 output)                       = 100,663,296
    deepseek fc1 (N 768, K 3,072): R·K fp8 + (R + 256·31)/32·32 · 24 · 4 = 201,326,592 + 7,053,312 = 208,379,904
    (fc2, K 384: 25,165,824 + 881,664, smaller)
    3 × R·4 (row maps, final scales) = 786,432; blocked counts + cumsum (1,024 tokens a block → 8 blocks):
    2 × 256·8·4 = 16,384; blocked rows 256·8,192·4 = 8,388,608; first-token offsets 257·8 → 2,176 aligned;
    the binding's src_to_dest_map R·4 = 262,144. Sum 721,152,128 B = 0.672 GiB (last session's "about 0.67")."""
    ws = flashinfer_cutlass_workspace_bytes(num_rows=8192, hidden=3072, inter=384, top_k=8, experts=256)
    assert ws == 402_653_184 + 100_663_296 + 208_379_904 + 786_432 + 16_384 + 8_388_608 + 2_176 + 262_144
    assert ws == 721_152_128
    # at the MoE call vLLM's own (M, hidden) WorkspaceManager buffer is alive too: + 8,192 × 3,072 × 2 B
    assert flashinfer_cutlass_moe_point_bytes(MINIMAX_M2, moe_tp=4, ep_size=1, num_tokens=8192) == ws + 50_331_648


def test_with_ep_each_rank_holds_whole_experts_and_fewer_of_them() -> None:
    """EP 4: I = 1,536 whole, E = 64 local experts; the rows stay 8,192 × top-k (num_moe_inputs ignores EP)."""
    tp = flashinfer_cutlass_moe_point_bytes(MINIMAX_M2, moe_tp=4, ep_size=1, num_tokens=8192)
    ep = flashinfer_cutlass_moe_point_bytes(MINIMAX_M2, moe_tp=1, ep_size=4, num_tokens=8192)
    r, h, i = 65_536, 3072, 1536
    # inputs R·H·2 alike; outputs 2·R·I·2 four times larger; the fc1 fp8 copy R·H alike, its scales' padding smaller
    assert ep - tp == 2 * r * i * 2 - 2 * r * 384 * 2 + ((r + 64 * 31) // 32 * 32 - (r + 256 * 31) // 32 * 32) * (
        h // 128) * 4 + (64 - 256) * 8192 * 4 + 2 * (64 - 256) * 8 * 4 + ((65 * 8 + 127) // 128 * 128 - 2176)


def test_the_release_and_gpu_decide_whether_flashinfer_cutlass_runs() -> None:
    """oracle/fp8.py: 0.15.1 and 0.16.0 try FLASHINFER_CUTLASS before Triton (block FP8 on SM 9.0 only); 0.17+
    moves Triton to the front on Hopper unless ep_size > 1."""
    def picks(version: str, *, ep: bool = False, capability: tuple[int, int] | None = H100,
              model: object = MINIMAX_M2) -> bool:
        return flashinfer_cutlass_moe_selected(model, version=parse_vllm_version(version),  # type: ignore[arg-type]
                                               capability=capability, expert_parallel=ep)

    assert picks("0.16") and picks("0.15.1") and picks("0.16", ep=True)
    assert not picks("0.17") and not picks("0.19.1") and not picks("0.33")
    assert picks("0.17", ep=True) and picks("0.33", ep=True)
    assert not picks("0.14")  # not read: kvplan keeps the Triton caches
    assert not picks("0.16", capability=(8, 0)) and not picks("0.16", capability=(10, 0))
    assert not picks("0.16", capability=(12, 0)) and not picks("0.16", capability=None)
    assert not picks("0.16", model=QWEN3_30B_BF16)  # BF16 experts: not the block-FP8 scheme

    def forced(version: str, flag: bool) -> bool:
        return flashinfer_cutlass_moe_selected(MINIMAX_M2, version=parse_vllm_version(version), capability=H100,
                                               expert_parallel=False, use_flashinfer_moe_fp8=flag)

    assert forced("0.19.1", True) and not forced("0.16", False)  # VLLM_USE_FLASHINFER_MOE_FP8=1 / =0


def test_the_minimax_m2_0_16_record_moves_toward_its_log_and_stays_in_range() -> None:
    """MiniMax-M2 FP8 TP 4 on H100, 0.16.0rc2 ("Using FLASHINFER_CUTLASS Fp8 MoE backend"): the MoE call holds
    0.72 GiB against the Triton caches' 0.52, so kvplan goes from 18.87 GiB (+6.0 %) to 18.66 (+4.9 %) against the
    logged 17.79; the 0.11.2 record of the same deployment (Triton) does not move."""
    row = ROW["joshi-4xh100-minimax-m2-fp8-tp4-v0160"]
    assert round(row.predicted_gib, 2) == 18.66 and row.in_range and row.low_end_holds
    assert round(row.error_pct, 1) == 4.9
    assert round(ROW["joshi-4xh100-minimax-m2-fp8-tp4-v0112"].predicted_gib, 2) == 20.37


def test_on_the_ported_rules_the_moe_call_is_a_peak_candidate_and_only_vllms_buffer_stays() -> None:
    """vLLM 0.17+ with EP on Hopper (FLASHINFER_CUTLASS): the MoE call holds the three base hidden buffers
    (8,192 × 3 × 3,072 × 2 B = 150,994,944) with FlashInfer's workspace and vLLM's buffer (1,066,596,992 at EP 4);
    what the WorkspaceManager keeps for the sampler phase is FlashInferExperts.workspace_shapes' (M, hidden) buffer
    (50,331,648 B), not Triton's 8,192 × 8 × (3,072 + 3,072) × 2 B = 805,306,368."""
    point = flashinfer_cutlass_moe_point_bytes(MINIMAX_M2, moe_tp=1, ep_size=4, num_tokens=8192)
    assert point == 1_066_596_992
    fi = v1_forward_phase_bytes(MINIMAX_M2, tp=4, num_tokens=8192, moe_tp=1, moe_point_bytes=point)
    assert fi == 150_994_944 + point
    run = ProfileRun(8192, 1024, tp=4, moe_tp=1)
    v0191 = parse_vllm_version("0.19.1")
    triton = estimate_activation(MINIMAX_M2, run, version=v0191, model_runner_v2=False)
    flashinfer = estimate_activation(MINIMAX_M2, replace(run, moe_point_bytes=point), version=v0191,
                                     model_runner_v2=False)
    # the sampler phase is the peak on both: the retained workspace is the difference
    assert triton.bytes - flashinfer.bytes == 805_306_368 - 50_331_648


def test_fit_says_which_moe_kernel_it_counted() -> None:
    from kvplan.vllm.fit import _said_moe_kernel
    from kvplan.vllm.memory.budget import MemoryTerm

    term = MemoryTerm("activation", 1, "estimate", "peak")
    assert _said_moe_kernel(term, None) is term
    assert _said_moe_kernel(term, 771_483_776).assumption == (
        "peak; the block-FP8 MoE runs FlashInfer's CUTLASS kernel (its workspace with vLLM's buffer 0.72 GiB at the "
        "MoE call)")


def _activation(version: str, env: dict[str, str], max_num_seqs: int | None = None) -> tuple[int, str]:
    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.configs import ServeSettings
    from kvplan.vllm.environment import vllm_environment
    from kvplan.vllm.fit import plan_fit

    s = ServeSettings.of(tensor_parallel_size=4, vllm_version=version, max_num_seqs=max_num_seqs,
                         env=vllm_environment(env))
    term = next(t for t in plan_fit(MINIMAX_M2, get_gpu("h100"), s, advise=False).memory.terms
                if t.name == "activation")
    return term.bytes, term.assumption


def test_vllm_use_flashinfer_moe_fp8_1_runs_cutlass_at_tp_on_0_19_1() -> None:
    """oracle/fp8.py:select_fp8_moe_backend (0.19.1): VLLM_USE_FLASHINFER_MOE_FP8=1 tries FLASHINFER_TRTLLM, then
    FLASHINFER_CUTLASS before the priority list that puts Triton first at TP on Hopper. MiniMax-M2 FP8 TP 4 on H100:
    the MoE call holds the hand-counted 721,152,128 B workspace + vLLM's 50,331,648 B buffer, and the sampler phase
    (the peak) keeps FlashInferExperts' (M, hidden) buffer instead of Triton's 805,306,368 B."""
    unset, said = _activation("0.19.1", {})
    forced, forced_said = _activation("0.19.1", {"VLLM_USE_FLASHINFER_MOE_FP8": "1"})
    assert "FlashInfer" not in said and unset == 3_843_020_800
    assert unset - forced == 805_306_368 - 50_331_648
    assert forced_said.endswith("(its workspace with vLLM's buffer 0.72 GiB at the MoE call); "
                                "VLLM_USE_FLASHINFER_MOE_FP8=1")
    assert flashinfer_cutlass_moe_point_bytes(MINIMAX_M2, moe_tp=4, ep_size=1, num_tokens=8192) == (
        721_152_128 + 50_331_648)


def test_vllm_use_flashinfer_moe_fp8_0_keeps_triton_on_0_16() -> None:
    """0.16.0's select_fp8_moe_backend: =0 removes FLASHINFER_TRTLLM and FLASHINFER_CUTLASS, so the block-FP8 MoE
    that picks CUTLASS unset (the 0.16.0rc2 log) falls to Triton; the term says the variable decided. At the
    record's --max-num-seqs 16 the forward is the peak: the MoE call's 771,483,776 B with the hidden buffer
    (8,192 × 3,072 × 2 B) unset, kvplan's Triton count with =0."""
    unset, said = _activation("0.16", {}, 16)
    off, off_said = _activation("0.16", {"VLLM_USE_FLASHINFER_MOE_FP8": "0"}, 16)
    assert "FlashInfer's CUTLASS kernel" in said and "FlashInfer" not in off_said
    assert off_said.endswith("; VLLM_USE_FLASHINFER_MOE_FP8=0: the Triton MoE caches")
    assert unset == 721_152_128 + 2 * 50_331_648 and off == 603_979_776
    on = _activation("0.16", {"VLLM_USE_FLASHINFER_MOE_FP8": "1"}, 16)
    assert on == (unset, said + "; VLLM_USE_FLASHINFER_MOE_FP8=1")


def test_fit_reads_vllm_use_flashinfer_moe_fp8_from_env_flag_and_shell() -> None:
    import json

    from typer.testing import CliRunner

    from kvplan.cli.app import app

    args = ["fit", str(CONFIGS / "corpus" / "configs" / "MiniMaxAI--MiniMax-M2"), "--gpu", "h100", "-tp", "4",
            "--vllm-version", "0.19.1", "--json"]
    runner = CliRunner()
    by_flag = runner.invoke(app, [*args, "--env", "VLLM_USE_FLASHINFER_MOE_FP8=1"])
    by_shell = runner.invoke(app, args, env={"VLLM_USE_FLASHINFER_MOE_FP8": "1"})
    assert by_flag.exit_code == by_shell.exit_code == 0, by_flag.output
    assert json.loads(by_flag.stdout)["memory"] == json.loads(by_shell.stdout)["memory"]
    assert json.loads(by_flag.stdout)["memory"]["activation_bytes"] == 3_088_046_080
    bad = runner.invoke(app, args, env={"VLLM_USE_FLASHINFER_MOE_FP8": "on"})
    assert bad.exit_code == 2 and "VLLM_USE_FLASHINFER_MOE_FP8='on': vLLM reads it as an integer" in bad.stderr
