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
from typing import TYPE_CHECKING, Any, NamedTuple

from kvplan.errors import InvalidParameter
from kvplan.vllm.loading import LoadedModel, Progress, load_model, load_model_with_weights

if TYPE_CHECKING:
    from kvplan.ci.checks import CheckReport
    from kvplan.ci.plan import Deployment, Plan
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.hardware.model_costs import ModelCosts
    from kvplan.hardware.roofline import Roof, RooflineReport, SpeculativePoint
    from kvplan.model.size import SizeReport
    from kvplan.model.spec import ModelSpec
    from kvplan.observe.diagnose import DiagnoseReport, Thresholds
    from kvplan.sim.inputs import SimDeployment
    from kvplan.sim.prefix import PrefixReport
    from kvplan.sim.scheduler import SchedulerConfig, ServeReport
    from kvplan.sim.workloads import LengthDist, TraceRecord
    from kvplan.vllm.flags import FitFlags
    from kvplan.vllm.report import FitReport
    from kvplan.vllm.settings import ServeSettings
    from kvplan.vllm.sweep import SweepReport

Warn = Callable[[str], None]
__all__ = ["LoadedModel", "RooflineQuery", "check", "check_diagnose_options", "diagnose", "diagnose_metrics",
           "diagnose_plan_settings", "diagnose_with_plan", "fit", "fit_flags", "fit_plan", "fit_settings", "load_model",
           "load_model_with_weights", "roofline", "roofline_deployment", "roofline_plan", "roofline_query",
           "simulate_prefix", "simulate_serve", "size"]
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
             gpus_file: str | Path | None = None, gpu_link: str | None = None,
             advise: bool = True) -> FitReport | SweepReport:
    """The plan of a read deployment on its loaded model: one GPU's FitReport (`gpu`, or a custom GPU of
    `gpu_memory`), or, with neither, the SweepReport over the catalog (what to rent). `gpu_link`: how the GPUs
    reach each other (nvlink or pcie; GpuSpec.with_link), every catalog GPU's in a sweep. `advise=False` skips the
    re-planned fixes of a failing plan (FitReport.verdict.advice: the command always gives them)."""
    from kvplan.hardware import gpus

    gpu = gpu if isinstance(gpu, gpus.GpuSpec) else _text(gpu, "--gpu")
    gpu_memory, gpu_bandwidth = _text(gpu_memory, "--gpu-memory"), _text(gpu_bandwidth, "--gpu-bandwidth")
    gpu_total_bytes, gpus_file = _text(gpu_total_bytes, "--gpu-total-bytes"), _path(gpus_file, "--gpus-file")
    gpu_link = _text(gpu_link, "--gpu-link")
    settings = fit_settings(flags, loaded)
    if gpu is None and gpu_memory is None:
        from kvplan.vllm.sweep import sweep_gpus

        _refuse_one_gpu_flags(gpu_bandwidth=gpu_bandwidth, gpu_total_bytes=gpu_total_bytes)

        catalog = [chip if gpu_link is None else chip.with_link(gpu_link)  # NVIDIA by CUDA's rules, AMD by ROCm's
                   for chip in gpus.load_catalog(gpus_file).values()]
        return sweep_gpus(loaded.spec, catalog, settings)
    from kvplan.vllm.fit import plan_fit

    chip = deployment_gpu(gpu, gpu_memory, gpu_bandwidth, gpu_total_bytes, gpus_file, gpu_link)
    return plan_fit(loaded.spec, chip, settings, advise=advise)


def _refuse_one_gpu_flags(*, gpu_bandwidth: str | None, gpu_total_bytes: str | None) -> None:
    """The sweep over the catalog (no --gpu, no --gpu-memory) has no one GPU for a measured total or a custom
    bandwidth to describe: refused, as SGLang's sweep refuses them (cli/fit_sglang.py), not silently dropped."""
    if gpu_total_bytes is not None:
        raise InvalidParameter("--gpu-total-bytes is measured on one GPU: the catalog sweep (no --gpu) cannot use it",
                               hint="name that GPU with --gpu")
    if gpu_bandwidth is not None:
        raise InvalidParameter("--gpu-bandwidth describes a custom GPU: give --gpu-memory with it",
                               hint="a catalog GPU keeps its datasheet bandwidth (kvplan gpus ID)")


def deployment_gpu(gpu: str | GpuSpec | None, gpu_memory: str | None, gpu_bandwidth: str | None,
                   gpu_total_bytes: str | None, gpus_file: str | Path | None, gpu_link: str | None = None) -> GpuSpec:
    """The GPU `kvplan fit --gpu ID` (or --gpu-memory, a custom one; --gpu-total-bytes, a measured total;
    --gpu-link, how the GPUs reach each other) names."""
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
    return chip if gpu_link is None else chip.with_link(gpu_link)


def fit(model: str | None = None, gpu: str | GpuSpec | None = None, *, vllm_cmd: str | None = None,
        gpu_memory: str | None = None, gpu_bandwidth: str | None = None, gpu_total_bytes: str | None = None,
        gpus_file: str | Path | None = None, gpu_link: str | None = None, advise: bool = True,
        progress: Progress | None = None, on_warning: Warn | None = None, **options: Any) -> FitReport | SweepReport:
    """`kvplan fit`: vLLM's memory budget, KV blocks, concurrency and startup verdict on `gpu` (a catalog id or a
    GpuSpec), or without one the cheapest layout on each catalog GPU. `options` are fit_flags' (vLLM's engine
    arguments by name, `num_gpus`, `context`, `concurrency`, the measured `…_memory` overrides, …). A report
    whose `fits` is False (no `rows`, for a sweep) is the command's exit status 1; a bad input raises.
    `advise=False`: no re-planned fixes (fit_plan)."""
    flags = fit_flags(model, vllm_cmd=vllm_cmd, **options)
    loaded = load_model_with_weights(flags.model, flags.revision, hf_overrides=flags.hf_overrides, progress=progress)
    _warn(on_warning, loaded.note)
    return fit_plan(flags, loaded, gpu, gpu_memory=gpu_memory, gpu_bandwidth=gpu_bandwidth,
                    gpu_total_bytes=gpu_total_bytes, gpus_file=gpus_file, gpu_link=gpu_link, advise=advise)


def check(plan: str | os.PathLike[str] | Plan, gpus_file: str | Path | None = None, *,
          progress: Progress | None = None, on_warning: Warn | None = None) -> CheckReport:
    """`kvplan check PLAN`: every deployment of a plan file judged against its requirements (`passed` False is
    the command's exit status 1). Each model is loaded once per source, as `fit` loads it."""
    from dataclasses import replace

    from kvplan.ci.checks import check_report, evaluate_deployment
    from kvplan.ci.plan import Plan, load_plan
    from kvplan.errors import KvplanError
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.config import ConfigOverrides
    from kvplan.vllm.loading import with_stored_weights

    gpus_file = _path(gpus_file, "--gpus-file")
    loaded_plan = plan if isinstance(plan, Plan) else load_plan(_path(plan, "PLAN") or "")
    models: dict[tuple[str, str | None, str], LoadedModel] = {}
    results = []
    for dep in loaded_plan.deployments:
        for warning in dep.warnings:
            _warn(on_warning, warning)
        try:
            key = (dep.model_source, dep.revision,  # the overrides' type too: SGLang's rules are not vLLM's
                   type(dep.hf_overrides).__name__ + repr(sorted((dep.hf_overrides or {}).items())))
            if key not in models:
                models[key] = load_model_with_weights(
                    dep.model_source, dep.revision, progress=progress,
                    hf_overrides=dep.hf_overrides if isinstance(dep.hf_overrides, ConfigOverrides)
                    else dict(dep.hf_overrides) if dep.hf_overrides else None)
                _warn(on_warning, models[key].note)
        except KvplanError as exc:
            raise dep.locate(exc, "model") from None
        try:
            chip = get_gpu(dep.gpu, gpus_file if gpus_file is not None else loaded_plan.gpus_file)
            chip = chip if dep.gpu_link is None else chip.with_link(dep.gpu_link)
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


# --- kvplan roofline ------------------------------------------------------------------------------------------------

# `kvplan roofline`'s deployment options (vLLM's engine arguments it reads, by name) and its defaults.
ROOFLINE_OPTIONS = ("tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "kv_cache_dtype",
                    "quantization", "max_num_batched_tokens", "max_num_seqs", "gpu_memory_utilization", "rocm_aiter")
ROOFLINE_BATCHES = "1,2,4,8,16,32,64,128,256"
ROOFLINE_CONTEXT = "4096"


def roofline_deployment(model: str | None, vllm_cmd: str | None, given: Mapping[str, object],
                        revision: str | None = None) -> tuple[ServeSettings, str, str | None]:
    """`kvplan roofline`'s deployment as `kvplan fit` reads it (its settings, the model, the revision): `given`
    (ROOFLINE_OPTIONS by name), then a pasted `vllm serve` line's (given values win)."""
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.environment import vllm_environment
    from kvplan.vllm.flags import settings_from_flags

    pasted_env: dict[str, str] = {}
    merged: dict[str, object] = {**given, "revision": revision}
    if vllm_cmd is not None:
        from kvplan.vllm.command_line import parse_vllm_command

        parsed = parse_vllm_command(vllm_cmd)
        pasted_env = parsed.env
        merged = {**{k: v for k, v in parsed.options.items() if merged.get(k) is None},
                  **{k: v for k, v in merged.items() if v is not None}}
        model = model or parsed.model
    if not model:
        raise InvalidParameter('a model is needed: kvplan roofline MODEL (or --vllm-cmd "vllm serve MODEL …")')
    texts: dict[str, object] = {k: (v if isinstance(v, (str, bool)) else str(v)) for k, v in merged.items()
                                if v is not None}
    settings = settings_from_flags(texts, env=vllm_environment({**os.environ, **pasted_env}))
    found = texts.get("revision")
    return settings, model, found if isinstance(found, str) else None


def roofline(model: str | None = None, gpu: str = "", *, vllm_cmd: str | None = None, revision: str | None = None,
             context: str | int = ROOFLINE_CONTEXT, batch: str | Iterable[int] = ROOFLINE_BATCHES,
             prompt: str | int | None = None, max_concurrency: int | None = None,
             bandwidth_efficiency: float | None = None, compute_efficiency: float | None = None,
             gpus_file: str | Path | None = None, engine: str = "vllm", progress: Progress | None = None,
             on_warning: Warn | None = None, on_note: Warn | None = None, **options: object) -> RooflineReport:
    """`kvplan roofline MODEL --gpu GPU`: decode and prefill speed limits (ridge point, tokens/s by batch, memory- or
    compute-bound) of the deployment `options` describe (ROOFLINE_OPTIONS: vLLM's engine arguments by name) or
    `vllm_cmd` pastes, with the KV capacity `kvplan fit` (or, `engine="sglang"`, SGLang's pool) gives.
    `context`, `batch` and `prompt` are read as the command reads its texts ("32K", "1,8,64"). `on_warning` receives
    what the command prints as `Warning: …` (the model's load note among them), `on_note` its `Note: …` lines.

    The maths alone, on costs and roofs already in hand, is kvplan.roofline_report
    (kvplan.hardware.roofline.roofline)."""
    from kvplan.errors import InvalidParameter, close_matches

    unknown = sorted(set(options) - set(ROOFLINE_OPTIONS))
    if unknown:
        near = close_matches(unknown[0], list(ROOFLINE_OPTIONS))
        raise InvalidParameter(f"unknown roofline option {unknown[0]!r}"
                               + (f" (did you mean {near[0]}?)" if near else ""))
    batch_text = batch if isinstance(batch, str) else ",".join(str(b) for b in batch)
    query = roofline_query(gpu, context, batch_text, prompt)
    from kvplan.hardware.gpus import get_gpu

    settings, source, found = roofline_deployment(model, vllm_cmd, options, revision)
    chip = get_gpu(query.gpu, gpus_file)
    loaded = load_model_with_weights(source, found, progress=progress)
    _warn(on_warning, loaded.note)
    return roofline_plan(loaded, settings, query, chip, engine=engine,
                         max_concurrency=max_concurrency, bandwidth_efficiency=bandwidth_efficiency,
                         compute_efficiency=compute_efficiency, given=options, on_warning=on_warning,
                         on_note=on_note)


class RooflineQuery(NamedTuple):
    """What `kvplan roofline` is asked, read: the GPU id, context tokens, decode batches, prompt tokens."""

    gpu: str
    context: int
    batches: tuple[int, ...]
    prompt_tokens: int


def roofline_query(gpu: str, context: str | int, batch: str, prompt: str | int | None) -> RooflineQuery:
    """The command's --gpu, --context, --batch and --prompt read as it reads them (refused as it refuses them)."""
    from kvplan.errors import InvalidParameter
    from kvplan.units import parse_count

    if not gpu:
        raise InvalidParameter("--gpu is needed: the GPU whose roofs to use (see `kvplan gpus`)")
    ctx = parse_count(context, what="--context")
    batches = tuple(parse_count(b, what="--batch", minimum=1) for b in batch.split(",") if b.strip())
    prompt_tokens = parse_count(prompt, what="--prompt", minimum=1) if prompt is not None else max(ctx, 1)
    return RooflineQuery(gpu, ctx, batches, prompt_tokens)


def roofline_plan(loaded: LoadedModel, settings: ServeSettings, query: RooflineQuery, chip: GpuSpec, *,
                  engine: str = "vllm", max_concurrency: int | None = None,
                  bandwidth_efficiency: float | None = None, compute_efficiency: float | None = None,
                  given: Mapping[str, object] | None = None, on_warning: Warn | None = None,
                  on_note: Warn | None = None) -> RooflineReport:
    """The roofline of a read deployment on its loaded model and GPU (what `kvplan roofline` renders): `given` the
    options as the caller gave them (an SGLang plan refuses the vLLM-only ones given)."""
    import dataclasses

    from kvplan.errors import InvalidParameter
    from kvplan.hardware import roofline as rl
    from kvplan.vllm.architectures import served_quantization_methods
    from kvplan.vllm.loading import with_stored_weights
    from kvplan.vllm.quantization import apply_quantization

    given = given or {}
    spec = apply_quantization(loaded.spec, settings.model_config.quantization, served_quantization_methods())
    stored = loaded.weights.bytes if loaded.weights else None
    costs, roof = rl.deployment_roofline(
        spec, chip, tp=settings.parallel_config.tensor_parallel_size,
        kv_cache_dtype=settings.cache_config.kv_cache_dtype, weights_bytes=stored,
        bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency,
        dp=settings.parallel_config.data_parallel_size,
        expert_parallel=settings.parallel_config.enable_expert_parallel)
    if query.context > spec.max_model_len:
        _warn(on_warning, f"--context {query.context:,} exceeds the model's max_model_len {spec.max_model_len:,}")
    settings = with_stored_weights(settings, loaded.weights)
    if engine.lower() not in ("vllm", "sglang"):
        raise InvalidParameter(f"--engine must be vllm or sglang, got {engine!r}")
    if engine.lower() == "sglang":
        _roofline_refuse_vllm_only(given, settings)
        capacity, chunk, running = _roofline_sglang_caps(spec, chip, settings, query.context, stored, on_warning,
                                                         on_note)
        capacity = max_concurrency if max_concurrency is not None else capacity
    else:
        fit = _roofline_fit(spec, chip, settings.updated(context=query.context), on_note)
        capacity, chunk, running = max_concurrency, fit.scheduler.max_num_batched_tokens, fit.scheduler.max_num_seqs
        if capacity is None and fit.verdict.fits:
            capacity = fit.verdict.preemption.max_requests_at_context
        elif capacity is None:
            _warn(on_warning,
                  f"KV capacity not computed: vLLM would not start ({fit.verdict.error or fit.verdict.startup})")
    report = rl.roofline(costs, roof, context=query.context, batches=list(query.batches),
                         prompt_tokens=query.prompt_tokens, max_num_batched_tokens=chunk, kv_capacity_batch=capacity,
                         max_num_seqs=running, gpu_flops=chip.flops)
    return dataclasses.replace(
        report, notes=report.notes + rl.unmodelled_settings(pp=settings.parallel_config.pipeline_parallel_size,
                                                            enforce_eager=settings.model_config.enforce_eager),
        speculative=_roofline_speculative(costs, roof, settings, query.batches, query.context), engine=engine.lower())


def _roofline_speculative(costs: ModelCosts, roof: Roof, settings: ServeSettings, batches: Iterable[int],
                          context: int) -> tuple[SpeculativePoint, ...]:
    """Decode with the deployment's --speculative-config at each batch (none without one)."""
    from kvplan.hardware import roofline as rl
    from kvplan.hardware.model_costs import model_costs
    from kvplan.vllm.speculative import speculative_method

    if not settings.speculative_config:
        return ()
    method = speculative_method(settings.speculative_config)
    drafted = int(settings.speculative_config.get("num_speculative_tokens") or 1)
    draft = (model_costs(settings.speculative_draft, tp=settings.parallel_config.tensor_parallel_size,
                         kv_cache_dtype=settings.cache_config.kv_cache_dtype)
             if settings.speculative_draft is not None else None)
    return tuple(rl.speculative_point(costs, roof, b, context, method=method, drafted=drafted, draft=draft)
                 for b in sorted(set(batches)))


def _roofline_refuse_vllm_only(given: Mapping[str, object], settings: ServeSettings) -> None:
    """`--engine sglang` takes its caps and chunk from SGLang's rules: a vLLM setting given that would be silently
    replaced by SGLang's is refused, and so is a speculative draft (SGLang's is not modelled: kvplan/sglang/fit.py)."""
    from kvplan.errors import InvalidParameter

    for flag, name in (("--max-num-seqs", "max_num_seqs"), ("--max-num-batched-tokens", "max_num_batched_tokens"),
                       ("--gpu-memory-utilization", "gpu_memory_utilization")):
        if given.get(name) is not None:
            raise InvalidParameter(f"{flag} is a vLLM flag: --engine sglang takes SGLang's running-request cap, "
                                   "prefill chunk and memory fraction", hint="drop it, or use --engine vllm")
    if settings.speculative_config:
        raise InvalidParameter("--engine sglang: speculative decoding is not modelled for SGLang yet "
                               "(the draft's KV cells and graph sizes)", hint="use --engine vllm")


def _roofline_sglang_caps(model: ModelSpec, gpu: GpuSpec, settings: ServeSettings, context: int,
                          stored: int | None, on_warning: Warn | None,
                          on_note: Warn | None) -> tuple[int | None, int, int]:
    """`--engine sglang`: the requests of `context` tokens SGLang's pool holds per attention-DP worker (None when
    it would not start), its chunked_prefill_size and max_running_requests (kvplan/sglang/fit.py)."""
    from kvplan.sglang.defaults import SglangDeployment
    from kvplan.sglang.fit import plan_sglang_fit, requests_at
    from kvplan.vllm.memory.weights import given_or_estimated_weights

    dep = SglangDeployment(tp=settings.parallel_config.tensor_parallel_size,
                           kv_cache_dtype=settings.cache_config.kv_cache_dtype)
    w, low, high = given_or_estimated_weights(model, given=None, tp=dep.tp, pp=1, arch=gpu.arch, total_bytes=stored)
    fit = plan_sglang_fit(model, gpu, dep, weights_bytes=w, weights_range=(low, high))
    _warn(on_note, "KV capacity, running-request cap and prefill chunk by SGLang 0.5.23's rules; the speed model is "
                   "the same (fitted on vLLM and other engines' runs)")
    if not fit.fits:
        _warn(on_warning, f"KV capacity not computed: SGLang would not start ({fit.startup})")
        return None, fit.defaults.chunked_prefill_size, fit.max_running_requests or 1
    return requests_at(fit, context), fit.defaults.chunked_prefill_size, fit.max_running_requests


def _roofline_fit(model: ModelSpec, gpu: GpuSpec, settings: ServeSettings, on_note: Warn | None) -> FitReport:
    """The `kvplan fit` plan of this deployment: KV capacity at its context (one DP rank's), and vLLM's
    resolved max_num_seqs and max_num_batched_tokens (plan_fit, without advice)."""

    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.verdicts import Startup

    report = plan_fit(model, gpu, settings, advise=False)
    context = settings.load.context or 0
    if report.verdict.startup is Startup.REFUSES_MAX_MODEL_LEN and 0 < context < report.scheduler.max_model_len:
        # The model's full length does not fit, but requests of `context` tokens may: plan the
        # server one would run for them (vLLM's own advice: decrease max_model_len).
        _warn(on_note, f"the KV capacity assumes --max-model-len {context} (the model's "
                       f"{report.scheduler.max_model_len:,} does not fit)")
        report = plan_fit(model, gpu, settings.updated(max_model_len=context), advise=False)
    return report


# --- kvplan diagnose ------------------------------------------------------------------------------------------------

# `kvplan diagnose --plan MODEL`'s options, by name (each only with a plan).
DIAGNOSE_PLAN_OPTIONS = ("gpu", "gpu_memory", "gpu_total_bytes", "gpus_file", "gpu_link", "tensor_parallel_size",
                         "pipeline_parallel_size", "max_model_len", "max_num_batched_tokens", "gpu_memory_utilization",
                         "kv_cache_dtype", "block_size", "enforce_eager", "vllm_version", "weights_memory",
                         "activation_memory", "non_torch_memory", "cuda_graph_memory", "revision")


def diagnose(source: str, *, interval: float | None = None, timeout: float = 5.0, kv_high: float = 0.9,
             hit_rate_low: float = 0.1, min_prefix_queries: int = 1000, queue_p95_high: float = 1.0,
             max_num_seqs: int | None = None, plan: str | None = None, progress: Progress | None = None,
             on_warning: Warn | None = None, **plan_options: object) -> DiagnoseReport:
    """`kvplan diagnose URL|FILE`: what limits a vLLM server, from its /metrics (a URL, scraped twice `interval` s
    apart when given, or a saved exposition), and with `plan=MODEL` kvplan's prediction beside the server's KV
    capacity (`plan_options`: DIAGNOSE_PLAN_OPTIONS by name, `gpu` needed). `on_warning` receives the model's load
    note and the line the command prints on stderr before scraping twice.

    The rules alone, on a parsed snapshot, are kvplan.diagnose_report (kvplan.observe.diagnose.diagnose)."""
    from kvplan.errors import InvalidParameter, close_matches

    unknown = sorted(set(plan_options) - set(DIAGNOSE_PLAN_OPTIONS))
    if unknown:
        near = close_matches(unknown[0], list(DIAGNOSE_PLAN_OPTIONS))
        raise InvalidParameter(f"unknown diagnose option {unknown[0]!r}"
                               + (f" (did you mean {near[0]}?)" if near else ""))
    options = {name: plan_options.get(name) for name in DIAGNOSE_PLAN_OPTIONS}
    thresholds = check_diagnose_options(plan, options, interval=interval, timeout=timeout, kv_high=kv_high,
                                        hit_rate_low=hit_rate_low, min_prefix_queries=min_prefix_queries,
                                        queue_p95_high=queue_p95_high, max_num_seqs=max_num_seqs)
    report = diagnose_metrics(source, thresholds, interval=interval, timeout=timeout, on_warning=on_warning)
    if plan is None:
        return report
    options["max_num_seqs"] = max_num_seqs
    settings = diagnose_plan_settings(options)
    loaded = load_model_with_weights(plan, _text(options["revision"], "--revision"), progress=progress)
    _warn(on_warning, loaded.note)
    return diagnose_with_plan(report, loaded, settings, options)


def check_diagnose_options(plan: str | None, options: Mapping[str, object], *, interval: float | None,
                           timeout: float, kv_high: float = 0.9, hit_rate_low: float = 0.1,
                           min_prefix_queries: int = 1000, queue_p95_high: float = 1.0,
                           max_num_seqs: int | None = None) -> Thresholds:
    """`kvplan diagnose`'s checks before any read, in its order: --timeout and --interval in range, the thresholds
    (returned), --plan's options only with --plan, and --plan with a GPU."""
    from kvplan.errors import InvalidParameter
    from kvplan.observe.diagnose import Thresholds
    from kvplan.observe.metrics import MAX_WAIT_S

    for flag, seconds in (("--timeout", timeout), ("--interval", interval)):  # before any progress line
        if seconds is not None and not 0 < seconds <= MAX_WAIT_S:  # NaN and ∞ too
            raise InvalidParameter(f"{flag} must be positive, at most {MAX_WAIT_S:g} s, got {seconds:g}")
    thresholds = Thresholds(kv_high=kv_high, hit_rate_low=hit_rate_low, min_prefix_queries=min_prefix_queries,
                            queue_p95_high_s=queue_p95_high, max_num_seqs=max_num_seqs)
    if plan is None and (stray := ["--" + k.replace("_", "-") for k, v in options.items() if v is not None]):
        raise InvalidParameter(f"{', '.join(stray)} only appl{'y' if len(stray) > 1 else 'ies'} with --plan MODEL")
    if plan is not None and options.get("gpu") is None and options.get("gpu_memory") is None:
        raise InvalidParameter("--plan needs the server's GPU: --gpu NAME (or --gpu-memory)")
    return thresholds


def diagnose_metrics(source: str, thresholds: Thresholds | None = None, *, interval: float | None = None,
                     timeout: float = 5.0, on_warning: Warn | None = None) -> DiagnoseReport:
    """The server's /metrics read (once, or twice `interval` s apart) and diagnosed, as `kvplan diagnose` does."""
    from kvplan.errors import InvalidParameter
    from kvplan.observe.diagnose import diagnose as diagnose_report
    from kvplan.observe.metrics import is_url, parse_exposition, read_exposition, scrape_twice

    if interval is None:
        return diagnose_report(parse_exposition(read_exposition(source, timeout)), thresholds=thresholds,
                               source=source)
    if not is_url(source):
        raise InvalidParameter("--interval needs a URL: a saved file does not change between two reads")
    _warn(on_warning, f"Scraping twice, {interval:g} s apart…")
    scrapes = scrape_twice(source, interval, timeout)
    return diagnose_report(scrapes.second, scrapes.first, scrapes.elapsed_s, thresholds, source=source)


def diagnose_plan_settings(options: Mapping[str, Any]) -> ServeSettings:
    """The settings `kvplan diagnose --plan` predicts the server with (its options, as `fit` reads them)."""
    from kvplan.vllm.flags import settings_from_flags

    return settings_from_flags(options, None, options["vllm_version"], measured={
        term: options[f"{term}_memory"] for term in ("weights", "activation", "non_torch", "cuda_graph")})


def diagnose_with_plan(report: DiagnoseReport, loaded: LoadedModel, settings: ServeSettings,
                       options: Mapping[str, Any]) -> DiagnoseReport:
    """The report with kvplan's prediction for the loaded model on the options' GPU compared with each engine's KV
    capacity."""
    from kvplan.observe.diagnose import compare_report_with_plan
    from kvplan.vllm.loading import with_stored_weights

    settings = with_stored_weights(settings, loaded.weights)
    chip = deployment_gpu(options["gpu"], options["gpu_memory"], None, options["gpu_total_bytes"],
                          options["gpus_file"], options["gpu_link"])
    return compare_report_with_plan(report, loaded.spec, chip, settings)


# --- kvplan simulate ------------------------------------------------------------------------------------------------

# The deployment options (vLLM's engine arguments, by name) `kvplan simulate prefix` and `serve` pass to `kvplan fit`
# with --model/--gpu (each refused without them), in the order the commands name a stray one.
PREFIX_DEPLOYMENT_OPTIONS = ("tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization",
                             "max_model_len", "max_num_seqs", "max_num_batched_tokens", "kv_cache_dtype",
                             "enforce_eager", "kv_cache_memory_bytes")
SERVE_DEPLOYMENT_OPTIONS = ("tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization",
                            "kv_cache_dtype", "enforce_eager", "kv_cache_memory_bytes")


def _deployment_options(command: str, names: tuple[str, ...], options: Mapping[str, object]) -> dict[str, object]:
    """`options` (vLLM's engine arguments by name) as the command's dict of them, all named; an unknown name is
    refused with the nearest."""
    from kvplan.errors import close_matches

    unknown = sorted(set(options) - set(names))
    if unknown:
        near = close_matches(unknown[0], list(names))
        raise InvalidParameter(f"unknown simulate {command} option {unknown[0]!r}"
                               + (f" (did you mean {near[0]}?)" if near else ""))
    return {name: options.get(name) for name in names}


def _simulate_deployment(model: str | None, gpu: str | None, given: Mapping[str, object], *,
                         deployment_only: Mapping[str, object], pool: tuple[int | None, object],
                         progress: Progress | None, on_warning: Warn | None) -> SimDeployment | None:
    """`kvplan fit MODEL --gpu GPU` at the flags in `given` (vLLM's names, read as fit reads them) as the simulators'
    pool, or None when `pool` (--num-gpu-blocks, --kv-tokens) gives it directly (sim/inputs.py:pool_from_deployment
    refuses a mix, and the `deployment_only` flags given without --model/--gpu)."""
    from kvplan.sim.inputs import SimDeployment, pool_from_deployment

    model, gpu = _text(model, "--model"), _text(gpu, "--gpu")
    if not pool_from_deployment(model, gpu, num_gpu_blocks=pool[0], kv_tokens=pool[1],
                                deployment_options=dict(deployment_only)):
        return None  # a pool given directly loads none of fit's stack (kvplan simulate's start-up)
    assert model is not None and gpu is not None
    from kvplan.hardware.gpus import get_gpu
    from kvplan.sim.sizing import fitted_pool
    from kvplan.vllm.environment import vllm_environment
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.flags import settings_from_flags
    from kvplan.vllm.loading import with_stored_weights

    settings = settings_from_flags(given, env=vllm_environment(os.environ))
    gpus_file = given.get("gpus_file")
    chip = get_gpu(gpu, str(gpus_file) if gpus_file else None)
    revision = given.get("revision")
    loaded = load_model_with_weights(model, str(revision) if revision else None, progress=progress)
    _warn(on_warning, loaded.note)
    settings = with_stored_weights(settings, loaded.weights)
    return SimDeployment(fitted_pool(plan_fit(loaded.spec, chip, settings, advise=False)), loaded.spec, chip,
                         settings)


def _trace_records(trace: str | os.PathLike[str], block_size: int, trace_block_size: int | None,
                   unit_s: float = 1.0) -> list[TraceRecord]:
    """A JSONL trace file read (bounded: files.TRACE) and parsed as the simulators read it."""
    from kvplan import files
    from kvplan.sim.workloads import parse_trace

    path = str(_path(trace, "--trace"))
    return parse_trace(files.read_lines(path, files.TRACE), block_size=block_size,
                       trace_block_size=trace_block_size, timestamp_unit_s=unit_s, source=path)


def _length_dist(spec: str, what: str) -> LengthDist:
    """A length distribution as the command reads it; `empirical:FILE` with the file's values read (bounded)."""
    import dataclasses

    from kvplan import files
    from kvplan.sim.workloads import parse_length_dist, parse_length_values

    dist = parse_length_dist(_text(spec, what) or "", what=what)
    if dist.kind == "empirical":
        values = parse_length_values(files.read_lines(dist.path, files.LENGTHS), source=dist.path)
        dist = dataclasses.replace(dist, values=values)
    return dist


def simulate_prefix(
    scenario: str = "cyclic", *, docs: int = 10, doc_tokens: int = 5033, num_requests: int = 200,
    prefix_tokens: int = 1024, suffix_tokens: int = 256, tenants: int = 1, conversations: int = 16, turns: int = 5,
    user_tokens: int = 256, reply_tokens: int = 256, zipf_s: float = 1.0, seed: int = 0,
    trace: str | os.PathLike[str] | None = None, trace_block_size: int | None = None,
    num_gpu_blocks: int | None = None, kv_tokens: str | int | None = None, block_size: int | None = None,
    model: str | None = None, gpu: str | None = None, gpus_file: str | Path | None = None,
    revision: str | None = None, what_if_blocks: Iterable[int] = (), cpu_offload_tokens: str | int | None = None,
    cpu_offload_bytes: str | int | None = None, kv_bytes_per_token: int | None = None,
    kv_offloading_size: str | float | None = None, offload_chunk_tokens: int | None = None,
    load_ms_per_ktok: float | None = None, recompute_ms_per_ktok: float | None = None,
    progress: Progress | None = None, on_warning: Warn | None = None, **options: object,
) -> PrefixReport:
    """`kvplan simulate prefix`: a workload served one request at a time through vLLM's block pool, its prefix-cache
    hits per pass, a larger pool, a CPU tier. Keyword-rich on purpose (as vLLM's `LLM(...)`): each argument is the
    command's option of that name; `options` are the deployment's vLLM engine arguments by name
    (PREFIX_DEPLOYMENT_OPTIONS), with `model` and `gpu` (the pool `kvplan fit` plans: PrefixReport.deployment).
    Same numbers and the same refusals as the command; the simulator alone, on a workload in hand, is
    kvplan.sim.prefix.simulate_prefix (public as kvplan.prefix_report)."""
    from dataclasses import replace

    from kvplan.sim import prefix as core
    from kvplan.sim.inputs import CpuTierOptions, given_pool, offload_settings
    from kvplan.sim.sizing import check_request_lengths
    from kvplan.sim.workloads import PrefixScenario, prefix_workload

    given = {**_deployment_options("prefix", PREFIX_DEPLOYMENT_OPTIONS, options), "revision": revision,
             "gpus_file": gpus_file}
    deployment = _simulate_deployment(model, gpu, {**given, "block_size": block_size}, deployment_only=given,
                                      pool=(num_gpu_blocks, kv_tokens), progress=progress, on_warning=on_warning)
    if deployment is not None:
        blocks, block_size = deployment.pool.sim_num_gpu_blocks, deployment.pool.sim_block_size
    else:
        blocks, block_size = given_pool(num_gpu_blocks, kv_tokens, block_size)
    shape = PrefixScenario(str(getattr(scenario, "value", scenario)), docs, doc_tokens, num_requests, prefix_tokens,
                           suffix_tokens, tenants, conversations, turns, user_tokens, reply_tokens, zipf_s, seed)
    records = None if trace is None else _trace_records(trace, block_size, trace_block_size)
    workload = prefix_workload(shape, block_size, records)
    if deployment is not None:
        check_request_lengths((r.num_prompt_tokens + r.num_output_tokens for r in workload.requests),
                              deployment.pool.max_model_len)
    offload = offload_settings(CpuTierOptions(cpu_offload_tokens, cpu_offload_bytes, kv_bytes_per_token,
                                              kv_offloading_size, offload_chunk_tokens, load_ms_per_ktok,
                                              recompute_ms_per_ktok), deployment)
    report = core.simulate_prefix(workload, num_gpu_blocks=blocks, block_size=block_size, offload=offload,
                                  what_if_blocks=tuple(what_if_blocks))
    return report if deployment is None else replace(report, deployment=deployment.pool)


def simulate_serve(
    num_requests: int = 1000, *, request_rate: str | float = "inf", arrival: str = "poisson",
    prompt_len: str = "1024", output_len: str = "256", shared_prefix_tokens: int = 0, seed: int = 0,
    trace: str | os.PathLike[str] | None = None, trace_block_size: int | None = None,
    trace_timestamp_unit: str = "s", num_gpu_blocks: int | None = None, kv_tokens: str | int | None = None,
    block_size: int | None = None, model: str | None = None, gpu: str | None = None,
    gpus_file: str | Path | None = None, revision: str | None = None, max_num_seqs: int | None = None,
    max_num_batched_tokens: str | int | None = None, max_model_len: str | int | None = None,
    enable_chunked_prefill: bool = True, enable_prefix_caching: bool = True, step_ms: float | None = None,
    ms_per_token: float | None = None, ms_per_context_ktok: float | None = None,
    bandwidth_efficiency: float | None = None, compute_efficiency: float | None = None,
    ttft_slo: str | None = None, tpot_slo: str | None = None, progress: Progress | None = None,
    on_warning: Warn | None = None, on_progress: Callable[[int, int], None] | None = None, **options: object,
) -> ServeReport:
    """`kvplan simulate serve`: requests run through a simulation of vLLM V1's continuous-batching scheduler (TTFT,
    ITL, queueing, preemptions, KV usage). Keyword-rich on purpose (as vLLM's `LLM(...)`): each argument is the
    command's option of that name; `options` are the deployment's vLLM engine arguments by name
    (SERVE_DEPLOYMENT_OPTIONS), with `model` and `gpu` (pool, limits and the roofline's step times from `kvplan
    fit`: ServeReport.deployment). `on_progress(finished, total)` hears the simulation's progress. Same numbers and
    the same refusals as the command; the scheduler alone is kvplan.sim.scheduler.simulate_serve (public as
    kvplan.serve_report)."""
    from dataclasses import replace

    from kvplan.sim import scheduler as sch
    from kvplan.sim import workloads as wl
    from kvplan.sim.sizing import ROOFLINE_COST_MODEL

    deployment_only = {**_deployment_options("serve", SERVE_DEPLOYMENT_OPTIONS, options), "revision": revision,
                       "gpus_file": gpus_file, "bandwidth_efficiency": bandwidth_efficiency,
                       "compute_efficiency": compute_efficiency}
    engine = {"max_model_len": max_model_len, "max_num_seqs": max_num_seqs, "block_size": block_size,
              "max_num_batched_tokens": max_num_batched_tokens, "enable_prefix_caching": enable_prefix_caching}
    if trace is None:
        wl.check_serve_requests(num_requests, "--num-requests")
    deployment = _simulate_deployment(model, gpu, {**deployment_only, **engine}, deployment_only=deployment_only,
                                      pool=(num_gpu_blocks, kv_tokens), progress=progress, on_warning=on_warning)
    config = _scheduler_config(deployment, engine, num_gpu_blocks, kv_tokens, enable_chunked_prefill)
    rate, unit_s = wl.parse_request_rate(request_rate), wl.timestamp_unit_s(trace_timestamp_unit)
    outputs = _length_dist(output_len, "--output-len")
    if trace is not None:
        records = _trace_records(trace, config.block_size, trace_block_size, unit_s)
        wl.check_serve_requests(len(records), f"{trace}: the trace's requests")
        requests = wl.trace_serve_requests(records, outputs, seed)
    else:
        requests = wl.synthetic_serve_requests(wl.SyntheticLoad(
            num_requests, request_rate=rate, arrival=str(getattr(arrival, "value", arrival)),
            prompt_len=_length_dist(prompt_len, "--prompt-len"), output_len=outputs,
            shared_prefix_tokens=shared_prefix_tokens, seed=seed), block_size=config.block_size)
    fixed = (step_ms, ms_per_token, ms_per_context_ktok)
    roofline, pool = None, None
    if deployment is not None and all(v is None for v in fixed):
        from kvplan.sim.inputs import roofline_cost_notes, roofline_step_cost

        roofline = roofline_step_cost(deployment, bandwidth_efficiency, compute_efficiency)
        pool = replace(deployment.pool, compute_dtype=roofline.roofline.roof.flops_dtype,
                       notes=(*deployment.pool.notes, *roofline_cost_notes(deployment.settings)))
    elif bandwidth_efficiency is not None or compute_efficiency is not None:
        raise InvalidParameter("--bandwidth-efficiency and --compute-efficiency tune the roofline, which "
                               "--step-ms, --ms-per-token and --ms-per-context-ktok replace")
    ttft_s, tpot_s = sch.parse_slo_s(ttft_slo, "--ttft-slo"), sch.parse_slo_s(tpot_slo, "--tpot-slo")
    report = sch.simulate_serve(requests, config, roofline or sch.FixedCost.from_ms(*fixed), ttft_slo_s=ttft_s,
                                tpot_slo_s=tpot_s, progress=on_progress)
    if roofline is not None:
        report = replace(report, cost_model=ROOFLINE_COST_MODEL, cost_model_params=roofline.figures())
    return replace(report, deployment=pool or (deployment.pool if deployment else None))


def _scheduler_config(deployment: SimDeployment | None, engine: Mapping[str, Any], num_gpu_blocks: int | None,
                      kv_tokens: str | int | None, enable_chunked_prefill: bool) -> SchedulerConfig:
    """The scheduler's settings: the fitted deployment's pool and vLLM limits, or the pool given directly with the
    `engine` options (vLLM's names; its H100-class defaults where not given)."""
    from kvplan.sim import scheduler as sch
    from kvplan.sim.inputs import given_pool
    from kvplan.units import parse_count

    caching = bool(engine["enable_prefix_caching"])
    if deployment is not None:
        pool = deployment.pool
        return sch.SchedulerConfig(
            num_gpu_blocks=pool.sim_num_gpu_blocks, block_size=pool.sim_block_size, max_num_seqs=pool.max_num_seqs,
            max_num_batched_tokens=pool.max_num_batched_tokens, enable_chunked_prefill=enable_chunked_prefill,
            enable_prefix_caching=caching, max_model_len=pool.max_model_len)
    blocks, bs = given_pool(num_gpu_blocks, kv_tokens, engine["block_size"])
    mnbt, mml = engine["max_num_batched_tokens"], engine["max_model_len"]
    return sch.SchedulerConfig(
        num_gpu_blocks=blocks, block_size=bs, max_num_seqs=engine["max_num_seqs"] or sch.DEFAULT_MAX_NUM_SEQS,
        max_num_batched_tokens=(sch.DEFAULT_MAX_NUM_BATCHED_TOKENS if mnbt is None
                                else parse_count(mnbt, what="--max-num-batched-tokens", minimum=1)),
        enable_chunked_prefill=enable_chunked_prefill, enable_prefix_caching=caching,
        max_model_len=None if mml is None else parse_count(mml, what="--max-model-len", minimum=1))
