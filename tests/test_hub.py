"""The real huggingface_hub path, end to end, against the test Hub on 127.0.0.1."""
from __future__ import annotations

from tests.conftest import json_out, run_kvplan
from tests.hubserver import HubServer


def test_hub_config_download_gives_the_document_bytes_per_token(hub_env: dict[str, str]) -> None:
    data = json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], hub_env))
    assert data["kv_bytes_per_token"] == 28_672
    assert data["model"] == "Qwen/Qwen2.5-1.5B"


def test_hub_weights_come_from_safetensors_metadata(hub_env: dict[str, str]) -> None:
    data = json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], hub_env))
    assert data["weights_source"] == "safetensors metadata"
    assert data["weights_bytes"] == (151936 * 1536 + 1536) * 2


def test_hub_cache_is_reused_offline(hub_env: dict[str, str], hub: HubServer) -> None:
    json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], hub_env))
    before = len(hub.state.requests)
    data = json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], {**hub_env, "HF_HUB_OFFLINE": "1"}))
    assert data["kv_bytes_per_token"] == 28_672
    assert len(hub.state.requests) == before  # nothing asked of the server
    # the headers' counts the online run cached (hub.py:_store_counts): the same answer as online
    assert data["weights_source"] == "safetensors metadata"
    assert data["weights_bytes"] == (151936 * 1536 + 1536) * 2


def test_hub_offline_cache_miss_is_one_line_exit_2(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "Qwen/Qwen2.5-7B"], {**hub_env, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0
    assert "not in the local cache and HF_HUB_OFFLINE is set" in proc.stderr


def test_hub_gated_repo_without_token(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "meta-llama/Llama-3.1-8B"], hub_env)
    assert proc.returncode == 2
    assert "gated repo" in proc.stderr and "HF_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hub_gated_repo_with_token_works_and_token_is_never_printed(hub_env: dict[str, str]) -> None:
    token = "hf_TESTSECRETtoken123456"
    proc = run_kvplan(["size", "meta-llama/Llama-3.1-8B", "--json"], {**hub_env, "HF_TOKEN": token})
    assert json_out(proc)["kv_bytes_per_token"] == 131_072
    assert token not in proc.stdout + proc.stderr


def test_hub_unknown_repo(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "nobody/no-such-model"], hub_env)
    assert proc.returncode == 2
    assert "no model 'nobody/no-such-model' on the Hub" in proc.stderr


def test_hub_unknown_revision(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--revision", "v9.9"], hub_env)
    assert proc.returncode == 2
    assert "has no revision 'v9.9'" in proc.stderr


def test_hub_known_revision(hub_env: dict[str, str]) -> None:
    data = json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--revision", "main", "--json"], hub_env))
    assert data["kv_bytes_per_token"] == 28_672


def test_hub_quant_config_sets_the_kv_dtype(hub_env: dict[str, str]) -> None:
    """hf_quant_config.json (ModelOpt) declares an FP8 KV cache: `auto` means fp8, half the bytes."""
    data = json_out(run_kvplan(["size", "nvidia/Llama-3.1-70B-Instruct-FP8", "--json"], hub_env))
    assert data["kv_cache_dtype"] == "fp8"
    assert data["kv_bytes_per_token"] == 80 * 8 * 128 * 2 * 1


def test_hub_server_error_and_unreachable_hub(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "broken/server-error"], hub_env)
    assert proc.returncode == 2 and "Error:" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B"], {**hub_env, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 2
    assert "cannot reach the Hugging Face Hub" in proc.stderr or "Error:" in proc.stderr


def test_hub_non_json_config_is_a_bad_config(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "broken/not-json"], hub_env)
    assert proc.returncode == 2
    assert "is not valid JSON" in proc.stderr


def test_hub_truncated_download_fails_cleanly_and_caches_nothing(hub_env: dict[str, str]) -> None:
    from pathlib import Path

    proc = run_kvplan(["size", "broken/truncated"], hub_env)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr
    snapshots = list(Path(hub_env["HF_HOME"]).rglob("snapshots/*/config.json"))
    assert snapshots == []
