"""Flags of big deployments, from the command line and pasted `vllm serve` lines, against vLLM 0.33's CUDA
planner (tests/fixtures/oracle-cuda/*__h100-* extra cases; the core is pinned case by case in
tests/test_cuda_golden.py)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from tests.conftest import CONFIGS

runner = CliRunner()
GOLDENS = CONFIGS.parent / "oracle-cuda"
YARN = ('{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, '
        '"max_position_embeddings": 131072}')


def _golden_line(case: str) -> str:
    return str(json.loads((GOLDENS / f"{case}.json").read_text())["kv_cache"]["log_line"])


def _fit_json(*args: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["fit", *args, "--gpu", "h100", "--weights-memory", "0", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_yarn_hf_overrides_serve_qwen3_at_128k_as_vllm_does() -> None:
    r = _fit_json(str(CONFIGS / "Qwen--Qwen3-30B-A3B"), "--max-model-len", "131072", "--kv-cache-memory-bytes",
                  "21474836480", "--hf-overrides", YARN)
    assert r["verdict"]["log_line"] == _golden_line("Qwen--Qwen3-30B-A3B__h100-yarn-mml131072")


@pytest.mark.parametrize(("flags", "case"), [
    ("--speculative-config '{\"method\": \"deepseek_mtp\", \"num_speculative_tokens\": 1}'",
     "deepseek-ai--DeepSeek-V3__h100-tp8-mml8192-mtp1"),
    ("--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 3}'",
     "deepseek-ai--DeepSeek-V3__h100-tp8-mml8192-mtp3"),
    ("-dcp 2", "deepseek-ai--DeepSeek-V3__h100-tp8-mml8192-dcp2"),
    ("--decode-context-parallel-size 8", "deepseek-ai--DeepSeek-V3__h100-tp8-mml8192-dcp8"),
])
def test_pasted_vllm_serve_lines_with_mtp_and_dcp(flags: str, case: str) -> None:
    cmd = (f"vllm serve {CONFIGS / 'deepseek-ai--DeepSeek-V3'} -tp 8 --max-model-len 8192 "
           f"--kv-cache-memory-bytes 21474836480 {flags}")
    assert _fit_json("--vllm-cmd", cmd)["verdict"]["log_line"] == _golden_line(case)


def test_dcp_needs_a_tp_size_it_divides() -> None:
    result = runner.invoke(app, ["fit", str(CONFIGS / "deepseek-ai--DeepSeek-V3"), "--gpu", "h100", "-tp", "8",
                                 "-dcp", "3"])
    assert result.exit_code == 2
    assert "--tensor-parallel-size 8 must be divisible by --decode-context-parallel-size 3" in result.output


def test_mtp_needs_the_models_mtp_layers() -> None:
    result = runner.invoke(app, ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "h100",
                                 "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'])
    assert result.exit_code == 2
    assert "has no MTP layers" in result.output


def test_a_bad_json_flag_is_one_clear_error() -> None:
    result = runner.invoke(app, ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "h100",
                                 "--speculative-config", "{method: mtp}"])
    assert result.exit_code == 2
    assert "--speculative-config: not valid JSON" in result.output


def test_num_gpu_blocks_override_sets_the_block_count() -> None:
    r = _fit_json(str(CONFIGS / "Qwen--Qwen2.5-7B"), "--max-model-len", "32768", "--num-gpu-blocks-override", "4096")
    assert (r["cache"]["num_gpu_blocks"], r["cache"]["kv_cache_tokens"]) == (4096, 4096 * 16)


def test_dtype_float32_doubles_the_kv_bytes_and_float16_is_refused_for_gemma2() -> None:
    half = _fit_json(str(CONFIGS / "Qwen--Qwen2.5-7B"), "--max-model-len", "32768", "--kv-cache-memory-bytes",
                     "20GiB", "--dtype", "half")
    full = _fit_json(str(CONFIGS / "Qwen--Qwen2.5-7B"), "--max-model-len", "32768", "--kv-cache-memory-bytes",
                     "20GiB", "--dtype", "float32")
    assert (half["cache"]["kv_cache_dtype"], full["cache"]["kv_cache_dtype"]) == ("float16", "float32")
    assert full["cache"]["bytes_per_block"] == 2 * half["cache"]["bytes_per_block"]
    refused = runner.invoke(app, ["fit", str(CONFIGS / "unsloth--gemma-2-9b"), "--gpu", "h100", "--dtype", "half"])
    assert refused.exit_code == 2 and "does not support float16" in refused.output


def test_cpu_offload_takes_weights_off_the_gpu() -> None:
    base = runner.invoke(app, ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "h100", "--json"])
    off = runner.invoke(app, ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "h100", "--cpu-offload-gb", "4",
                              "--json"])
    weights = [json.loads(r.stdout)["memory"]["weights_bytes"] for r in (base, off)]
    assert weights[0] - weights[1] == 4 * 2**30


def test_lora_slots_add_their_buffers_to_the_weights() -> None:
    """Llama-3.1-8B, 4 adapters of rank 64: per decoder layer, A and B buffers of qkv (3 slices), o, gate_up
    (2 slices) and down hold 64 × (38,912 + 43,008) values; × 4 slots × 2 bytes × 32 layers = 1.25 GiB."""
    args = [str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--gpu", "h100", "--json"]
    base = json.loads(runner.invoke(app, ["fit", *args]).stdout)
    lora = json.loads(runner.invoke(app, ["fit", *args, "--enable-lora", "--max-loras", "4",
                                          "--max-lora-rank", "64"]).stdout)
    assert lora["memory"]["weights_bytes"] - base["memory"]["weights_bytes"] == 4 * 32 * 64 * (38_912 + 43_008) * 2


def test_online_fp8_quantization_and_vllms_method_mismatch() -> None:
    args = [str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--gpu", "h100", "--json"]
    base = json.loads(runner.invoke(app, ["fit", *args]).stdout)
    fp8 = json.loads(runner.invoke(app, ["fit", *args, "--quantization", "fp8"]).stdout)
    # linear weights at 1 byte, embeddings kept
    assert fp8["memory"]["weights_bytes"] < 0.6 * base["memory"]["weights_bytes"]
    mismatch = runner.invoke(app, ["fit", str(CONFIGS / "nvidia--Llama-3.1-70B-Instruct-FP8"), "--gpu", "h100",
                                   "-tp", "2", "--quantization", "awq"])
    assert mismatch.exit_code == 2
    assert "does not match the quantization method specified in the `quantization` argument (awq)" in \
        mismatch.output


def test_expert_parallel_splits_the_experts_over_tp_times_dp_ranks() -> None:
    from kvplan.model.hub import load_local
    from kvplan.model.weights import routed_expert_bytes

    model = str(CONFIGS / "Qwen--Qwen3-30B-A3B")
    args = [model, "--gpu", "h100", "-tp", "2", "-dp", "2", "--json"]
    plain = json.loads(runner.invoke(app, ["fit", *args]).stdout)
    ep = json.loads(runner.invoke(app, ["fit", *args, "--enable-expert-parallel"]).stdout)
    experts = routed_expert_bytes(load_local(model))
    assert plain["memory"]["weights_bytes"] - ep["memory"]["weights_bytes"] == experts // 2 - experts // 4
    assert plain["deployment"]["num_gpus"] == ep["deployment"]["num_gpus"] == 4
    # the memory the experts free goes to the KV cache
    assert ep["cache"]["kv_cache_tokens"] > plain["cache"]["kv_cache_tokens"]


def test_hf_overrides_in_a_plan_are_applied_to_the_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "deployments:\n"
        "  - name: qwen3-128k\n"
        f"    model: {CONFIGS / 'Qwen--Qwen3-30B-A3B'}\n"
        "    gpu: h100\n"
        "    vllm:\n"
        "      max_model_len: 131072\n"
        "      kv_cache_memory_bytes: 21474836480\n"
        f"      hf_overrides: {YARN}\n"
        "    measured: {weights_memory: 0}\n"
        "    require:\n"
        "      starts: true\n", encoding="utf-8")
    result = runner.invoke(app, ["check", str(plan), "--json"])
    assert result.exit_code == 0, result.output
    assert "hf_overrides" not in result.stderr


EAGLE3_DRAFT = CONFIGS.parent / "corpus" / "configs" / "nm-testing--EAGLE3-LLaMA3.1-Instruct-8B-converted"


def test_eagle3_draft_joins_the_kv_cache_as_vllm_plans_it() -> None:
    """Llama-3.1-8B + a speculators-format EAGLE-3 draft (one Llama layer, 8 KV heads × 128): 33 layers share
    the 20 GiB (tests/fixtures/oracle-cuda/extra/…-eagle3x3.json, vLLM 0.33's planner with the draft built)."""
    golden = json.loads((GOLDENS / "extra" / "meta-llama--Meta-Llama-3.1-8B__h100-mml8192-eagle3x3.json")
                        .read_text())["plan"]["kv_cache_config"]
    spec = json.dumps({"method": "eagle3", "model": str(EAGLE3_DRAFT), "num_speculative_tokens": 3})
    r = _fit_json(str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--max-model-len", "8192",
                  "--kv-cache-memory-bytes", "21474836480", "--speculative-config", spec)
    assert (r["cache"]["num_gpu_blocks"], r["verdict"]["log_line"]) == (golden["num_blocks"], golden["log_line"]) == (
        9929, "GPU KV cache size: 158,864 tokens, Maximum concurrency for 8,192 tokens per request: 19.39x")
    pasted = _fit_json("--vllm-cmd", f"vllm serve {CONFIGS / 'meta-llama--Meta-Llama-3.1-8B'} --max-model-len 8192 "
                                     f"--kv-cache-memory-bytes 21474836480 --speculative-config '{spec}'")
    assert pasted["cache"]["num_gpu_blocks"] == golden["num_blocks"]


def test_an_eagle_drafts_own_kv_cache_dtype_applies_to_its_layers_only() -> None:
    """config/speculative.py:apply_draft_overrides: `kv_cache_dtype` in the speculative config is the draft's."""
    golden = json.loads((GOLDENS / "extra" / "meta-llama--Meta-Llama-3.1-8B__h100-mml8192-eagle3x3-dfp8.json")
                        .read_text())["plan"]["kv_cache_config"]
    spec = json.dumps({"method": "eagle3", "model": str(EAGLE3_DRAFT), "num_speculative_tokens": 3,
                       "kv_cache_dtype": "fp8"})
    r = _fit_json(str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--max-model-len", "8192",
                  "--kv-cache-memory-bytes", "21474836480", "--speculative-config", spec)
    assert (r["cache"]["num_gpu_blocks"], r["verdict"]["log_line"]) == (golden["num_blocks"], golden["log_line"]) == (
        10082, "GPU KV cache size: 161,312 tokens, Maximum concurrency for 8,192 tokens per request: 19.69x")


def test_eagle_needs_the_drafts_checkpoint() -> None:
    result = runner.invoke(app, ["fit", str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--gpu", "h100",
                                 "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3}'])
    assert result.exit_code == 2
    assert "method 'eagle3' needs the draft's checkpoint" in result.output


def test_a_draft_without_num_speculative_tokens_or_n_predict_is_refused_as_vllm_does() -> None:
    # config/speculative.py: "A speculative model was provided, but `num_speculative_tokens` was not provided"
    result = runner.invoke(app, ["fit", str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"), "--gpu", "h100",
                                 "--speculative-config", json.dumps({"method": "eagle3", "model": str(EAGLE3_DRAFT)})])
    assert result.exit_code == 2
    assert "`num_speculative_tokens` was not provided" in result.output


def test_mtp_without_num_speculative_tokens_takes_the_checkpoints_mtp_layer_count() -> None:
    from kvplan.model.hub import load_local
    from kvplan.vllm.speculative import resolve_speculative

    model = load_local(str(CONFIGS / "deepseek-ai--DeepSeek-V3"))  # num_nextn_predict_layers: 1
    spec = resolve_speculative(model, {"method": "mtp"})
    assert spec is not None and (spec.num_speculative_tokens, spec.draft_layers) == (1, 1)


def test_hf_overrides_update_nested_configs_and_replace_dicts_whole() -> None:
    """config/model.py:_apply_dict_overrides: a nested PretrainedConfig is updated key by key; a dict-valued
    parameter (rope_scaling, quantization_config) is replaced whole."""
    from kvplan.model.config import apply_hf_overrides

    config = {"text_config": {"a": 1, "b": 2}, "rope_scaling": {"factor": 2.0, "rope_type": "yarn"},
              "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}
    out = apply_hf_overrides(config, {"text_config": {"a": 9}, "rope_scaling": {"factor": 4.0},
                                      "quantization_config": {"quant_method": "fp8"}})
    assert out == {"text_config": {"a": 9, "b": 2}, "rope_scaling": {"factor": 4.0},
                   "quantization_config": {"quant_method": "fp8"}}


def test_no_async_scheduling_leaves_one_batch_in_flight_as_vllm_plans_it(tmp_path: Path) -> None:
    """config/vllm.py:max_concurrent_batches: with async scheduling off, 1 (PP 1); vLLM 0.33's planner
    (tests/fixtures/oracle-cuda/extra/openai--gpt-oss-20b__h100-mml8192-noasync.json) keeps the blocks."""
    golden = json.loads((GOLDENS / "extra" / "openai--gpt-oss-20b__h100-mml8192-noasync.json").read_text())
    assert golden["config"]["max_in_flight_tokens"] == 8192
    kv = golden["plan"]["kv_cache_config"]
    model = str(CONFIGS / "openai--gpt-oss-20b")
    flags = ["--gpu", "h100", "--max-model-len", "8192", "--kv-cache-memory-bytes", "21474836480", "--json"]
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    model: {model}\n    gpu: h100\n"
                    "    vllm_cmd: vllm serve x --no-async-scheduling --max-model-len 8192 "
                    "--kv-cache-memory-bytes 21474836480\n    require:\n      starts: true\n", encoding="utf-8")
    for args in (["fit", model, "--no-async-scheduling", *flags],
                 ["fit", "--vllm-cmd", f"vllm serve {model} --no-async-scheduling", *flags]):
        r = json.loads(runner.invoke(app, args).stdout)
        assert (r["cache"]["num_gpu_blocks"], r["cache"]["kv_cache_tokens"], r["scheduler"]["in_flight_tokens"]) == (
            kv["num_blocks"], kv["kv_cache_size_tokens"], 8192)
    from kvplan.ci.plan import load_plan

    assert load_plan(plan).deployments[0].settings.scheduler_config.async_scheduling is False


def test_mtp_loads_the_checkpoints_mtp_modules_on_every_gpu() -> None:
    """vLLM skips the MTP layer's weights unless MTP speculation is on (deepseek_mtp.py builds it then): on
    DeepSeek-V3 at TP 8 one module (a MoE decoder layer + eh_proj, embedding and head shared) is ~1.36 GiB a GPU."""
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.model.weights import mtp_module_stored_bytes
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    model = load_local(str(CONFIGS / "deepseek-ai--DeepSeek-V3"))
    base = ServeSettings.of(tp=8, max_model_len=8192)
    plain = plan_fit(model, get_gpu("h200"), base, advise=False)
    mtp = plan_fit(model, get_gpu("h200"), replace(base, speculative_config={"method": "mtp"}), advise=False)
    assert mtp.memory.weights_bytes - plain.memory.weights_bytes == -(-mtp_module_stored_bytes(model) // 8)
    assert round((mtp.memory.weights_bytes - plain.memory.weights_bytes) / 2**30, 2) == 1.36


def test_a_hub_safetensors_total_holds_the_mtp_modules_which_load_only_with_mtp() -> None:
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.model.weights import mtp_module_stored_bytes
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    model = load_local(str(CONFIGS / "deepseek-ai--DeepSeek-V3"))
    base = ServeSettings.of(tp=8, max_model_len=8192, weights_total_bytes=700 * 10**9)
    plain = plan_fit(model, get_gpu("h200"), base, advise=False)
    mtp = plan_fit(model, get_gpu("h200"), replace(base, speculative_config={"method": "mtp"}), advise=False)
    assert mtp.memory.weights_bytes - plain.memory.weights_bytes == -(-mtp_module_stored_bytes(model) // 8)
    assert "not loaded without MTP speculation" in next(t.assumption for t in plain.memory.terms
                                                         if t.name == "weights")


def test_an_eagle3_head_loads_its_layer_fc_and_own_lm_head_on_every_gpu() -> None:
    """llama_eagle3.py for the Llama-3.1-8B EAGLE-3 head (hidden 4,096, 32/8 heads × 128, intermediate 14,336,
    draft_vocab_size 32,000): q/k/v from 2·hidden 50,331,648 + o 16,777,216 + MLP 176,160,768 + 3 norms
    12,288, fc 3 × 4,096 → 4,096 50,331,648 + norm 4,096, LM head 131,072,000; the embedding (525,336,576) is
    the target's, or the head's own at the estimate's high end."""
    from kvplan.model.config import parse_config
    from kvplan.model.hub import load_local
    from kvplan.vllm.speculative import eagle_head_params, resolve_speculative, speculators_layer_config

    target = load_local(str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"))
    raw = json.loads((EAGLE3_DRAFT / "config.json").read_text())
    draft = parse_config(speculators_layer_config(raw), name="eagle3")
    spec = resolve_speculative(target, {"method": "eagle3", "model": str(EAGLE3_DRAFT), "num_speculative_tokens": 3},
                               draft)
    assert spec is not None and spec.draft is not None
    assert eagle_head_params(spec.draft, spec, target) == (
        50_331_648 + 16_777_216 + 176_160_768 + 12_288 + 50_331_648 + 4_096 + 131_072_000, 525_336_576)


def test_prefill_context_parallelism_adds_gpus_and_keeps_or_shards_the_kv_as_vllm_does() -> None:
    """config/parallel.py: PCP alone replicates the KV cache (each PCP rank has the single-rank plan); DCP over
    the PCP axis shards it (block_size × dcp tokens per block id); DCP must be 1, pcp or tp × pcp; only MLA
    backends implement PCP."""
    from kvplan.errors import InvalidParameter, NotServed
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    mla = load_local(str(CONFIGS / "deepseek-ai--DeepSeek-V2-Lite"))
    base = ServeSettings.of(max_model_len=8192, kv_cache_memory_bytes=20 * 2**30)
    one = plan_fit(mla, get_gpu("h100"), base, advise=False)
    pcp = plan_fit(mla, get_gpu("h100"), base.updated(prefill_context_parallel_size=2), advise=False)
    assert (pcp.deployment.num_gpus, pcp.cache.num_gpu_blocks, pcp.cache.kv_cache_tokens) == (
        2, one.cache.num_gpu_blocks, one.cache.kv_cache_tokens)
    sharded = plan_fit(mla, get_gpu("h100"), base.updated(prefill_context_parallel_size=2,
                                                     decode_context_parallel_size=2), advise=False)
    assert sharded.cache.num_gpu_blocks == one.cache.num_gpu_blocks
    assert sharded.cache.kv_cache_tokens == 2 * one.cache.kv_cache_tokens
    with pytest.raises(InvalidParameter, match="valid DCP sizes are \\[1, 2\\]"):
        plan_fit(mla, get_gpu("h100"), base.updated(prefill_context_parallel_size=2,
                                               decode_context_parallel_size=4), advise=False)
    with pytest.raises(NotServed, match="PCP not supported"):
        plan_fit(load_local(str(CONFIGS / "Qwen--Qwen2.5-7B")), get_gpu("h100"),
                 base.updated(prefill_context_parallel_size=2), advise=False)
    r = json.loads(runner.invoke(app, ["fit", "--vllm-cmd", f"vllm serve {CONFIGS / 'deepseek-ai--DeepSeek-V2-Lite'} "
                                       "-pcp 2 --max-model-len 8192 --kv-cache-memory-bytes 21474836480",
                                       "--gpu", "h100", "--json"]).stdout)
    assert (r["deployment"]["num_gpus"], r["cache"]["num_gpu_blocks"]) == (2, one.cache.num_gpu_blocks)


def test_a_kv_connector_without_hma_support_turns_the_hybrid_manager_off_as_vllm_does() -> None:
    """config/vllm.py: LMCacheConnectorV1 does not implement SupportsHMA, so gpt-oss-20b's sliding-window layers
    are cached as full attention (vLLM 0.33's planner: oracle-cuda/extra/…-lmcache.json); NixlConnector keeps the
    hybrid manager (the plain plan)."""
    golden = json.loads((GOLDENS / "extra" / "openai--gpt-oss-20b__h100-mml8192-lmcache.json").read_text())
    kv = golden["plan"]["kv_cache_config"]
    model = str(CONFIGS / "openai--gpt-oss-20b")
    flags = ["--gpu", "h100", "--max-model-len", "8192", "--kv-cache-memory-bytes", "21474836480", "--json"]

    def plan(connector: str) -> dict[str, Any]:
        spec = json.dumps({"kv_connector": connector, "kv_role": "kv_both"})
        result = runner.invoke(app, ["fit", model, "--kv-transfer-config", spec, *flags])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    lmcache = plan("LMCacheConnectorV1")
    assert (lmcache["cache"]["num_gpu_blocks"], lmcache["cache"]["kv_cache_tokens"],
            lmcache["scheduler"]["max_concurrency"]) == (
        kv["num_blocks"], kv["kv_cache_size_tokens"], kv["max_concurrency"]) == (27306, 436896, 53.33203125)
    plain = json.loads(runner.invoke(app, ["fit", model, *flags]).stdout)
    assert plan("NixlConnector")["cache"]["num_gpu_blocks"] == plain["cache"]["num_gpu_blocks"] != 27306
    bad = runner.invoke(app, ["fit", model, "--kv-transfer-config", '{"kv_connector": "NoSuch"}', *flags])
    assert bad.exit_code == 2 and "Unsupported connector type: NoSuch" in bad.output


def test_a_mamba_hybrid_without_the_hybrid_manager_is_refused_as_vllm_does() -> None:
    golden = json.loads((GOLDENS / "extra" / "ibm-granite--granite-4.0-h-small__h100-mml8192-nohma.json").read_text())
    assert golden["plan"]["kv_cache_config"]["error"] == (
        "ValueError: Failed to promote local KV cache specs to one unified type.")
    result = runner.invoke(app, ["fit", "--vllm-cmd", f"vllm serve {CONFIGS / 'ibm-granite--granite-4.0-h-small'} "
                                 "--disable-hybrid-kv-cache-manager --max-model-len 8192", "--gpu", "h100"])
    assert result.exit_code == 2 and "Failed to promote local KV cache specs to one unified type." in result.output


def test_lora_and_offload_move_the_weights_range_with_the_estimate() -> None:
    """A term added to (or taken off) the weights estimate moves its whole range, not only its best value."""
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    model = load_local(str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"))
    base = ServeSettings.of(max_model_len=8192)

    def weights(s: ServeSettings) -> Any:
        return next(t for t in plan_fit(model, get_gpu("h100"), s, advise=False).memory.terms if t.name == "weights")

    plain, lora = weights(base), weights(base.updated(enable_lora=True))
    added = lora.bytes - plain.bytes
    assert added > 0 and (lora.low_bytes - plain.low_bytes, lora.high_bytes - plain.high_bytes) == (added, added)
    offload = weights(base.updated(cpu_offload_bytes=2**30))
    assert (plain.bytes - offload.bytes, plain.high_bytes - offload.high_bytes) == (2**30, 2**30)
