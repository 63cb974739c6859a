"""kvplan never prints a Hugging Face token, never writes outside stdout/stderr, the HF cache and the files
a user names, and never runs model code.

The CLI runs in a fresh interpreter with HF_TOKEN set to a recognisable value, the working directory an
empty folder and HOME / HF_HOME inside the test's tmp_path; every byte of stdout and stderr is searched,
with KVPLAN_DEBUG=1 (which prints tracebacks) and without.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from tests.conftest import CONFIGS
from tests.hubserver import HubServer

TOKEN = "hf_kvplanLeakCanary7Q2mZ9xW4tR8"
KVPLAN_SRC = Path(kvplan.__file__).parent
LOCAL = str(CONFIGS / "Qwen--Qwen2.5-7B")

# Raise an exception whose text holds the token from inside a command: an "internal error" with a traceback.
INTERNAL_ERROR = (
    "import os, sys\n"
    "import kvplan.model.size\n"
    "def boom(*args, **kwargs):\n"
    "    raise RuntimeError('upstream said: bad token ' + os.environ['HF_TOKEN'])\n"
    "kvplan.model.size.size_report = boom\n"
    "from kvplan.cli.app import main\n"
    "sys.argv[0] = 'kvplan'\n"
    "main()\n"
)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_", "XDG_"))}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(KVPLAN_SRC.parent), os.environ.get("PYTHONPATH")]))
    full_env.update(env)
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, env=full_env,
                          timeout=60, check=False)


@pytest.fixture
def sandbox(tmp_path: Path, hub: HubServer) -> tuple[Path, dict[str, str]]:
    """An empty working directory and an environment with the token, a private HOME and HF cache."""
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    return cwd, {"HOME": str(home), "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.endpoint,
                 "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_TELEMETRY": "1"}


# (argv after `python`, expected exit code, a phrase the output must hold — so each case is known to have
# done what it is here for)
CASES = [
    pytest.param(["-m", "kvplan", "size", "meta-llama/Llama-3.1-8B", "--json"], 0, '"kv_bytes_per_token": 131072',
                 id="gated-repo-with-token"),
    pytest.param(["-m", "kvplan", "size", f"{TOKEN}/model"], 2, "no model '***/model' on the Hub",
                 id="token-in-an-error-message"),
    pytest.param(["-c", INTERNAL_ERROR, "size", LOCAL], 2, "internal error: RuntimeError: upstream said: bad token ***",
                 id="token-in-an-internal-error"),
    pytest.param(["-m", "kvplan", "diagnose", f"http://127.0.0.1:1/metrics?token={TOKEN}"], 2, "connection refused",
                 id="token-in-a-url"),
    pytest.param(["-m", "kvplan", "fit", "--gpu", "h100", "--vllm-cmd",
                  f"vllm serve {LOCAL} --hf-token {TOKEN} --api-key sk-secret-9 --port 8000"], 0, "--hf-token ***",
                 id="token-in-a-pasted-vllm-command"),
]


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "KVPLAN_DEBUG"])
@pytest.mark.parametrize(("argv", "exit_code", "phrase"), CASES)
def test_no_command_prints_the_token(sandbox: tuple[Path, dict[str, str]], argv: list[str], exit_code: int,
                                     phrase: str, debug: bool) -> None:
    cwd, env = sandbox
    proc = _run(argv, cwd, {**env, **({"KVPLAN_DEBUG": "1"} if debug else {})})
    output = proc.stdout + proc.stderr
    assert proc.returncode == exit_code, output
    assert phrase in output
    assert TOKEN not in output
    assert "sk-secret-9" not in output
    if debug and exit_code == 2:
        assert "Traceback (most recent call last)" in proc.stderr  # the scrubbed traceback was printed
    assert list(cwd.iterdir()) == []  # nothing written to the working directory
    assert list(Path(env["HOME"]).iterdir()) == []  # … nor to HOME (~/.cache, ~/.config, …)


def test_the_token_reaches_the_hub_and_nowhere_else(sandbox: tuple[Path, dict[str, str]], hub: HubServer) -> None:
    cwd, env = sandbox
    before = len(hub.state.requests)
    proc = _run(["-m", "kvplan", "size", "meta-llama/Llama-3.1-8B", "--json"], cwd, env)
    assert proc.returncode == 0, proc.stderr
    assert "auth-header-present" in hub.state.requests[before:]  # sent as the Authorization header …
    assert all(TOKEN not in r for r in hub.state.requests[before:])  # … never in a URL
    written = [p for p in Path(env["HF_HOME"]).rglob("*") if p.is_file()]
    assert written and all(TOKEN not in p.read_text(errors="replace") for p in written)


# ---------------------------------------------------------------------------------------------------
# No model code: a check of kvplan's source, by syntax tree

FORBIDDEN_MODULES = {"transformers", "torch", "vllm", "pickle", "marshal", "dill", "runpy", "subprocess", "ctypes"}
FORBIDDEN_BUILTINS = {"exec", "eval", "compile", "__import__"}
FORBIDDEN_NAMES = {"AutoConfig", "AutoModel", "AutoModelForCausalLM", "AutoTokenizer", "PretrainedConfig"}
UNSAFE_YAML = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all", "Loader",
               "UnsafeLoader", "FullLoader"}
HUB_DOWNLOADS_OF_MANY_FILES = {"snapshot_download", "hf_hub_download_all"}


def _sources() -> list[Path]:
    return sorted(KVPLAN_SRC.rglob("*.py"))


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(KVPLAN_SRC.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{where}: from {node.module} import …")
            found += [f"{where}: imports {a.name}" for a in node.names
                      if a.name in FORBIDDEN_NAMES | HUB_DOWNLOADS_OF_MANY_FILES]
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS:
                found.append(f"{where}: calls {node.func.id}()")
            found += [f"{where}: passes trust_remote_code" for k in node.keywords if k.arg == "trust_remote_code"]
            if isinstance(node.func, ast.Attribute) and node.func.attr == "import_module" and \
                    path.name != "__init__.py":
                found.append(f"{where}: importlib.import_module outside kvplan/__init__.py")
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "yaml" and node.attr in UNSAFE_YAML:
                found.append(f"{where}: yaml.{node.attr} (only the safe loader may read YAML)")
            if node.attr in FORBIDDEN_NAMES | HUB_DOWNLOADS_OF_MANY_FILES:
                found.append(f"{where}: uses {node.attr}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{where}: uses {node.id}")
    return found


def test_kvplan_source_never_imports_or_runs_model_code() -> None:
    assert len(_sources()) > 20  # the walk found the package
    violations = [v for path in _sources() for v in _violations(path)]
    assert violations == []


def test_the_lazy_imports_of_the_package_are_its_own_modules() -> None:
    """kvplan/__init__.py imports by name (PEP 562 lazy attributes): only kvplan's own modules."""
    lazy = kvplan._LAZY
    assert lazy and all(module.startswith("kvplan.") for module in lazy.values())


def test_the_hub_is_asked_for_json_files_only() -> None:
    from kvplan.model import hub

    assert hub.CONFIG_NAME.endswith(".json") and hub.QUANT_CONFIG_NAME.endswith(".json")


def test_the_source_check_can_fail(tmp_path: Path) -> None:
    global KVPLAN_SRC
    bad = tmp_path / "pkg" / "bad.py"
    bad.parent.mkdir()
    bad.write_text("import yaml\nfrom transformers import AutoConfig\n"
                   "AutoConfig.from_pretrained('x', trust_remote_code=True)\nyaml.load('a')\neval('1')\n")
    saved, KVPLAN_SRC = KVPLAN_SRC, bad.parent
    try:
        found = _violations(bad)
    finally:
        KVPLAN_SRC = saved
    assert len(found) >= 5, found
