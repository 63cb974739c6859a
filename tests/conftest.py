"""Shared fixtures: fixture configs, a Hub-compatible server on 127.0.0.1, and a CLI runner in a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hubserver import HubServer, fixture_repo, safetensors_header

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
ALL_FIXTURES = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").exists())


def load_fixture(folder: str):  # type: ignore[no-untyped-def]
    """A fixture model parsed through the local-folder path."""
    from kvplan.model.hub import load_local

    return load_local(str(CONFIGS / folder))


@pytest.fixture(scope="session")
def hub() -> Iterator[HubServer]:
    """The test Hub: Qwen2.5-1.5B (with safetensors), a gated Llama, a Mistral, a failing repo."""
    server = hub_repos()
    server.start()
    yield server
    server.stop()


def hub_repos() -> HubServer:
    """The test Hub's server with its repos, not yet started."""
    server = HubServer()
    qwen = fixture_repo("Qwen--Qwen2.5-1.5B")
    qwen.files["model.safetensors"] = safetensors_header(
        {"model.embed_tokens.weight": ("BF16", [151936, 1536]), "model.norm.weight": ("BF16", [1536])})
    server.state.repos["Qwen/Qwen2.5-1.5B"] = qwen
    server.state.repos["meta-llama/Llama-3.1-8B"] = fixture_repo("meta-llama--Meta-Llama-3.1-8B", gated=True)
    server.state.repos["nvidia/Llama-3.1-70B-Instruct-FP8"] = fixture_repo("nvidia--Llama-3.1-70B-Instruct-FP8")
    server.state.repos["broken/server-error"] = fixture_repo("Qwen--Qwen2.5-7B", fault="500")
    server.state.repos["broken/truncated"] = fixture_repo("Qwen--Qwen2.5-7B", fault="truncate")
    server.state.repos["broken/not-json"] = type(qwen)(files={"config.json": b"<html>oops</html>"})
    return server


def run_kvplan(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a fresh interpreter (so HF_* variables are read as a user's shell sets them)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_"))}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)


@pytest.fixture
def hub_env(hub: HubServer, tmp_path: Path) -> dict[str, str]:
    """Environment pointing huggingface_hub at the test Hub with an empty cache."""
    return {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}


def json_out(proc: subprocess.CompletedProcess[str]) -> dict:  # type: ignore[type-arg]
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]
