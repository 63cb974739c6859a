"""FlashInfer's all-reduce + RMSNorm fusion workspace (memory/non_torch.py:flashinfer_ar_fusion_workspace)."""
from __future__ import annotations

from kvplan.hardware.nodes import nvswitch_gpus
from kvplan.units import GiB, MiB
from kvplan.vllm.defaults import parse_vllm_version
from kvplan.vllm.memory.non_torch import flashinfer_ar_fusion_workspace
from tests.test_accuracy import ROW

V019, V016, V022 = parse_vllm_version("0.19"), parse_vllm_version("0.16"), parse_vllm_version("0.22")
H100_TP4 = {"tp": 4, "pp": 1, "dp": 1, "hidden": 3072, "max_num_batched_tokens": 8192, "capability": (9, 0),
            "compiled": True, "nvswitch_gpus": 8}


def test_minimax_m2_at_tp_4_on_h100_rounds_three_small_buffers_to_512_mib_each() -> None:
    """SM90 TP 4: max size 2 MiB → 2 MiB ÷ (3,072 × 2 B) = 341 tokens; 4 × 341 × 3,072 × 2 B = 8,380,416 B, the
    0.16 log's "Signal pad offset: 8388608" once rounded to 2 MiB; flags 4 × 256 × 4 B; Lamport 3 × the first."""
    ws = flashinfer_ar_fusion_workspace(version=V019, **H100_TP4)  # type: ignore[arg-type]
    assert ws is not None
    best, low, high = ws
    assert low == (8 + 2 + 24) * MiB
    assert best == high == 3 * 512 * MiB == int(1.5 * GiB)


def test_from_vllm_0_22_the_best_value_is_the_buffers_own_size() -> None:
    """FlashInfer 0.6.11.post2+ allocates through torch's symmetric memory: the rounding is the range's top."""
    ws = flashinfer_ar_fusion_workspace(version=V022, **H100_TP4)  # type: ignore[arg-type]
    assert ws == ((8 + 2 + 24) * MiB, (8 + 2 + 24) * MiB, int(1.5 * GiB))


def test_no_workspace_where_vllm_builds_none() -> None:
    def ws(**kw: object) -> object:
        return flashinfer_ar_fusion_workspace(**{**H100_TP4, "version": V019, **kw})  # type: ignore[arg-type]

    assert ws(version=V016) is None  # 0.16.0's -O2 leaves fuse_allreduce_rms off
    assert ws(compiled=False) is None  # --enforce-eager: nothing compiled, no pass
    assert ws(tp=1) is None and ws(tp=16) is None  # FlashInfer's world sizes are 2, 4, 8
    assert ws(pp=2) is None and ws(dp=2) is None  # up to 0.20: DP = 1 and PP = 1
    assert ws(pp=2, version=parse_vllm_version("0.24")) is not None  # 0.24 drops that condition
    assert ws(capability=(8, 0)) is None and ws(capability=(12, 0)) is None  # capability 9.0 / 10.x only
    assert ws(capability=(10, 3)) is None  # 0.17–0.19 test 10.0 exactly; B300 joins in 0.20
    b300 = ws(capability=(10, 3), version=parse_vllm_version("0.20"), hidden=8192)
    # 64 MiB at TP 4: 4,096 tokens × 8,192 × 2 B × 4 = 256 MiB, Lamport 768 MiB → 512 + 512 + 1,024 MiB
    assert b300 is not None and b300[0] == 2 * GiB
    assert ws(nvswitch_gpus=0) is None  # no multicast without an NVSwitch


def test_nvswitch_nodes() -> None:
    assert nvswitch_gpus("h100-sxm") == nvswitch_gpus("b200") == 8 and nvswitch_gpus("gb200") == 4
    assert nvswitch_gpus("gh200") == nvswitch_gpus("h100-nvl") == nvswitch_gpus("l40s") == 0


def test_the_minimax_m2_5_0_19_record_holds_the_workspace() -> None:
    """MiniMax-M2.5 FP8, TP 4 on H100, vLLM 0.19.1 ("Enabled custom fusions: norm_quant, act_quant,
    allreduce_rms"): 18.16 GiB logged; kvplan 19.89 (+9.5 %) without the workspace, 18.39 (+1.3 %) with it."""
    row = ROW["joshi-4xh100-minimax-m2.5-fp8-tp4-v0191"]
    assert round(row.predicted_gib, 2) == 18.39 and row.in_range and row.low_end_holds


def test_pass_config_turns_the_fusion_on_or_off_against_the_release_default() -> None:
    """--compilation-config '{"pass_config": {"fuse_allreduce_rms": ...}}' overrides the -O2 default."""
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.memory.cuda_graphs import compilation_settings

    on = compilation_settings({"pass_config": {"fuse_allreduce_rms": True, "enable_sp": False}})
    assert on.fuse_allreduce_rms is True and on.ignored_keys == ("pass_config.enable_sp",)
    assert compilation_settings({"cudagraph_mode": "NONE"}).fuse_allreduce_rms is None
    kw = {**H100_TP4, "version": V016}
    assert flashinfer_ar_fusion_workspace(**kw, fuse=True) is not None  # type: ignore[arg-type]
    assert flashinfer_ar_fusion_workspace(**{**kw, "version": V019}, fuse=False) is None  # type: ignore[arg-type]
    import pytest
    with pytest.raises(InvalidParameter, match="fuse_allreduce_rms"):
        compilation_settings({"pass_config": {"fuse_allreduce_rms": "yes"}})


def test_the_minimax_m2_0_16_dev_build_record_is_told_its_fusion() -> None:
    """MiniMax-M2 TP 4, 0.16.0rc2 dev build: its engine config prints fuse_allreduce_rms True (0.16.0's -O2: off);
    with it kvplan goes from 20.37 GiB (+14.5 %) to 18.87 (+6.0 %) against the logged 17.79, and to 18.66 (+4.9 %)
    with FlashInfer's CUTLASS MoE workspace the release runs (tests/test_flashinfer_moe.py)."""
    row = ROW["joshi-4xh100-minimax-m2-fp8-tp4-v0160"]
    assert round(row.predicted_gib, 2) == 18.66 and row.in_range and row.low_end_holds
