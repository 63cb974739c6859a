"""SGLang 0.5.23's speculative decoding (kvplan/sglang/speculative.py), against the oracle's runs.

tests/fixtures/sglang/spec-oracle-runs.json: SGLang's own code (tools/sglang_oracle/spec_oracle.py around the shared
oracle) resolving the server arguments and building DefaultPoolConfigurator with the speculative algorithm and
SGLang's own spec_aux_config, on a KV byte budget of 60 GiB (64,424,509,440 B) per rank. Each expected number is
also derived by hand in the test from SGLang's rule.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import get_gpu
from kvplan.sglang.budget import FreeMemory
from kvplan.sglang.command_line import parse_sglang_command
from kvplan.sglang.defaults import SglangDeployment
from kvplan.sglang.engine_args import deployment_fields
from kvplan.sglang.fit import SglangFit, plan_sglang_fit, resolve_server_args
from kvplan.sglang.pool import PoolLimits, size_pool
from kvplan.sglang.speculative import SpeculativeArgs, draft_cell_bytes, resolve_speculative

sys.path.insert(0, str(Path(__file__).parent))
import sglang_goldens  # noqa: E402

RUNS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "fixtures" / "sglang" / "spec-oracle-runs.json").read_text())["runs"]}
BUDGET = 60 << 30  # the runs' --kv-budget-bytes
# A measured budget large enough for any of these pools (the byte budget under test is BUDGET, via size_pool).
FREE = FreeMemory(130.0, 120.0, (130.0, 130.0), (120.0, 120.0), "given")


def _plan(run: dict[str, Any]) -> SglangFit:
    spec = sglang_goldens.model_spec(run["model"])
    fields: dict[str, Any] = deployment_fields(run["args"])
    draft = None
    if run.get("draft") == run["model"]:
        fields["speculative_draft_model_path"] = spec.name  # the target's own checkpoint as its draft
    elif run.get("draft"):
        draft = sglang_goldens.model_spec(run["draft"])
        fields["speculative_draft_model_path"] = draft.name
    measured = FREE
    if run.get("avail_gib") is not None:  # the run's free memory (SGLang's own _profile_available_bytes)
        pre, avail = run["pre_gib"], run["avail_gib"]
        measured = FreeMemory(pre, avail, (pre, pre), (avail, avail), "given")
    return plan_sglang_fit(spec, get_gpu(sglang_goldens.GPU_IDS[run["gpu"]]), SglangDeployment(**fields),
                           weights_bytes=0, weights_range=(0, 0), measured=measured, draft=draft)


def _assert_resolved(fit: SglangFit, run: dict[str, Any]) -> None:
    r = run["resolved"]
    d, sd = fit.defaults, fit.speculative
    assert sd is not None
    assert d.mem_fraction_static == pytest.approx(r["mem_fraction_static"], abs=1e-9)
    assert (d.attention_backend, d.page_size, d.chunked_prefill_size) == (
        r["attention_backend"], r["page_size"], r["chunked_prefill_size"])
    assert (d.decode_graph_max_bs, d.decode_graph_sizes) == (r["cuda_graph"]["decode"]["max_bs"],
                                                             r["cuda_graph"]["decode"]["num_bs"])
    assert (d.prefill_graph, d.prefill_graph_sizes) == (r["cuda_graph"]["prefill"]["backend"],
                                                        r["cuda_graph"]["prefill"]["num_bs"])
    assert (sd.algorithm, sd.num_steps, sd.eagle_topk, sd.num_draft_tokens, sd.max_running_requests) == (
        r["speculative_algorithm"], r["speculative_num_steps"], r["speculative_eagle_topk"],
        r["speculative_num_draft_tokens"], r["max_running_requests"])


def _assert_pool(fit: SglangFit, run: dict[str, Any]) -> None:
    p = run["pool"]
    assert fit.geometry is not None and fit.geometry.cell_bytes == p["cell_size_bytes"]
    assert fit.geometry.draft_layers == (p["eagle_draft_num_layers"] or 0)
    pool = size_pool(fit.geometry, p["kv_budget_bytes"], PoolLimits(
        page_size=fit.defaults.page_size, context_len=fit.context_len,
        max_running=fit.speculative.max_running_requests if fit.speculative else None,
        attn_dp_size=fit.defaults.attn_dp_size))
    assert (pool.max_total_num_tokens, pool.max_running_requests) == (p["max_total_num_tokens"],
                                                                     p["max_running_requests"])


def test_nextn_on_deepseek_v3_is_eagle_with_the_mtp_layer_beside_the_target() -> None:
    """NEXTN → EAGLE; DeepseekV3ForCausalLM drafts from its own path; (3, 1, 4); max_running_requests 48. Cell:
    MLA 576 × 61 layers × 2 B = 70,272, plus int(70,272 × 1 / 61) = 1,152 for num_nextn_predict_layers 1 → 71,424;
    60 GiB // 71,424 = 902,000 tokens. The fraction (0.886) and the 512-batch decode graphs are the plain run's; the
    graph list is the speculative one (67 sizes, not 52)."""
    run = RUNS["deepseek-v3_h200_tp8_nextn"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    assert fit.speculative is not None and fit.speculative.draft_model_path == fit.model
    assert 70272 + draft_cell_bytes(70272, layers=61, draft_layers=1) == 71424 == fit.geometry.cell_bytes  # type: ignore[union-attr]
    assert BUDGET // 71424 == 902000
    _assert_pool(fit, run)
    assert fit.max_running_requests == 48


def test_standalone_draft_prices_its_layers_at_the_targets_per_layer_bytes() -> None:
    """Llama-3.1-70B (TP 8: 1 KV head × 80 layers × 256 × 2 B = 40,960) with Llama-3.1-8B as STANDALONE draft
    (32 layers): + int(40,960 × 32 / 80) = 16,384 → 57,344 B; 60 GiB // 57,344 = 1,123,474 tokens; (3, 1, 4)."""
    run = RUNS["llama-3.1-70b_h100_tp8_standalone_8b"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    assert 40960 + 16384 == fit.geometry.cell_bytes  # type: ignore[union-attr]
    assert BUDGET // 57344 == 1123474
    _assert_pool(fit, run)


def test_eagle_on_llama_auto_chooses_the_wide_tree_and_keeps_fa3() -> None:
    """LlamaForCausalLM: _auto_choose_speculative_params gives (5, 4, 8), after the backend was chosen from an
    unset top-k (fa3 on Hopper). The draft path is the target's own (32 layers, no num_nextn_predict_layers): the
    cell doubles, 131,072 → 262,144; 60 GiB // 262,144 = 245,760."""
    run = RUNS["llama-3.1-8b_h100_eagle_self"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    assert BUDGET // 262144 == 245760
    _assert_pool(fit, run)


def test_eagle_on_b200_without_a_topk_gets_flashinfer_not_trtllm_mha() -> None:
    """get_default_attn_backend on SM100 wants no algorithm or a given top-k: EAGLE with SGLang's own top-k gets
    flashinfer (page 1); the fraction 0.854 and the 16384-token prefill graphs (74 sizes) are B200's."""
    run = RUNS["llama-3.1-8b_b200_eagle_self"]
    _assert_resolved(_plan(run), run)


def test_ngram_has_no_draft_cells_and_resolves_breadth_10_and_12_tokens() -> None:
    """NGRAM: top-k = --speculative-ngram-max-bfs-breadth 10, draft tokens 12, steps 12 // 10 = 1, 48 requests; the
    cell is Qwen3-8B's own (8 heads × 36 layers × 256 × 2 B = 147,456): 60 GiB // 147,456 = 436,906 tokens."""
    run = RUNS["qwen3-8b_h100_ngram"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    _assert_pool(fit, run)


@pytest.mark.parametrize("run_id", ["llama-3.1-8b_h100_eagle_s3k2d6", "llama-3.1-8b_b200_eagle_s3k1d7",
                                    "deepseek-v3_h200_tp8_dp8attn_nextn"])
def test_given_speculative_arguments_are_resolved_as_sglang_does(run_id: str) -> None:
    """A given top-k 2 keeps Hopper off fa3 (flashinfer); top-k 1 on B200 keeps trtllm_mha (page 64) and draft
    tokens become steps + 1 = 4; with attention DP 8 the 48 requests are per worker 48 // 8 = 6."""
    run = RUNS[run_id]
    fit = _plan(run)
    _assert_resolved(fit, run)
    _assert_pool(fit, run)


@pytest.mark.parametrize("run_id", ["llama-3.1-8b_h100_eagle3_steps_only", "llama-3.1-70b_h100_tp8_dp2attn_standalone"])
def test_sglangs_speculative_refusals_are_kvplans(run_id: str) -> None:
    run = RUNS[run_id]
    with pytest.raises(InvalidParameter) as exc:
        _plan(run)
    assert run["error_text"] in str(exc.value)


def test_unknown_and_unmodelled_algorithms_are_refused() -> None:
    spec = dataclasses.replace(sglang_goldens.model_spec("Qwen--Qwen3-8B"), name="m",
                               architectures=("LlamaForCausalLM",))
    server = resolve_server_args(spec, get_gpu("h100-sxm"), SglangDeployment())[3]
    assert (server.attn_dp_size, server.attention_backend, server.page_size) == (1, "fa3", 1)
    with pytest.raises(InvalidParameter, match="Unknown speculative algorithm name: MEDUSA"):
        resolve_speculative(SpeculativeArgs("MEDUSA"), spec, server)
    with pytest.raises(InvalidParameter, match="DFLASH is not modelled"):
        resolve_speculative(SpeculativeArgs("dflash"), spec, server)
    assert resolve_speculative(SpeculativeArgs("nextn"), spec, server).algorithm == "EAGLE"


def test_an_eagle_draft_on_a_model_without_its_own_mtp_needs_its_checkpoint() -> None:
    spec = sglang_goldens.model_spec("Qwen--Qwen3-8B")
    with pytest.raises(InvalidParameter, match="does not give its own MTP draft"):
        plan_sglang_fit(spec, get_gpu("h100-sxm"), SglangDeployment(speculative_algorithm="EAGLE"),
                        weights_bytes=0, weights_range=(0, 0), measured=FREE)


def test_pasted_speculative_flags_are_read_not_ignored() -> None:
    cmd = parse_sglang_command(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --speculative-algorithm EAGLE "
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
        "--speculative-draft-model-path lmsys/DeepSeek-V3-NextN")
    assert cmd.ignored == () and cmd.unmodelled == ()
    fields = deployment_fields(cmd.options)
    assert (fields["speculative_num_steps"], fields["speculative_eagle_topk"], fields["speculative_num_draft_tokens"],
            fields["speculative_draft_model_path"]) == (3, 1, 4, "lmsys/DeepSeek-V3-NextN")


def _cli_fit(model: str, flags: str) -> dict[str, Any]:
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    path = f"tests/fixtures/configs/{model}"
    result = CliRunner().invoke(app, ["fit", path, "--gpu", "h200", "--json", "--sglang-cmd",
                                      f"python -m sglang.launch_server --model-path {path} {flags}"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_the_draft_weights_join_the_budget_sglang_sizes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang loads the draft before it sizes the pool: NEXTN on DeepSeek-V3 adds its one MTP module
    (kvplan/model/weights.py:mtp_module_stored_bytes, split over TP 8); a STANDALONE draft adds its own estimate."""
    from kvplan.model.weights import mtp_module_stored_bytes
    from kvplan.vllm.memory.weights import given_or_estimated_weights

    monkeypatch.chdir(Path(__file__).parent.parent)
    plain = _cli_fit("deepseek-ai--DeepSeek-V3", "--tp 8")
    nextn = _cli_fit("deepseek-ai--DeepSeek-V3", "--tp 8 --speculative-algorithm NEXTN")
    spec = sglang_goldens.model_spec("deepseek-ai--DeepSeek-V3")
    assert nextn["weights_bytes"] - plain["weights_bytes"] == -(-mtp_module_stored_bytes(spec) // 8) > 0
    assert nextn["geometry"]["draft_layers"] == 1 and nextn["max_running_requests"] == 48
    target = _cli_fit("meta-llama--Meta-Llama-3.1-70B", "--tp 8")
    standalone = _cli_fit("meta-llama--Meta-Llama-3.1-70B", "--tp 8 --speculative-algorithm STANDALONE "
                          "--speculative-draft-model-path tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B")
    draft = sglang_goldens.model_spec("meta-llama--Meta-Llama-3.1-8B")
    own = given_or_estimated_weights(draft, given=None, tp=8, pp=1, arch=get_gpu("h200").arch)[0]
    assert standalone["weights_bytes"] - target["weights_bytes"] == own
    assert standalone["geometry"]["draft_layers"] == 32


def test_a_plan_files_pasted_speculative_line_is_judged_with_the_draft(tmp_path: Path) -> None:
    """`kvplan check`: the same tokens as `kvplan fit` (MTP layer in the cell, its weights in the budget)."""
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    config = Path(__file__).parent / "fixtures" / "configs" / "deepseek-ai--DeepSeek-V3"
    plan = tmp_path / "plan.yaml"
    plan.write_text("deployments:\n  - name: mtp\n    engine: sglang\n    gpu: h200\n    sglang_cmd: \"python -m "
                    f"sglang.launch_server --model-path {config} --tp 8 --speculative-algorithm NEXTN\"\n"
                    "    require:\n      starts: true\n")
    result = CliRunner().invoke(app, ["check", str(plan), "--offline", "--json"])
    assert result.exit_code == 0, result.output
    (dep,) = json.loads(result.stdout)["deployments"]
    fit = CliRunner().invoke(app, ["fit", str(config), "--gpu", "h200", "--json", "--sglang-cmd",
                                   f"python -m sglang.launch_server --model-path {config} --tp 8 "
                                   "--speculative-algorithm NEXTN"])
    assert fit.exit_code == 0, fit.output
    assert dep["kv_cache_tokens"] == json.loads(fit.stdout)["max_total_num_tokens"]
    assert dep["max_num_seqs"] == 48


def test_the_no_gpu_sweep_plans_a_speculative_line_as_fit_does() -> None:
    """`kvplan fit` without --gpu: the H200 row of a NEXTN deployment holds the MTP modules' weights too
    (sglang/speculative.py:target_weights_bytes), so its tokens are fit --gpu h200's (616,253; 636,752 before the
    sweep counted them)."""
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    config = Path(__file__).parent / "fixtures" / "configs" / "deepseek-ai--DeepSeek-V3"
    line = f"python -m sglang.launch_server --model-path {config} --speculative-algorithm NEXTN"
    sweep = CliRunner().invoke(app, ["fit", str(config), "--json", "--sglang-cmd", line])
    assert sweep.exit_code == 0, sweep.output
    (row,) = [r for r in json.loads(sweep.stdout)["rows"] if r["gpu"] == "h200"]
    fit = CliRunner().invoke(app, ["fit", str(config), "--gpu", "h200", "--json", "--sglang-cmd", f"{line} --tp 8"])
    assert fit.exit_code == 0, fit.output
    assert row["tp"] == 8 and row["total_tokens"] == json.loads(fit.stdout)["max_total_num_tokens"] == 616_253


def test_ngram_beside_a_sliding_window_pool_keeps_the_targets_pool() -> None:
    """NGRAM has no draft: HybridSWAPoolConfigurator sizes Gemma-4 26B's pool alone at TP 8 (the same 30,720 B
    float cell as without it), 50e9 B // 30,720 = 1,627,604 full tokens, 1,302,083 sliding, 48 requests."""
    run = RUNS["gemma-4-26b_h100_tp8_ngram"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    p = run["pool"]
    assert fit.geometry is not None and fit.geometry.swa is not None and fit.geometry.cell_size == p["cell_size_bytes"]
    pool = size_pool(fit.geometry, p["kv_budget_bytes"], PoolLimits(page_size=fit.defaults.page_size,
                     context_len=fit.context_len, max_running=48, attn_dp_size=1))
    assert (pool.max_total_num_tokens, pool.swa_tokens, pool.max_running_requests) == (
        p["max_total_num_tokens"], p["swa_max_total_num_tokens"], p["max_running_requests"])


def test_ngram_beside_a_dsa_pool_is_refused_as_sglang_refuses_it() -> None:
    """DeepSeek-V3.2's DSA pool pages by 64, and NGRAM's top-k 10 with a page over 1 needs flashinfer
    (speculative_hook.py:_handle_ngram)."""
    run = RUNS["deepseek-v3.2_h200_tp8_ngram"]
    with pytest.raises(InvalidParameter) as exc:
        _plan(run)
    assert run["error_text"] in str(exc.value)


def _pool_of(fit: SglangFit, run: dict[str, Any]) -> Any:
    p = run["pool"]
    assert fit.geometry is not None
    return size_pool(fit.geometry, p["kv_budget_bytes"], PoolLimits(
        page_size=fit.defaults.page_size, context_len=fit.context_len,
        max_running=fit.speculative.max_running_requests if fit.speculative else None,
        attn_dp_size=fit.defaults.attn_dp_size))


def test_an_mtp_draft_beside_a_dsa_pool_adds_its_latent_share_and_a_full_index_k_row() -> None:
    """DefaultPoolConfigurator.__init__'s DSA branch: DeepSeek-V3.2 on H200 (bf16, page 64): target latent 576 ×
    2 B × 61 = 70,272 + index-K 132 B × 61 = 8,052 → 78,324; the draft's one NEXTN layer adds
    int(70,272 × 1 / 61) = 1,152 latent + 132 index-K (allocate_all_layers) = 1,284 → 79,608 B. 60 GiB // 79,608
    // 64 × 64 = 809,216 tokens; SGLang's log prints the target pool alone, (809,216 + 64) × 78,324 B = 59.03 GB."""
    run = RUNS["deepseek-v3.2_h200_tp8_nextn"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    assert fit.geometry is not None and fit.geometry.target_cell_bytes == 70272 + 8052
    assert draft_cell_bytes(78324, layers=61, draft_layers=1, indexer_bytes=8052, indexer_row_bytes=132) == 1284
    assert fit.geometry.cell_bytes == 79608 == run["pool"]["cell_size_bytes"]
    assert BUDGET // 79608 // 64 * 64 == 809216
    _assert_pool(fit, run)
    pool = _pool_of(fit, run)
    assert pool.log_line == run["pool"]["kv_pool_log"][0]["log"] == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 809216, KV size: 59.03 GB")
    assert pool.k_bytes == run["pool"]["kv_pool_log"][0]["kv_bytes"] == (809216 + 64) * 78324


DSA_MTP_RUNS = [r for r in RUNS if r.endswith(("_nextn", "_nextn_s2k1d3")) and (
    r.startswith(("deepseek-v3.2", "glm-5")))]


@pytest.mark.parametrize("run_id", DSA_MTP_RUNS)
def test_dsa_mtp_runs_match_the_oracle_cell_tokens_requests_and_log(run_id: str) -> None:
    """Every DSA + NEXTN oracle run: the resolved arguments, the cell, the token count, the running requests (48,
    or 48 // 8 under attention DP 8) and SGLang's `KV Cache is allocated` line, exactly."""
    run = RUNS[run_id]
    fit = _plan(run)
    _assert_resolved(fit, run)
    _assert_pool(fit, run)
    assert _pool_of(fit, run).log_line == run["pool"]["kv_pool_log"][0]["log"]


MAMBA_RUNS = [r for r, run in RUNS.items() if run.get("avail_gib") is not None and "pool" in run]


def _assert_mamba(fit: SglangFit, run: dict[str, Any]) -> None:
    p = run["pool"]
    assert fit.geometry is not None and fit.budget.mamba is not None
    assert fit.geometry.cell_bytes == p["cell_size_bytes"]
    assert fit.geometry.draft_layers == (p["eagle_draft_num_layers"] or 0)
    if "refusal" in p:  # SGLang's _profile_available_bytes refusal after the state and intermediate carve
        assert fit.budget.refusal == p["refusal"] and not fit.fits
        return
    assert fit.budget.budget_bytes == p["profiled_budget_bytes"]
    assert fit.budget.mamba.max_mamba_cache_size == p["max_mamba_cache_size"]
    assert (fit.max_total_num_tokens, fit.max_running_requests) == (p["max_total_num_tokens"],
                                                                   p["max_running_requests"])


def test_a_path_less_nextn_on_qwen3_5_reserves_intermediate_state_and_adds_no_draft_rows() -> None:
    """Qwen3.5-27B on one H100 (avail 53.3011, pre 78.68 GiB; fraction 0.76756 and the 100 MiB multimodal
    reservation: rest 34.92 GiB). NEXTN without a
    draft path: eagle_draft_num_layers comes from the target config as written (no num_nextn_predict_layers), so
    the cell stays 16 full layers' 65,536 B. _handle_max_mamba_cache (memory_budget_spec, ratio 5, D = 4):
    K = int((budget − per × 5) // (per × 1.8)) = 61 (114 without speculative decoding), the intermediate state
    per × (min(48, 61 // 5) + 1) × 4 comes off first; budget 19,939,758,989 B, 304,256 tokens, 12 requests
    (61 // 5; 22 without)."""
    run = RUNS["qwen3.5-27b_h100_nextn"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    _assert_mamba(fit, run)
    assert fit.budget.mamba is not None and fit.budget.mamba.ratio == 5
    per = fit.budget.mamba.per_req_bytes
    rest = 53.3011 - 78.68 * (1 - fit.defaults.mem_fraction_static) - 100 / 1024  # the 100 MiB multimodal reservation
    k = int((rest * 0.9 / 1.9 * (1 << 30) - per * 5) // (per * (1 + 4 / 5)))
    assert k == 61
    rest -= per * (min(48, k // 5) + 1) * 4 / (1 << 30) + (k + 1) * per / (1 << 30)
    assert int(rest * (1 << 30)) == 19939758989 and 19939758989 // 65536 == 304256


@pytest.mark.parametrize("run_id", MAMBA_RUNS)
def test_mamba_speculative_runs_match_the_oracle_budget_state_tokens_and_requests(run_id: str) -> None:
    """Every Mamba-hybrid speculative oracle run (SGLang's own _profile_available_bytes on the grid case's free
    memory): the resolved arguments, the cell (a draft path given: the draft-mode config's one MTP layer), the
    budget after the state and intermediate carve, the state slots, the tokens and the running requests."""
    run = RUNS[run_id]
    fit = _plan(run)
    _assert_resolved(fit, run)
    _assert_mamba(fit, run)


def test_a_given_mamba_cache_size_with_speculative_state_can_leave_no_kv_budget() -> None:
    """--max-mamba-cache-size 256 with NEXTN on Qwen3.5-27B / one H100: 257 state slots and the intermediate
    state per × (min(48, 256 // 5) + 1) × 4 leave nothing, so SGLang refuses with its minimum-fraction words."""
    run = RUNS["qwen3.5-27b_h100_nextn_mamba256"]
    fit = _plan(run)
    assert fit.budget.refusal == run["pool"]["refusal"]
    assert "Raise --mem-fraction-static above 0.323" in run["pool"]["refusal"]


SWA_DRAFT_RUNS = [r for r, run in RUNS.items() if (run.get("pool") or {}).get("pool_configurator") ==
                  "HybridSWAPoolConfigurator" and run["resolved"]["speculative_algorithm"] != "NGRAM"]


def _assert_swa(fit: SglangFit, run: dict[str, Any]) -> None:
    p = run["pool"]
    assert fit.geometry is not None and fit.geometry.swa is not None
    assert fit.geometry.cell_size == pytest.approx(p["cell_size_bytes"], rel=0, abs=1e-6)
    assert fit.geometry.draft_layers == (p["eagle_draft_num_layers"] or 0)
    pool = _pool_of(fit, run)
    assert (pool.max_total_num_tokens, pool.swa_tokens, pool.max_running_requests) == (
        p["full_max_total_num_tokens"], p["swa_max_total_num_tokens"], p["max_running_requests"])


def test_a_non_swa_draft_beside_a_sliding_window_pool_puts_all_its_rows_in_the_full_pool() -> None:
    """HybridSWAPoolConfigurator.__init__: gpt-oss-120b at TP 2 (4 KV heads × (64 + 64) × 2 B = 1,024 B per layer,
    18 full + 18 sliding layers, swa_full_tokens_ratio 0.8) with Llama-3.1-8B as its EAGLE draft (32 layers, not a
    hybrid SWA config: eagle_draft_swa_num_layers unset): the draft's 32 rows join the full side at the target's
    per-layer size, (18 + 32) × 1,024 = 51,200, + 0.8 × 1,024 × 18 = 65,945.6 B; 60 GiB // 65,945.6 = 976,934 full
    tokens, int(976,934 × 0.8) = 781,547 sliding."""
    run = RUNS["gpt-oss-120b_h100_tp2_eagle_llama-3.1-8b"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    assert fit.geometry is not None and fit.geometry.cell_bytes == (18 + 32) * 1024
    assert int(BUDGET // ((18 + 32) * 1024 + 0.8 * 1024 * 18)) == 976934
    _assert_swa(fit, run)


def test_a_hybrid_swa_draft_splits_its_rows_between_the_two_pools() -> None:
    """gpt-oss-20b as gpt-oss-120b's STANDALONE draft at TP 4 (2 KV heads: 512 B per layer): its 24 layers are 12
    sliding (eagle_draft_swa_num_layers) and 12 full, so (18 + 12) × 512 = 15,360 + 0.8 × 512 × (18 + 12) =
    12,288 → 27,648 B."""
    run = RUNS["gpt-oss-120b_h200_tp4_standalone_gpt-oss-20b"]
    fit = _plan(run)
    _assert_resolved(fit, run)
    assert fit.geometry is not None and (fit.geometry.draft_layers, fit.geometry.draft_swa_layers) == (24, 12)
    assert fit.geometry.cell_size == pytest.approx(15360 + 0.8 * 512 * 30) == 27648
    _assert_swa(fit, run)


@pytest.mark.parametrize("run_id", SWA_DRAFT_RUNS)
def test_swa_draft_runs_match_the_oracle_cell_and_both_pools(run_id: str) -> None:
    """Every EAGLE/EAGLE3/STANDALONE/NEXTN run beside a hybrid sliding-window pool: the resolved arguments, the
    float cell, the full and sliding token counts and the running requests, exactly (the oracle cannot build
    these pools on meta tensors for their log line: Tensor.item() on the SWA pool's index)."""
    run = RUNS[run_id]
    fit = _plan(run)
    _assert_resolved(fit, run)
    _assert_swa(fit, run)


@pytest.mark.parametrize(("model", "fields", "draft", "words"), [
    # DeepSeek-V4's draft is modelled at PP 1 (test_sglang_dsv4.py; NEXTN refused there in SGLang's words)
    ("deepseek-ai--DeepSeek-V4-Flash", {"tp": 4, "pp": 2, "speculative_algorithm": "EAGLE",
                                        "speculative_eagle_topk": 1, "speculative_num_steps": 3,
                                        "speculative_num_draft_tokens": 4}, None,
     "pipeline parallelism with a sliding-window, Mamba or DSA pool"),
    ("Qwen--Qwen3.5-27B", {"pp": 2, "speculative_algorithm": "NEXTN"}, None,
     "pipeline parallelism with a sliding-window, Mamba or DSA pool"),
    ("meta-llama--Meta-Llama-3.1-8B", {"pp": 2, "speculative_algorithm": "EAGLE",
                                       "speculative_draft_model_path": "meta-llama/Meta-Llama-3.1-8B"}, None,
     "speculative decoding under pipeline parallelism"),
    ("google--gemma-4-E2B-it", {"speculative_algorithm": "NEXTN"}, "google--gemma-4-E2B-it-assistant",
     "SGLang promotes NEXTN/EAGLE to FROZEN_KV_MTP"),
])
def test_the_speculative_pools_still_unmodelled_are_refused_with_the_reason(
        model: str, fields: dict[str, Any], draft: str | None, words: str) -> None:
    """DeepSeek-V4's MTP draft under PP, PP under any draft, a Gemma-4 assistant draft (FROZEN_KV_MTP):
    kvplan's words."""
    spec = sglang_goldens.model_spec(model)
    draft_spec = sglang_goldens.model_spec(draft) if draft else None
    if draft_spec is not None:
        fields = {**fields, "speculative_draft_model_path": draft_spec.name}
    if fields.get("speculative_draft_model_path") == "meta-llama/Meta-Llama-3.1-8B":
        fields["speculative_draft_model_path"] = spec.name
    with pytest.raises(InvalidParameter, match="not modelled") as exc:
        plan_sglang_fit(spec, get_gpu("h200"), SglangDeployment(**fields), weights_bytes=0, weights_range=(0, 0),
                        measured=FREE, draft=draft_spec)
    assert words in str(exc.value)
