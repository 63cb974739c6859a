"""Plan files for `kvplan check`: the safe YAML walk, line numbers in every message, settings from the
three vLLM sources, and the limits that keep a hostile file from hanging the loader."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvplan.ci.plan import MAX_NODES, load_plan, parse_yaml
from kvplan.errors import ParseError
from kvplan.vllm.multimodal import ModalityLimit
from tests.conftest import CONFIGS

QWEN7 = str(CONFIGS / "Qwen--Qwen2.5-7B")


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ParseError) as info:
        load_plan(path)
    exc = info.value
    return f"{exc}" + (f" ({exc.hint})" if exc.hint else "")


def plan_text(require: str = "starts: true", extra: str = "") -> str:
    return (f"deployments:\n  - name: chat\n    model: {QWEN7}\n    gpu: h100\n{extra}"
            f"    require:\n      {require}\n")


# --- shape, lines and keys -------------------------------------------------------------------------


def test_the_issue_shape_loads_with_both_spellings_and_lines(tmp_path: Path) -> None:
    path = write(tmp_path, f"""\
deployments:
  - name: chat
    model: {QWEN7}
    gpu: h100
    num_gpus: 1
    vllm: {{tensor-parallel-size: 1, max_model_len: 32768, gpu-memory-utilization: 0.9}}
    require:
      starts: true
      min_concurrency: {{value: 8, context: 32768}}
""")
    dep = load_plan(path).deployments[0]
    s = dep.settings
    assert (s.parallel_config.tensor_parallel_size, s.model_config.max_model_len, s.cache_config.gpu_memory_utilization,
            dep.num_gpus) == (1, 32768, 0.9, 1)
    assert [(q.kind, q.line, q.value, q.context) for q in dep.requirements] == [
        ("starts", 8, None, None), ("min_concurrency", 9, 8, 32768)]
    assert dep.requirements[1].key == "deployments[0].require.min_concurrency"
    assert (dep.line, dep.lines["gpu"], dep.lines["vllm"]) == (2, 4, 6)


def test_unknown_requirement_names_key_and_line_with_the_suggestion(tmp_path: Path) -> None:
    text = plan_text("starts: true\n      min_concurency: {value: 8, context: 32768}")
    assert error_of(tmp_path, text) == (f"{tmp_path / 'plan.yaml'}:7: deployments[0].require.min_concurency: "
                                        "unknown key (did you mean min_concurrency?)")


@pytest.mark.parametrize(("text", "expected"), [
    ("deployment: []\n", ":1: deployment: unknown key (did you mean deployments?)"),
    ("- a\n- b\n", ":1: the plan must be a mapping with a `deployments:` list, not a list"),
    ("just text\n", ":1: the plan must be a mapping with a `deployments:` list, not the string 'just text'"),
    ("", ": the plan is empty (it needs a `deployments:` list)"),
    ("version: 1\n", ":1: the plan has no `deployments:` list"),
    ("version: 2\ndeployments: []\n", ":1: version: unsupported plan version 2 (this kvplan reads 1)"),
    ("deployments: []\n", ":1: deployments: expected a non-empty list of deployments, got a list"),
    ("deployments:\n  - name: a\n    gpu: h100\n    require: {starts: true}\n",
     ":2: deployments[0]: missing `model` (a Hub id or a path; or give it in vllm_cmd / vllm_config)"),
    ("deployments: [{name: a, model: x/y}]\n", ":1: deployments[0]: missing `gpu`"),
    ("deployments:\n  - {name: a, model: x/y, gpu: h100, require: {}}\n",
     ":2: deployments[0].require: no requirements (give at least one of starts, min_concurrency, no_preemption, "
     "min_kv_tokens, min_decode_throughput, max_itl_ms, max_p99_ttft_ms, min_headroom_pct)"),
    ("deployments: [1]\n",
     ":1: deployments[0]: expected a deployment (a mapping with name, model, gpu, require), got the number 1"),
    ("deployments: {\n", ":2: not valid YAML: expected the node content, but found '<stream end>'"),
    ("deployments: []\n---\nmore: 1\n",
     ":2: not valid YAML: expected a single document in the stream but found another document"),
    ("deployments:\n  - name: a\n    name: b\n", ":3: deployments[0].name: given twice (also on line 2)"),
    ("yes: 1\n", ":1: document: keys must be plain strings, got 'yes' (YAML 1.1 reads yes/no/on/off as "
                 "booleans: quote the key)"),
])
def test_bad_plans_say_file_line_and_key(tmp_path: Path, text: str, expected: str) -> None:
    assert error_of(tmp_path, text) == f"{tmp_path / 'plan.yaml'}{expected}"


@pytest.mark.parametrize(("require", "expected"), [
    ("starts: false", ":6: deployments[0].require.starts: expected `true` or `pessimistic`, got the boolean "
                      "False (`starts: true` judges kvplan's best estimate, `starts: pessimistic` the pessimistic "
                      "end of its range; remove the key to skip the check)"),
    ("min_kv_tokens: lots", ":6: deployments[0].require.min_kv_tokens: cannot read 'lots' as a whole number "
                            "(examples: 4096, 32k, 32K)"),
    ("min_kv_tokens: 0", ":6: deployments[0].require.min_kv_tokens: must be ≥ 1, got 0"),
    ("min_concurrency: {value: 8, contxt: 4096}",
     ":6: deployments[0].require.min_concurrency.contxt: unknown key (did you mean context?)"),
    ("min_decode_throughput: 500", ":6: deployments[0].require.min_decode_throughput: give a mapping: "
                                   "{value: …, batch: …}"),
    ("max_itl_ms: {value: 20}", ":6: deployments[0].require.max_itl_ms: missing `batch`"),
    ("max_itl_ms: {value: -1, batch: 8}", ":6: deployments[0].require.max_itl_ms.value: must be ≥ 0, got -1"),
    ("max_itl_ms: {value: .inf, batch: 8}",
     ":6: deployments[0].require.max_itl_ms.value: expected a finite number, got inf"),
    ("max_p99_ttft_ms: 500", ":6: deployments[0].require.max_p99_ttft_ms: needs a workload: give `workload:` here "
                             "or on the deployment"),
    ("min_headroom_pct: 20", ":6: deployments[0].require.min_headroom_pct: needs `concurrency` (and `context`): the "
                             "load to measure the headroom at (or add a no_preemption / min_concurrency requirement "
                             "to take it from)"),
    ("min_headroom_pct: 120", ":6: deployments[0].require.min_headroom_pct: a percentage ≤ 100, got 120"),
    ("no_preemption: 8", ":6: deployments[0].require.no_preemption: expected `true` or a mapping with concurrency "
                         "and context"),
    ("max_p99_ttft_ms: {value: 500, workload: {prompt_len: lots}}",
     ":6: deployments[0].require.max_p99_ttft_ms.workload.prompt_len: cannot read 'lots' (examples: 2048, "
     "uniform:512:4096, lognormal:256:0.5, empirical:lengths.txt)"),
    ("max_p99_ttft_ms: {value: 500, workload: {rate: 4}}",
     ":6: deployments[0].require.max_p99_ttft_ms.workload.rate: unknown key (did you mean request_rate?)"),
])
def test_bad_requirements_say_line_and_key(tmp_path: Path, require: str, expected: str) -> None:
    assert error_of(tmp_path, plan_text(require)) == f"{tmp_path / 'plan.yaml'}{expected}"


@pytest.mark.parametrize(("extra", "expected"), [
    ("    vllm: {max-model-length: 4096}\n",
     ":5: deployments[0].vllm.max-model-length: unknown key (did you mean max-model-len?)"),
    ("    vllm: {gpu-memory-utilization: 1.5}\n",
     ":5: deployments[0].vllm.gpu-memory-utilization: must be in (0, 1], got 1.5"),
    ("    vllm: {max_model_len: 4096, max-model-len: 8192}\n",
     ":5: deployments[0].vllm.max-model-len: given twice (also on line 5 as max_model_len)"),
    ("    vllm: {kv-cache-dtype: fp4}\n",
     ":5: deployments[0].vllm.kv-cache-dtype: must be one of auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, "
     "fp8_ds_mla, nvfp4_ds_mla, nvfp4, nvfp4_4over6, got 'fp4'"),
    ("    vllm: {tensor-parallel-size: 2}\n    num_gpus: 4\n",
     ":6: deployments[0].num_gpus: 4 GPUs, but tensor-parallel-size 2 × pipeline-parallel-size 1 uses 2"),
    ("    vllm_cmd: vllm serve Qwen/Qwen2.5-7B --max-model-length 4096\n",
     ":5: deployments[0].vllm_cmd: --max-model-length: unknown vLLM option (did you mean --max-model-len?)"),
    ("    vllm_cmd: vllm serve Qwen/Qwen2.5-7B --max-model-len\n",
     ":5: deployments[0].vllm_cmd: --max-model-len needs a value"),
    ("    vllm_config: missing.yaml\n", None),
    ("    revision: main\n", ":5: deployments[0].revision: a revision applies to Hub models, but '"),
    ("    measured: {weights: 15GiB}\n",
     ":5: deployments[0].measured.weights: unknown key (did you mean weights_memory?)"),
    ("    vllm_version: '0.5'\n", ":5: deployments[0].vllm_version: --vllm-version 0.5: kvplan models the V1 engine "
                                 "of vLLM 0.8 and later (older releases sized the cache with the V0 worker, whose "
                                 "accounting differs)"),
])
def test_bad_settings_say_line_and_key(tmp_path: Path, extra: str, expected: str | None) -> None:
    message = error_of(tmp_path, plan_text(extra=extra))
    if expected is None:
        assert message == f"{tmp_path / 'missing.yaml'}: no such file"
    else:
        assert message.startswith(f"{tmp_path / 'plan.yaml'}{expected}")


def test_duplicate_deployment_names_are_refused(tmp_path: Path) -> None:
    text = plan_text() + f"  - name: chat\n    model: {QWEN7}\n    gpu: h100\n    require: {{starts: true}}\n"
    assert error_of(tmp_path, text).endswith(":7: deployments[1].name: 'chat' is used twice (also on line 2)")


# --- safety ---------------------------------------------------------------------------------------------


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
deployments: *i
"""


def test_alias_bomb_stops_at_the_node_budget_quickly(tmp_path: Path) -> None:
    start = time.process_time()  # CPU time: a loaded machine does not count
    message = error_of(tmp_path, BILLION_LAUGHS)
    assert time.process_time() - start < 2.0  # 9⁹ ≈ 387 million nodes if expanded
    assert f"more than {MAX_NODES:,} YAML nodes (aliases expanding?): refused" in message


def test_self_referencing_alias_stops_at_the_depth_limit(tmp_path: Path) -> None:
    message = error_of(tmp_path, "deployments: &x [*x]\n")
    assert message == (f"{tmp_path / 'plan.yaml'}:1: deployments[0][0][0][0][0][0][0]…: nested deeper than 40 "
                       "levels (a self-referencing alias?)")


def test_python_tags_are_refused_not_constructed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = plan_text(f"starts: !!python/object/apply:os.system ['touch {marker}']")
    assert error_of(tmp_path, text) == (
        f"{tmp_path / 'plan.yaml'}:6: deployments[0].require.starts: unsupported YAML tag "
        "!!python/object/apply:os.system (use plain strings and numbers)")
    assert not marker.exists()


def test_timestamps_and_custom_tags_are_refused() -> None:
    with pytest.raises(ParseError, match="unsupported YAML tag !!timestamp"):
        parse_yaml("when: 2024-01-01\n", "p.yaml")
    with pytest.raises(ParseError, match="unsupported YAML tag !custom"):
        parse_yaml("x: !custom 1\n", "p.yaml")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "# " + "x" * (1 << 20) + "\n")
    with pytest.raises(ParseError, match=r"is more than a plan may be \(1 MiB\)"):
        load_plan(path)


# --- anchors, merge keys, x- keys -----------------------------------------------------------------------


def test_x_keys_hold_anchors_and_merge_keys_are_honoured(tmp_path: Path) -> None:
    path = write(tmp_path, f"""\
x-settings: &settings {{max-model-len: 8192, gpu-memory-utilization: 0.8}}
deployments:
  - name: a
    model: {QWEN7}
    gpu: h100
    vllm:
      <<: *settings
      gpu-memory-utilization: 0.85
    require: {{starts: true}}
""")
    s = load_plan(path).deployments[0].settings
    assert (s.model_config.max_model_len, s.cache_config.gpu_memory_utilization) == (8192, 0.85)


def test_an_explicit_key_after_a_merge_keeps_its_own_line(tmp_path: Path) -> None:
    text = (f"x-d: &d {{max-model-len: 8192}}\ndeployments:\n  - name: a\n    model: {QWEN7}\n    gpu: h100\n"
            "    vllm:\n      max-model-len: lots\n      <<: *d\n    require: {starts: true}\n")
    assert ":7: deployments[0].vllm.max-model-len: cannot read 'lots'" in error_of(tmp_path, text)


# --- the three vLLM sources ------------------------------------------------------------------------------


def test_config_file_then_command_line_then_mapping_override_in_that_order(tmp_path: Path) -> None:
    write(tmp_path, "model: Qwen/Qwen2.5-7B-Instruct\nport: 8000\nmax-model-len: 8192\nmax-num-seqs: 64\n"
                    "gpu-memory-utilization: 0.8\n", "serve.yaml")
    path = write(tmp_path, f"""\
deployments:
  - name: a
    model: {QWEN7}
    vllm_config: serve.yaml
    vllm_cmd: vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384 -tp 2 --host 0.0.0.0 --max-num-seqs=32
    vllm: {{max-num-seqs: 16}}
    gpu: h100
    require: {{starts: true}}
""")
    dep = load_plan(path).deployments[0]
    s = dep.settings
    assert (s.model_config.max_model_len, s.scheduler_config.max_num_seqs, s.parallel_config.tensor_parallel_size,
            s.cache_config.gpu_memory_utilization, dep.num_gpus) == (16384, 16, 2, 0.8, 2)
    assert dep.model == QWEN7 and dep.model_is_local and dep.warnings == ()


def test_model_and_revision_can_come_from_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, "deployments:\n  - name: a\n    gpu: h100\n"
                           "    vllm_cmd: vllm serve Qwen/Qwen2.5-7B --revision abc123\n    require: {starts: true}\n")
    dep = load_plan(path).deployments[0]
    assert (dep.model, dep.model_source, dep.model_is_local, dep.revision) == (
        "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B", False, "abc123")


def test_unmodelled_options_warn_and_unknown_harmless_ones_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, plan_text(extra="    vllm_cmd: vllm serve m --swap-space 4 --port 8000 --my-plugin x\n"
                                           "    vllm: {kv_offloading_size: 4, limit_mm_per_prompt: {image: 2}}\n"))
    deployment = load_plan(path).deployments[0]
    where = f"{tmp_path / 'plan.yaml'}"
    assert deployment.warnings == (
        f"{where}:5: deployments[0].vllm_cmd: --swap-space: vLLM 0.33 has no --swap-space (V1 preempts by "
        "recomputing; no GPU memory); planned without it",
        f"{where}:5: deployments[0].vllm_cmd: --my-plugin: ignored: kvplan does not know this vLLM option",
    )
    assert deployment.settings.cache_config.kv_offloading_size == 4.0  # modelled: the CPU tier
    # modelled: the towers
    assert deployment.settings.multimodal_config.limit_mm_per_prompt == (("image", ModalityLimit(count=2)),)


def test_num_gpus_alone_sets_tensor_parallel_size(tmp_path: Path) -> None:
    dep = load_plan(write(tmp_path, plan_text(extra="    num_gpus: 4\n    vllm: {pp: 2}\n"))).deployments[0]
    par = dep.settings.parallel_config
    assert (par.tensor_parallel_size, par.pipeline_parallel_size, dep.num_gpus) == (2, 2, 4)


def test_measured_memory_and_auto_max_model_len(tmp_path: Path) -> None:
    extra = "    measured: {weights-memory: 14GiB, cuda_graph_memory: 512MiB}\n    vllm: {max-model-len: auto}\n"
    s = load_plan(write(tmp_path, plan_text(extra=extra))).deployments[0].settings
    assert (s.measured.weights_bytes, s.measured.cuda_graph_bytes, s.model_config.max_model_len) == (
        14 * 2**30, 512 * 2**20, -1)


# --- models: relative to the plan, Hub ids ------------------------------------------------------------


def test_relative_model_paths_resolve_against_the_plan_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plan = load_plan(Path(__file__).parent / "fixtures" / "plans" / "passing.yaml")
    dep = plan.deployments[0]
    assert dep.model == "../configs/Qwen--Qwen2.5-7B"
    assert Path(dep.model_source).resolve() == (CONFIGS / "Qwen--Qwen2.5-7B").resolve()
    assert dep.model_is_local


def test_hub_ids_stay_hub_ids(tmp_path: Path) -> None:
    text = plan_text().replace(QWEN7, "Qwen/Qwen2.5-7B-Instruct").replace("    gpu:", "    revision: v1\n    gpu:")
    dep = load_plan(write(tmp_path, text)).deployments[0]
    assert (dep.model_source, dep.model_is_local, dep.revision) == ("Qwen/Qwen2.5-7B-Instruct", False, "v1")


def test_workload_on_the_deployment_serves_the_ttft_requirement(tmp_path: Path) -> None:
    extra = "    workload: {num_requests: 50, request_rate: inf, prompt_len: 'uniform:100:200', seed: 7}\n"
    q = load_plan(write(tmp_path, plan_text("max_p99_ttft_ms: 250", extra))).deployments[0].requirements[0]
    assert q.workload is not None
    assert (q.value, q.workload.num_requests, q.workload.request_rate, q.workload.prompt_len, q.workload.seed) == (
        250, 50, float("inf"), "uniform:100:200", 7)


def test_headroom_borrows_the_load_of_no_preemption(tmp_path: Path) -> None:
    require = "no_preemption: {concurrency: 16, context: 2048}\n      min_headroom_pct: 10"
    q = load_plan(write(tmp_path, plan_text(require))).deployments[0].requirements[1]
    assert (q.kind, q.concurrency, q.context, q.value) == ("min_headroom_pct", 16, 2048, 10)


def test_big_deployment_options_in_a_plan_reach_the_settings(tmp_path: Path) -> None:
    extra = ("    vllm: {dtype: half, dcp: 2, dp: 2, enable_expert_parallel: true, num_gpu_blocks_override: 1000,\n"
             "           speculative_config: {method: mtp, num_speculative_tokens: 2}, cpu_offload_gb: 2}\n")
    s = load_plan(write(tmp_path, plan_text(extra=extra))).deployments[0].settings
    par = s.parallel_config
    assert (s.model_config.dtype, par.decode_context_parallel_size, par.data_parallel_size,
            par.enable_expert_parallel) == ("half", 2, 2, True)
    assert (s.cache_config.num_gpu_blocks_override, s.offload_config.cpu_offload_bytes) == (1000, 2 * 2**30)
    assert s.speculative_config == {"method": "mtp", "num_speculative_tokens": 2}


def test_a_deployments_vllm_environment_comes_from_env_and_the_command_line(tmp_path: Path) -> None:
    """`env:` (names and values as in a shell) over the `vllm_cmd` line's leading `VLLM_…=` words; a token
    assignment on that line is dropped unread."""
    extra = ('    vllm_cmd: "HF_TOKEN=hf_x VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve m"\n'
             "    env: {VLLM_USE_V2_MODEL_RUNNER: 1, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: '0'}\n")
    s = load_plan(write(tmp_path, plan_text(extra=extra))).deployments[0].settings
    assert (s.env.use_v2_model_runner, s.env.estimate_cudagraphs, s.env.use_flashinfer_sampler) == (True, False, True)
    message = error_of(tmp_path, plan_text(extra="    env: {VLLM_USE_V2_MODEL_RUNNER: 'yes'}\n"))
    assert message.endswith(
        "plan.yaml:5: deployments[0].env: VLLM_USE_V2_MODEL_RUNNER='yes': vLLM reads it as an integer (0 or 1)")
    assert "a value is a string or an integer" in error_of(
        tmp_path, plan_text(extra="    env: {VLLM_USE_V2_MODEL_RUNNER: true}\n"))
