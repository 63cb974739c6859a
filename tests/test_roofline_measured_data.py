"""Schema of tests/fixtures/data/roofline-measured.yaml, the published speed measurements (issue 21).

Each point must carry its source, the settings it ran with, one measured figure and the inputs kvplan needs to
predict it: a config folder that exists under tests/fixtures, a GPU id of kvplan's catalog, positive sizes, and a
`compare` that the file's header defines. The first 17 points are the project's shared data, copied unchanged.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.hardware.gpus import load_catalog

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "fixtures" / "data" / "roofline-measured.yaml"
CONFIG_ROOTS = (ROOT / "tests" / "fixtures" / "configs", ROOT / "tests" / "fixtures" / "corpus" / "configs")

CLASSES = {"dense-decode", "moe-decode", "high-batch", "prefill"}
COMPARES = {
    "per_request_tok_s", "itl_ms", "ttft_ms", "tpot_ms", "static_batch_e2e_ms", "static_batch_out_tok_s",
    "static_batch_out_tok_s_per_gpu", "output_tok_s", "prefill_tok_s_per_gpu",
}
# The unit a published figure may carry for each `compare` (static_batch_e2e_ms: published in s or ms).
UNITS = {
    "per_request_tok_s": {"tok/s"}, "itl_ms": {"ms"}, "ttft_ms": {"ms"}, "tpot_ms": {"ms"},
    "static_batch_e2e_ms": {"ms", "s"}, "static_batch_out_tok_s": {"tok/s"},
    "static_batch_out_tok_s_per_gpu": {"tok/s/GPU"}, "output_tok_s": {"tok/s"},
    "prefill_tok_s_per_gpu": {"tok/s/GPU"},
}
REQUIRED_INPUTS = ("config", "gpu", "tp", "batch", "context", "compare")
OPTIONAL_INPUTS = {
    "prompt", "output_tokens", "quantization", "kv_cache_dtype", "ep", "dp", "dp_attention", "speculative",
    "moe_backend",
}
# The shared file's 17 points (../shared/data/roofline-measured.yaml), in order.
SHARED_IDS = [
    "gptfast-llama2-7b-a100-tp1", "gptfast-llama2-7b-a100-tp2", "gptfast-llama2-7b-a100-tp4",
    "gptfast-llama2-7b-a100-tp8", "gptfast-llama2-70b-a100-tp2", "gptfast-llama2-70b-a100-tp4",
    "gptfast-llama2-70b-a100-tp8", "gptfast-mixtral-8x7b-a100-tp2", "gptfast-mixtral-8x7b-a100-tp4",
    "gptfast-mixtral-8x7b-a100-tp8", "trt05-llama7b-a100-tp1-ttft-128", "trt05-llama7b-a100-tp1-ttft-2048",
    "trt05-llama70b-a100-tp4-ttft-128", "trt05-llama70b-a100-tp4-ttft-2048", "trt061-llama7b-a100-b384-128-128",
    "trt061-llama7b-a100-b60-128-2048", "trt061-llama7b-a100-b52-2048-128",
]


def _load() -> dict[str, Any]:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and data.get("schema") == 1
    return data


def _points() -> list[dict[str, Any]]:
    points = _load()["points"]
    assert isinstance(points, list)
    return points


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _schema_errors(point: dict[str, Any], gpu_ids: set[str]) -> list[str]:
    """Every way one point breaks the schema, as short messages (empty when it is sound)."""
    errors: list[str] = []
    for key in ("id", "class", "source", "settings", "measured", "notes", "kvplan_inputs"):
        if key not in point:
            errors.append(f"missing {key}")
    if errors:
        return errors
    if point["class"] not in CLASSES:
        errors.append(f"class {point['class']!r}")
    source = point["source"]
    for key in ("url", "citation", "engine"):
        if not isinstance(source.get(key), str) or not source[key].strip():
            errors.append(f"source.{key} empty")
    if not str(source.get("url", "")).startswith("https://"):
        errors.append("source.url is not https")
    settings = point["settings"]
    for key in ("model", "gpu", "tp"):
        if key not in settings:
            errors.append(f"settings.{key} missing")
    if "batch" not in settings and "concurrency" not in settings:
        errors.append("settings has neither batch nor concurrency")
    measured = point["measured"]
    value = measured.get("value")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        errors.append(f"measured.value {value!r}")
    if not isinstance(measured.get("metric"), str) or not measured["metric"]:
        errors.append("measured.metric empty")
    errors.extend(_input_errors(point, gpu_ids))
    return errors


def _input_errors(point: dict[str, Any], gpu_ids: set[str]) -> list[str]:
    errors: list[str] = []
    inputs = point["kvplan_inputs"]
    missing = [key for key in REQUIRED_INPUTS if key not in inputs]
    if missing:
        return [f"kvplan_inputs missing {missing}"]
    unknown = set(inputs) - set(REQUIRED_INPUTS) - OPTIONAL_INPUTS
    if unknown:
        errors.append(f"kvplan_inputs unknown keys {sorted(unknown)}")
    config = ROOT / inputs["config"]
    if not any(config.parent == base for base in CONFIG_ROOTS) or not (config / "config.json").is_file():
        errors.append(f"config {inputs['config']} is not a fixture folder holding config.json")
    if inputs["gpu"] not in gpu_ids:
        errors.append(f"gpu {inputs['gpu']!r} is not a catalog id")
    for key in ("tp", "batch", "context", "prompt", "output_tokens", "ep", "dp"):
        if key in inputs and not _positive_int(inputs[key]):
            errors.append(f"kvplan_inputs.{key} {inputs[key]!r}")
    compare = inputs["compare"]
    if compare not in COMPARES:
        errors.append(f"compare {compare!r}")
    elif point["measured"].get("unit") not in UNITS[compare]:
        errors.append(f"unit {point['measured'].get('unit')!r} for {compare}")
    if errors:
        return errors
    settings = point["settings"]
    if settings["tp"] != inputs["tp"]:
        errors.append("settings.tp differs from kvplan_inputs.tp")
    published_batch = settings.get("concurrency", settings.get("batch"))
    if published_batch != inputs["batch"]:
        errors.append("kvplan_inputs.batch differs from the published batch/concurrency")
    if "prompt" in inputs and inputs["prompt"] > inputs["context"]:
        errors.append("prompt longer than context")
    if compare.startswith("static_batch") and not {"prompt", "output_tokens"} <= set(inputs):
        errors.append("static-batch point without prompt and output_tokens")
    if compare == "ttft_ms" and inputs.get("prompt") != inputs["context"]:
        errors.append("ttft point whose context is not its prompt")
    return errors


def test_every_point_follows_the_schema() -> None:
    gpu_ids = set(load_catalog())
    problems = {p.get("id", f"#{i}"): errs for i, p in enumerate(_points()) if (errs := _schema_errors(p, gpu_ids))}
    assert problems == {}


def test_point_ids_are_unique() -> None:
    ids = [p["id"] for p in _points()]
    assert len(ids) == len(set(ids))


def test_the_shared_points_come_first_unchanged_in_order_and_more_were_added() -> None:
    points = _points()
    assert [p["id"] for p in points[:17]] == SHARED_IDS
    # 17 shared + 65 added by issue 21's data helpers + 18 by its speed helper; a truncated file fails here.
    assert len(points) == 100


def test_every_compare_in_use_is_defined_in_the_header() -> None:
    header = "".join(line for line in DATA.read_text(encoding="utf-8").splitlines(True) if line.startswith("#"))
    in_use = {p["kvplan_inputs"]["compare"] for p in _points()}
    assert in_use <= COMPARES
    assert [c for c in sorted(in_use) if c not in header] == []


def test_every_class_has_points_off_a100() -> None:
    off_a100 = {p["class"] for p in _points() if not p["kvplan_inputs"]["gpu"].startswith("a100")}
    assert off_a100 == CLASSES


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p["kvplan_inputs"].update(gpu="h100-sxm5-imaginary"), "is not a catalog id"),
        (lambda p: p["kvplan_inputs"].update(config="tests/fixtures/configs/no--such-model"), "config.json"),
        (lambda p: p["measured"].update(value=0), "measured.value"),
        (lambda p: p["kvplan_inputs"].update(batch=-1), "kvplan_inputs.batch"),
        (lambda p: p["kvplan_inputs"].update(compare="tokens_per_dollar"), "compare"),
        (lambda p: p["kvplan_inputs"].pop("context"), "missing"),
        (lambda p: p.pop("source"), "missing source"),
    ],
)
def test_the_schema_check_rejects_a_broken_point(mutate: Any, message: str) -> None:
    point = yaml.safe_load(yaml.safe_dump(_points()[0]))
    assert _schema_errors(point, set(load_catalog())) == []
    mutate(point)
    assert any(message in error for error in _schema_errors(point, set(load_catalog())))
