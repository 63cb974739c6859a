"""Round 5 of the adversarial pass (left by round 4): each input below was once accepted silently or answered
differently than it should; each now ends in the one `Error: …` line (exit 2), a `Note:` or the right answer."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CONFIGS, json_out, run_kvplan
from tests.hubserver import HubServer

QWEN_7B = str(CONFIGS / "Qwen--Qwen2.5-7B")


# --- a plan's pasted command line that is no text ------------------------------------------------------------------


@pytest.mark.parametrize("lines, key, kind", [
    ("    vllm_cmd: 5\n", "vllm_cmd", "the number 5"),
    ("    vllm_cmd: 0.5\n", "vllm_cmd", "the number 0.5"),
    ("    vllm_cmd: [vllm, serve]\n", "vllm_cmd", "a list"),
    ("    engine: sglang\n    sglang_cmd: 5\n", "sglang_cmd", "the number 5"),
])
def test_a_pasted_command_line_that_is_no_text_is_refused(tmp_path: Path, lines: str, key: str, kind: str) -> None:
    """`vllm_cmd: 5` was read as the line `5`, whose first word the parser took as the model: the plan went on to
    look up a Hub model named '5'."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    gpu: h100\n{lines}    require: {{starts: true}}\n",
                    encoding="utf-8")
    proc = run_kvplan(["check", str(plan)], {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    line = 4 + lines.count("\n") - 1
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"Error: {plan}:{line}: deployments[0].{key}: expected a command line (text), got {kind}\n"


def test_a_pasted_command_line_of_text_still_plans(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    gpu: h100\n    vllm_cmd: 'vllm serve {QWEN_7B}'\n"
                    "    require: {starts: true}\n", encoding="utf-8")
    proc = run_kvplan(["check", str(plan)])
    assert proc.returncode == 0, proc.stderr


# --- one spelling of a report's notes -------------------------------------------------------------------------------

GEMMA3 = str(CONFIGS / "google--gemma-3-4b-it")
LLAMA_8B = str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B")


@pytest.mark.parametrize("args, first", [
    (["size", GEMMA3], "Note: text_config leaves head_dim=256"),
    (["fit", GEMMA3, "--gpu", "h100"], "Note: text_config leaves head_dim=256"),
    (["roofline", "--gpu", "h100", "--context", "4096", "--batch", "1",
      "--vllm-cmd", f"vllm serve {LLAMA_8B} --enforce-eager"], "Note: --enforce-eager: the per-layer costs"),
])
def test_a_reports_notes_are_spelt_note_capitalised(args: list[str], first: str) -> None:
    """size, fit and roofline wrote `note: …` on stdout; calibrate, SGLang and every stderr notice write `Note: …`."""
    proc = run_kvplan(args)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.lower().startswith("note: ")]
    assert notes and notes[0].startswith(first)
    assert all(line.startswith("Note: ") for line in notes), notes


def test_no_renderer_spells_a_note_in_lower_case() -> None:
    import re

    import kvplan

    render = Path(kvplan.__file__).parent / "render"
    spelt = re.compile(r"""["']note: """)
    found = [f"{p.name}:{n}" for p in sorted(render.glob("*.py"))
             for n, text in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if spelt.search(text)]
    assert found == []


# --- a KV connector's cpu_bytes_to_use -------------------------------------------------------------------------------

CPU_BYTES_HINT = "(kvplan does not model this CPU tier; --kv-offloading-size GiB plans one)"


def _connector(name: str, extra: str | None) -> str:
    tail = "" if extra is None else f', "kv_connector_extra_config": {extra}'
    return f'{{"kv_connector": "{name}", "kv_role": "kv_both"{tail}}}'


@pytest.mark.parametrize("config, shown", [
    (_connector("OffloadingConnector", '{"cpu_bytes_to_use": -5}'), "'-5'"),
    (_connector("OffloadingConnector", '{"cpu_bytes_to_use": 1.5}'), "'1.5'"),
    (_connector("OffloadingConnector", '{"cpu_bytes_to_use": "lots"}'), "'lots'"),
    (_connector("OffloadingConnector", '{"cpu_bytes_to_use": 2000000000000000000}'), "'2000000000000000000'"),
    (_connector("SimpleCPUOffloadConnector", '{"cpu_bytes_to_use": -1}'), "'-1'"),
    ('{"kv_connector": "MultiConnector", "kv_connector_extra_config": {"connectors": ['
     + _connector("NixlConnector", None) + ", " + _connector("OffloadingConnector", '{"cpu_bytes_to_use": 0}')
     + "]}}", "'0'"),
])
def test_a_connectors_impossible_cpu_bytes_to_use_is_refused(config: str, shown: str) -> None:
    """kv_connector_extra_config was never read: a negative CPU tier planned as if it were not there."""
    proc = run_kvplan(["fit", QWEN_7B, "--gpu", "h100", "--kv-transfer-config", config])
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("Error: --kv-transfer-config: kv_connector_extra_config.cpu_bytes_to_use must be a whole "
                           f"number of bytes from 1 to 2**60, got {shown} {CPU_BYTES_HINT}\n")


def test_an_offloading_connector_without_cpu_bytes_to_use_is_refused_as_vllm_refuses_it() -> None:
    """v1/kv_offload/cpu/spec.py:CPUOffloadingSpec.__init__ (OffloadingConnector's default spec) raises
    'cpu_bytes_to_use must be specified in kv_connector_extra_config'."""
    config = _connector("OffloadingConnector", None)
    proc = run_kvplan(["fit", QWEN_7B, "--gpu", "h100", "--kv-transfer-config", config])
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("Error: --kv-transfer-config: OffloadingConnector needs "
                           "kv_connector_extra_config.cpu_bytes_to_use, the bytes of its CPU tier (vLLM: "
                           "cpu_bytes_to_use must be specified in kv_connector_extra_config) (or plan the CPU tier "
                           "with --kv-offloading-size GiB)\n")


@pytest.mark.parametrize("value", ["10737418240", '"10737418240"', "10737418240.0"])
def test_a_connectors_cpu_bytes_to_use_is_read_as_vllm_reads_it_and_said_to_be_unmodelled(value: str) -> None:
    """vLLM reads it as int(value): a whole number, also as text."""
    config = _connector("OffloadingConnector", f'{{"cpu_bytes_to_use": {value}}}')
    with_tier = json_out(run_kvplan(["fit", QWEN_7B, "--gpu", "h100", "--json", "--kv-transfer-config", config]))
    plain = json_out(run_kvplan(["fit", QWEN_7B, "--gpu", "h100", "--json"]))
    assert with_tier["cache"]["num_gpu_blocks"] == plain["cache"]["num_gpu_blocks"]
    assert any(n.endswith("Its CPU tier (cpu_bytes_to_use 10,737,418,240 bytes = 10.00 GiB) is not modelled: "
                          "--kv-offloading-size GiB plans OffloadingConnector's CPU tier.") for n in with_tier["notes"])


# --- offline, the safetensors metadata ------------------------------------------------------------------------------

QWEN_HUB_WEIGHTS = (151936 * 1536 + 1536) * 2  # the test Hub's model.safetensors header (tests/conftest.py)


@pytest.mark.parametrize("args", [["size", "Qwen/Qwen2.5-1.5B", "--json"],
                                  ["fit", "Qwen/Qwen2.5-1.5B", "--gpu", "h100", "--json"]])
def test_offline_the_weights_are_the_cached_headers_counts_as_online(hub_env: dict[str, str], hub: HubServer,
                                                                     args: list[str]) -> None:
    """Offline, the Hub's safetensors metadata was not read, so fit and check silently fell back to the analytic
    count: another answer than online for the same cached model."""
    online_proc = run_kvplan(args, hub_env)
    online = json_out(online_proc)
    before = len(hub.state.requests)
    offline_proc = run_kvplan(args, {**hub_env, "HF_HUB_OFFLINE": "1"})
    offline = json_out(offline_proc)
    assert len(hub.state.requests) == before
    # the same notices too: the test Hub's header is two tensors, far below the config's count
    assert offline_proc.stderr == online_proc.stderr
    assert offline_proc.stderr.startswith("Warning: the Hub's safetensors metadata holds 0.43 GiB of weights")
    assert offline == online
    if args[0] == "size":
        assert (offline["weights_source"], offline["weights_bytes"]) == ("safetensors metadata", QWEN_HUB_WEIGHTS)


def test_offline_without_cached_counts_the_analytic_estimate_is_said(hub_env: dict[str, str], tmp_path: Path) -> None:
    """A cache that holds config.json but not the headers' counts (filled by vLLM, or an older kvplan): the weights
    are the analytic count, and the run says so instead of silently answering differently than online."""
    import shutil

    json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], hub_env))
    folders = list((tmp_path / "hf").rglob("kvplan-safetensors"))
    assert len(folders) == 1
    shutil.rmtree(folders[0])
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], {**hub_env, "HF_HUB_OFFLINE": "1"})
    assert json_out(proc)["weights_source"] == "analytic parameter count"
    assert proc.stderr == ("Warning: safetensors metadata not used (the safetensors metadata of Qwen/Qwen2.5-1.5B is "
                           "not in the local cache and HF_HUB_OFFLINE is set: the weights are estimated from "
                           "config.json; run once online to cache it); weights are the analytic count\n")


@pytest.mark.parametrize("body", ['{"parameters_by_dtype": {"BF16": -1}}', '{"parameters_by_dtype": {"Q4": 5}}',
                                  '{"parameters_by_dtype": {"BF16": 1e30}}', "[1]", "x" * 70_000])
def test_offline_malformed_cached_counts_are_said_and_not_used(hub_env: dict[str, str], body: str) -> None:
    json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], hub_env))
    (cached,) = Path(hub_env["HF_HOME"]).rglob("kvplan-safetensors/*.json")
    cached.write_text(body, encoding="utf-8")
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], {**hub_env, "HF_HUB_OFFLINE": "1"})
    assert json_out(proc)["weights_source"] == "analytic parameter count"
    assert proc.stderr.startswith("Warning: safetensors metadata not used (") and proc.stderr.count("\n") == 1
    assert "cached safetensors counts of Qwen/Qwen2.5-1.5B" in proc.stderr
