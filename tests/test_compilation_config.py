"""`--compilation-config` (CUDA-graph mode and capture sizes) from flags, pasted `vllm serve` lines and plans,
and the CUDA-graph term it changes (kvplan/vllm/memory/cuda_graphs.py; vLLM 0.33
v1/worker/gpu/cudagraph_utils.py:profile_cudagraph_memory and config/vllm.py:_set_cudagraph_sizes)."""
from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.ci.plan import VLLM_UNMODELLED, load_plan
from kvplan.cli.app import app
from kvplan.vllm.memory.cuda_graphs import cuda_graph_bytes
from tests.conftest import CONFIGS

runner = CliRunner()
QWEN = str(CONFIGS / "Qwen--Qwen2.5-7B")  # 28 layers


def _graphs(*args: str) -> int:
    result = runner.invoke(app, ["fit", *args, "--gpu", "h100", "--json"])
    assert result.exit_code == 0, result.output
    return int(json.loads(result.stdout)["memory"]["cuda_graph_bytes"])


def test_default_mode_and_the_modes_vllm_accepts() -> None:
    # H100, max_num_seqs 1024: 51 capture sizes, all of them decode sizes too.
    assert _graphs(QWEN) == cuda_graph_bytes(51, 51)
    assert _graphs(QWEN, "--compilation-config", '{"cudagraph_mode": "PIECEWISE"}') == cuda_graph_bytes(51, 0)
    assert _graphs(QWEN, "-cc", '{"cudagraph_mode": "FULL_DECODE_ONLY"}') == cuda_graph_bytes(0, 51)
    assert _graphs(QWEN, "--compilation-config", '{"cudagraph_mode": "NONE"}') == 0
    sizes = '{"cudagraph_capture_sizes": [1, 2, 4, 8]}'
    assert _graphs(QWEN, "--compilation-config", sizes) == cuda_graph_bytes(4, 4)


def test_a_pasted_vllm_serve_line_carries_the_compilation_config() -> None:
    line = f"vllm serve {QWEN} --compilation-config '{{\"cudagraph_mode\": \"PIECEWISE\"}}'"
    assert _graphs("--vllm-cmd", line) == cuda_graph_bytes(51, 0)
    line = f"vllm serve {QWEN} -cc='{{\"max_cudagraph_capture_size\": 16}}'"
    assert _graphs("--vllm-cmd", line) == cuda_graph_bytes(5, 5)


def test_a_bad_compilation_config_is_vllms_error() -> None:
    result = runner.invoke(app, ["fit", QWEN, "--gpu", "h100", "--compilation-config", '{"cudagraph_mode": "MAYBE"}'])
    assert result.exit_code == 2
    assert "cudagraph_mode must be one of NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE" in result.output


def test_gpt_oss_captures_up_to_1024_unless_told_otherwise() -> None:
    """models/config.py:GptOssForCausalLMConfig: max_cudagraph_capture_size 1024 (67 → 83 graphs)."""
    oss = str(CONFIGS / "openai--gpt-oss-20b")
    default = _graphs(oss, "--weights-memory", "0", "--max-num-seqs", "1024")
    assert default == cuda_graph_bytes(83, 83, moe_layers=24)
    capped = _graphs(oss, "--weights-memory", "0", "--max-num-seqs", "1024", "--compilation-config",
                     '{"max_cudagraph_capture_size": 512}')
    assert capped == cuda_graph_bytes(51, 51, moe_layers=24)


def test_a_plan_takes_compilation_config_as_a_modelled_option(tmp_path: Path) -> None:
    assert "compilation_config" not in VLLM_UNMODELLED
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "deployments:\n"
        "  - name: chat\n"
        f"    model: {QWEN}\n"
        "    gpu: h100\n"
        "    vllm: {compilation_config: {cudagraph_mode: PIECEWISE, cudagraph_capture_sizes: [1, 2, 4]}}\n"
        "    require:\n"
        "      starts: true\n")
    s = load_plan(plan).deployments[0].settings
    assert s.compilation_config == {"cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4]}
