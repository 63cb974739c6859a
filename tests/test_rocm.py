"""AMD Instinct GPUs planned by vLLM 0.33's ROCm rules (kvplan/vllm/rocm.py), pinned to vLLM's own RocmPlatform
(tests/fixtures/oracle-rocm/, from /work/shared/tools/vllm-rocm-oracle: vLLM 0.33.0's planner with faked
amdsmi/HIP answers, stub aiter/flash_attn packages)."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import NotServed
from kvplan.hardware.gpus import get_gpu, load_catalog
from kvplan.model.config import parse_config
from kvplan.model.kv_cache import KVCacheSpec
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
    r = plan_fit(model, get_gpu("mi300x"), ServeSettings.of(kv_cache_dtype="fp8", kv_cache_memory_bytes=KV_20_GIB,
                                                         weights_bytes=0), advise=False)
    assert r.platform == "rocm" and r.attention_backend == "ROCM_ATTN"
    assert r.platform_rules is not None and "float8_e4m3fnuz" in r.platform_rules
    assert r.max_num_batched_tokens == 16384 and r.max_num_seqs == 1024  # ≥ 160 GiB tier
    h100 = plan_fit(model, get_gpu("h100"), ServeSettings.of(kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0),
                    advise=False)
    assert h100.platform == "cuda" and h100.platform_rules is None and h100.attention_backend == "FLASH_ATTN"


def test_the_sweep_lists_amd_beside_nvidia_each_by_its_platform() -> None:
    from kvplan.vllm.sweep import sweep_gpus

    model = _model("Qwen--Qwen2.5-7B-Instruct")
    report = sweep_gpus(model, [get_gpu("h100"), get_gpu("mi300x"), get_gpu("mi355x")],
                        ServeSettings.of(kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0))
    platforms = {row.gpu: row.platform for row in report.rows}
    assert platforms == {"h100-sxm": "cuda", "mi300x": "rocm", "mi355x": "rocm"}


def test_a_rocm_refusal_is_a_sweep_reason_not_an_abort() -> None:
    from kvplan.vllm.sweep import sweep_gpus

    model = _model("deepseek-ai--DeepSeek-V2-Lite-Chat")
    report = sweep_gpus(model, [get_gpu("h100"), get_gpu("mi300x")],
                        ServeSettings.of(kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0, rocm_aiter_installed=False))
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
    r = plan_fit(model, get_gpu("mi300x"), ServeSettings.of(max_model_len=8192), advise=False)
    assert r.startup == "OOM loading weights" and r.error is not None and r.error.startswith("HIP out of memory")
    log = parse_startup_log("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.")
    assert log.failure.reason == "cuda_oom"


def _golden(case: str) -> Any:
    return json.loads((GOLDENS / f"{case}.json").read_text())


def _cli(args: list[str], env: dict[str, str] | None = None) -> Any:
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    result = CliRunner().invoke(app, args, env=env or {})
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


GPT_OSS = str(ROOT / "tests" / "fixtures" / "configs" / "openai--gpt-oss-20b")
SERVE_8K_20GIB = "vllm serve x --kv-cache-memory-bytes 21474836480 --max-model-len 8192"


def test_size_bytes_per_token_are_the_rocm_page_bytes_fp8_one_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    # ROCm stores fp8 KV as uint8 (one byte) and ROCM_ATTN's two head slots keep CUDA's bytes per token:
    # vLLM's spec on MI300X is 28 layers × 16,384 B per 16-token page (…__mi300x-fp8.json) = 28,672 B/token
    monkeypatch.delenv("VLLM_ROCM_USE_AITER", raising=False)
    qwen = str(CORPUS / "Qwen--Qwen2.5-7B-Instruct")
    for case, extra in (("Qwen--Qwen2.5-7B-Instruct__mi300x-fp8", ["--kv-cache-dtype", "fp8"]),
                        ("Qwen--Qwen2.5-7B-Instruct__mi355x-fp8", ["--kv-cache-dtype", "fp8"]),
                        ("Qwen--Qwen2.5-7B-Instruct__mi300x-tp2", ["-tp", "2"])):
        (group,) = _golden(case)["per_pp_rank"][0]["spec_groups"]
        want = group["num_layers"] * group["page_size_bytes"] // group["block_size"]
        assert _cli(["size", qwen, *extra, "--json"])["kv_bytes_per_token"] == want
    assert want == 28 * 2 * 128 * 2 * 2  # TP 2: 2 KV heads of 128 per rank, K and V, bf16


def test_roofline_kv_capacity_is_planned_by_the_rocm_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    # gpt-oss-20b at 20 GiB on MI300X: ROCM_AITER_UNIFIED_ATTN's 64-token blocks (13,653, aiter installed) or
    # TRITON_ATTN's 16 (54,613: no aiter, or ROCM_AITER_FA with VLLM_ROCM_USE_AITER=1), as vLLM 0.33 plans them
    monkeypatch.delenv("VLLM_ROCM_USE_AITER", raising=False)
    base = ["roofline", GPT_OSS, "--gpu", "mi300x", "--context", "1000", "--vllm-cmd", SERVE_8K_20GIB, "--json"]
    capacity = {label: _cli(base + extra, env)["kv_capacity_batch"]
                for label, extra, env in (("image", [], {}), ("pip", ["--no-aiter"], {}),
                                          ("enabled", [], {"VLLM_ROCM_USE_AITER": "1"}))}
    s = ServeSettings.of(max_model_len=8192, kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0, context=1000)
    model = parse_config(json.loads((Path(GPT_OSS) / "config.json").read_text()), name="gpt-oss-20b")
    for label, golden_case, settings in (
            ("image", "openai--gpt-oss-20b__mi300x-mml8192", s),
            ("pip", "openai--gpt-oss-20b__mi300x-mml8192-noaiter", s.updated(rocm_aiter_installed=False)),
            ("enabled", "openai--gpt-oss-20b__mi300x-mml8192-useaiter", s.updated(rocm_use_aiter=True))):
        r = plan_fit(model, get_gpu("mi300x"), settings, advise=False)
        assert r.num_gpu_blocks == _golden(golden_case)["kv_cache"]["num_blocks"]
        assert capacity[label] == r.preemption.max_requests_at_context
    assert capacity == {"image": 413, "pip": 430, "enabled": 430}


def test_check_plans_take_the_aiter_choice_and_vllms_variable(tmp_path: Path) -> None:
    deployment = ("  - name: {name}\n    model: " + GPT_OSS + "\n    gpu: mi300x\n{extra}"
                  "    vllm: {{max-model-len: 8192, kv-cache-memory-bytes: 21474836480}}\n"
                  "    require: {{starts: true}}\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text("deployments:\n" + "".join(deployment.format(name=n, extra=e) for n, e in (
        ("image", ""), ("pip", "    aiter: false\n"), ("enabled", "    env: {VLLM_ROCM_USE_AITER: \"1\"}\n"))))
    report = _cli(["check", str(plan), "--json"])
    got = {d["name"]: (d["num_gpu_blocks"], d["kv_cache_tokens"]) for d in report["deployments"]}
    want = {n: (_golden(f"openai--gpt-oss-20b__mi300x-mml8192{s}")["kv_cache"]["num_blocks"],
                _golden(f"openai--gpt-oss-20b__mi300x-mml8192{s}")["kv_cache"]["tokens"])
            for n, s in (("image", ""), ("pip", "-noaiter"), ("enabled", "-useaiter"))}
    assert got == want == {"image": (13653, 435196), "pip": (54613, 436477), "enabled": (54613, 436477)}
    plan.write_text("deployments:\n" + deployment.format(name="bad", extra="    aiter: \"no\"\n"))
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    bad = CliRunner().invoke(app, ["check", str(plan)])
    assert bad.exit_code == 2 and "deployments[0].aiter: true" in bad.output and "Traceback" not in bad.output


def test_the_fit_sweep_offers_amd_beside_nvidia_with_the_rocm_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_ROCM_USE_AITER", raising=False)
    args = ["fit", GPT_OSS, "--max-model-len", "8192", "--kv-cache-memory-bytes", "20GiB", "--json"]
    for extra, suffix in (([], ""), (["--no-aiter"], "-noaiter")):
        rows = {r["gpu"]: r for r in _cli(args + extra)["rows"]}
        golden = _golden(f"openai--gpt-oss-20b__mi300x-mml8192{suffix}")["kv_cache"]
        for gpu in ("mi300x", "mi325x", "mi355x"):
            assert rows[gpu]["platform"] == "rocm"
            assert (rows[gpu]["num_gpu_blocks"], rows[gpu]["kv_cache_tokens"]) == (golden["num_blocks"],
                                                                                   golden["tokens"])
        assert rows["h100-sxm"]["platform"] == "cuda" and rows["h100-sxm"]["num_gpu_blocks"] == 54613


def test_deepseek_v4_on_rocm_keeps_the_flashmla_caches_under_rocms_backend() -> None:
    # models/deepseek_v4/amd/rocm.py:DeepseekV4ROCMAiterMLAAttention keeps the fp8_ds_mla layout: vLLM 0.33 plans
    # 21,426 blocks of 256 tokens at 20 GiB, TP 8, the same as on an H100 (oracle-cuda …V4-Flash__h100-tp8)
    model = _model("deepseek-ai--DeepSeek-V4-Flash")
    s = ServeSettings.of(tp=8, max_model_len=8192, kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0)
    for gpu in ("mi300x", "mi355x"):
        r = plan_fit(model, get_gpu(gpu), s, advise=False)
        assert (r.attention_backend, r.block_size, r.num_gpu_blocks) == ("ROCM_FLASHMLA_SPARSE_DSV4", 256, 21426)
        assert r.log_line == _golden(f"deepseek-ai--DeepSeek-V4-Flash__{gpu}-tp8-mml8192")["kv_cache"]["log_line"]
    with pytest.raises(NotServed, match="fp8_ds_mla layout only supports fp8 kv-cache, got bfloat16"):
        plan_fit(model, get_gpu("mi300x"), s.updated(kv_cache_dtype="bfloat16"), advise=False)


ROCM_LOGS = ROOT / "tests" / "fixtures" / "startup-logs" / "rocm"


def _logged(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, pattern
    return match.group(1)


@pytest.mark.parametrize(("log", "specs", "tp"), [
    # DeepSeek-R1-Distill-Qwen-14B (Qwen2ForCausalLM: 48 layers, 8 KV heads of 128, bf16), TP 2: 4 heads a rank
    ("ray-rocm7-blog-r1-distill-qwen-14b-tp2.log", [[KVCacheSpec(i, "full", 8, 128, 128, 2) for i in range(48)]],
     2),
    ("unsloth-gfx1201-llama31-8b-merged.log", None, 1),
])
def test_public_rocm_startup_logs_are_reproduced_from_their_kv_memory(log: str, specs: Any, tp: int) -> None:
    from kvplan.model.kv_cache import kv_cache_specs
    from kvplan.units import GiB
    from kvplan.vllm.block_plan import BlockPlanSettings, plan_kv_cache

    text = (ROCM_LOGS / log).read_text()
    gib = float(_logged(text, r"Available KV cache memory: ([\d.]+) GiB"))
    tokens = int(_logged(text, r"GPU KV cache size: ([\d,]+) tokens").replace(",", ""))
    max_len = int(_logged(text, r"'max_model_len': (\d+)"))
    if specs is None:  # the Llama-3.1-8B geometry (README.md: inferred from the chat template and weights)
        specs = kv_cache_specs(_model("meta-llama--Llama-3.1-8B-Instruct"), tp=tp, kv_cache_dtype="auto")
    else:
        specs = [[replace(s, num_kv_heads=s.num_kv_heads // tp) for s in specs[0]]]
    lo, hi = (plan_kv_cache(specs, int((gib + d) * GiB), BlockPlanSettings(16, max_len, 8192)) for d in (-0.005, 0.005))
    mid = plan_kv_cache(specs, int(gib * GiB), BlockPlanSettings(16, max_len, 8192))
    assert lo.kv_cache_tokens <= tokens <= hi.kv_cache_tokens
    assert mid.kv_cache_tokens == tokens  # 103,813 and 4,925 blocks of 16 at the printed GiB


def test_a_vision_tower_whose_heads_do_not_split_over_tp_is_refused_in_vllms_words() -> None:
    # vLLM 0.33's RocmPlatform (…GLM-4.5V__mi300x-tp8-mml8192.json): "AssertionError: 12 is not divisible by 8"
    # from glm4_1v.py:Glm4vVisionAttention; the rule is the model's, so CUDA refuses alike
    model = _model("zai-org--GLM-4.5V")
    s = ServeSettings.of(tp=8, max_model_len=8192, kv_cache_memory_bytes=KV_20_GIB, weights_bytes=0)
    golden = _golden("zai-org--GLM-4.5V__mi300x-tp8-mml8192")
    assert golden["build_error"]["error_message"] == "12 is not divisible by 8"
    for gpu in ("mi300x", "h100"):
        with pytest.raises(NotServed, match=r"^12 is not divisible by 8"):
            plan_fit(model, get_gpu(gpu), s, advise=False)
    assert plan_fit(model, get_gpu("mi300x"), s.updated(tp=4), advise=False).fits  # 12 = 4 × 3
