"""Speculative decoding with a separate draft model (`--speculative-config '{"method": "draft_model", …}'`)
against vLLM 0.33's CUDA planner with the draft built (tests/fixtures/oracle-cuda/extra/*-draft*.json, made by
tools/cuda_oracle/draft_model_oracle.py): Qwen3-32B / 14B / 8B targets with the Qwen3-0.6B draft."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from tests.conftest import CONFIGS, json_out, run_kvplan
from tests.hubserver import HubServer, Repo

runner = CliRunner()
EXTRA = CONFIGS.parent / "oracle-cuda" / "extra"
CORPUS = CONFIGS.parent / "corpus" / "configs"
DRAFT = CORPUS / "Qwen--Qwen3-0.6B"
QWEN3_32B = CORPUS / "Qwen--Qwen3-32B"
QWEN3_14B = CORPUS / "Qwen--Qwen3-14B"
QWEN3_8B = CONFIGS / "Qwen--Qwen3-8B"
KV_20GIB = "21474836480"


def _golden(case: str) -> dict[str, Any]:
    return json.loads((EXTRA / f"{case}.json").read_text())  # type: ignore[no-any-return]


def _capacity(case: str) -> tuple[int, int, float, int]:
    kv = _golden(case)["plan"]["kv_cache_config"]
    return kv["num_blocks"], kv["kv_cache_size_tokens"], kv["max_concurrency"], kv["max_model_len"]


def _spec(**extra: Any) -> str:
    return json.dumps({"method": "draft_model", "model": str(DRAFT), **extra})


def _fit(*args: str, weights: tuple[str, ...] = ("--weights-memory", "0")) -> dict[str, Any]:
    result = runner.invoke(app, ["fit", *args, "--gpu", "h100", "--max-model-len", "8192",
                                 "--kv-cache-memory-bytes", KV_20GIB, *weights, "--json"])
    assert result.exit_code in (0, 1), result.output  # 1: does not start (Qwen3-32B at TP 1 on one H100)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _numbers(r: dict[str, Any]) -> tuple[int, int, float, int]:
    cache, sched = r["cache"], r["scheduler"]
    return cache["num_gpu_blocks"], cache["kv_cache_tokens"], sched["max_concurrency"], sched["max_model_len"]


# (case, target, kvplan flags, speculative-config extras, golden blocks, tokens)
CASES = [
    ("Qwen--Qwen3-32B__h100-mml8192-draftx3", QWEN3_32B, (), {"num_speculative_tokens": 3}, 3561, 56976),
    ("Qwen--Qwen3-32B__h100-mml8192-draftx5", QWEN3_32B, (), {"num_speculative_tokens": 5}, 3561, 56976),
    ("Qwen--Qwen3-32B__h100-tp2-mml8192-draftx3", QWEN3_32B, ("-tp", "2"), {"num_speculative_tokens": 3},
     7123, 113968),
    ("Qwen--Qwen3-32B__h100-tp2-mml8192-draftx5", QWEN3_32B, ("-tp", "2"), {"num_speculative_tokens": 5},
     7123, 113968),
    ("Qwen--Qwen3-32B__h100-tp2-mml8192-draftx3-dtp1", QWEN3_32B, ("-tp", "2"),
     {"num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}, 7123, 113968),
    ("Qwen--Qwen3-32B__h100-pp2-mml8192-draftx3", QWEN3_32B, ("-pp", "2"), {"num_speculative_tokens": 3},
     7123, 113968),
    ("Qwen--Qwen3-14B__h100-mml8192-draftx5", QWEN3_14B, (), {"num_speculative_tokens": 5}, 4818, 77088),
    ("Qwen--Qwen3-8B__h100-mml8192-draftx3", QWEN3_8B, (), {"num_speculative_tokens": 3}, 5120, 81920),
    ("Qwen--Qwen3-8B__h100-mml8192-draftx3-dfp8", QWEN3_8B, (), {"num_speculative_tokens": 3, "kv_cache_dtype": "fp8"},
     6553, 104848),
]


@pytest.mark.parametrize(("case", "target", "flags", "extra", "blocks", "tokens"), CASES, ids=[c[0] for c in CASES])
def test_draft_model_layers_join_the_targets_kv_cache_as_vllm_plans_them(
        case: str, target: Path, flags: tuple[str, ...], extra: dict[str, Any], blocks: int, tokens: int) -> None:
    """The draft's 28 layers (8 KV heads × 128, sharded like the target's) join the target's group: 20 GiB over
    92 layers for Qwen3-32B, 64 for Qwen3-8B; an fp8 draft cache halves the draft's share of each block."""
    r = _fit(str(target), *flags, "--speculative-config", _spec(**extra))
    assert _numbers(r) == _capacity(case)
    assert (r["cache"]["num_gpu_blocks"], r["cache"]["kv_cache_tokens"]) == (blocks, tokens)


def test_the_draft_counts_once_per_block_whatever_the_number_of_speculative_tokens() -> None:
    assert _capacity("Qwen--Qwen3-32B__h100-mml8192-draftx3") == _capacity("Qwen--Qwen3-32B__h100-mml8192-draftx5")
    r = _fit(str(QWEN3_32B), "--speculative-config", _spec(num_speculative_tokens=3))
    assert r["scheduler"]["max_concurrency"] == 56976 / 8192 and [g["num_layers"] for g in r["cache"]["groups"]] == [92]


def test_preemption_counts_the_drafts_lookahead_slots() -> None:
    """The scheduler allocates num_lookahead_tokens (= 3) slots past each request (config/vllm.py:
    num_lookahead_tokens): a 8,192-token request holds 513 blocks of 16, so 5,119 usable blocks run 9 at once."""
    r = _fit(str(QWEN3_8B), "--speculative-config", _spec(num_speculative_tokens=3), "--concurrency", "10")
    p = r["verdict"]["preemption"]
    assert (p["blocks_per_request"], p["max_requests_at_context"]) == (513, 5119 // 513)
    assert "(+3 draft slots each)" in p["explanation"]


def test_a_model_with_no_method_and_no_eagle_in_its_name_is_a_draft_model() -> None:
    spec = json.dumps({"model": str(DRAFT), "num_speculative_tokens": 5})
    r = _fit(str(QWEN3_8B), "--speculative-config", spec)
    assert _numbers(r) == _capacity("Qwen--Qwen3-8B__h100-mml8192-draftx5-nomethod") == (5120, 81920, 10.0, 8192)
    assert r["verdict"]["log_line"] == ("GPU KV cache size: 81,920 tokens, Maximum concurrency for 8,192 tokens per "
                                        "request: 10.00x")
    assert any("draft_model, 5 token(s)): 28 draft layer(s)" in n for n in r["notes"])


def test_a_shorter_draft_max_model_len_lowers_the_targets() -> None:
    """config/vllm.py:_limit_max_model_len_to_draft: 4,096 tokens per request, the same blocks."""
    r = _fit(str(QWEN3_8B), "--speculative-config", _spec(num_speculative_tokens=3, max_model_len=4096))
    assert _numbers(r) == _capacity("Qwen--Qwen3-8B__h100-mml8192-draftx3-dmml4096") == (5120, 81920, 20.0, 4096)
    assert r["verdict"]["log_line"] == ("GPU KV cache size: 81,920 tokens, Maximum concurrency for 4,096 tokens per "
                                        "request: 20.00x")
    assert r["settings_sources"]["max_model_len"].startswith("the draft model's")


def test_a_pasted_vllm_serve_line_with_a_draft_model_plans_like_the_flags() -> None:
    spec = _spec(num_speculative_tokens=3)
    result = runner.invoke(app, ["fit", "--gpu", "h100", "--json", "--vllm-cmd",
                                 f"vllm serve {QWEN3_32B} -tp 2 --max-model-len 8192 --kv-cache-memory-bytes "
                                 f"{KV_20GIB} --speculative-config '{spec}'"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert _numbers(r) == _capacity("Qwen--Qwen3-32B__h100-tp2-mml8192-draftx3") == (7123, 113968, 113968 / 8192, 8192)
    assert r["verdict"]["log_line"] == ("GPU KV cache size: 113,968 tokens, Maximum concurrency for 8,192 tokens per "
                                        "request: 13.91x")


def test_a_plan_file_loads_the_draft_relative_to_the_plan(tmp_path: Path) -> None:
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / "qwen3-0.6b").symlink_to(DRAFT, target_is_directory=True)
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "deployments:\n"
        "  - name: qwen3-32b-draft\n"
        f"    model: {QWEN3_32B}\n"
        "    gpu: h100\n"
        "    vllm:\n"
        "      tensor_parallel_size: 2\n"
        "      max_model_len: 8192\n"
        f"      kv_cache_memory_bytes: {KV_20GIB}\n"
        "      speculative_config: {method: draft_model, model: drafts/qwen3-0.6b, num_speculative_tokens: 5}\n"
        "    measured: {weights_memory: 0}\n"
        "    require:\n"
        "      starts: true\n", encoding="utf-8")
    result = runner.invoke(app, ["check", str(plan), "--json"])
    assert result.exit_code == 0, result.output
    [dep] = json.loads(result.stdout)["deployments"]
    assert dep["num_gpu_blocks"] == _capacity("Qwen--Qwen3-32B__h100-tp2-mml8192-draftx5")[0] == 7123


def test_the_draft_models_weights_load_on_every_gpu_with_the_targets() -> None:
    """v1/worker/gpu/model_runner.py:load_model counts the draft in "Model loading took": Qwen3-0.6B (tied
    embeddings, bf16) adds its TP share to each GPU."""
    from kvplan.model.hub import load_local
    from kvplan.vllm.memory.weights import estimate_weights

    draft = load_local(str(DRAFT))
    for tp in (1, 2):
        base = _fit(str(QWEN3_32B), "-tp", str(tp), weights=())
        with_draft = _fit(str(QWEN3_32B), "-tp", str(tp), "--speculative-config", _spec(num_speculative_tokens=3),
                          weights=())
        own = estimate_weights(draft, tp=tp, pp=1, arch="hopper").bytes
        assert with_draft["memory"]["weights_bytes"] - base["memory"]["weights_bytes"] == own
    assert 1.0 * 2**30 < estimate_weights(draft, tp=1, pp=1, arch="hopper").bytes < 1.3 * 2**30


def _refusal(target: Path, spec: str, *flags: str) -> str:
    result = runner.invoke(app, ["fit", str(target), "--gpu", "h100", "--max-model-len", "8192", *flags,
                                 "--speculative-config", spec])
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


def _oracle_refusal(case: str) -> str:
    return " ".join(str(_golden(case)["error"]).split())


@pytest.mark.parametrize(("case", "target", "flags", "extra", "sentence"), [
    ("Qwen--Qwen3-32B__h100-tp4-mml8192-draftx3-dtp2", QWEN3_32B, ("-tp", "4"),
     {"num_speculative_tokens": 3, "draft_tensor_parallel_size": 2},
     "speculative_draft_tensor_parallel_size=2 cannot be other value than 1 or target model tensor_parallel_size"),
    ("Qwen--Qwen3-8B__h100-mml8192-draftx3-tpkey", QWEN3_8B, (), {"num_speculative_tokens": 3,
                                                                  "tensor_parallel_size": 1},
     "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass "
     "'draft_tensor_parallel_size' instead."),
    ("Qwen--Qwen3-8B__h100-mml8192-draftx3-dmml16384", QWEN3_8B, (), {"num_speculative_tokens": 3,
                                                                      "max_model_len": 16384},
     "speculative_max_model_len=16384 cannot be larger than target_max_model_len=8192"),
    ("Qwen--Qwen3-8B__h100-mml8192-draft-notokens", QWEN3_8B, (), {},
     "A speculative model was provided, but `num_speculative_tokens` was not provided"),
    ("meta-llama--Meta-Llama-3.1-8B__h100-mml8192-draftx3-qwen", CONFIGS / "meta-llama--Meta-Llama-3.1-8B", (),
     {"num_speculative_tokens": 3},
     "Target and draft model should have the same vocabulary size. Target model vocab_size=128256. Draft model "
     "vocab_size=151936. Using models with different tokenizers can cause out-of-bounds errors during speculative "
     "decoding."),
], ids=["draft-tp", "tensor_parallel_size", "draft-max-model-len", "no-tokens", "vocabulary"])
def test_draft_model_refusals_use_vllms_sentences(case: str, target: Path, flags: tuple[str, ...],
                                                  extra: dict[str, Any], sentence: str) -> None:
    assert sentence in _oracle_refusal(case)
    assert sentence in _refusal(target, _spec(**extra), *flags)


def test_a_draft_longer_than_its_own_config_allows_is_refused() -> None:
    message = _refusal(QWEN3_8B, _spec(num_speculative_tokens=3, max_model_len=65536), "--max-model-len", "40960")
    assert "User-specified max_model_len (65536) is greater than the derived max_model_len (40960" in message


@pytest.mark.parametrize("key", ["use_heterogeneous_vocab", "parallel_drafting"])
def test_draft_model_options_that_send_vllm_to_model_runner_v1_are_refused(key: str) -> None:
    message = _refusal(QWEN3_8B, _spec(num_speculative_tokens=3, **{key: True}))
    assert f"{key} is not modelled by kvplan yet" in message


def test_the_draft_model_runs_without_cuda_graphs() -> None:
    """v1/worker/gpu/spec_decode/standalone_ar/speculator.py:capture is a no-op: the graph estimate counts the
    target's layers only (an EAGLE draft is captured with the target)."""
    base = _fit(str(QWEN3_8B))
    with_draft = _fit(str(QWEN3_8B), "--speculative-config", _spec(num_speculative_tokens=3))
    assert with_draft["memory"]["cuda_graph_bytes"] == base["memory"]["cuda_graph_bytes"] > 0


def test_a_draft_whose_architecture_vllm_does_not_serve_is_refused(tmp_path: Path) -> None:
    config = json.loads((DRAFT / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["Qwen3FooForCausalLM"]}))
    spec = json.dumps({"model": str(tmp_path), "num_speculative_tokens": 3})
    assert "Model architectures ['Qwen3FooForCausalLM'] are not supported for now" in _refusal(QWEN3_8B, spec)


def test_a_hub_draft_is_read_from_the_hub_in_fit_and_in_a_plan(hub: HubServer, hub_env: dict[str, str],
                                                               tmp_path: Path) -> None:
    """`model` as a Hub id: its config.json is fetched the way the target's is (never its code); a plan keeps
    it a Hub id."""
    hub.state.repos["Qwen/Qwen3-0.6B"] = Repo(files={"config.json": (DRAFT / "config.json").read_bytes()})
    spec = json.dumps({"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 3})
    r = json_out(run_kvplan(["fit", str(QWEN3_8B), "--gpu", "h100", "--max-model-len", "8192",
                             "--kv-cache-memory-bytes", KV_20GIB, "--speculative-config", spec, "--json"], env=hub_env))
    assert _numbers(r) == _capacity("Qwen--Qwen3-8B__h100-mml8192-draftx3") == (5120, 81920, 10.0, 8192)
    assert any(req.startswith(("GET /Qwen/Qwen3-0.6B/resolve/", "HEAD /Qwen/Qwen3-0.6B/resolve/"))
               for req in hub.state.requests)
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "deployments:\n"
        "  - name: qwen3-8b-draft\n"
        f"    model: {QWEN3_8B}\n"
        "    gpu: h100\n"
        f"    vllm: {{max_model_len: 8192, kv_cache_memory_bytes: {KV_20GIB}, speculative_config: {spec}}}\n"
        "    measured: {weights_memory: 0}\n"
        "    require: {starts: true}\n", encoding="utf-8")
    [dep] = json_out(run_kvplan(["check", str(plan), "--json"], env=hub_env))["deployments"]
    assert dep["num_gpu_blocks"] == 5120
