"""`kvplan check` from the command line: exit codes 0/1/2, every --format (JUnit parsed back, GitHub
annotations and step summary compared as exact strings), --output written atomically, --offline, and the
example plan shipped in examples/."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.ci.checks import evaluate_deployment
from kvplan.ci.plan import load_plan
from kvplan.cli.app import app
from kvplan.hardware.gpus import get_gpu
from tests.conftest import CONFIGS, load_fixture, run_kvplan

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
PLANS = ROOT / "tests" / "fixtures" / "plans"
PASSING = str(PLANS / "passing.yaml")
FAILING = str(PLANS / "failing.yaml")
FAILING_REL = "tests/fixtures/plans/failing.yaml"
EXAMPLE = str(ROOT / "examples" / "plan.yaml")
QWEN7 = str(CONFIGS / "Qwen--Qwen2.5-7B")

VLLM_REFUSAL = (
    "vLLM would not start (refuses: max_model_len): To serve at least one request with the model's max seq len "
    "(32768), (1.75 GiB KV cache is needed, which is larger than the available KV cache memory (1.0 GiB). Based on "
    "the available memory, the estimated maximum model length is 18704. Try increasing `gpu_memory_utilization` "
    "(which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
    "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


def invoke(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["check", *args], env=env, catch_exceptions=False)


# --- exit codes -----------------------------------------------------------------------------------------


def test_passing_plan_exits_0_with_the_table() -> None:
    result = invoke(PASSING)
    assert result.exit_code == 0, result.stderr
    assert "All 5 requirements hold." in result.stdout
    assert "chat: ../configs/Qwen--Qwen2.5-7B on 1 × h100-sxm" in result.stdout
    assert result.stderr == ""


def test_failing_plan_exits_1_and_says_why_for_each_failure() -> None:
    result = invoke(FAILING)
    assert result.exit_code == 1
    text = " ".join(result.stdout.split())  # the console wraps long lines
    assert "4 of 6 requirements fail." in text
    assert (f"✗ {FAILING}:9: chat min_concurrency: 4 requests of 4,096 tokens run at once (1,169 usable blocks ÷ 256 "
            "per request); required ≥ 5") in text
    assert f"✗ {FAILING}:18: too-long starts: vLLM would not start (refuses: max_model_len)" in text


@pytest.mark.parametrize(("plan", "stderr"), [
    ("deployments: [{name: a, model: ./nope, gpu: h100, require: {starts: true}}]\n",
     "Error: {plan}:1: deployments[0].model: no such file or folder: {dir}/nope\n"),
    (f"deployments: [{{name: a, model: {QWEN7}, gpu: h1000, require: {{starts: true}}}}]\n",
     "Error: {plan}:1: deployments[0].gpu: unknown GPU 'h1000' (did you mean h100, h100-80gb, v100?)\n"),
    (f"deployments: [{{name: a, model: {QWEN7}, gpu: h100, require: {{min_concurency: 1}}}}]\n",
     "Error: {plan}:1: deployments[0].require.min_concurency: unknown key (did you mean min_concurrency?)\n"),
    ("[1, 2]\n", "Error: {plan}:1: the plan must be a mapping with a `deployments:` list, not a list\n"),
])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, plan: str, stderr: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(plan, encoding="utf-8")
    result = invoke(str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == stderr.format(plan=path, dir=tmp_path)


def test_missing_plan_file_exits_2() -> None:
    result = invoke("no/such/plan.yaml")
    assert (result.exit_code, result.stderr) == (2, "Error: no/such/plan.yaml: no such file\n")


def test_alias_bomb_exits_2_quickly(tmp_path: Path) -> None:
    from tests.test_check_plan import BILLION_LAUGHS

    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS, encoding="utf-8")
    result = run_kvplan(["check", str(path)], timeout=20)
    assert result.returncode == 2
    assert "YAML nodes (aliases expanding?): refused" in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


# --- formats --------------------------------------------------------------------------------------------


def test_json_equals_the_core_result() -> None:
    result = invoke(FAILING, "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert (data["schema_version"], data["kind"], data["plan"], data["passed"]) == (2, "check", FAILING, False)
    assert (data["num_requirements"], data["num_failed"]) == (6, 4)
    plan = load_plan(FAILING)
    core = evaluate_deployment(plan.deployments[0], load_fixture("Qwen--Qwen2.5-7B"), get_gpu("h100"))
    chat = data["deployments"][0]
    assert chat["num_gpu_blocks"] == core.num_gpu_blocks == 1170
    assert [c["measured"] for c in chat["checks"]] == [c.measured for c in core.checks]
    assert chat["checks"][1] == {
        "requirement": "min_concurrency", "key": "deployments[0].require.min_concurrency", "line": 9,
        "passed": False, "comparison": ">=", "required": 5, "measured": 4, "unit": "requests", "margin": -1,
        "margin_pct": -20.0, "context": 4096, "batch": None, "concurrency": None,
        "message": "4 requests of 4,096 tokens run at once (1,169 usable blocks ÷ 256 per request); required ≥ 5",
    }
    assert invoke(FAILING, "--json").stdout == result.stdout


def test_junit_parses_with_a_suite_per_deployment_and_a_case_per_requirement() -> None:
    result = invoke(FAILING, "--format", "junit")
    assert result.exit_code == 1
    root = ET.fromstring(result.stdout)
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "6", "4", "0")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        ("chat", "5", "3"), ("too-long", "1", "1")]
    props = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert (props["gpu"], props["num_gpu_blocks"], props["kv_cache_tokens"]) == ("h100-sxm", "1170", "18720")
    cases = suites[0].findall("testcase")
    assert [(c.get("name"), c.get("classname"), c.get("line"), c.find("failure") is not None) for c in cases] == [
        ("starts", "chat", "8", False), ("min_concurrency", "chat", "9", True), ("no_preemption", "chat", "10", True),
        ("min_kv_tokens", "chat", "11", False), ("min_headroom_pct", "chat", "12", True)]
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("type") == "min_concurrency"
    assert failure.get("message") == ("4 requests of 4,096 tokens run at once (1,169 usable blocks ÷ 256 per "
                                      "request); required ≥ 5")
    assert failure.text == (f"required ≥ 5 requests at 4,096 tokens, measured 4 requests, margin −1 (−20%)\n"
                            f"{FAILING}:9: deployments[0].require.min_concurrency")
    starts = suites[1].find("testcase/failure")
    assert starts is not None and starts.get("message") == VLLM_REFUSAL


def test_junit_escapes_markup_in_messages(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(Path(PASSING).read_text(encoding="utf-8").replace("name: chat", "name: 'a<b & \"c\"'")
                    .replace("../configs", str(CONFIGS)), encoding="utf-8")
    result = invoke(str(plan), "-f", "junit")
    assert ET.fromstring(result.stdout).find("testsuite").get("name") == 'a<b & "c"'  # type: ignore[union-attr]


EXPECTED_ANNOTATIONS = f"""\
::error file={FAILING_REL},line=9,title=kvplan check%3A chat min_concurrency::min_concurrency failed: required ≥ 5 \
requests, measured 4 requests, margin −1 (−20%25): 4 requests of 4,096 tokens run at once (1,169 usable blocks ÷ 256 \
per request); required ≥ 5
::error file={FAILING_REL},line=10,title=kvplan check%3A chat no_preemption::no_preemption failed: required ≥ 8 \
requests, measured 4 requests, margin −4 (−50%25): 8 requests of 4,096 tokens need 2,048 blocks but only 1,169 are \
usable: preemption is possible from the 5th such request running at once.
::error file={FAILING_REL},line=12,title=kvplan check%3A chat min_headroom_pct::min_headroom_pct failed: required \
≥ 13%25, measured −75.2%25, margin −88.2 pts: 8 requests of 4,096 tokens need 2,048 KV blocks but only 1,169 are \
usable (879 short); required ≥ 13%25 left
::error file={FAILING_REL},line=18,title=kvplan check%3A too-long starts::starts failed: {VLLM_REFUSAL}
kvplan check {FAILING}: 4 of 6 requirements fail.
"""

EXPECTED_SUMMARY = f"""\
## ❌ kvplan check: 4 of 6 requirements fail.

Plan: `{FAILING_REL}`

### ❌ chat

`../configs/Qwen--Qwen2.5-7B` on 1 × `h100-sxm`: max_model_len 4,096, max_num_seqs 8, 1,170 KV blocks \
(18,720 tokens)

| requirement | at | required | measured | margin | result |
|---|---|--:|--:|--:|---|
| `starts` |   | starts | starts |   | ✅ pass |
| `min_concurrency` | 4,096 tokens | ≥ 5 requests | 4 requests | −1 (−20%) | ❌ **FAIL** |
| `no_preemption` | 8 × 4,096 tokens | ≥ 8 requests | 4 requests | −4 (−50%) | ❌ **FAIL** |
| `min_kv_tokens` |   | ≥ 18,720 tokens | 18,720 tokens | 0 | ✅ pass |
| `min_headroom_pct` | 8 × 4,096 tokens | ≥ 13% | −75.2% | −88.2 pts | ❌ **FAIL** |

### ❌ too-long

`../configs/Qwen--Qwen2.5-7B` on 1 × `h100-sxm`: max_model_len 32,768, max_num_seqs 1,024, 1,170 KV blocks \
(18,720 tokens)

| requirement | at | required | measured | margin | result |
|---|---|--:|--:|--:|---|
| `starts` |   | starts | refuses: max_model_len |   | ❌ **FAIL** |

### Why

- **chat** `min_concurrency` ({FAILING_REL}:9): 4 requests of 4,096 tokens run at once (1,169 usable blocks ÷ 256 \
per request); required ≥ 5
- **chat** `no_preemption` ({FAILING_REL}:10): 8 requests of 4,096 tokens need 2,048 blocks but only 1,169 are \
usable: preemption is possible from the 5th such request running at once.
- **chat** `min_headroom_pct` ({FAILING_REL}:12): 8 requests of 4,096 tokens need 2,048 KV blocks but only 1,169 \
are usable (879 short); required ≥ 13% left
- **too-long** `starts` ({FAILING_REL}:18): {VLLM_REFUSAL}

"""


def test_github_annotations_point_at_the_failing_lines_and_the_summary_is_appended(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    env = {"GITHUB_WORKSPACE": str(ROOT), "GITHUB_STEP_SUMMARY": str(summary)}
    result = invoke(FAILING, "--format", "github", env=env)
    assert result.exit_code == 1
    assert result.stdout == EXPECTED_ANNOTATIONS
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + EXPECTED_SUMMARY


def test_github_on_a_passing_plan_prints_no_annotation(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    env = {"GITHUB_WORKSPACE": str(ROOT), "GITHUB_STEP_SUMMARY": str(summary)}
    result = invoke(PASSING, "-f", "github", env=env)
    assert (result.exit_code, result.stdout) == (0, f"kvplan check {PASSING}: All 5 requirements hold.\n")
    assert summary.read_text(encoding="utf-8").startswith("## ✅ kvplan check: All 5 requirements hold.\n")


def test_github_without_step_summary_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    result = invoke(FAILING, "-f", "github", env={"GITHUB_WORKSPACE": str(ROOT)})
    assert result.exit_code == 1 and list(tmp_path.iterdir()) == []


def test_annotation_properties_and_data_are_escaped() -> None:
    from kvplan.render.github import escape_data, escape_property

    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%") == "a%3A b%2C c%25"


# --- --output ---------------------------------------------------------------------------------------------


def test_output_writes_the_report_to_a_file_and_stdout_stays_empty(tmp_path: Path) -> None:
    target = tmp_path / "report.xml"
    result = invoke(FAILING, "-f", "junit", "--output", str(target))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"4 of 6 requirements fail. Report written to {target}.\n"
    assert ET.fromstring(target.read_text(encoding="utf-8")).get("failures") == "4"
    assert [p.name for p in tmp_path.iterdir()] == ["report.xml"]  # no temporary file left


def test_output_table_is_plain_text(tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    assert invoke(PASSING, "-o", str(target)).exit_code == 0
    text = target.read_text(encoding="utf-8")
    assert "\x1b[" not in text and "All 5 requirements hold." in text


def test_output_is_atomic_when_the_rename_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.json"
    target.write_text("previous report\n", encoding="utf-8")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    result = invoke(PASSING, "--json", "-o", str(target))
    assert result.exit_code == 2
    assert result.stderr == f"Error: --output: cannot write {target}: No space left on device\n"
    assert target.read_text(encoding="utf-8") == "previous report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_output_into_a_missing_folder_is_exit_2(tmp_path: Path) -> None:
    result = invoke(PASSING, "-o", str(tmp_path / "nope" / "r.txt"))
    assert result.exit_code == 2 and result.stderr.startswith("Error: --output: cannot write")


# --- offline and the Hub cache --------------------------------------------------------------------------


def test_offline_resolves_hub_models_from_the_cache(tmp_path: Path, hub_env: dict[str, str]) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("deployments:\n  - name: small\n    model: Qwen/Qwen2.5-1.5B\n    gpu: h100\n"
                    "    vllm: {max-model-len: 8192}\n    require: {starts: true}\n", encoding="utf-8")
    online = run_kvplan(["check", str(plan), "--json"], env=hub_env)
    assert online.returncode == 0, online.stderr
    dead = {**hub_env, "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens there
    offline = run_kvplan(["check", str(plan), "--json", "--offline"], env=dead)
    assert offline.returncode == 0, offline.stderr
    # Online, the Hub's safetensors headers give the stored weight bytes, as `kvplan fit` uses them (466,750,464:
    # tests/conftest.py), and the online run caches their counts beside config.json (model/hub.py:_store_counts);
    # offline they are read back, so the plan is the same one (it was the analytic count's, 3,087,428,608 bytes:
    # 154,749 blocks, 2,475,984 tokens; tests/test_bad_input_round5.py pins the note when they are not cached).
    got, want = json.loads(offline.stdout), json.loads(online.stdout)
    assert [(d["num_gpu_blocks"], d["kv_cache_tokens"]) for d in want["deployments"]] == [(160_157, 2_562_512)]
    assert [(d["num_gpu_blocks"], d["kv_cache_tokens"]) for d in got["deployments"]] == [(160_157, 2_562_512)]
    assert got["deployments"] == want["deployments"]
    assert {k: v for k, v in got.items() if k != "deployments"} == {k: v for k, v in want.items() if k != "deployments"}

    empty = {**dead, "HF_HOME": str(tmp_path / "empty-cache")}
    miss = run_kvplan(["check", str(plan), "--offline"], env=empty)
    assert miss.returncode == 2
    assert miss.stderr == (f"Error: {plan}:3: deployments[0].model: config.json of Qwen/Qwen2.5-1.5B is not in the "
                           "local cache and HF_HUB_OFFLINE is set (unset HF_HUB_OFFLINE once to download it)\n")


def test_offline_flag_is_undone_after_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert invoke(PASSING, "--offline").exit_code == 0
    assert "HF_HUB_OFFLINE" not in os.environ


def test_warnings_for_unmodelled_options_go_to_stderr(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(Path(PASSING).read_text(encoding="utf-8").replace("../configs", str(CONFIGS))
                    .replace("      max-num-seqs: 8\n", "      max-num-seqs: 8\n      swap-space: 4\n"),
                    encoding="utf-8")
    result = invoke(str(plan), "--json")
    assert result.exit_code == 0
    json.loads(result.stdout)
    assert result.stderr == (f"Warning: {plan}:11: deployments[0].vllm.swap-space: vLLM 0.33 has no --swap-space (V1 "
                             "preempts by recomputing; no GPU memory); planned without it\n")


# --- the shipped example --------------------------------------------------------------------------------


def test_the_example_plan_passes_offline_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(EXAMPLE, "--offline", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["passed"] and [d["name"] for d in data["deployments"]] == ["chat", "long-context", "small"]
    kinds = {c["requirement"] for d in data["deployments"] for c in d["checks"]}
    assert kinds == {"starts", "min_concurrency", "no_preemption", "min_kv_tokens", "min_decode_throughput",
                     "max_itl_ms", "max_p99_ttft_ms", "min_headroom_pct"}
    assert result.stderr == ""


def test_check_help_lists_formats_and_examples() -> None:
    result = runner.invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "kvplan check examples/plan.yaml" in result.stdout
    assert "table|json|junit|github" in result.stdout
