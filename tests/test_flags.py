"""Flags a user never typed are never blamed, and GPU counts that leave GPUs idle are refused."""
from __future__ import annotations

from tests.conftest import CONFIGS, run_kvplan

QWEN = str(CONFIGS / "Qwen--Qwen2.5-7B")  # 28 attention heads, 4 KV heads


def test_num_gpus_not_a_multiple_of_tp_times_pp_is_refused() -> None:
    proc = run_kvplan(["fit", QWEN, "--gpu", "H100", "--num-gpus", "3", "-tp", "2"])
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: --num-gpus 3 is not a multiple of -tp 2 × -pp 1 = 2")


def test_an_implied_tp_blames_num_gpus_not_a_flag_never_typed() -> None:
    proc = run_kvplan(["fit", QWEN, "--gpu", "H100", "--num-gpus", "3"])
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: --num-gpus 3 implies -tp 3, which does not divide the 28 attention heads")
    assert "--tensor-parallel-size 3" not in proc.stderr
    typed = run_kvplan(["fit", QWEN, "--gpu", "H100", "-tp", "3"])
    assert "--tensor-parallel-size 3 does not divide" in typed.stderr


def test_num_gpus_a_multiple_of_tp_plans_replicas() -> None:
    proc = run_kvplan(["fit", QWEN, "--gpu", "H100", "--num-gpus", "4", "-tp", "2"])
    assert proc.returncode == 0, proc.stderr
    assert "on 4 × NVIDIA H100" in proc.stdout and "(tp 2, pp 1)" in proc.stdout
