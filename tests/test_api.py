"""The library surface: `import kvplan` is cheap and every public name resolves to the core objects
the CLI renders."""
from __future__ import annotations

import subprocess
import sys

import kvplan
from tests.conftest import CONFIGS


def test_every_public_name_resolves() -> None:
    for name in kvplan.__all__:
        assert getattr(kvplan, name) is not None


def test_library_fit_equals_the_vllm_numbers() -> None:
    spec = kvplan.load_model(str(CONFIGS / "Qwen--Qwen2.5-1.5B"))
    report = kvplan.plan_fit(spec, kvplan.get_gpu("h100"),
                             kvplan.ServeSettings(max_model_len=32768, kv_cache_memory_bytes=60 * 2**30))
    # vllm-reference §10(a): 60 GiB of KV → 140,434 blocks, 2,246,944 tokens, 68.57x.
    got = (report.num_gpu_blocks, report.kv_cache_tokens, round(report.max_concurrency, 2))
    assert got == (140_434, 2_246_944, 68.57)


def test_import_kvplan_loads_no_submodule() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, kvplan; print(sorted(m for m in sys.modules "
                          "if m.startswith('kvplan.')))"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
