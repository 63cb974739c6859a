"""FlashInfer's CUTLASS fused-MoE kernel in vLLM's profile run: which releases pick it, and its workspace."""
from __future__ import annotations

from kvplan.model.spec import ModelSpec
from kvplan.vllm.defaults import VllmVersion

# Which FP8 MoE kernel vLLM builds for a block-FP8 checkpoint (weight_block_size [128, 128], dynamic per-token-group
# activations: kFp8Static128BlockSym / kFp8Dynamic128Sym) on CUDA, read in the wheels:
#   * 0.15.1 and 0.16.0 (model_executor/layers/fused_moe/oracle/fp8.py:select_fp8_moe_backend): the first supported of
#     AITER, FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, DEEPGEMM, ..., TRITON. FlashInferExperts._supports_quant_scheme
#     (fused_moe/flashinfer_cutlass_moe.py) takes block FP8 on SM 9.0 only (`is_device_capability(90)`), with
#     FlashInfer installed (vLLM pins it: flashinfer-python 0.6.1 / 0.6.3) and no sequence parallelism; TRT-LLM's
#     FP8 MoE needs SM 10.x. So H100 / H200 run FLASHINFER_CUTLASS at TP and with EP alike (the MiniMax-M2 0.16.0rc2
#     log: "Using FLASHINFER_CUTLASS Fp8 MoE backend").
#   * 0.17.0, 0.19.0/0.19.1, 0.20.0, 0.27.1, 0.33.0 (oracle/fp8.py:_get_priority_backends): "On Hopper for Block Fp8,
#     prefer Triton for TP and FI CUTLASS for EP" — TRITON moved to the front unless ep_size > 1.
#   * VLLM_USE_FLASHINFER_MOE_FP8=0 removes both FlashInfer backends, =1 tries them first (the same branch of
#     select_fp8_moe_backend in 0.16.0 and 0.19.1, taken only when envs.is_set; kvplan reads it into
#     VllmEnvironment.use_flashinfer_moe_fp8). Not modelled: with =1, SM 10.x takes FLASHINFER_TRTLLM (its
#     workspace not counted: the Triton caches kept) and a GPU neither backend supports makes vLLM raise
#     NotImplementedError; VLLM_FLASHINFER_MOE_BACKEND, when set, picks one of the two;
#     LoRA forces TRITON, VLLM_USE_DEEP_GEMM=1 DEEPGEMM in 0.16
#     (neither modelled here).
# Releases before 0.15 were not read for this: kvplan keeps the Triton workspace there.
FI_CUTLASS_FP8_BLOCK_SINCE = VllmVersion(0, 15)
FI_CUTLASS_FP8_BLOCK_TP_UNTIL = VllmVersion(0, 17)
FI_CUTLASS_FP8_BLOCK_CAPABILITY = (9, 0)


def fp8_block_moe(model: ModelSpec) -> bool:
    """A block-FP8 MoE checkpoint (8-bit weights with a weight_block_size): vLLM's Fp8MoEMethod with block scales."""
    q = model.quant
    return (model.moe is not None and q is not None and q.weight_bits == 8
            and model.facts.quant_layout.fp8_block is not None)


def flashinfer_cutlass_moe_selected(model: ModelSpec, *, version: VllmVersion, capability: tuple[int, int] | None,
                                    expert_parallel: bool, use_flashinfer_moe_fp8: bool | None = None) -> bool:
    """Whether `version` runs a block-FP8 MoE through FlashInfer's CUTLASS kernel on a GPU of `capability` (the
    block above): SM 9.0 from 0.15, at TP only before 0.17, with expert parallelism (ep_size > 1) on every later
    release read. `use_flashinfer_moe_fp8`: VLLM_USE_FLASHINFER_MOE_FP8 when set (0: never; 1: select_fp8_moe_backend
    tries FLASHINFER_TRTLLM, then FLASHINFER_CUTLASS, before the priority list, so at TP too). DeepSeek-V4's experts
    are not this scheme (kvplan keeps its own MoE count)."""
    if capability != FI_CUTLASS_FP8_BLOCK_CAPABILITY or not fp8_block_moe(model) or model.dsv4 is not None:
        return False
    if version < FI_CUTLASS_FP8_BLOCK_SINCE or use_flashinfer_moe_fp8 is False:
        return False
    return expert_parallel or use_flashinfer_moe_fp8 is True or version < FI_CUTLASS_FP8_BLOCK_TP_UNTIL


# FlashInfer's CUTLASS MoE workspace (flashinfer-python 0.6.3, the pin of vLLM 0.16.0; the same code in 0.6.1),
# data/csrc/fused_moe/cutlass_backend/cutlass_fused_moe_kernels.cuh:CutlassMoeFCRunner::getWorkspaceDeviceBufferSizes
# for the runner flashinfer_cutlass_fused_moe_binding.cu builds for bf16 activations and fp8 weights
# (CutlassMoeFCRunner<__nv_bfloat16, __nv_fp8_e4m3>: T = OutputType = bf16, 2 B) with use_deepseek_fp8_block_scale,
# not min-latency. With R = num_rows × top_k permuted rows, H = hidden, I = the expert width on this rank:
#   overlapped_gemm1_gemm2_inputs  = max(R·H·2 (permuted data), R·I·2 (fc1 result), R·H·2 (blockscale fc2 output))
#   overlapped_gemm1_gemm2_outputs = 2·R·I·2 (blockscale fc1 output, gate and up)
#   deepseek_fc_workspace          = max over fc1 (N = 2·I, K = H) and fc2 (N = H, K = I) of
#       nv_internal/.../fp8_blockscale_gemm/fp8_blockscale_gemm.cu:CutlassFp8BlockScaleGemmRunner<bf16, fp8, bf16>::
#       getWorkspaceSizeBase(R, N, K, E): A is bf16, so it quantizes internally: align4(R)·K fp8 and
#       compute_padded_offset(R, E)·ceil(K / 128) fp32 scales (deep_gemm/scheduler.cuh: (R + E·31) / 32 · 32);
#   permuted_row_to_unpermuted_row, permuted_token_selected_experts, permuted_token_final_scales: R × 4 B each;
#   blocked_expert_counts and its cumsum: E·ceil(rows / computeNumTokensPerBlock(rows, E))·4 B each;
#   blocked_row_to_unpermuted_row: E·rows·4 B; expert_first_token_offset: (E + 1)·8 B;
# each aligned to kCudaMemAlign (128 B, common/workspace.h), E = experts on this rank. getWorkspaceInfo
# (the binding) adds src_to_dest_map (rows·top_k·4 B) and allocates it all with alloc_tensor for each call: a
# transient of the MoE layer's call in torch's allocator (tvm-ffi's environment allocator), so part of the profile
# run's peak, not a persistent buffer. Left out: the per-expert pointer and stride arrays (alpha_scale_ptr_array,
# tma_ws_gemm*_workspace) and CUTLASS's grouped-GEMM workspace: no factor of rows or hidden, under 1 MiB at 256
# experts. vLLM's own share (fused_moe/modular_kernel.py:_allocate_buffers, one chunk): FlashInferExperts.
# workspace_shapes gives workspace13 = fused output = (M, H), one common WorkspaceManager buffer of M·H in the
# activation dtype, alive for good (v1/worker/workspace.py).
_ALIGN = 128
_FP8_GROUP = 128


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _tokens_per_block(num_rows: int, experts: int) -> int:
    """cutlass_fused_moe_kernels.cuh:computeNumTokensPerBlock."""
    t = 32
    while t <= 1024:
        if -(-num_rows // t) * experts <= t:
            return t
        t *= 2
    return 1024


def _blockscale_gemm_workspace(rows: int, n: int, k: int, experts: int) -> int:
    """fp8_blockscale_gemm.cu:getWorkspaceSizeBase for a bf16 A (quantized inside) and fp8 B; `n` does not enter."""
    del n
    padded = (rows + experts * 31) // 32 * 32
    return -(-rows // 4) * 4 * k + padded * -(-k // _FP8_GROUP) * 4


def flashinfer_cutlass_workspace_bytes(*, num_rows: int, hidden: int, inter: int, top_k: int, experts: int,
                                       gated: bool = True) -> int:
    """FlashInfer's CUTLASS MoE workspace for one call of `num_rows` tokens on the block-FP8 path (the block above):
    `inter` the expert width on this rank, `experts` the experts on this rank."""
    r = num_rows * top_k
    factor = 2 if gated else 1
    fc1_out = factor * r * inter * 2
    inputs = max(r * hidden * 2, r * inter * 2)
    deepseek = max(_blockscale_gemm_workspace(r, factor * inter, hidden, experts),
                   _blockscale_gemm_workspace(r, hidden, inter, experts))
    blocks = -(-num_rows // _tokens_per_block(num_rows, experts))
    small = (3 * _aligned(r * 4) + 2 * _aligned(experts * blocks * 4) + _aligned(experts * num_rows * 4)
             + _aligned((experts + 1) * 8))
    return _aligned(inputs) + _aligned(fc1_out) + _aligned(deepseek) + small + _aligned(r * 4)


def flashinfer_cutlass_moe_point_bytes(model: ModelSpec, *, moe_tp: int, ep_size: int, num_tokens: int,
                                       act_bytes: int = 2) -> int:
    """What an MoE layer holds at its FlashInfer CUTLASS call over `num_tokens` tokens: FlashInfer's workspace
    (flashinfer_cutlass_workspace_bytes) and vLLM's M × hidden WorkspaceManager buffer. `moe_tp`: the ranks each
    expert's width is split over; `ep_size`: the ranks the experts are spread over (1 without EP)."""
    moe = model.moe
    assert moe is not None
    inter = -(-moe.expert_intermediate_size // moe_tp)
    experts = -(-moe.num_experts // ep_size)
    ws = flashinfer_cutlass_workspace_bytes(num_rows=num_tokens, hidden=model.hidden_size, inter=inter,
                                            top_k=moe.experts_per_token, experts=experts, gated=model.gated_mlp)
    return ws + num_tokens * model.hidden_size * act_bytes
