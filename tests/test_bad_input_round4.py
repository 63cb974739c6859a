"""Round 4 of the adversarial pass: each input below once ended in an internal error, a silent wrong answer or an
error that named the wrong thing; each now ends in the one `Error: …` line (exit 2) or the right answer."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CONFIGS, json_out, run_kvplan
from tests.hubserver import HubServer

QWEN_7B = str(CONFIGS / "Qwen--Qwen2.5-7B")
BAD_ID_HINT = "(Hub ids look like org/name: letters, digits, '-', '_' and '.')"


def _online(hub: HubServer, tmp_path: Path) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}


# --- a model name huggingface_hub refuses, online -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-1.5B@main", "Qwen/Qwen 2.5", "Qwen/Qwen2.5-1.5B\n", "a--b/c"])
def test_a_name_that_is_no_hub_id_is_one_error_line_online(hub: HubServer, tmp_path: Path, name: str) -> None:
    """Online, the cache bookkeeping before a download (hub.py:_cache_entries) asked huggingface_hub for the repo's
    cache folder, which validates the id and raised HFValidationError outside the error mapping: 'internal error'."""
    for args in (["size", name], ["fit", name, "--gpu", "h100", "--json"]):
        proc = run_kvplan(args, _online(hub, tmp_path))
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert proc.stderr == f"Error: {name!r} is neither a local path nor a Hub id {BAD_ID_HINT}\n"


def test_a_plan_naming_no_hub_id_points_at_its_model_line(hub: HubServer, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("deployments:\n  - name: a\n    model: Qwen/Qwen2.5-1.5B@main\n    gpu: h100\n"
                    "    require: {starts: true}\n", encoding="utf-8")
    proc = run_kvplan(["check", str(plan)], _online(hub, tmp_path))
    assert proc.returncode == 2
    assert proc.stderr == (f"Error: {plan}:3: deployments[0].model: 'Qwen/Qwen2.5-1.5B@main' is neither a local "
                           f"path nor a Hub id {BAD_ID_HINT}\n")


# --- a plan's unquoted vllm_version ------------------------------------------------------------------------------


@pytest.mark.parametrize("written, planned", [("0.10", "0.10"), ("0.20", "0.20"), ("0.9", "0.9"), ("'0.10'", "0.10")])
def test_an_unquoted_vllm_version_is_read_as_written(tmp_path: Path, written: str, planned: str) -> None:
    """YAML reads `vllm_version: 0.10` as the float 0.1: the plan was refused as 'vLLM 0.1' (older than 0.8)."""
    from kvplan.ci.plan import load_plan

    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    model: {QWEN_7B}\n    gpu: h100\n    vllm_version: {written}\n"
                    "    require: {starts: true}\n", encoding="utf-8")
    assert load_plan(plan).deployments[0].settings.vllm_version == planned
    json_out(run_kvplan(["check", str(plan), "--format", "json"]))


def test_a_vllm_version_that_is_no_release_is_refused_as_written(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    model: {QWEN_7B}\n    gpu: h100\n    vllm_version: 1.0e-1\n"
                    "    require: {starts: true}\n", encoding="utf-8")
    proc = run_kvplan(["check", str(plan)])
    assert proc.returncode == 2
    assert proc.stderr == (f"Error: {plan}:5: deployments[0].vllm_version: --vllm-version: cannot read '1.0e-1' "
                           "(examples: 0.33, 0.11.0)\n")


# --- a GPU file's figures are bounded as --gpu-memory is -------------------------------------------------------

GPU_FILE = ("gpus:\n  - id: mygpu\n    name: My GPU\n    vendor: nvidia\n    platform: cuda\n    memory_gb: 24\n"
            "    cuda_total_bytes: 25000000000\n    memory_bandwidth_bytes_per_s: 1.0e+12\n"
            "    flops: {bf16: 100.0e+12}\n    compute_capability: \"8.9\"\n")


@pytest.mark.parametrize("old, new, message", [
    ("cuda_total_bytes: 25000000000", "cuda_total_bytes: " + "9" * 50,
     "cuda_total_bytes 9999999999999999999999999999999999999999… is beyond any GPU (kvplan accepts at most 1 EiB)"),
    ("memory_bandwidth_bytes_per_s: 1.0e+12", "memory_bandwidth_bytes_per_s: 1.0e+300",
     "memory_bandwidth_bytes_per_s 1e+300 is beyond any GPU (kvplan accepts at most 1 EiB)"),
    ("memory_gb: 24", "memory_gb: 1.0e+12",
     "memory_gb 1000000000000.0 is beyond any GPU (kvplan accepts at most 1 EiB, 1.15e+09 GB)"),
])
def test_a_gpu_file_figure_past_1_eib_is_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    """cuda_total_bytes: 10**50 planned a GPU of 10**41 GiB (exit 0, 40-digit counts); --gpu-memory stops at 1 EiB."""
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text(GPU_FILE.replace(old, new), encoding="utf-8")
    for args in (["gpus", "--gpus-file", str(gpus)], ["fit", QWEN_7B, "--gpu", "mygpu", "--gpus-file", str(gpus)]):
        proc = run_kvplan(args)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"Error: {gpus}: GPU 'mygpu': {message}\n")


def test_a_gpu_file_of_real_figures_still_plans(tmp_path: Path) -> None:
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text(GPU_FILE, encoding="utf-8")
    assert json_out(run_kvplan(["gpus", "mygpu", "--gpus-file", str(gpus), "--json"]))["gpus"][0]["cuda_total_bytes"] \
        == 25_000_000_000


# --- diagnose: a bounded number of engines -------------------------------------------------------------------------


def test_an_exposition_of_more_engines_than_any_deployment_is_refused(tmp_path: Path) -> None:
    """50,000 engine series (a 3 MB file) took minutes to diagnose and render; past MAX_ENGINES it is one line."""
    from kvplan.errors import ParseError
    from kvplan.observe.metrics import MAX_ENGINES, parse_exposition

    def series(n: int) -> str:
        return "".join(f'vllm:num_requests_running{{engine="{i}",model_name="m"}} 1\n' for i in range(n))

    assert len(parse_exposition(series(MAX_ENGINES)).engines) == MAX_ENGINES == 1_024
    with pytest.raises(ParseError, match="names 1,025 engines"):
        parse_exposition(series(MAX_ENGINES + 1))
    saved = tmp_path / "metrics.txt"
    saved.write_text(series(50_000), encoding="utf-8")
    proc = run_kvplan(["diagnose", str(saved), "--json"])
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("Error: the exposition names 50,000 engines (model_name, engine), more than kvplan "
                           "diagnoses at once (1,024) (more engines than a vLLM deployment runs; scrape one "
                           "server's /metrics)\n")


# --- diagnose: thresholds and URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flag, value, message", [
    ("--queue-p95-high", "nan", "--queue-p95-high must be > 0 s, got nan"),  # was accepted: never reported
    ("--queue-p95-high", "-1", "--queue-p95-high must be > 0 s, got -1"),
    ("--min-prefix-queries", "-1", "--min-prefix-queries must be ≥ 0, got -1"),
])
def test_a_diagnose_threshold_that_can_never_trigger_is_refused(tmp_path: Path, flag: str, value: str,
                                                                message: str) -> None:
    from tests.fixtures.metrics.exposition import EngineState, exposition

    saved = tmp_path / "metrics.txt"
    saved.write_text(exposition(EngineState(running=3, waiting=2, kv_usage=0.5)), encoding="utf-8")
    proc = run_kvplan(["diagnose", str(saved), flag, value])
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"Error: {message}\n")


@pytest.mark.parametrize("url, message", [
    # was: "the input holds bytes that are not UTF-8 text (encoding with 'idna' codec failed …)"
    ("http://" + "a" * 300 + ":80/",
     "cannot read 'http://" + "a" * 72 + "…' as a URL: its host is no DNS name"
     " (encoding with 'idna' codec failed (UnicodeError: label too long))"),
    # was: "cannot reach http://***@127.0.0.1:9/metrics: [Errno -2] Name or service not known"
    ("http://user:hf_secretTOKEN123456789@127.0.0.1:9/metrics",
     "a metrics URL with credentials (user:password@host) is not supported (give the host alone, or save the page "
     "with curl and pass the file)"),
])
def test_a_metrics_url_urllib_cannot_use_is_named_for_what_it_is(url: str, message: str) -> None:
    proc = run_kvplan(["diagnose", url, "--timeout", "1"])
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"Error: {message}\n")
    assert "hf_secret" not in proc.stderr


# --- a pasted SGLang line's --revision -------------------------------------------------------------------------

SGLANG_HUB = "python -m sglang.launch_server --model-path Qwen/Qwen2.5-1.5B --revision nope"


def test_a_pasted_sglang_revision_is_loaded_not_ignored(hub: HubServer, tmp_path: Path) -> None:
    """`--revision nope` was listed as 'ignored SGLang flags that do not change the KV plan' and main was planned;
    SGLang loads the config at that revision (server_args.revision), so the Hub's refusal is the answer."""
    env = _online(hub, tmp_path)
    for args in (["fit", "--engine", "sglang", "--gpu", "h100", "--sglang-cmd", SGLANG_HUB],
                 ["fit", "--engine", "sglang", "--sglang-cmd", SGLANG_HUB, "--json"]):
        proc = run_kvplan(args, env)
        refused = "Error: Qwen/Qwen2.5-1.5B has no revision 'nope'\n"
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", refused)
    pinned = SGLANG_HUB.replace("nope", "0123456789abcdef0123456789abcdef01234567")  # the test Hub's commit
    json_out(run_kvplan(["fit", "--engine", "sglang", "--gpu", "h100", "--sglang-cmd", pinned, "--json"], env))


def test_a_plans_sglang_cmd_revision_is_loaded_and_the_plans_own_wins(hub: HubServer, tmp_path: Path) -> None:
    env = _online(hub, tmp_path)
    plan = tmp_path / "plan.yaml"
    body = (f"deployments:\n  - name: s\n    engine: sglang\n    gpu: h100\n    sglang_cmd: {SGLANG_HUB}\n"
            "    require: {starts: true}\n")
    plan.write_text(body, encoding="utf-8")
    proc = run_kvplan(["check", str(plan)], env)
    assert proc.returncode == 2
    assert proc.stderr == f"Error: {plan}:2: deployments[0].model: Qwen/Qwen2.5-1.5B has no revision 'nope'\n"
    plan.write_text(body.replace("    gpu: h100\n", "    gpu: h100\n    revision: main\n"), encoding="utf-8")
    json_out(run_kvplan(["check", str(plan), "--format", "json"], env))


# --- simulate serve: the fixed step cost -------------------------------------------------------------------------


@pytest.mark.parametrize("flag, value", [("--step-ms", "nan"), ("--step-ms", "inf"), ("--ms-per-token", "nan"),
                                         ("--ms-per-context-ktok", "inf")])
def test_a_step_cost_that_is_not_finite_is_refused(flag: str, value: str) -> None:
    """Click's min=0.0 lets NaN and ∞ through: --step-ms nan was 'internal error: IndexError', inf 'internal error:
    ValueError: cannot convert float NaN to integer'."""
    proc = run_kvplan(["simulate", "serve", "--num-gpu-blocks", "100", "--num-requests", "10", flag, value])
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"Error: {flag} must be a finite number of milliseconds ≥ 0, got {value}\n"


# --- kvplan-check-plans ------------------------------------------------------------------------------------------

PASSING = str(CONFIGS.parent / "plans" / "passing.yaml")


def _gate(args: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from kvplan.cli import gate

    try:
        code = gate.main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capfd.readouterr().err


def test_a_junit_folder_that_cannot_be_made_is_one_error_line(tmp_path: Path,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    """--junit naming a file was a FileExistsError traceback and exit 1 (a failed requirement's code)."""
    taken = tmp_path / "report"
    taken.write_text("", encoding="utf-8")
    assert _gate([PASSING, "--junit", str(taken)], capfd) == (
        2, f"Error: --junit: cannot make the folder {taken}: File exists\n")


@pytest.mark.parametrize("args, message", [
    (["--format", "xml"], "argument --format/-f: invalid choice: 'xml' (choose from 'table', 'json', 'junit', "
                          "'github')"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_a_gate_usage_error_is_one_error_line(args: list[str], message: str,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    """argparse printed its usage block and `kvplan-check-plans: error: …`: three lines, none `Error: …`."""
    assert _gate([PASSING, *args], capfd) == (2, f"Error: {message} (see 'kvplan-check-plans -h')\n")


def test_a_negative_roofline_max_concurrency_names_the_flag() -> None:
    """Was 'Error: kv capacity batch must be ≥ 0, got -1': the core's name, not the flag's."""
    proc = run_kvplan(["roofline", QWEN_7B, "--gpu", "h100", "--max-concurrency", "-1"])
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("Error: Invalid value for '--max-concurrency': -1 is not in the range x>=0. "
                           "(see 'kvplan roofline -h')\n")
