"""Non-torch memory at TP/PP > 1 on GPUs with no NVLink (kvplan/vllm/memory/non_torch.py, PCIe figure)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import custom_gpu, get_gpu
from kvplan.units import GiB
from kvplan.vllm.defaults import parse_vllm_version
from kvplan.vllm.memory.non_torch import estimate_non_torch
from tests.conftest import CONFIGS
from tests.test_accuracy import BY_ID

runner = CliRunner()
FIXTURES_LOGS = CONFIGS.parent / "startup-logs" / "raw"


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
    assert "GPUs without NVLink" in pcie.assumption


def test_pcie_figure_holds_two_gpus_and_leaves_one_gpu_and_vllm_0_10_alone() -> None:
    """Two H200 NVL outside one NVLink bridge (SYS), vLLM 0.23.0, TP 2: the calibration logs leave 0.13–0.19 GiB of
    non-torch growth, inside the PCIe bound and 0.34 GiB under the NVLink figure; one GPU and 0.10 are untouched."""
    v011, v010, v023 = (parse_vllm_version(v) for v in ("0.11", "0.10", "0.23"))
    assert BY_ID["ptocu-2xh200nvl-dsv4-flash-tp2-serve-64k"]["gpu_link"] == "pcie"
    assert estimate_non_torch(tp=2, pp=1, version=v023, pcie_only=True).bytes == round(0.21 * GiB)
    assert estimate_non_torch(tp=2, pp=1, version=v023).bytes == round(0.54 * GiB)
    assert estimate_non_torch(tp=1, pp=2, version=v011, pcie_only=True).bytes == round(0.21 * GiB)
    assert (estimate_non_torch(tp=1, pp=1, version=v011, pcie_only=True).bytes
            == estimate_non_torch(tp=1, pp=1, version=v011).bytes == round(0.13 * GiB))
    assert estimate_non_torch(tp=8, pp=1, version=v010, pcie_only=True).bytes == round(0.17 * GiB)


def test_no_nvls_buffers_without_nvlink() -> None:
    """NVLS needs an NVSwitch: a TP 8 group of H100s said to be on PCIe gets no NVLS top on its range."""
    v023 = parse_vllm_version("0.23")
    nvswitch = estimate_non_torch(tp=8, pp=1, version=v023, arch="hopper")
    pcie = estimate_non_torch(tp=8, pp=1, version=v023, arch="hopper", pcie_only=True)
    assert nvswitch.high_bytes - round(1.40 * GiB) == 16 * 2 * 128 * 1024 * 8 * 8
    assert pcie.high_bytes == round(1.40 * GiB)


def test_gpu_link_pcie_makes_a_catalog_nvlink_gpu_pcie_only_and_drops_its_nvlink_figure() -> None:
    h200 = get_gpu("h200")
    pcie = h200.with_link("pcie")
    assert (h200.pcie_only, pcie.pcie_only, pcie.interconnect_bytes_per_s, pcie.link) == (False, True, None, "pcie")
    assert get_gpu("rtx-3090").with_link("nvlink").pcie_only is False  # a bridged pair
    assert custom_gpu("24GiB").with_link("PCIe").pcie_only is True


def test_an_unknown_gpu_link_is_refused_with_the_choices() -> None:
    with pytest.raises(InvalidParameter, match="unknown GPU link 'infiniband' .choose from nvlink, pcie"):
        get_gpu("h200").with_link("infiniband")


def test_from_0_27_total_consumed_keeps_the_nvlink_figure() -> None:
    """0.27 charges the free-memory drop (total_consumed): 4 × RTX PRO 6000 at TP 4, 0.27.1, prints 56.89 GiB
    "consumed (weights + non-torch)" over 55.19 GiB of weights — more than the PCIe bound."""
    v027, v026 = parse_vllm_version("0.27"), parse_vllm_version("0.26")
    assert estimate_non_torch(tp=4, pp=1, version=v027, pcie_only=True).bytes == round(0.54 * GiB)
    assert estimate_non_torch(tp=4, pp=1, version=v026, pcie_only=True).bytes == round(0.21 * GiB)


QWEN72 = str(CONFIGS / "Qwen--Qwen2.5-72B")


def _non_torch(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    return next(t for t in json.loads(result.stdout)["memory"]["terms"] if t["name"] == "non_torch")


def test_fit_gpu_link_pcie_takes_the_pcie_figure_and_says_so() -> None:
    """`fit --gpu-link pcie`: two H200s outside one NVLink bridge at vLLM 0.23 are charged PCIe's 0.21 GiB, not
    NVLink's 0.54, and the report says why; a bad link is a usage error (exit 2)."""
    args = ["fit", QWEN72, "--gpu", "h200", "-tp", "2", "--vllm-version", "0.23", "--json"]
    eager = [*args, "--enforce-eager"]
    nvlink, pcie = (_non_torch(runner.invoke(app, [*eager, *extra])) for extra in ([], ["--gpu-link", "pcie"]))
    assert (nvlink["bytes"], pcie["bytes"]) == (round(0.54 * GiB), round(0.21 * GiB))
    # compiled: NVLink adds FlashInfer's all-reduce fusion workspace (multicast needs the NVSwitch), PCIe does not
    compiled_nvlink, compiled_pcie = (_non_torch(runner.invoke(app, [*args, *extra]))
                                      for extra in ([], ["--gpu-link", "pcie"]))
    assert compiled_nvlink["bytes"] > nvlink["bytes"] and compiled_pcie["bytes"] == round(0.21 * GiB)
    notes = json.loads(runner.invoke(app, [*args, "--gpu-link", "pcie"]).stdout)["notes"]
    assert any(n.startswith("--gpu-link pcie: the GPUs reach each other over PCIe") for n in notes)
    bad = runner.invoke(app, [*args, "--gpu-link", "ib"])
    assert bad.exit_code == 2 and "unknown GPU link 'ib' (choose from nvlink, pcie)" in bad.stderr


def test_a_plan_deployment_takes_gpu_link_and_refuses_a_bad_one(tmp_path: Path) -> None:
    from kvplan import api
    from kvplan.ci.plan import load_plan
    from kvplan.errors import ParseError

    def plan(link: str) -> Path:
        path = tmp_path / "plan.yaml"
        path.write_text(f"deployments:\n  - name: a\n    model: {QWEN72}\n    gpu: h200\n    gpu_link: {link}\n"
                        "    num_gpus: 2\n    vllm_version: '0.23'\n    require: {min_kv_tokens: 1}\n",
                        encoding="utf-8")
        return path

    assert load_plan(plan("PCIe")).deployments[0].gpu_link == "pcie"
    pcie, nvlink = (api.check(plan(link)).deployments[0] for link in ("pcie", "nvlink"))
    assert pcie.kv_cache_tokens > nvlink.kv_cache_tokens  # 0.33 GiB more KV memory per GPU
    with pytest.raises(ParseError, match=r"plan.yaml:5: deployments\[0\].gpu_link: must be one of nvlink, pcie"):
        load_plan(plan("sys"))


def test_the_v010_a100_figure_is_the_no_nvlink_one_and_nvlink_takes_the_hopper_reading() -> None:
    """The A100 0.10.1.1 TP 2 logs ran without P2P ("lacks GPU P2P capability") or across nodes: their 0.17 GiB is
    the figure without NVLink. Over NVLink 0.10 charges the distributed init too: the 2 × H200 0.10.2 log's 1.38 GiB,
    measured on Hopper and taken, with the A100 figure as its low end, elsewhere."""
    v010 = parse_vllm_version("0.10")
    assert {BY_ID[r]["gpu_link"] for r in ("dennislee-a100x2-qwen2-7b-tp2-util025",
                                           "dennislee-a100-40g-x2-qwen2-7b-tp2-util050")} == {"pcie"}
    assert "lacks GPU P2P capability" in (FIXTURES_LOGS / "dennislee-a100x2-qwen2-7b-tp2-util025.log").read_text()
    no_nvlink = estimate_non_torch(tp=2, pp=1, version=v010, arch="ampere", pcie_only=True)
    ampere = estimate_non_torch(tp=2, pp=1, version=v010, arch="ampere")
    hopper = estimate_non_torch(tp=2, pp=1, version=v010, arch="hopper")
    assert (no_nvlink.bytes, ampere.bytes, hopper.bytes) == (round(0.17 * GiB), round(1.38 * GiB), round(1.38 * GiB))
    assert ampere.low_bytes == round(0.17 * GiB) < hopper.low_bytes and "estimate off Hopper" in ampere.assumption


@pytest.mark.parametrize(("log", "gpu", "linked"), [
    ("dennislee-a100x2-qwen2-7b-tp2-util025", "a100-80gb", True),  # "lacks GPU P2P capability"
    ("dennislee-a100x2-qwen2-7b-tp2-util050", "a100-80gb", True),  # the same, its line wrapped after "lacks GPU"
    ("ghlog-2xh200-qwen3-next-80b-a3b-instruct-tp2-v0102", "h200", False),  # NVSwitch: custom all-reduce on
])
def test_calibrate_plans_a_log_without_p2p_over_pcie(log: str, gpu: str, linked: bool) -> None:
    """vLLM's custom all-reduce warning ("your platform lacks GPU P2P capability", or "more than two PCIe-only
    GPUs") says no NVLink joins the GPUs: calibrate plans with --gpu-link pcie and says which line told it."""
    from kvplan.vllm.startup_log import NO_NVLINK_RULE, parse_startup_log

    text = (FIXTURES_LOGS / f"{log}.log").read_text(encoding="utf-8")
    assert (NO_NVLINK_RULE in {x.rule for x in parse_startup_log(text).lines}) is linked
    model = {"a100-80gb": CONFIGS.parent / "corpus" / "configs" / "Qwen--Qwen2-7B-Instruct",
             "h200": CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Instruct"}[gpu]
    result = runner.invoke(app, ["calibrate", str(FIXTURES_LOGS / f"{log}.log"), "--model", str(model), "--gpu", gpu,
                                 "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert ("--gpu-link pcie" in report["command"]) is linked
    assert any("custom all-reduce is disabled" in n for n in report["notes"]) is linked


def test_nvls_needs_the_tp_group_inside_one_nvswitch() -> None:
    """NCCL's NVLS buffers widen the high end only where one NVSwitch joins the TP group (an HGX board, an NVL72
    rack): not on H100 NVL's bridged pairs, not beyond 8 GPUs of an HGX board."""
    v033 = parse_vllm_version("0.33")
    nvls = 16 * 2 * 128 * 1024 * 8 * 4  # TP 4 on Hopper: 2 × 16 channels × 1 MiB × 4
    hgx = estimate_non_torch(tp=4, pp=1, version=v033, arch="hopper", nvswitch_gpus=8)
    bridged = estimate_non_torch(tp=4, pp=1, version=v033, arch="hopper", nvswitch_gpus=0)
    assert hgx.high_bytes - bridged.high_bytes == nvls and hgx.bytes == bridged.bytes
    assert estimate_non_torch(tp=16, pp=1, version=v033, arch="hopper", nvswitch_gpus=8).high_bytes == round(
        1.40 * GiB)


def test_calibrate_takes_the_users_gpu_link_over_the_logs() -> None:
    """`calibrate --gpu-link`: the user's word wins over the log's warning; the suggested command says it once."""
    qwen2 = str(CONFIGS.parent / "corpus" / "configs" / "Qwen--Qwen2-7B-Instruct")
    log = str(FIXTURES_LOGS / "dennislee-a100x2-qwen2-7b-tp2-util025.log")
    said = {}
    for link in ("nvlink", "pcie"):
        result = runner.invoke(app, ["calibrate", log, "--model", qwen2, "--gpu", "a100-80gb", "--gpu-link", link,
                                     "--json"])
        assert result.exit_code == 0, result.stderr
        said[link] = json.loads(result.stdout)
    assert said["nvlink"]["command"].count("--gpu-link") == 1 and "--gpu-link nvlink" in said["nvlink"]["command"]
    assert said["pcie"]["command"].count("--gpu-link") == 1
    assert not any("custom all-reduce is disabled" in n for n in said["nvlink"]["notes"])
