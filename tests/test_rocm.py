"""AMD Instinct GPUs planned by vLLM 0.33's ROCm rules (kvplan/vllm/rocm.py), pinned to vLLM's own RocmPlatform
(tests/fixtures/oracle-rocm/, from /work/shared/tools/vllm-rocm-oracle: vLLM 0.33.0's planner with faked
amdsmi/HIP answers, stub aiter/flash_attn packages)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import NotServed
from kvplan.hardware.gpus import get_gpu, load_catalog
from kvplan.model.config import parse_config
from kvplan.vllm.environment import vllm_environment
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.rocm import RocmAiter, fp8_view_dtype, rocm_backend
from kvplan.vllm.settings import ServeSettings
from tests import vllm_goldens

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = ROOT / "tests" / "fixtures" / "oracle-rocm"
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "configs"
KV_20_GIB = 21474836480


def _model(config_dir: str) -> Any:
    return parse_config(json.loads((CORPUS / config_dir / "config.json").read_text()), name=config_dir)


GOLDEN_FILES = sorted(GOLDENS.glob("*__*.json"))
# vLLM's verdicts: the oracle's own failures (FAILURES.md) have none
VERDICT_FILES = [p for p in GOLDEN_FILES if json.loads(p.read_text())["status"] != "oracle_failure"]


def test_goldens_cover_the_three_parts_and_every_aiter_mode() -> None:
    goldens = [json.loads(p.read_text()) for p in GOLDEN_FILES]
    assert {g["inputs"]["gpu"] for g in goldens} == {"mi300x", "mi325x", "mi355x"}
    modes = {(g["inputs"]["aiter_installed"], g["inputs"]["env"].get("VLLM_ROCM_USE_AITER")) for g in goldens}
    assert modes == {(True, None), (False, None), (True, "1")}
    assert {g["inputs"]["tensor_parallel_size"] for g in goldens} >= {1, 2, 8}
    assert any(g["inputs"]["kv_cache_dtype"] == "fp8" for g in goldens)


@pytest.mark.parametrize("path", VERDICT_FILES, ids=[p.stem for p in VERDICT_FILES])
def test_each_rocm_golden_is_exact_or_refused_with_vllms_reason(path: Path) -> None:
    outcome = vllm_goldens.classify_rocm(json.loads(path.read_text()))
    assert outcome.judged
    assert vllm_goldens.passes(outcome), outcome.detail


def test_every_rocm_golden_is_counted_and_the_unjudged_are_the_oracles_failures() -> None:
    outcomes = [vllm_goldens.classify_rocm(json.loads(p.read_text())) for p in GOLDEN_FILES]
    unjudged = {o.case for o in outcomes if not o.judged}
    assert unjudged == {p.stem for p in GOLDEN_FILES} - {p.stem for p in VERDICT_FILES}
    assert all(o.cls == "oracle-failure" for o in outcomes if not o.judged)  # none for an unmodelled flag


def test_failures_md_lists_every_oracle_failure() -> None:
    failed = {p.stem for p in GOLDEN_FILES} - {p.stem for p in VERDICT_FILES}
    listed = set(re.findall(r"^\| `([^`]+)` \|", (GOLDENS / "FAILURES.md").read_text(), re.M))
    assert failed == listed and len(VERDICT_FILES) >= 40


def test_vllm_derives_the_platform_facts_the_catalog_states() -> None:
    # the oracle's own RocmPlatform answers: gfx942 → capability (9, 4), fnuz fp8; gfx950 → (9, 5), OCP fp8
    facts = {}
    for path in GOLDEN_FILES:
        g = json.loads(path.read_text())
        facts[g["inputs"]["gpu"]] = g["oracle"]
    assert facts["mi300x"]["device_name"] == "AMD_Instinct_MI300X"
    assert facts["mi325x"]["device_name"] == "AMD_Instinct_MI325X"
    for gpu_id, oracle in facts.items():
        gpu = get_gpu(gpu_id)
        assert gpu.platform == "rocm"
        assert gpu.compute_capability == oracle["gcn_arch"]
        assert fp8_view_dtype(gpu) == oracle["fp8_dtype"]
    assert facts["mi300x"]["fp8_dtype"] == "float8_e4m3fnuz" and facts["mi355x"]["fp8_dtype"] == "float8_e4m3fn"


def test_every_catalog_gpu_states_its_platform_and_amd_parts_are_rocm() -> None:
    text = (ROOT / "kvplan" / "hardware" / "gpus.yaml").read_text()
    assert text.count("\n  - id: ") == text.count("\n    platform: ")
    for gpu in load_catalog().values():
        assert gpu.platform == ("rocm" if gpu.vendor == "amd" else "cuda"), gpu.id


def test_vllm_rocm_use_aiter_is_read_as_envs_py_reads_it() -> None:
    assert vllm_environment({}).rocm_use_aiter is False
    assert vllm_environment({"VLLM_ROCM_USE_AITER": "1"}).rocm_use_aiter is True
    assert vllm_environment({"VLLM_ROCM_USE_AITER": "TRUE"}).rocm_use_aiter is True
    assert vllm_environment({"VLLM_ROCM_USE_AITER": "yes"}).rocm_use_aiter is False  # not "true"/"1": off
    assert vllm_environment({"VLLM_ROCM_USE_AITER_MHA": "0"}).rocm_use_aiter_mha is False
    assert vllm_environment({}).rocm_use_aiter_mla is True


def test_mla_without_aiter_or_flash_attn_is_refused_in_vllms_words() -> None:
    model = _model("deepseek-ai--DeepSeek-V2-Lite-Chat")
    with pytest.raises(NotServed, match="No valid MLA prefill backend found"):
        rocm_backend(model, get_gpu("mi300x"), "bfloat16", RocmAiter(installed=False))


def test_triton_mla_refuses_fp8_e5m2_but_aiter_mla_takes_it() -> None:
    model = _model("deepseek-ai--DeepSeek-V2-Lite-Chat")
    with pytest.raises(NotServed, match="No valid attention backend found.*TRITON_MLA.*kv_cache_dtype not supported"):
        rocm_backend(model, get_gpu("mi300x"), "fp8_e5m2", RocmAiter())
    assert rocm_backend(model, get_gpu("mi300x"), "fp8_e5m2", RocmAiter(use_aiter=True)).name == "ROCM_AITER_MLA"


def test_rocm_fit_says_which_platform_planned_it() -> None:
    model = _model("Qwen--Qwen2.5-7B-Instruct")
    r = plan_fit(model, get_gpu("mi300x"), ServeSettings(kv_cache_dtype="fp8", kv_cache_memory_bytes=KV_20_GIB,
                                                         weights_bytes=0), advise=False)
    assert r.platform == "rocm" and r.attention_backend == "ROCM_ATTN"
    assert r.platform_rules is not None and "float8_e4m3fnuz" in r.platform_rules
    assert r.max_num_batched_tokens == 16384 and r.max_num_seqs == 1024  # ≥ 160 GiB tier
    h100 = plan_fit(model, get_gpu("h100"), ServeSettings(kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0),
                    advise=False)
    assert h100.platform == "cuda" and h100.platform_rules is None and h100.attention_backend == "FLASH_ATTN"


def test_the_sweep_lists_amd_beside_nvidia_each_by_its_platform() -> None:
    from kvplan.vllm.sweep import sweep_gpus

    model = _model("Qwen--Qwen2.5-7B-Instruct")
    report = sweep_gpus(model, [get_gpu("h100"), get_gpu("mi300x"), get_gpu("mi355x")],
                        ServeSettings(kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0))
    platforms = {row.gpu: row.platform for row in report.rows}
    assert platforms == {"h100-sxm": "cuda", "mi300x": "rocm", "mi355x": "rocm"}


def test_a_rocm_refusal_is_a_sweep_reason_not_an_abort() -> None:
    from kvplan.vllm.sweep import sweep_gpus

    model = _model("deepseek-ai--DeepSeek-V2-Lite-Chat")
    report = sweep_gpus(model, [get_gpu("h100"), get_gpu("mi300x")],
                        ServeSettings(kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0, rocm_aiter_installed=False))
    assert [row.gpu for row in report.rows] == ["h100-sxm"]
    assert any("No valid MLA prefill backend found" in reason.reason for reason in report.reasons)


def test_fit_cli_takes_the_aiter_choice_and_vllms_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    runner = CliRunner()
    gpt_oss = str(ROOT / "tests" / "fixtures" / "configs" / "openai--gpt-oss-20b")
    args = ["fit", gpt_oss, "--gpu", "mi300x", "--max-model-len", "8192", "--kv-cache-memory-bytes", "20GiB", "--json"]
    monkeypatch.delenv("VLLM_ROCM_USE_AITER", raising=False)
    seen = {}
    for label, extra, env in (("image", [], {}), ("pip", ["--no-aiter"], {}),
                              ("flag", ["--env", "VLLM_ROCM_USE_AITER=1"], {}),
                              ("enabled", [], {"VLLM_ROCM_USE_AITER": "1"})):
        result = runner.invoke(app, [*args, *extra], env=env)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        seen[label] = (report["attention_backend"], report["block_size"], report["num_gpu_blocks"])
    # vLLM 0.33's RocmPlatform (tests/fixtures/oracle-rocm/openai--gpt-oss-20b__mi300x-mml8192*.json)
    assert seen == {"image": ("ROCM_AITER_UNIFIED_ATTN", 64, 13653), "pip": ("TRITON_ATTN", 16, 54613),
                    "enabled": ("ROCM_AITER_FA", 16, 54613), "flag": ("ROCM_AITER_FA", 16, 54613)}
    refused = runner.invoke(app, ["fit", str(CORPUS / "deepseek-ai--DeepSeek-V2-Lite-Chat"), "--gpu", "mi300x",
                                  "--no-aiter", "--kv-cache-memory-bytes", "20GiB"])
    assert refused.exit_code == 2
    assert "No valid MLA prefill backend found" in refused.output and "Traceback" not in refused.output


def test_rocm_oom_is_worded_as_torch_on_rocm_words_it() -> None:
    from kvplan.vllm.startup_log import parse_startup_log

    model = _model("Qwen--Qwen3-235B-A22B")  # ~438 GiB of bf16 weights on one 192 GB part
    r = plan_fit(model, get_gpu("mi300x"), ServeSettings(max_model_len=8192), advise=False)
    assert r.startup == "OOM loading weights" and r.error is not None and r.error.startswith("HIP out of memory")
    log = parse_startup_log("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.")
    assert log.failure == "cuda_oom"
