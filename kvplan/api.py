"""The library: what the commands call, so `kvplan.size`, `kvplan.fit` and `kvplan.check` give the same answers
and the same refusals as `kvplan size`, `kvplan fit` and `kvplan check`.

The CLI (kvplan/cli/) parses its options, calls these functions, and renders what they return; a library
caller gets the same objects (SizeReport, FitReport or SweepReport, CheckReport). Errors are KvplanError
subclasses whose message is the command's `Error: …` line. `progress` shows what is slow (a Hub download) and
`on_warning` receives what the commands print as warnings; both default to nothing. Loading models and GPU
files is the I/O here; the planning itself is the pure core's.

    import kvplan
    report = kvplan.fit("Qwen/Qwen2.5-7B", "h100", max_model_len=32768)     # = kvplan fit … --gpu h100 …
    report = kvplan.fit(vllm_cmd="vllm serve Qwen/Qwen2.5-7B -tp 2")         # no GPU: the sweep, what to rent
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.errors import InvalidParameter
from kvplan.vllm.loading import LoadedModel, Progress, load_model, load_model_with_weights

if TYPE_CHECKING:
    from kvplan.ci.checks import CheckReport
    from kvplan.ci.plan import Deployment, Plan
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.size import SizeReport
    from kvplan.vllm.flags import FitFlags
    from kvplan.vllm.report import FitReport
    from kvplan.vllm.settings import ServeSettings
    from kvplan.vllm.sweep import SweepReport

Warn = Callable[[str], None]
__all__ = ["LoadedModel", "check", "fit", "fit_flags", "fit_plan", "fit_settings", "load_model",
           "load_model_with_weights", "size"]
# `kvplan fit`'s own options beside the vLLM engine arguments of kvplan/vllm/engine_args.py.
_OWN_OPTIONS = ("moe_backend", "rocm_aiter")


def _warn(on_warning: Warn | None, note: str | None) -> None:
    if note and on_warning is not None:
        on_warning(note)


def _text(value: object, flag: str) -> str | None:
    """An argument the command reads as text, read as the command reads it: a number becomes its digits (the
    command sees `--gpu 123` as '123', and says what it says of that); anything else but text or None is the
    command's kind of error (InvalidParameter, one line naming the flag), not an AttributeError further in."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise InvalidParameter(f"{flag}: expected text, got {type(value).__name__} {_short(value)}")


def _path(value: object, flag: str) -> str | Path | None:
    """A file argument: a path (text or os.PathLike) or None; else InvalidParameter as _text."""
    if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
        return Path(os.fspath(value))
    return _text(value, flag)


def _count(value: object, flag: str) -> int | None:
    """A whole-number argument: an int as given (the core checks its range, as for the command), else read as the
    command reads its text (units.parse_count: `2`, `32k`), so `tp="2"` works and `tp=[2]` is a one-line error."""
    from kvplan.units import parse_count

    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, bool):
        raise InvalidParameter(f"{flag}: expected a whole number, got {value!r}")
    return parse_count(_text(value, flag) or "", what=flag)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def size(model: str, *, revision: str | None = None, kv_cache_dtype: str = "auto", tp: int = 1, pp: int = 1,
         progress: Progress | None = None, on_warning: Warn | None = None) -> SizeReport:
    """`kvplan size MODEL`: KV bytes per token, layers, weights; vLLM's refusal (if the latest vLLM does not serve
    the model) is a note, since an older vLLM (or --trust-remote-code) may serve it."""
    from dataclasses import replace

    from kvplan.model.size import size_report
    from kvplan.vllm.architectures import serving_refusal
    from kvplan.vllm.defaults import LATEST

    model, revision = _text(model, "MODEL") or "", _text(revision, "--revision")
    kv_cache_dtype = _text(kv_cache_dtype, "--kv-cache-dtype") or "auto"
    tp, pp = _count(tp, "--tensor-parallel-size") or 0, _count(pp, "--pipeline-parallel-size") or 0
    loaded = load_model_with_weights(model, revision, progress=progress)
    _warn(on_warning, loaded.note)
    report = size_report(
        loaded.spec, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype,
        weights_bytes=loaded.weights.bytes if loaded.weights else None,
        weights_source="safetensors metadata" if loaded.weights else "analytic parameter count",
    )
    reason = serving_refusal(loaded.spec, LATEST)  # the same reason `fit` stops with
    if reason is not None:
        report = replace(report, notes=(*report.notes, reason))
    return report


def fit_flags(model: str | None = None, *, vllm_cmd: str | None = None, num_gpus: int | None = None,
              usage: str | None = None, vllm_version: str | None = None, weights_memory: str | None = None,
              activation_memory: str | None = None, non_torch_memory: str | None = None,
              cuda_graph_memory: str | None = None, context: str | None = None, concurrency: int | None = None,
              env: Iterable[str] | None = None, environ: Mapping[str, str] | None = None,
              on_ignored: Callable[[tuple[str, ...]], None] | None = None, **options: object) -> FitFlags:
    """`kvplan fit`'s options read as the command reads them (kvplan/vllm/flags.py:fit_flags): `options` are vLLM's
    engine arguments by name (`max_model_len=32768`, `tensor_parallel_size=2`, `kv_cache_dtype="fp8"`, …),
    `env` the `--env VLLM_NAME=VALUE` words, `environ` the environment vLLM would see (default: this process's);
    `on_ignored` hears the flags of `vllm_cmd` that kvplan does not use (FitFlags.ignored keeps them too)."""
    from kvplan.errors import close_matches
    from kvplan.vllm.engine_args import fit_options
    from kvplan.vllm.flags import fit_flags as read_flags

    model, vllm_cmd, usage = _text(model, "MODEL"), _text(vllm_cmd, "--vllm-cmd"), _text(usage, "--usage")
    vllm_version, context = _text(vllm_version, "--vllm-version"), _text(context, "--context")
    weights_memory, activation_memory = _text(weights_memory, "--weights-memory"), _text(activation_memory,
                                                                                        "--activation-memory")
    non_torch_memory = _text(non_torch_memory, "--non-torch-memory")
    cuda_graph_memory = _text(cuda_graph_memory, "--cuda-graph-memory")
    num_gpus, concurrency = _count(num_gpus, "--num-gpus"), _count(concurrency, "--concurrency")
    known = {arg.name for arg in fit_options()} | set(_OWN_OPTIONS)
    unknown = sorted(set(options) - known)
    if unknown:
        near = close_matches(unknown[0], sorted(known))
        raise InvalidParameter(f"unknown fit option {unknown[0]!r}" + (f" (did you mean {near[0]}?)" if near else ""))
    given = {name: options.get(name) for name in sorted(known)}
    return read_flags(model, given, vllm_cmd=vllm_cmd, usage=usage, vllm_version=vllm_version,
                      measured={"weights": weights_memory, "activation": activation_memory,
                                "non_torch": non_torch_memory, "cuda_graph": cuda_graph_memory},
                      context=context, concurrency=concurrency, num_gpus=num_gpus,
                      environ=os.environ if environ is None else environ, env_words=env, on_ignored=on_ignored)


def fit_settings(flags: FitFlags, loaded: LoadedModel) -> ServeSettings:
    """The settings a read deployment is planned with on its loaded model: a -tp that --num-gpus implied is
    checked against the model (and blamed on --num-gpus), and the Hub's stored weight bytes are used unless
    --weights-memory gives them."""
    from kvplan.vllm.flags import check_implied_tp
    from kvplan.vllm.loading import with_stored_weights

    check_implied_tp(loaded.spec, flags)
    return with_stored_weights(flags.settings, loaded.weights)


def fit_plan(flags: FitFlags, loaded: LoadedModel, gpu: str | GpuSpec | None = None, *,
             gpu_memory: str | None = None, gpu_bandwidth: str | None = None, gpu_total_bytes: str | None = None,
             gpus_file: str | Path | None = None, advise: bool = True) -> FitReport | SweepReport:
    """The plan of a read deployment on its loaded model: one GPU's FitReport (`gpu`, or a custom GPU of
    `gpu_memory`), or, with neither, the SweepReport over the catalog (what to rent). `advise=False` skips the
    re-planned fixes of a failing plan (FitReport.advice: the command always gives them)."""
    from kvplan.hardware import gpus

    gpu = gpu if isinstance(gpu, gpus.GpuSpec) else _text(gpu, "--gpu")
    gpu_memory, gpu_bandwidth = _text(gpu_memory, "--gpu-memory"), _text(gpu_bandwidth, "--gpu-bandwidth")
    gpu_total_bytes, gpus_file = _text(gpu_total_bytes, "--gpu-total-bytes"), _path(gpus_file, "--gpus-file")
    settings = fit_settings(flags, loaded)
    if gpu is None and gpu_memory is None:
        from kvplan.vllm.sweep import sweep_gpus

        _refuse_one_gpu_flags(gpu_bandwidth=gpu_bandwidth, gpu_total_bytes=gpu_total_bytes)

        catalog = list(gpus.load_catalog(gpus_file).values())  # NVIDIA by vLLM's CUDA rules, AMD by its ROCm rules
        return sweep_gpus(loaded.spec, catalog, settings)
    from kvplan.vllm.fit import plan_fit

    return plan_fit(loaded.spec, _gpu(gpu, gpu_memory, gpu_bandwidth, gpu_total_bytes, gpus_file), settings,
                    advise=advise)


def _refuse_one_gpu_flags(*, gpu_bandwidth: str | None, gpu_total_bytes: str | None) -> None:
    """The sweep over the catalog (no --gpu, no --gpu-memory) has no one GPU for a measured total or a custom
    bandwidth to describe: refused, as SGLang's sweep refuses them (cli/fit_sglang.py), not silently dropped."""
    if gpu_total_bytes is not None:
        raise InvalidParameter("--gpu-total-bytes is measured on one GPU: the catalog sweep (no --gpu) cannot use it",
                               hint="name that GPU with --gpu")
    if gpu_bandwidth is not None:
        raise InvalidParameter("--gpu-bandwidth describes a custom GPU: give --gpu-memory with it",
                               hint="a catalog GPU keeps its datasheet bandwidth (kvplan gpus ID)")


def _gpu(gpu: str | GpuSpec | None, gpu_memory: str | None, gpu_bandwidth: str | None,
         gpu_total_bytes: str | None, gpus_file: str | Path | None) -> GpuSpec:
    """The GPU `kvplan fit --gpu ID` (or --gpu-memory, a custom one; --gpu-total-bytes, a measured total) names."""
    from kvplan.hardware import gpus
    from kvplan.units import parse_bytes

    if gpu_bandwidth is not None and gpu_memory is None:
        raise InvalidParameter("--gpu-bandwidth describes a custom GPU: give --gpu-memory with it",
                               hint="a catalog GPU keeps its datasheet bandwidth (kvplan gpus ID)")
    if gpu_memory is not None:
        chip = gpus.custom_gpu(gpu_memory, gpu_bandwidth, name=gpu if isinstance(gpu, str) else "custom")
    elif isinstance(gpu, str):
        chip = gpus.get_gpu(gpu, gpus_file)
    else:
        assert gpu is not None
        chip = gpu
    if gpu_total_bytes is not None:
        chip = chip.with_cuda_total(parse_bytes(gpu_total_bytes, what="--gpu-total-bytes"))
    return chip


def fit(model: str | None = None, gpu: str | GpuSpec | None = None, *, vllm_cmd: str | None = None,
        gpu_memory: str | None = None, gpu_bandwidth: str | None = None, gpu_total_bytes: str | None = None,
        gpus_file: str | Path | None = None, advise: bool = True, progress: Progress | None = None,
        on_warning: Warn | None = None, **options: Any) -> FitReport | SweepReport:
    """`kvplan fit`: vLLM's memory budget, KV blocks, concurrency and startup verdict on `gpu` (a catalog id or a
    GpuSpec), or without one the cheapest layout on each catalog GPU. `options` are fit_flags' (vLLM's engine
    arguments by name, `num_gpus`, `context`, `concurrency`, the measured `…_memory` overrides, …). A report
    whose `fits` is False (no `rows`, for a sweep) is the command's exit status 1; a bad input raises.
    `advise=False`: no re-planned fixes (fit_plan)."""
    flags = fit_flags(model, vllm_cmd=vllm_cmd, **options)
    loaded = load_model_with_weights(flags.model, flags.revision, hf_overrides=flags.hf_overrides, progress=progress)
    _warn(on_warning, loaded.note)
    return fit_plan(flags, loaded, gpu, gpu_memory=gpu_memory, gpu_bandwidth=gpu_bandwidth,
                    gpu_total_bytes=gpu_total_bytes, gpus_file=gpus_file, advise=advise)


def check(plan: str | os.PathLike[str] | Plan, gpus_file: str | Path | None = None, *,
          progress: Progress | None = None, on_warning: Warn | None = None) -> CheckReport:
    """`kvplan check PLAN`: every deployment of a plan file judged against its requirements (`passed` False is
    the command's exit status 1). Each model is loaded once per source, as `fit` loads it."""
    from dataclasses import replace

    from kvplan.ci.checks import check_report, evaluate_deployment
    from kvplan.ci.plan import Plan, load_plan
    from kvplan.errors import KvplanError
    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.loading import with_stored_weights

    gpus_file = _path(gpus_file, "--gpus-file")
    loaded_plan = plan if isinstance(plan, Plan) else load_plan(_path(plan, "PLAN") or "")
    models: dict[tuple[str, str | None, str], LoadedModel] = {}
    results = []
    for dep in loaded_plan.deployments:
        for warning in dep.warnings:
            _warn(on_warning, warning)
        try:
            key = (dep.model_source, dep.revision, repr(sorted((dep.hf_overrides or {}).items())))
            if key not in models:
                models[key] = load_model_with_weights(
                    dep.model_source, dep.revision, progress=progress,
                    hf_overrides=dict(dep.hf_overrides) if dep.hf_overrides else None)
                _warn(on_warning, models[key].note)
        except KvplanError as exc:
            raise dep.locate(exc, "model") from None
        try:
            chip = get_gpu(dep.gpu, gpus_file if gpus_file is not None else loaded_plan.gpus_file)
        except KvplanError as exc:
            raise dep.locate(exc, "gpu") from None
        weighed = replace(dep, settings=with_stored_weights(dep.settings, models[key].weights))
        results.append(evaluate_deployment(_with_draft(weighed), models[key].spec, chip))
    return check_report(loaded_plan.path, results)


def _with_draft(dep: Deployment) -> Deployment:
    """The deployment with the speculative draft its `speculative_config` names loaded, as `fit` loads it."""
    from dataclasses import replace

    from kvplan.errors import KvplanError
    from kvplan.vllm.loading import load_speculative_draft

    spec = dep.settings.speculative_config
    try:
        draft = load_speculative_draft(dict(spec) if spec is not None else None)
    except KvplanError as exc:
        raise dep.locate(exc, "vllm") from None
    return dep if draft is None else replace(dep, settings=replace(dep.settings, speculative_draft=draft))
