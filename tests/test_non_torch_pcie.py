"""Non-torch memory at TP/PP > 1 on GPUs with no NVLink (kvplan/vllm/memory/non_torch.py, PCIe figure)."""
from __future__ import annotations

import pytest

from kvplan.hardware.gpus import custom_gpu, get_gpu
from kvplan.units import GiB
from kvplan.vllm.defaults import parse_vllm_version
from kvplan.vllm.memory.non_torch import estimate_non_torch
from tests.test_accuracy import BY_ID


@pytest.mark.parametrize(("gpu", "pcie"), [("rtx-3090", True), ("rtx-pro-6000", True), ("l40s", True),
                                           ("h100-sxm", False), ("a100-80gb-pcie", False), ("gb10", False)])
def test_pcie_only_is_a_catalog_cuda_gpu_without_nvlink(gpu: str, pcie: bool) -> None:
    assert get_gpu(gpu).pcie_only is pcie


def test_a_gpu_given_by_its_memory_alone_keeps_the_nvlink_figure() -> None:
    """--gpu-memory says nothing of the interconnect: the larger (pessimistic) NVLink figure stays."""
    assert custom_gpu("24GiB").pcie_only is False


def test_pcie_multi_gpu_non_torch_is_the_l40s_logs_bound_from_0_11() -> None:
    """8 × L40S, vLLM 0.10.2, TP 8: "0.18 GiB" and "0.21 GiB for non-torch memory" with 0.10's snapshot taken before
    the distributed init (NCCL's communicators included): from 0.11 the profile run's share is at most that."""
    logged = BY_ID["l40sx8-qwen3-235b-a22b-2507-fp8-tp8-ep-v0102"]["non_torch_gib"]
    assert logged == 0.21
    v011 = parse_vllm_version("0.11")
    pcie = estimate_non_torch(tp=4, pp=1, version=v011, arch="ampere", pcie_only=True)
    nvlink = estimate_non_torch(tp=4, pp=1, version=v011, arch="ampere")
    assert pcie.bytes == round(logged * GiB) and nvlink.bytes == round(0.54 * GiB)
    assert pcie.low_bytes == round(0.02 * GiB) and pcie.high_bytes == nvlink.high_bytes == round(1.40 * GiB)
    assert "PCIe-only" in pcie.assumption


def test_pcie_figure_leaves_one_gpu_two_gpus_and_vllm_0_10_alone() -> None:
    """Two PCIe GPUs keep custom all-reduce and the NVLink figure (no log bounds them lower)."""
    v011, v010 = parse_vllm_version("0.11"), parse_vllm_version("0.10")
    assert (estimate_non_torch(tp=2, pp=1, version=v011, pcie_only=True).bytes
            == estimate_non_torch(tp=2, pp=1, version=v011).bytes == round(0.54 * GiB))
    assert estimate_non_torch(tp=1, pp=2, version=v011, pcie_only=True).bytes == round(0.54 * GiB)
    assert (estimate_non_torch(tp=1, pp=1, version=v011, pcie_only=True).bytes
            == estimate_non_torch(tp=1, pp=1, version=v011).bytes == round(0.13 * GiB))
    assert (estimate_non_torch(tp=8, pp=1, version=v010, pcie_only=True).bytes
            == estimate_non_torch(tp=8, pp=1, version=v010).bytes == round(0.17 * GiB))


def test_from_0_27_total_consumed_keeps_the_nvlink_figure() -> None:
    """0.27 charges the free-memory drop (total_consumed): 4 × RTX PRO 6000 at TP 4, 0.27.1, prints 56.89 GiB
    "consumed (weights + non-torch)" over 55.19 GiB of weights — more than the PCIe bound."""
    v027, v026 = parse_vllm_version("0.27"), parse_vllm_version("0.26")
    assert estimate_non_torch(tp=4, pp=1, version=v027, pcie_only=True).bytes == round(0.54 * GiB)
    assert estimate_non_torch(tp=4, pp=1, version=v026, pcie_only=True).bytes == round(0.21 * GiB)
