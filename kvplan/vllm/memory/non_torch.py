"""Non-torch memory that grows during vLLM's profiling run (NCCL buffers, attention and cuBLAS workspaces)."""
from __future__ import annotations

from kvplan.units import GiB
from kvplan.vllm.defaults import LATEST, TOTAL_CONSUMED_SINCE, VllmVersion, version_band
from kvplan.vllm.memory.budget import MemoryTerm, shifted, with_range

# --- Non-torch memory growth during profiling --------------------------------------------------------
# utils/mem_utils.py:memory_profiling (v1/worker/gpu_worker.py:determine_available_memory) charges what
# cudaMemGetInfo loses beyond torch's allocations between the first snapshot and the end of the profiling
# run: attention and cuBLAS workspaces, and with TP/PP > 1 the NCCL connections the dummy run's first
# large collectives make.
#
# What is NOT charged at TP > 1 in the V1 engine (read in 0.11.0 and 0.33.0, v1/worker/gpu_worker.py:
# init_device): init_worker_distributed_environment runs *before* the snapshot ("This ensures NCCL buffers
# are allocated before we measure available memory"), and so does a cuBLAS/cuBLASLt handle warm-up (0.33).
# That is where CudaCommunicator builds the custom all-reduce IPC buffers (custom_all_reduce.py:
# CustomAllreduce.__init__: meta_size() + max_size uncached, a max(8 MiB, all-gather, 16 MiB reduce-scatter)
# buffer, 8 MiB of rank_data), the symmetric-memory all-reduce buffer (symm_mem.py:SymmMemCommunicator,
# VLLM_ALLREDUCE_USE_SYMM_MEM on by default: all_reduce_utils.py:SYMM_MEM_ALL_REDUCE_MAX_SIZES, 64 MiB at
# TP 8 on SM90, 128 MiB on SM100) and pynccl's communicator with its warm-up all-reduce
# (pynccl.py:PyNcclCommunicator.__init__). They are the startup baseline (budget.py), not this term.
# The V0 engine took its snapshot *before* init_worker_distributed_environment (worker/worker.py:
# init_device, read in 0.8.4), so V0's "non_torch_memory takes X GiB" holds all of the above: the
# 0.9–3.6 GiB per GPU the V0 breakdown logs print at TP ≥ 2 (tests/fixtures/data/memory-breakdown-logs.yaml)
# is V1's baseline growth at TP ≥ 2 plus this term, not this term (test_non_torch_covers_v0_breakdowns).
#
# vLLM 0.11 and later — llm-d H100 logs, measured ("non-torch memory" line): 0.13–0.14 GiB on one GPU,
# 0.54–0.55 GiB at TP=2 (calibration half: 0.13 on one GPU).
NON_TORCH_BYTES_SINGLE_GPU = round(0.13 * GiB)
NON_TORCH_BYTES_MULTI_GPU = round(0.54 * GiB)
# vLLM 0.8–0.10 — implied by the A100 0.10.1.1 logs of the calibration half (requested − "Model loading
# took" − "Available KV cache memory" − the FlashInfer sampler peak): 0.05 GiB on one GPU (Qwen2-7B,
# utilization 0.25), 0.17 GiB at TP=2 without NVLink: the one-node pair's log says "Custom allreduce is disabled
# because your platform lacks GPU P2P capability" (so NCCL ran without its P2P transport) and the 2 × A100 40GB
# record's two GPUs are on two nodes ("this process group spans across nodes"; its log says "FlashInfer is not
# available" and agrees once its native sampler is counted). Their records carry `gpu_link: pcie`.
NON_TORCH_BYTES_SINGLE_GPU_V010 = round(0.05 * GiB)
NON_TORCH_BYTES_MULTI_GPU_V010 = round(0.17 * GiB)
NON_TORCH_V011_SINCE = VllmVersion(0, 11)
# vLLM 0.10 on Hopper at TP/PP > 1: v1/worker/gpu_worker.py:init_device (read in 0.10.1.1) takes init_snapshot
# *before* init_worker_distributed_environment (0.11 moved it after), so 0.10's non-torch growth also holds the
# distributed init: pynccl's communicator and warm-up all-reduce, the device group's NCCL communicator and the
# custom all-reduce IPC buffers. On H100 that init costs 1.54 − 0.61 = 0.93 GiB at TP 2 (the llm-d startup
# baselines, budget.py), so 0.54 + 0.93 = 1.47 GiB; measured on the calibration half: "1.38 GiB for non-torch
# memory" on 2 × H200 (ghlog-2xh200-qwen3-next-80b-a3b-instruct-tp2-v0102, vLLM 0.10.2). The A100 0.10.1.1 TP 2
# logs above (0.17) ran without P2P, so no log reads 0.10 over NVLink on another architecture: an NVLink group of
# any GPU takes the Hopper figure, the pessimistic end (an estimate, down to 0.17 at its low end), a group without
# NVLink the A100 logs' 0.17.
NON_TORCH_BYTES_MULTI_GPU_V010_NVLINK = round(1.38 * GiB)
# Ranges (GiB, low … high) from the calibration residuals above, widened by the logs' 2-decimal rounding.
# TP/PP > 1 beyond TP=2 is assumed to cost what TP=2 costs (no calibration log with TP ≥ 4 states it). The
# multi-GPU top is the calibration half's highest measured value: 1.38 GiB "for non-torch memory" on
# 2 × H200 (Qwen3-Next-80B-A3B, vLLM 0.10.2, NVSwitch), which no interconnect rule kvplan has explains.
NON_TORCH_RANGE_SINGLE_GIB = (0.02, 0.20)
NON_TORCH_RANGE_MULTI_GIB = (0.10, 1.40)
# PCIe-only GPUs (no NVLink: the catalog's L40S, L4, A10, T4, RTX cards): NCCL opens far fewer channels over PCIe
# (or shared host memory) than over NVSwitch, and vLLM turns custom all-reduce off beyond two PCIe GPUs
# (custom_all_reduce.py:CustomAllreduce.__init__, "not supported on more than two PCIe-only GPUs"). Measured on
# the calibration half: 8 × L40S at TP 8, vLLM 0.10.2 (l40sx8-qwen3-235b-a22b-2507-fp8-tp8-ep-v0102), "0.18 GiB"
# and "0.21 GiB for non-torch memory" on its two printing ranks — and 0.10 takes its snapshot *before*
# init_worker_distributed_environment (v1/worker/gpu_worker.py:init_device, read in 0.10.1.1), so those figures
# hold NCCL's communicators as well as the profile run's connections; the V0 breakdowns of multi-rank RTX 3090
# runs print 0.20 GiB with the same order (tests/fixtures/data/memory-breakdown-logs.yaml). From 0.11 the
# snapshot follows the distributed init and the term holds the profile run's part only: at most 0.21 GiB, the
# value kept (the pessimistic end of what the logs bound). Range: the single-GPU floor … the NVLink range's top.
# Any TP/PP group on PCIe, two GPUs too: custom all-reduce staying on for two PCIe GPUs (world size 2 is allowed) gives
# it no buffers after the snapshot. Read in 0.23.0 and 0.27.1: CustomAllreduce allocates in __init__ (before vLLM's
# snapshot) and takes inputs under 8 MiB only (custom_all_reduce.py, max_size 8192 × 1024); symmetric memory
# (symm_mem.py:SymmMemCommunicator, all_reduce_utils.py:SYMM_MEM_ALL_REDUCE_MAX_SIZES: SM 9.0 and 10.0 entries only,
# 64 MiB at TP 2 on SM 9.0) likewise; a profile run's larger all-reduces (8,192 tokens × hidden × 2 B) go to pynccl.
# Over PCIe NCCL's device buffers are small: a P2P connection holds 4 MiB (SIMPLE) + 512 KiB (LL) + 4.69 MiB (LL128) per
# channel (NCCL src/init.cc: computeBuffSizes), and two GPUs whose path is above PXB (PHB, NODE, SYS: across a host
# bridge or CPU sockets) get no P2P transport except on an AMD host with ≤ 2 GPUs (NCCL paths.cc:ncclTopoCheckP2p: "By
# default don't use P2P across CPU Host Bridges and further apart", p2pLevel = PATH_PXB), the SHM transport's FIFOs
# being host memory. Measured on the calibration half at TP 2: two H200 NVL of an 8-GPU host outside one NVLink bridge
# ("connected through SYS, not NVLink"), vLLM 0.23.0 (ptocu-2xh200nvl-dsv4-flash-tp2-serve-64k and -256k, `gpu_link:
# pcie`): requested − "Model loading took" − "Available KV cache memory" − kvplan's activation leaves 0.13 GiB of
# non-torch growth with H200 SXM's 139.72 GiB total, 0.19 with the 139.8 GiB the log prints for its device: the one-GPU
# figure or a little above it, inside this bound (the NVLink figure would put them 0.34 GiB low). And only while
# vLLM charges non_torch_increase (0.11–0.26): from 0.27 it sizes the cache by total_consumed, the free-memory drop
# since its snapshot (utils/mem_utils.py:memory_profiling), which also holds Model Runner V2's persistent buffers and
# allocator slack; the 0.27.1 log of 4 × RTX PRO 6000 at TP 4 (utho-4xrtxpro6000-qwen3-235b-a22b-2507-fp8-tp4-v0271,
# calibration) prints 56.89 GiB "consumed (weights + non-torch)" against 55.19 of weights: 1.70 GiB, of which the
# penalty state of its 32 requests is 0.02 — far above the PCIe bound (and the NVLink figure), so 0.27+ keeps the
# NVLink figure.
NON_TORCH_BYTES_MULTI_GPU_PCIE = round(0.21 * GiB)
NON_TORCH_RANGE_MULTI_PCIE_GIB = (0.02, 1.40)

# NVLink SHARP (NVLS) buffers, from 3 GPUs of one NVSwitch domain on Hopper and data-center Blackwell (NCCL
# src/transport/nvls.cc: ncclNvlsInit returns without NVLS when gpuCount <= 2; NVLS_NCHANNELS_SM90 16,
# NVLS_NCHANNELS_SM100 32; NCCL_NVLS_CHUNKSIZE 128 KiB; ncclNvlsBufferSetup: buffSize = chunk × NCCL_STEPS (8),
# nvlsPerRankSize = nChannels × 2 × buffSize, nvlsTotalSize = nvlsPerRankSize × nHeads, nHeads = the
# communicator's ranks in one node), bound to physical memory on every GPU. NCCL sets them up on the first
# NVLS collective (runtime connect, the default since NCCL 2.22): whether that is pynccl's one-element
# warm-up (before the snapshot) or the profile run's first large all-reduce (after it) is NCCL's tuner's
# choice, so they widen the high end only: 128 MiB at TP 4, 256 MiB at TP 8 on H100/H200, twice on B200.
NCCL_STEPS = 8
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_CHANNELS = {"hopper": 16, "blackwell": 32}
NVLS_MIN_GPUS = 3


def nvls_buffer_bytes(*, tp: int, arch: str | None) -> int:
    """NCCL's NVLS buffers on one GPU of a TP group (ncclNvlsBufferSetup's nvlsTotalSize); 0 where NCCL does
    not use NVLS (≤ 2 GPUs, no NVSwitch multicast: any architecture but Hopper and SM10x Blackwell)."""
    channels = NVLS_CHANNELS.get(arch or "")
    if channels is None or tp < NVLS_MIN_GPUS:
        return 0
    return channels * 2 * NVLS_CHUNK_BYTES * NCCL_STEPS * tp


# Integrated GPUs (DGX Spark's GB10, Jetson): utils/mem_utils.py:MemorySnapshot.measure takes free memory from
# psutil's MemAvailable, so the non-torch growth also holds what the host side of the engine gains between
# the first snapshot and the end of profiling (its Python heap, torch.compile's workers, …): an estimate.
# Calibration half, GB10, vLLM 0.13.0 (NVIDIA 26.01): ceil(121.63 GiB × utilization) − "Model loading took" −
# "Available KV cache memory" − the activation kvplan counts (256 rows × vocabulary × 38.4 B + 2,048 hidden
# states; the sampler dominates) − 0.13 GiB:
#   guardkit Qwen2.5-14B-Instruct-FP8-dynamic, 0.15: 18.245 − 15.223 + 1.30 − 1.412 − 0.13 = 2.78 GiB
#     (vocabulary 152,064, hidden 5,120: Qwen2.5-14B's config as quoted in public index file 30247352769)
#   guardkit Nemotron-3-Nano-4B-FP8, 0.05: 6.082 − 4.905 + 2.51 − 1.212 − 0.13 = 2.34 GiB (vocabulary 131,072,
#     as every Nemotron-H / Nemotron-Nano config of the corpus; hidden 3,136 from the model card)
# Best: their mean. Range: 0 (a host that gains nothing; the two logs only bound the top) … 2.80 GiB.
INTEGRATED_HOST_GROWTH_BYTES = round(2.56 * GiB)
INTEGRATED_HOST_GROWTH_RANGE_GIB = (0.0, 2.80)


# --- FlashInfer's all-reduce + RMSNorm fusion workspace -------------------------------------------------
# From vLLM 0.17 the default optimization level (-O2, config/vllm.py:OPTIMIZATION_LEVEL_02) turns on
# pass_config.fuse_allreduce_rms = enable_allreduce_rms_fusion: TP > 1, CUDA, FlashInfer installed (a hard
# requirement of the wheels from 0.17), compute capability 9.0 or 10.x, and up to 0.20 DP = 1 and PP = 1 (0.24
# drops those two; 0.16.0 leaves the fusion off, though its 0.16.0rc2 dev builds had it on). Nothing is
# compiled under --enforce-eager (VllmConfig.__post_init__: compilation mode NONE), so no pass runs. The pass
# builds its workspace when torch.compile configures it, inside the profile run and after vLLM's snapshot
# (compilation/passes/fusion/allreduce_rms_fusion.py:AllReduceFusionPass.__init__ →
# distributed/device_communicators/flashinfer_all_reduce.py, FlashInfer's create_allreduce_fusion_workspace from
# 0.17: one "trtllm" workspace on one node, which the quantized patterns' workspace aliases — 0.17/0.18's
# VLLM_FLASHINFER_ALLREDUCE_BACKEND default is "trtllm", 0.19+ resolves "auto" to it on one node): FlashInfer's
# trtllm_create_ipc_workspace_for_all_reduce_fusion (use_symm_dev_mem=True), three buffers per GPU —
# tp × T × hidden × 2 B, tp × 256 × 4 B of flags and 3 × tp × T × hidden × 2 B of Lamport buffers, T =
# min(max size ÷ (hidden × 2 B), max_num_batched_tokens), the max size per capability and TP from
# FI_ALLREDUCE_FUSION_MAX_SIZE_MB (SM90: 64 / 2 / 0.5 MiB at TP 2 / 4 / 8; SM100: 64 / 32 / 1).
# Up to FlashInfer 0.6.8.post1 (vLLM 0.17–0.20 pin 0.6.4 … 0.6.8.post1; read in 0.6.3, 0.6.6, 0.6.8.post1) each
# buffer is a SymmDeviceMemory (comm/mnnvl.py:_get_allocation_prop) whose cuMemCreate size is rounded up to the
# multicast object's CU_MULTICAST_GRANULARITY_RECOMMENDED — 512 MiB on NVSwitch Hopper: an SGLang log of this
# workspace at TP 2 (sgl-project/sglang#18341) maps each of its 24 MiB, 2 MiB and 68 MiB buffers 0x20000000 B
# apart per rank, and a write-up measuring 8 × H100 SXM names "NCCL's 512 MiB multicast objects" for the
# recommended granularity (code-index id 68342261365). So 3 × 512 MiB = 1.5 GiB of non-torch memory on each GPU,
# whatever the model: the bulk of what the MiniMax-M2.5 0.19.1 log holds above kvplan's 0.11 terms (issue 20).
# From FlashInfer 0.6.11.post2 (vLLM 0.22 on; read in 0.6.11.post2, 0.6.12, 0.6.16.post3, 0.7.0.post1) the
# buffers come from torch's symmetric memory (comm/torch_symmetric_memory.py:_alloc_symm_buffer_bytes), whose
# rounding kvplan has not read: the buffers' own size there, the multicast-rounded size as the range's top
# (0.21, whose FlashInfer pin kvplan has not seen, is counted the same way). Multicast needs an NVSwitch: PCIe
# cards, bridged pairs and a TP group spanning nodes (FlashInfer's "mnnvl" backend) are left out.
FI_AR_FUSION_SINCE = VllmVersion(0, 17)
FI_AR_FUSION_DP_PP_FREE_SINCE = VllmVersion(0, 24)
FI_AR_SYMM_DEVICE_MEMORY_BEFORE = VllmVersion(0, 21)
# compilation/passes/fusion/allreduce_rms_fusion.py:FI_ALLREDUCE_FUSION_MAX_SIZE_MB (0.19.1), by compute capability;
# SM 10.3 (B300, GB300) joins from 0.20 (is_device_capability_family(100); 0.17–0.19 test 9.0 and 10.0 exactly).
FI_AR_FUSION_MAX_SIZE_MIB = {(9, 0): {2: 64.0, 4: 2.0, 8: 0.5}, (10, 0): {2: 64.0, 4: 32.0, 8: 1.0},
                             (10, 3): {2: 64.0, 4: 64.0, 8: 2.0}}
FI_AR_FUSION_SM103_SINCE = VllmVersion(0, 20)
FI_BARRIER_FLAG_COUNT = 256  # comm/trtllm_ar.py:BarrierFlagCount
FI_SIGNAL_PAD_BYTES = 2048  # comm/mnnvl.py:SIGNAL_PAD_SIZE
CU_MEM_ALLOC_GRANULARITY = 2 * 1024 * 1024
CU_MULTICAST_GRANULARITY_RECOMMENDED = 512 * 1024 * 1024


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def flashinfer_ar_fusion_workspace(*, tp: int, pp: int, dp: int, hidden: int, max_num_batched_tokens: int,
                                   capability: tuple[int, int] | None, version: VllmVersion, compiled: bool,
                                   nvswitch_gpus: int, fuse: bool | None = None) -> tuple[int, int, int] | None:
    """(best, low, high) bytes of FlashInfer's all-reduce fusion workspace on one GPU, or None where vLLM builds
    none (see FI_AR_FUSION_SINCE's comment): its three buffers at their own size (low) and rounded to the
    recommended multicast granularity (high), the best being the rounded one before vLLM 0.21. `fuse`:
    --compilation-config's pass_config.fuse_allreduce_rms (None: the release's -O2 default)."""
    sm103_too_early = capability == (10, 3) and version < FI_AR_FUSION_SM103_SINCE
    sizes = {} if capability is None or sm103_too_early else FI_AR_FUSION_MAX_SIZE_MIB.get(capability, {})
    default = version >= FI_AR_FUSION_SINCE and (version >= FI_AR_FUSION_DP_PP_FREE_SINCE or (pp == 1 and dp == 1))
    if not (default if fuse is None else fuse) or not compiled or tp not in sizes or tp > nvswitch_gpus:
        return None
    tokens = min(int(sizes[tp] * 1024 * 1024) // (hidden * 2), max_num_batched_tokens)
    data = tp * tokens * hidden * 2
    buffers = (data, tp * FI_BARRIER_FLAG_COUNT * 4, 3 * data)
    own = [_round_up(b + FI_SIGNAL_PAD_BYTES, CU_MEM_ALLOC_GRANULARITY) for b in buffers]
    low = sum(own)
    high = sum(_round_up(b, CU_MULTICAST_GRANULARITY_RECOMMENDED) for b in own)
    return (high if version < FI_AR_SYMM_DEVICE_MEMORY_BEFORE else low), low, high


def estimate_non_torch(*, tp: int, pp: int, version: VllmVersion = LATEST, integrated: bool = False,
                       arch: str | None = None, pcie_only: bool = False,
                       nvswitch_gpus: int | None = None) -> MemoryTerm:
    """Non-torch memory that appears during profiling (NCCL lazy buffers, workspaces), by version band and
    TP×PP (utils/mem_utils.py:memory_profiling's `non_torch_increase`): NVLink unless `pcie_only` says there is none
    between the GPUs. On an `integrated` GPU the host's growth joins it
    (INTEGRATED_HOST_GROWTH_BYTES). At TP ≥ 3 on Hopper or SM10x Blackwell, NCCL's NVLS buffers widen the high
    end (nvls_buffer_bytes). vLLM 0.10 over NVLink charges the distributed init as well
    (NON_TORCH_BYTES_MULTI_GPU_V010_NVLINK). On `pcie_only` GPUs (no NVLink between them) 0.11–0.26 takes the PCIe
    figure (NON_TORCH_BYTES_MULTI_GPU_PCIE), and NVLS, which needs an NVSwitch, is left out; so it is where the TP
    group is larger than the GPUs one NVSwitch joins (`nvswitch_gpus`, kvplan/hardware/nodes.py; None: not known,
    the architecture decides)."""
    multi = tp * pp > 1
    old = version < NON_TORCH_V011_SINCE
    band = version_band(version)
    if multi:
        nvlink_v010 = old and not pcie_only
        pcie = pcie_only and not old and version < TOTAL_CONSUMED_SINCE
        value = (NON_TORCH_BYTES_MULTI_GPU_V010_NVLINK if nvlink_v010 else NON_TORCH_BYTES_MULTI_GPU_V010 if old
                 else NON_TORCH_BYTES_MULTI_GPU_PCIE if pcie else NON_TORCH_BYTES_MULTI_GPU)
        where = ("2 × H200 0.10.2 log, measured" + ("" if arch == "hopper" else ", an estimate off Hopper")
                 + "; 0.10 snapshots before the distributed init, so NCCL's communicators count here" if nvlink_v010
                 else "A100 0.10.1.1 logs at TP=2 without NVLink (no P2P, or across nodes), implied" if old
                 else "GPUs without NVLink: the 8 × L40S 0.10.2 log's 0.21, which also holds NCCL's "
                      "communicators, as a bound; two H200 NVL over SYS leave 0.13–0.19 at 0.23" if pcie
                 else "H100 0.11 logs at TP=2, measured")
        text = (f"vLLM {band}: {value / GiB:.2f} GiB ({where}: the NCCL connections the profile run's first "
                "large collectives make; custom all-reduce and symmetric-memory buffers are allocated before "
                "vLLM's snapshot, not here); assumed for any TP×PP > 1")
        lo, hi = NON_TORCH_RANGE_MULTI_PCIE_GIB if pcie else NON_TORCH_RANGE_MULTI_GIB
        if nvlink_v010:  # the 0.11+ range's spread around its best value, moved with it
            shift = (NON_TORCH_BYTES_MULTI_GPU_V010_NVLINK - NON_TORCH_BYTES_MULTI_GPU) / GiB
            lo, hi = lo + shift, hi + shift
            if arch != "hopper":  # no NVLink log off Hopper: down to the A100 logs' figure
                lo = NON_TORCH_BYTES_MULTI_GPU_V010 / GiB
    else:
        value = NON_TORCH_BYTES_SINGLE_GPU_V010 if old else NON_TORCH_BYTES_SINGLE_GPU
        where = "A100 0.10.1.1 logs, implied" if old else "H100 0.11 logs, measured"
        text = f"vLLM {band}: {value / GiB:.2f} GiB on one GPU ({where}: attention and cuBLAS workspaces)"
        lo, hi = NON_TORCH_RANGE_SINGLE_GIB
    on_nvswitch = not pcie_only and (nvswitch_gpus is None or tp <= nvswitch_gpus)
    nvls = nvls_buffer_bytes(tp=tp, arch=arch) if multi and on_nvswitch else 0
    if nvls:
        text += (f"; up to {nvls / GiB:.2f} GiB more of NCCL NVLS buffers at TP {tp} (2 × {NVLS_CHANNELS[arch or '']} "
                 "channels × 1 MiB × TP, NCCL nvls.cc), if NCCL sets them up after vLLM's snapshot")
    term = with_range(MemoryTerm("non_torch", value, "estimate", text), round(lo * GiB), round(hi * GiB) + nvls)
    if not integrated:
        return term
    low, high = INTEGRATED_HOST_GROWTH_RANGE_GIB
    return shifted(term, INTEGRATED_HOST_GROWTH_BYTES,
                   f"plus the host's growth on an integrated GPU, {INTEGRATED_HOST_GROWTH_BYTES / GiB:.2f} GiB (free "
                   f"memory is the OS's MemAvailable; GB10 logs, estimate {low:.2f} … {high:.2f} GiB)",
                   low_delta=round(low * GiB), high_delta=round(high * GiB))
