"""Absurd values are refused with the bound named: config.json counts and lengths (kvplan.model.reader's
bounds, far above every real model), vLLM's fixed set of --block-size values, the simulator's request count."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import BadConfig
from kvplan.model import reader
from kvplan.model.config import parse_config
from tests.conftest import ALL_FIXTURES, CONFIGS

LLAMA = json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B" / "config.json").read_text())


def _with(**changes: Any) -> dict[str, Any]:
    return {**LLAMA, **changes}


@pytest.mark.parametrize(("changes", "message"), [
    ({"num_hidden_layers": 10_000_000},
     "num_hidden_layers is 1e+07, more than kvplan accepts for layers (at most 10,000"),
    ({"num_hidden_layers": 1e308}, "num_hidden_layers is 1e+308, more than kvplan accepts for layers"),
    ({"max_position_embeddings": 1e308}, "max_position_embeddings gives 1e+308 tokens, more than kvplan accepts for "
                                         "a context length (at most 268,435,456"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 1e300}},
     "max_position_embeddings × rope factor 1e+300 gives 1.311e+305 tokens"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 1e300, "original_max_position_embeddings": 4096}},
     "original_max_position_embeddings × rope factor 1e+300 gives 4.096e+303 tokens"),
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 1e305}}, "gives inf tokens"),
    ({"head_dim": 0}, "head_dim must be a positive integer, got 0"),
    ({"head_dim": -128}, "head_dim must be a positive integer, got -128"),
    ({"hidden_size": 2**30}, "hidden_size is 1.074e+09, more than kvplan accepts for a width (at most 2,097,152"),
    ({"vocab_size": 10**12}, "vocab_size is 1e+12, more than kvplan accepts for a vocabulary"),
    ({"num_attention_heads": 10**6, "num_key_value_heads": 10**6}, "more than kvplan accepts for heads"),
])
def test_absurd_config_values_are_refused_with_the_bound(changes: dict[str, Any], message: str) -> None:
    start = time.process_time()  # CPU time: a loaded machine does not count
    with pytest.raises(BadConfig, match="^config.json: ") as caught:
        parse_config(_with(**changes))
    assert message in str(caught.value)
    assert time.process_time() - start < 1.0


def test_every_real_config_is_inside_the_bounds() -> None:
    corpus = CONFIGS.parent / "corpus" / "configs"
    folders = [CONFIGS / name for name in ALL_FIXTURES] + sorted(
        p for p in corpus.iterdir() if (p / "config.json").is_file())  # Pixtral-12B-2409: params.json only
    assert len(folders) > 200
    for folder in folders:
        data = json.loads((folder / "config.json").read_text())
        try:
            spec = parse_config(data)
        except BadConfig as exc:
            assert "more than kvplan accepts" not in str(exc), folder  # refused for another reason: fine
            continue
        assert spec.num_layers <= reader.MAX_LAYERS and spec.max_model_len <= reader.MAX_MODEL_LEN


def test_the_bounds_stay_far_above_real_models() -> None:
    # The comment in kvplan/model/reader.py quotes the largest real values; the bounds keep ≥ 20× headroom.
    assert reader.MAX_LAYERS >= 20 * 126 and reader.MAX_MODEL_LEN >= 20 * 10_485_760
    assert reader.MAX_WIDTH >= 20 * 53_248 and reader.MAX_VOCAB >= 20 * 262_144


def test_the_cli_names_the_bound(tmp_path: Path) -> None:
    from tests.conftest import run_kvplan

    (tmp_path / "config.json").write_text(json.dumps(_with(num_hidden_layers=10_000_000)))
    proc = run_kvplan(["size", str(tmp_path)])
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: config.json: num_hidden_layers is 1e+07, more than kvplan accepts")


@pytest.mark.parametrize("argv", [
    ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "H100", "--block-size", "100000000000000000000000000"],
    ["fit", "--vllm-cmd", f"vllm serve {CONFIGS / 'Qwen--Qwen2.5-7B'} --block-size 1e15", "--gpu", "H100"],
    ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "H100", "--block-size", "131072"],
])
def test_a_block_size_beyond_any_vllm_block_is_refused(argv: list[str]) -> None:
    from tests.conftest import run_kvplan

    proc = run_kvplan(argv)
    assert proc.returncode == 2, proc.stdout
    assert "--block-size" in proc.stderr and "at most 65,536" in proc.stderr and "internal error" not in proc.stderr


def test_the_largest_block_size_is_still_planned() -> None:
    from tests.conftest import run_kvplan

    proc = run_kvplan(["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "H100", "--block-size", "65536", "--json"])
    assert proc.returncode in (0, 1) and "at most" not in proc.stderr


def test_serve_simulation_requests_are_bounded_at_once() -> None:
    from tests.conftest import run_kvplan

    start = time.perf_counter()
    proc = run_kvplan(["simulate", "serve", "--num-requests", "10000000", "--num-gpu-blocks", "100"])
    assert proc.returncode == 2 and time.perf_counter() - start < 10
    assert "--num-requests: 10,000,000 is more than kvplan's serve simulation runs (at most 1,000,000" in proc.stderr


def test_a_trace_beyond_the_serve_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kvplan.cli.app import app
    from kvplan.sim import workloads

    monkeypatch.setattr(workloads, "MAX_SERVE_REQUESTS", 3)
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(f'{{"timestamp": {i}, "prompt_len": 64, "output_len": 4}}\n' for i in range(5)))
    result = CliRunner().invoke(app, ["simulate", "serve", "--trace", str(trace), "--num-gpu-blocks", "100"])
    assert result.exit_code == 2
    assert "the trace's requests: 5 is more than kvplan's serve simulation runs (at most 3" in result.output
