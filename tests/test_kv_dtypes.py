"""The NVFP4 and DeepSeek `_ds_mla` KV cache dtypes against vLLM 0.33's CUDA planner: raw cuda_oracle.py /
golden_server.py output in tests/fixtures/oracle-cuda/extra/ (20 GiB of KV memory per GPU; see its README)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from tests.conftest import CONFIGS

runner = CliRunner()
EXTRA = CONFIGS.parent / "oracle-cuda" / "extra"
CORPUS = CONFIGS.parent / "corpus" / "configs"
GPUS = {"h100": "h100", "b200": "b200", "a100": "a100-80gb"}


def _golden(case: str) -> dict:  # type: ignore[type-arg]
    return json.loads((EXTRA / f"{case}.json").read_text())  # type: ignore[no-any-return]


def _config(folder: str) -> str:
    for root in (CONFIGS, CORPUS, EXTRA / "configs"):
        if (root / folder / "config.json").is_file():
            return str(root / folder)
    raise AssertionError(folder)


def _fit(case: str, *extra: str) -> tuple[int, str]:
    folder, variant = case.split("__")
    gpu, mml = variant.split("-")[0], variant.split("-")[1].removeprefix("mml")
    kv = _golden(case)["request"]["kv_cache_dtype"] if "request" in _golden(case) else None
    args = ["fit", _config(folder), "--gpu", GPUS[gpu], "--max-model-len", mml, "--kv-cache-memory-bytes",
            "21474836480", "--weights-memory", "0", "--json", *extra]
    if kv and kv != "auto":
        args += ["--kv-cache-dtype", kv]
    result = runner.invoke(app, args)
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


ANSWERED = [
    "Qwen--Qwen2.5-7B__b200-mml8192-nvfp4",
    "Qwen--Qwen2.5-7B__h100-mml8192-nvfp4",
    "Qwen--Qwen2.5-7B__a100-mml8192-nvfp4",
    "Qwen--Qwen2.5-7B__b200-mml8192-nvfp4_4over6",
    "openai--gpt-oss-20b__b200-mml8192-nvfp4",
    "facebook--opt-125m__b200-mml2048-nvfp4",
    "synthetic--Qwen3-235B-A22B-NVFP4-kv-nvfp4__b200-mml8192",  # ModelOpt kv_cache_quant_algo: NVFP4
    "deepseek-ai--DeepSeek-V3.2__h100-mml8192-fp8_ds_mla",
    "deepseek-ai--DeepSeek-V3.2__b200-mml8192-fp8_ds_mla",
    "deepseek-ai--DeepSeek-V3.2__b200-mml8192-nvfp4_ds_mla",
]


@pytest.mark.parametrize("case", ANSWERED)
def test_kv_dtype_as_vllm_lays_it(case: str) -> None:
    golden = _golden(case)
    code, out = _fit(case)
    assert code == 0, out
    r = json.loads(out)
    plan = golden["plan"]
    assert r["verdict"]["log_line"] == plan["kv_cache_config"]["log_line"]
    assert r["cache"]["num_gpu_blocks"] == plan["kv_cache_config"]["num_blocks"]
    assert r["cache"]["block_size"] == plan["block_size"]
    assert r["deployment"]["attention_backend"] == plan["attn_backends"][-1]
    assert r["cache"]["kv_cache_dtype"] == golden["config"]["cache_dtype"]
    # One block id spans every layer of one scheduler group (the hybrid manager's groups share a tensor).
    page = sum(g["page_size_bytes"] * g["num_layers"] for g in plan["per_pp_rank"][0]["spec_groups"])
    assert r["cache"]["bytes_per_block"] == page // len(plan["kv_cache_config"]["groups"])


REFUSED = [
    ("Qwen--Qwen2.5-7B__h100-mml8192-nvfp4", None, None),  # answered: the control for the two below
    ("openai--gpt-oss-20b__h100-mml8192-nvfp4", "fa2 prefill misreads an NVFP4 KV cache at head_size 64", 1),
    ("facebook--opt-125m__h100-mml2048-nvfp4", "fa2 prefill misreads an NVFP4 KV cache at head_size 64", 1),
    ("deepseek-ai--DeepSeek-V3.2__h100-mml8192-nvfp4_ds_mla",
     "FLASHMLA_SPARSE only supports the nvfp4_ds_mla kv-cache dtype on SM100 (Blackwell)", 1),
    ("deepseek-ai--DeepSeek-V3.2__h100-mml8192-nvfp4", "nvfp4 KV cache is not supported with MLA", 2),
    ("deepseek-ai--DeepSeek-V3__b200-mml8192-nvfp4", "nvfp4 KV cache is not supported with MLA", 2),
    ("deepseek-ai--DeepSeek-V3__h100-mml8192-fp8_ds_mla", "FLASHMLA_SPARSE", 1),
    ("deepseek-ai--DeepSeek-V3__b200-mml8192-fp8_ds_mla", "FLASHMLA_SPARSE", 1),
    ("deepseek-ai--DeepSeek-V3__b200-mml8192-nvfp4_ds_mla", "FLASHMLA_SPARSE", 1),
]


@pytest.mark.parametrize(("case", "phrase", "kind"), REFUSED)
def test_kv_dtype_refused_where_vllm_refuses_it(case: str, phrase: str | None, kind: int | None) -> None:
    golden = _golden(case)
    code, out = _fit(case)
    refusal = golden.get("error") or golden["plan"].get("error")
    if phrase is None:
        assert code == 0 and refusal is None
        return
    assert code != 0
    assert refusal is not None and phrase in refusal
    assert phrase in " ".join(out.split())
    # vLLM's config validation (a ValidationError) is a bad argument; a missing backend is "not served".
    assert ("ValidationError" in refusal) == (kind == 2)


def test_nvfp4_packs_a_head_into_9_16ths_of_a_byte_a_value() -> None:
    """head_size 128: 64 bytes of fp4 values + 8 fp8 scales for K, the same for V (nvfp4_kv_cache_full_dim)."""
    from kvplan.model.hub import load_local
    from kvplan.model.kv_cache import kv_cache_specs

    model = load_local(str(CONFIGS / "Qwen--Qwen2.5-7B"))
    spec = kv_cache_specs(model, kv_cache_dtype="nvfp4")[0][0]
    assert spec.bytes_per_token == 4 * 2 * (64 + 8)
