"""The GPU catalog: packaged figures and their sources, lookup, user files, custom GPUs, `kvplan gpus`."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import BadConfig, InvalidParameter, ParseError, UnknownGpu
from kvplan.hardware.gpus import (
    GPUS_FILE_ENV,
    GpuSpec,
    _slug,
    custom_gpu,
    get_gpu,
    load_catalog,
    normalize_dtype,
    parse_catalog,
    parse_flops,
)
from kvplan.units import GiB, MiB, format_gib_vllm

REQUIRED_IDS = {
    "h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "h20-3e", "gh200", "b200", "b300",
    "a100-40gb-sxm", "a100-40gb-pcie", "a100-80gb-sxm", "a100-80gb-pcie", "l40s", "l40", "l20", "l4",
    "a10g", "a10", "t4", "v100-16gb", "v100-32gb", "rtx-3090", "rtx-4090", "rtx-5090",
    "rtx-6000-ada", "rtx-pro-6000", "mi300x", "mi325x", "mi355x", "gb200", "gb300", "gb10",
}


@pytest.fixture(autouse=True)
def _no_env_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GPUS_FILE_ENV, raising=False)


@pytest.fixture()
def catalog() -> dict[str, GpuSpec]:
    return load_catalog()


def _write(tmp_path: Path, text: str, name: str = "gpus.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- packaged catalog


def test_catalog_has_every_required_gpu(catalog: dict[str, GpuSpec]) -> None:
    assert REQUIRED_IDS <= set(catalog)


def test_every_packaged_figure_is_present_positive_and_sourced(catalog: dict[str, GpuSpec]) -> None:
    for spec in catalog.values():
        assert spec.name and spec.vendor in {"nvidia", "amd"}, spec.id
        assert spec.cuda_total_bytes > 0 and spec.nvml_total_bytes > 0 and spec.memory_gb > 0, spec.id
        assert isinstance(spec.cuda_total_bytes, int) and isinstance(spec.nvml_total_bytes, int), spec.id
        assert spec.memory_bandwidth_bytes_per_s is not None and spec.memory_bandwidth_bytes_per_s > 0
        assert spec.compute_capability is not None, spec.id
        assert "bf16" in spec.flops or "fp16" in spec.flops, spec.id
        figures = ["memory_gb", "cuda_total_bytes", "nvml_total_bytes", "memory_bandwidth_bytes_per_s",
                   "compute_capability", *(f"flops.{d}" for d in spec.flops)]
        if spec.interconnect_bytes_per_s is not None:
            figures.append("interconnect_bytes_per_s")
        if spec.integrated:
            figures.append("integrated")
        for key in figures:
            assert len(spec.sources.get(key, "").strip()) > 10, f"{spec.id}: no source for {key}"
        assert set(spec.sources) == set(figures), f"{spec.id}: sources for figures it does not state"


def test_estimated_figures_say_so_and_measured_ones_say_measured(catalog: dict[str, GpuSpec]) -> None:
    for spec in catalog.values():
        src = spec.sources["cuda_total_bytes"]
        assert src.startswith(("measured:", "estimated:")), spec.id
    assert catalog["h100-sxm"].sources["cuda_total_bytes"].startswith("measured: 79.19 GiB")
    assert catalog["l4"].sources["cuda_total_bytes"].startswith("estimated:")


def test_the_gh200_total_is_torchs_measured_95_gib(catalog: dict[str, GpuSpec]) -> None:
    """NVIDIA's GH200 blog prints torch's OOM "GPU 0 has a total capacity of 95.00 GiB" beside nvidia-smi's
    97.871 GB, OpenCL through the CUDA ICD reports 97280 MB on 'NVIDIA GH200 480GB', and Isambard-AI's GH200 nodes
    print the same 95.00 GiB: 0.58 GiB below NVML, where the estimate from H100 NVL's driver share said 95.08.
    Isambard's part names itself 'NVIDIA GH200 120GB' (vLLM's fused-MoE config file name)."""
    gh200 = catalog["gh200"]
    assert gh200.cuda_total_bytes == 97280 * MiB == round(95.00 * GiB)
    assert gh200.nvml_total_bytes == 97871 * MiB
    assert gh200.sources["cuda_total_bytes"].startswith("measured: 95.00 GiB")
    assert get_gpu("NVIDIA GH200 120GB").id == get_gpu("NVIDIA GH200 480GB").id == "gh200"


def test_cuda_total_is_below_nvml_total_for_every_gpu(catalog: dict[str, GpuSpec]) -> None:
    # cudaMemGetInfo excludes driver-reserved memory (vLLM reference §9); GB300 loses the most (284,208 MiB
    # NVML vs 276.50 GiB, 1.05 GiB). GB10 has no NVML total: vLLM falls back to the CUDA total.
    for spec in catalog.values():
        if spec.id == "gb10":
            assert spec.nvml_total_bytes == spec.cuda_total_bytes
            assert "'Not Supported'" in spec.sources["nvml_total_bytes"]
            continue
        assert spec.cuda_total_bytes < spec.nvml_total_bytes, spec.id
        assert spec.nvml_total_bytes - spec.cuda_total_bytes < 1.1 * GiB, spec.id


def test_marketing_capacity_matches_nvml_total_within_ten_percent(catalog: dict[str, GpuSpec]) -> None:
    # Catches a MiB/bytes or GB/GiB slip in either figure.
    for spec in catalog.values():
        assert abs(spec.memory_gb * 1e9 / spec.nvml_total_bytes - 1) < 0.10, spec.id


def test_narrower_dtypes_are_never_slower(catalog: dict[str, GpuSpec]) -> None:
    for spec in catalog.values():
        f = spec.flops
        if "bf16" in f and "fp8" in f:
            assert f["fp8"] >= f["bf16"], spec.id
        if "fp8" in f and "fp4" in f:
            assert f["fp4"] >= f["fp8"], spec.id


def test_ids_aliases_and_device_names_are_unique_even_ignoring_punctuation(
    catalog: dict[str, GpuSpec],
) -> None:
    owner: dict[str, str] = {}
    for spec in catalog.values():
        for name in {spec.id, *spec.aliases, *spec.device_names}:
            slug = _slug(name)
            assert owner.setdefault(slug, spec.id) == spec.id, f"{name!r}: {owner[slug]} vs {spec.id}"


def test_h100_alias_is_the_sxm_part_with_measured_totals() -> None:
    h100 = get_gpu("h100")
    assert h100.id == "h100-sxm"
    assert h100.cuda_total_bytes == round(79.19 * GiB) == 85_029_615_043
    assert format_gib_vllm(h100.cuda_total_bytes) == "79.19"
    assert h100.nvml_total_bytes == 81_559 * MiB
    assert h100.memory_bandwidth_bytes_per_s == 3.35e12
    assert h100.peak_flops("bf16") == 989.4e12


def test_h100_bf16_ridge_point_is_about_295_flop_per_byte() -> None:
    ridge = get_gpu("h100").ridge_point("bf16")
    assert ridge == pytest.approx(989.4e12 / 3.35e12)
    assert 295 < ridge < 296


def test_measured_totals_of_other_gpus_match_the_reference() -> None:
    # vLLM reference §9 and tests/fixtures/data/gpu-memory.yaml, as vLLM prints them.
    expected_cuda = {"h200": "139.72", "a100": "79.32", "a100-40gb": "39.38", "l40s": "44.42", "t4": "14.74"}
    for name, gib in expected_cuda.items():
        assert format_gib_vllm(get_gpu(name).cuda_total_bytes) == gib, name
    expected_nvml_mib = {"h200": 143_771, "a100": 81_920, "a100-40gb": 40_960, "l40s": 46_068,
                         "a10": 23_028, "l4": 23_034, "t4": 15_360}
    for name, mib in expected_nvml_mib.items():
        assert get_gpu(name).nvml_total_bytes == mib * MiB, name


def test_grace_blackwell_entries_carry_their_measured_totals_and_dense_figures() -> None:
    gb200, gb300, gb10 = get_gpu("gb200"), get_gpu("gb300"), get_gpu("dgx-spark")
    assert format_gib_vllm(gb200.cuda_total_bytes) == "184.31" and gb200.cuda_total_bytes == 197_901_355_581
    assert gb200.nvml_total_bytes == 189_471 * MiB
    assert (gb200.memory_gb, gb200.memory_bandwidth_bytes_per_s, gb200.interconnect_bytes_per_s) == (186, 8e12, 1.8e12)
    assert dict(gb200.flops) == {"bf16": 2.5e15, "fp16": 2.5e15, "fp8": 5e15, "fp4": 10e15, "int8": 5e15}
    assert format_gib_vllm(gb300.cuda_total_bytes) == "276.5" and gb300.nvml_total_bytes == 284_208 * MiB
    assert dict(gb300.flops) == {"bf16": 2.5e15, "fp16": 2.5e15, "fp8": 5e15, "fp4": 15e15}
    assert (gb300.memory_gb, gb300.capability, gb300.arch) == (279, (10, 3), "blackwell")
    assert format_gib_vllm(gb10.cuda_total_bytes) == "121.63" and gb10.cuda_total_bytes == 130_599_218_053
    assert (gb10.memory_gb, gb10.memory_bandwidth_bytes_per_s, gb10.interconnect_bytes_per_s) == (128, 273e9, None)
    assert dict(gb10.flops) == {"bf16": 125e12, "fp16": 125e12, "fp8": 250e12, "fp4": 500e12}
    assert (gb10.capability, gb10.arch) == ((12, 1), "blackwell-rtx")
    # Sparsity halved and said so; GB10's wider formats are derived from its one NVIDIA figure.
    assert "with sparsity" in gb200.sources["flops.bf16"] and "without sparsity" in gb300.sources["flops.fp4"].lower()
    assert gb10.sources["flops.bf16"].startswith("derived:")
    assert gb10.ridge_point("fp4") == pytest.approx(500e12 / 273e9)


def test_the_141_gb_h20_and_the_l20_carry_their_figures() -> None:
    h20e, l20 = get_gpu("NVIDIA H20-3e"), get_gpu("NVIDIA L20")
    assert (h20e.id, l20.id, get_gpu("NVIDIA H20").id, get_gpu("h20-141gb").id) == ("h20-3e", "l20", "h20", "h20-3e")
    # vllm#13074's 'total_gpu_memory (139.72GiB)' and nvidia-smi's 143,771 MiB: H200's totals
    assert format_gib_vllm(h20e.cuda_total_bytes) == "139.72"
    assert h20e.cuda_total_bytes == get_gpu("h200").cuda_total_bytes == round(139.72 * GiB)
    assert h20e.nvml_total_bytes == 143_771 * MiB
    assert h20e.sources["cuda_total_bytes"].startswith("measured: 139.72 GiB")
    assert (h20e.memory_gb, h20e.memory_bandwidth_bytes_per_s, h20e.interconnect_bytes_per_s) == (141, 4.8e12, 900e9)
    assert dict(h20e.flops) == {"bf16": 148e12, "fp16": 148e12, "fp8": 296e12, "int8": 296e12}
    assert (h20e.capability, h20e.arch) == ((9, 0), "hopper")
    # L20: NVML 46,068 MiB measured, the cudaMemGetInfo total estimated from L40S's (same board memory)
    assert l20.nvml_total_bytes == 46_068 * MiB and format_gib_vllm(l20.cuda_total_bytes) == "44.42"
    assert l20.sources["cuda_total_bytes"].startswith("estimated: 44.42 GiB")
    assert (l20.memory_gb, l20.memory_bandwidth_bytes_per_s, l20.interconnect_bytes_per_s) == (48, 864e9, None)
    assert dict(l20.flops) == {"bf16": 119.5e12, "fp16": 119.5e12, "fp8": 239e12, "int8": 239e12}
    assert (l20.capability, l20.arch) == ((8, 9), "ada") and l20.sources["flops.fp8"].startswith("derived:")


def test_nvml_totals_put_gpus_in_vllms_batch_tiers() -> None:
    # vLLM reference §5: >= 160 GiB NVML -> top tier; H200's 140.4 GiB is in the >= 70 GiB tier.
    assert round(get_gpu("h200").nvml_total_bytes / GiB, 2) == 140.40
    for name in ("b200", "b300", "gb200", "gb300", "mi300x"):
        assert get_gpu(name).nvml_total_bytes >= 160 * GiB, name
    for name in ("h100", "h200", "h20", "h20-3e", "gh200"):
        assert 70 * GiB <= get_gpu(name).nvml_total_bytes < 160 * GiB, name
    assert get_gpu("l40s").nvml_total_bytes < 70 * GiB and get_gpu("l20").nvml_total_bytes < 70 * GiB


@pytest.mark.parametrize(
    ("name", "arch"),
    [("h100", "hopper"), ("b200", "blackwell"), ("b300", "blackwell"), ("rtx-5090", "blackwell-rtx"),
     ("rtx-pro-6000", "blackwell-rtx"), ("l40s", "ada"), ("a10", "ampere"), ("a100", "ampere"),
     ("t4", "turing"), ("v100", "volta"), ("mi300x", "cdna3"), ("mi355x", "cdna4"), ("gb200", "blackwell"),
     ("gb300", "blackwell"), ("gb10", "blackwell-rtx")],
)
def test_arch_comes_from_compute_capability(name: str, arch: str) -> None:
    assert get_gpu(name).arch == arch


def test_capability_is_major_minor_for_nvidia_and_none_for_amd() -> None:
    assert get_gpu("b300").capability == (10, 3)
    assert get_gpu("h100").capability == (9, 0)
    assert get_gpu("mi300x").capability is None


# --------------------------------------------------------------------------- FLOP/s lookup


def test_fp8_on_ampere_falls_back_to_bf16_and_says_so() -> None:
    resolved = get_gpu("a100").resolve_flops("fp8")
    assert (resolved.flops, resolved.dtype, resolved.requested) == (312e12, "bf16", "fp8")
    assert resolved.is_fallback


def test_bf16_on_turing_uses_the_fp16_figure() -> None:
    resolved = get_gpu("t4").resolve_flops("bfloat16")
    assert (resolved.flops, resolved.dtype, resolved.is_fallback) == (65e12, "fp16", True)


def test_fp4_on_blackwell_is_the_dense_figure_without_fallback() -> None:
    resolved = get_gpu("b200").resolve_flops("nvfp4")
    assert (resolved.flops, resolved.dtype, resolved.is_fallback) == (9e15, "fp4", False)
    assert get_gpu("h100").peak_flops("fp8_e4m3") == 1978.9e12


def test_unknown_dtype_is_an_invalid_parameter() -> None:
    with pytest.raises(InvalidParameter, match="unknown compute dtype"):
        normalize_dtype("fp12")


# --------------------------------------------------------------------------- lookup by name


@pytest.mark.parametrize(
    ("name", "gpu_id"),
    [("H100", "h100-sxm"), ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("h100 sxm", "h100-sxm"),
     ("NVIDIA H100 NVL", "h100-nvl"), ("NVIDIA H100 PCIe", "h100-pcie"),
     ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"), ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
     ("Tesla T4", "t4"), ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("rtx4090", "rtx-4090"),
     ("NVIDIA B300 SXM6 AC", "b300"), ("AMD Instinct MI300X", "mi300x"), ("  L40S ", "l40s"),
     ("gb200", "gb200"), ("NVIDIA GB200", "gb200"), ("GB200 NVL72", "gb200"), ("NVIDIA GB300", "gb300"),
     ("gb300-nvl72", "gb300"), ("NVIDIA GB10", "gb10"), ("DGX Spark", "gb10"), ("dgx-spark", "gb10")],
)
def test_lookup_accepts_ids_aliases_and_full_device_names(name: str, gpu_id: str) -> None:
    assert get_gpu(name).id == gpu_id


def test_unknown_gpu_suggests_close_names() -> None:
    with pytest.raises(UnknownGpu) as info:
        get_gpu("h1000")
    assert "h100" in info.value.suggestions
    assert "unknown GPU 'h1000'" in str(info.value)
    assert info.value.hint is not None and "h100" in info.value.hint


def test_lookup_never_matches_by_prefix() -> None:
    with pytest.raises(UnknownGpu):
        get_gpu("h10")


# --------------------------------------------------------------------------- user files


def test_user_file_overrides_figures_and_adds_gpus(tmp_path: Path) -> None:
    path = _write(tmp_path, """
gpus:
  - id: h100-sxm
    cuda_total_bytes: 79.11GiB
  - id: my-gpu
    name: My Accelerator
    aliases: [mine]
    cuda_total_bytes: 48000000000
    memory_bandwidth_bytes_per_s: 1.5TB/s
    flops: {bf16: 400T}
""")
    catalog = load_catalog(path)
    h100 = catalog["h100-sxm"]
    assert h100.cuda_total_bytes == int(79.11 * GiB)
    assert h100.nvml_total_bytes == 81_559 * MiB  # not overridden: kept
    assert h100.aliases[0] == "h100"
    assert h100.sources["cuda_total_bytes"] == f"user file {path}"
    mine = get_gpu("mine", path)
    assert (mine.id, mine.name, mine.cuda_total_bytes) == ("my-gpu", "My Accelerator", 48_000_000_000)
    assert mine.nvml_total_bytes == mine.cuda_total_bytes  # unknown NVML total defaults to the CUDA total
    assert mine.memory_bandwidth_bytes_per_s == 1.5e12 and mine.peak_flops("bf16") == 400e12
    assert list(catalog)[-1] == "my-gpu"


def test_env_var_names_the_user_file_when_no_file_is_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "gpus:\n  - {id: l4, cuda_total_bytes: 23000000000}\n")
    monkeypatch.setenv(GPUS_FILE_ENV, str(path))
    assert get_gpu("l4").cuda_total_bytes == 23_000_000_000
    monkeypatch.setenv(GPUS_FILE_ENV, "")
    assert get_gpu("l4").cuda_total_bytes == round(22.05 * GiB)


def test_user_overrides_do_not_leak_into_the_cached_catalog(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  - {id: t4, cuda_total_bytes: 1000}\n")
    assert load_catalog(path)["t4"].cuda_total_bytes == 1000
    fresh = load_catalog()
    assert fresh["t4"].cuda_total_bytes == round(14.74 * GiB)
    fresh.pop("t4")
    assert "t4" in load_catalog()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpus:\n  - {id: x1, name: X, cuda_total_bytes: 100}\n",
         "GPU 'x1': missing memory_bandwidth_bytes_per_s"),
        ("gpus:\n  - {id: h100-sxm, memory_bandwidth_bytes_per_s: -3}\n",
         "GPU 'h100-sxm': memory_bandwidth_bytes_per_s must be a positive number, got -3"),
        ("gpus:\n  - {id: h100-sxm, cuda_total_bytes: lots}\n", "GPU 'h100-sxm': cuda_total_bytes must be"),
        ("gpus:\n  - {id: h100-sxm, flops: {bf16: fast}}\n", "GPU 'h100-sxm': flops.bf16 must be"),
        ("gpus:\n  - {id: h100-sxm, flops: {fp6: 1.0e+15}}\n", "flops.fp6: unknown dtype"),
        ("gpus:\n  - {id: h100-sxm, memory_bandwith_bytes_per_s: 1}\n", "unknown key(s) memory_bandwith"),
        ("gpus:\n  - {id: new-gpu, name: N, aliases: [h200], cuda_total_bytes: 10, "
         "memory_bandwidth_bytes_per_s: 10}\n", "name 'h200' is used by both GPU 'h200' and GPU 'new-gpu'"),
        ("gpus:\n  - {id: h100, name: dup, cuda_total_bytes: 10, memory_bandwidth_bytes_per_s: 10}\n",
         "name 'h100' is used by both"),
        ("gpus:\n  - {id: t4, cuda_total_bytes: 10}\n  - {id: t4, cuda_total_bytes: 20}\n", "listed twice"),
        ("gpus:\n  - {id: t4, cuda_total_bytes: true}\n", "cuda_total_bytes must be a positive number"),
        ("just text\n", "expected a list of GPUs"),
    ],
)
def test_bad_user_file_names_the_entry_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(BadConfig) as info:
        load_catalog(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_yaml_is_a_parse_error_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  - id: [unclosed\n")
    with pytest.raises(ParseError, match=r"not valid YAML at line \d+") as info:
        load_catalog(path)
    assert "\n" not in str(info.value)


def test_missing_user_file_is_bad_config(tmp_path: Path) -> None:
    with pytest.raises(BadConfig, match="nope.yaml': no such file"):
        load_catalog(tmp_path / "nope.yaml")


def test_packaged_rules_reject_a_figure_without_source_but_user_files_allow_it() -> None:
    entry = {"id": "x1", "name": "X", "vendor": "nvidia", "memory_gb": 24, "cuda_total_bytes": 100,
             "nvml_total_bytes": 200, "memory_bandwidth_bytes_per_s": 1.0e12, "flops": {"bf16": 1.0e14},
             "compute_capability": "8.9",
             "sources": {"memory_gb": "m", "cuda_total_bytes": "c", "nvml_total_bytes": "n",
                         "memory_bandwidth_bytes_per_s": "b", "compute_capability": "cc"}}
    with pytest.raises(BadConfig, match="GPU 'x1': figure\\(s\\) without a source: flops.bf16"):
        parse_catalog({"gpus": [entry]}, "test.yaml", strict=True)
    assert parse_catalog({"gpus": [entry]}, "user.yaml")["x1"].peak_flops() == 1e14
    sourced = {**entry, "sources": {**entry["sources"], "flops.bf16": "datasheet"}}  # type: ignore[dict-item]
    assert parse_catalog({"gpus": [sourced]}, "test.yaml", strict=True)["x1"].arch == "ada"


# --------------------------------------------------------------------------- custom GPU, parsers, spec


def test_custom_gpu_takes_memory_as_the_cuda_total() -> None:
    gpu = custom_gpu("24GiB", "1TB/s", "300T")
    assert gpu.custom and gpu.vendor == "custom"
    assert gpu.cuda_total_bytes == gpu.nvml_total_bytes == 24 * GiB
    assert gpu.memory_bandwidth_bytes_per_s == 1e12
    assert gpu.peak_flops("bf16") == 300e12
    assert gpu.resolve_flops("fp8").is_fallback
    assert gpu.ridge_point() == pytest.approx(300.0)


def test_custom_gpu_without_bandwidth_or_flops_fails_only_when_they_are_needed() -> None:
    gpu = custom_gpu(24 * GiB)
    assert gpu.cuda_total_bytes == 24 * GiB
    with pytest.raises(InvalidParameter, match="no memory bandwidth"):
        gpu.require_bandwidth()
    with pytest.raises(InvalidParameter, match="no tensor throughput"):
        gpu.peak_flops("bf16")


@pytest.mark.parametrize("memory", ["abc", "0GiB", -5])
def test_custom_gpu_rejects_bad_memory(memory: str | int) -> None:
    with pytest.raises(InvalidParameter):
        custom_gpu(memory)


@pytest.mark.parametrize(
    ("text", "value"),
    [("300T", 300e12), ("1.2 PFLOPS", 1.2e15), ("989.4e12", 989.4e12), ("500TFLOP/s", 500e12),
     ("2.5p", 2.5e15), (7e14, 7e14)],
)
def test_parse_flops_reads_decimal_si_prefixes(text: str | float, value: float) -> None:
    assert parse_flops(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["fast", "-5T", "0", "1.2X", True])
def test_parse_flops_rejects_nonsense(text: str | bool) -> None:
    with pytest.raises(InvalidParameter):
        parse_flops(text)


def test_gpu_spec_is_frozen_and_hashable() -> None:
    h100 = get_gpu("h100")
    assert hash(h100) == hash(get_gpu("h100-sxm"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        h100.cuda_total_bytes = 1  # type: ignore[misc]


def test_with_cuda_total_replaces_the_total_and_its_source() -> None:
    h100 = get_gpu("h100").with_cuda_total(84_000_000_000)
    assert h100.cuda_total_bytes == 84_000_000_000
    assert h100.sources["cuda_total_bytes"] == "user: --gpu-total-bytes"
    assert h100.nvml_total_bytes == 81_559 * MiB
    with pytest.raises(InvalidParameter):
        h100.with_cuda_total(0)


# --------------------------------------------------------------------------- CLI

runner = CliRunner()


def test_cli_table_lists_every_gpu() -> None:
    result = runner.invoke(app, ["gpus"], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.stderr
    for gpu_id in ("h100-sxm", "b200", "mi355x", "rtx-pro-6000", "gb200", "gb300", "gb10"):
        assert gpu_id in result.stdout
    assert "CUDA GiB = cudaMemGetInfo total" in result.stdout and "79.19" in result.stdout and "989.4" in result.stdout
    assert result.stderr == ""


def test_cli_json_numbers_equal_the_core(tmp_path: Path) -> None:
    result = runner.invoke(app, ["gpus", "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kind"] == "gpus" and doc["schema_version"] == 2
    entries = {e["id"]: e for e in doc["gpus"]}
    assert set(entries) == set(load_catalog())
    h100, core = entries["h100-sxm"], get_gpu("h100")
    assert h100["cuda_total_bytes"] == core.cuda_total_bytes
    assert h100["nvml_total_bytes"] == core.nvml_total_bytes
    assert h100["flops"]["bf16"] == core.flops["bf16"]
    assert h100["aliases"][0] == "h100" and h100["sources"]["flops.bf16"].startswith("https://")


def test_cli_json_gives_each_gpus_architecture_as_the_catalog_derives_it(tmp_path: Path) -> None:
    result = runner.invoke(app, ["gpus", "--json"])
    assert result.exit_code == 0, result.stderr
    entries = {e["id"]: e for e in json.loads(result.stdout)["gpus"]}
    arch = {gpu_id: entries[gpu_id]["arch"] for gpu_id in ("h100-sxm", "b200", "a100-80gb-sxm", "l40s", "rtx-5090",
                                                             "t4", "mi300x", "mi355x")}
    assert arch == {"h100-sxm": "hopper", "b200": "blackwell", "a100-80gb-sxm": "ampere", "l40s": "ada",
                    "rtx-5090": "blackwell-rtx", "t4": "turing", "mi300x": "cdna3", "mi355x": "cdna4"}
    assert all(e["arch"] == get_gpu(gpu_id).arch for gpu_id, e in entries.items())
    assert list(entries["h100-sxm"])[9:11] == ["compute_capability", "arch"]  # beside what it is derived from
    # a user GPU without a compute capability: "unknown", never null
    path = _write(tmp_path, "gpus:\n  - {id: x1, name: X1, cuda_total_bytes: 48000000000, "
                            "memory_bandwidth_bytes_per_s: 1.5TB/s, flops: {bf16: 400T}}\n")
    result = runner.invoke(app, ["gpus", "x1", "--json", "--gpus-file", str(path)])
    assert result.exit_code == 0, result.stderr
    assert [e["arch"] for e in json.loads(result.stdout)["gpus"]] == ["unknown"]


def test_cli_shows_a_grace_blackwell_part_by_its_device_name_with_sources() -> None:
    result = runner.invoke(app, ["gpus", "NVIDIA GB10", "--json"])
    assert result.exit_code == 0, result.stderr
    (gb10,) = json.loads(result.stdout)["gpus"]
    assert gb10["id"] == "gb10" and gb10["cuda_total_bytes"] == 130_599_218_053 and gb10["flops"]["fp4"] == 500e12
    assert "121.63 GiB" in gb10["sources"]["cuda_total_bytes"] and "unified" in gb10["name"]
    result = runner.invoke(app, ["gpus", "gb200"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert "gb200" in result.stdout and "184.31" in result.stdout and "189471MiB" in result.stdout


def test_cli_one_gpu_shows_its_sources() -> None:
    result = runner.invoke(app, ["gpus", "NVIDIA H100 80GB HBM3"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert "h100-sxm" in result.stdout and "vllm/issues/55169" in result.stdout


def test_cli_one_gpu_as_json_is_a_list_of_one(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  - {id: a10, cuda_total_bytes: 23000000000}\n")
    result = runner.invoke(app, ["gpus", "a10", "--json", "--gpus-file", str(path)])
    assert result.exit_code == 0, result.stderr
    (entry,) = json.loads(result.stdout)["gpus"]
    assert (entry["id"], entry["cuda_total_bytes"]) == ("a10", 23_000_000_000)


def test_cli_unknown_gpu_exits_2_with_one_line() -> None:
    result = runner.invoke(app, ["gpus", "h1000"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: unknown GPU 'h1000'") and "h100" in lines[0]


def test_cli_bad_gpus_file_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  - {id: h100-sxm, memory_bandwidth_bytes_per_s: -1}\n")
    result = runner.invoke(app, ["gpus", "--gpus-file", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "memory_bandwidth_bytes_per_s" in lines[0] and "h100-sxm" in lines[0]


def test_gpu_for_device_name_reads_logged_names_through_the_catalog() -> None:
    """Logged device names (torch's, nvidia-smi's, the fused-MoE config file's) resolve by the catalog's lookup;
    a GPU the catalog lacks, or alternatives naming two GPUs, give None (benchmarks/accuracy.py relies on it)."""
    from kvplan.hardware.gpus import gpu_for_device_name, load_catalog

    catalog = load_catalog()
    found = {n: (g.id if g else None) for n in ("NVIDIA H20-3e", "NVIDIA L20", "NVIDIA_H200", "NVIDIA H100 NVL",
                                                "GB10 / DGX Spark", "8x H200/H20", "NVIDIA H200 NVL")
             for g in [gpu_for_device_name(n, catalog)]}
    assert found == {"NVIDIA H20-3e": "h20-3e", "NVIDIA L20": "l20", "NVIDIA_H200": "h200",
                     "NVIDIA H100 NVL": "h100-nvl", "GB10 / DGX Spark": "gb10", "8x H200/H20": None,
                     "NVIDIA H200 NVL": None}
