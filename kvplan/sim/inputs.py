"""`kvplan simulate`'s pool, CPU-tier and step-cost options read and checked, for the command and the library
(kvplan.simulate_prefix, kvplan.simulate_serve) alike: where the pool comes from (given, or `kvplan fit`'s:
sim/sizing.py), the CPU tier the offload options describe, and the roofline that times a fitted deployment's
steps. Pure: the model and the trace are read by kvplan/api.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter
from kvplan.sim.sizing import RooflineStepCost, num_gpu_blocks_from

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.spec import ModelSpec
    from kvplan.sim.prefix import OffloadSettings
    from kvplan.sim.sizing import FittedPool
    from kvplan.vllm.settings import ServeSettings


def pool_from_deployment(model: str | None, gpu: str | None, *, num_gpu_blocks: int | None, kv_tokens: object,
                         deployment_options: dict[str, object]) -> bool:
    """Whether `kvplan fit MODEL --gpu GPU` sizes the pool (True) or it is given directly (False), refused as the
    commands refuse it: --model and --gpu go together, the pool comes from one source, and a deployment option
    (`deployment_options`, by vLLM's name, None when not given) means nothing without them."""
    if (model is None) != (gpu is None):
        raise InvalidParameter("--model and --gpu go together: the pool is what `kvplan fit MODEL --gpu GPU` plans")
    if model is None or gpu is None:
        stray = [name for name, value in deployment_options.items() if value is not None]
        if stray:
            flag = "--" + stray[0].replace("_", "-")
            raise InvalidParameter(f"{flag} describes a deployment: it needs --model and --gpu")
        if num_gpu_blocks is None and kv_tokens is None:
            raise InvalidParameter("give the pool size as one of --num-gpu-blocks, --kv-tokens, or --model with --gpu",
                                   hint="vLLM logs it at start-up: 'GPU KV cache size: N tokens'")
        return False
    if num_gpu_blocks is not None or kv_tokens is not None:
        raise InvalidParameter("give the pool size as one of --num-gpu-blocks, --kv-tokens, or --model with --gpu, "
                               "not several")
    return True


def given_pool(num_gpu_blocks: int | None, kv_tokens: str | int | None, block_size: int | None) -> tuple[int, int]:
    """The pool given directly, as (num_gpu_blocks, block_size): `--kv-tokens` read as a count (`21520`, `21k`)
    and divided by the block size (default vLLM's 16)."""
    from kvplan.sim.scheduler import DEFAULT_BLOCK_SIZE
    from kvplan.units import parse_count

    bs = block_size or DEFAULT_BLOCK_SIZE
    tokens = None if kv_tokens is None else parse_count(kv_tokens, what="--kv-tokens")
    return num_gpu_blocks_from(num_gpu_blocks=num_gpu_blocks, kv_tokens=tokens, block_size=bs), bs


@dataclass(frozen=True)
class SimDeployment:
    """A `--model/--gpu` simulation's deployment: the pool `kvplan fit` planned, and the model, GPU and settings it
    planned it for (the roofline and the CPU tier read them)."""

    pool: FittedPool
    model: ModelSpec
    gpu: GpuSpec
    settings: ServeSettings


@dataclass(frozen=True)
class CpuTierOptions:
    """`kvplan simulate prefix`'s CPU-tier options as given (one of the three sizes at most; the rest default to
    sim/prefix.py's figures from the starting document)."""

    cpu_offload_tokens: str | int | None = None
    cpu_offload_bytes: str | int | None = None
    kv_bytes_per_token: int | None = None
    kv_offloading_size: str | float | None = None
    offload_chunk_tokens: int | None = None
    load_ms_per_ktok: float | None = None
    recompute_ms_per_ktok: float | None = None


def offload_settings(options: CpuTierOptions, deployment: SimDeployment | None) -> OffloadSettings:
    """The CPU tier the options describe: `--kv-offloading-size` (vLLM's OffloadingConnector, sized from the
    deployment's bytes per block: vllm/offload.py), `--cpu-offload-tokens`, or `--cpu-offload-bytes` ÷ KV bytes per
    token (the deployment's, unless given); none, a tier of 0 tokens."""
    from kvplan.sim import prefix as core
    from kvplan.units import parse_bytes, parse_count

    o = options
    if sum(x is not None for x in (o.cpu_offload_tokens, o.cpu_offload_bytes, o.kv_offloading_size)) > 1:
        raise InvalidParameter("give one of --cpu-offload-tokens, --cpu-offload-bytes, --kv-offloading-size")
    cpu_tokens, chunk = 0, o.offload_chunk_tokens
    per_token = o.kv_bytes_per_token
    if per_token is None and deployment is not None:
        per_token = deployment.pool.kv_bytes_per_token
    if o.kv_offloading_size is not None:
        if deployment is None:
            raise InvalidParameter("--kv-offloading-size needs --model and --gpu: the CPU tier's tokens follow "
                                   "the plan's bytes per block")
        from kvplan.vllm.engine_args import kv_offloading_gib
        from kvplan.vllm.offload import deployment_tier

        pool = deployment.pool
        tier = deployment_tier(deployment.model, deployment.settings.updated(
            kv_offloading_size=kv_offloading_gib(o.kv_offloading_size)), bytes_per_block=pool.bytes_per_block,
            block_size=pool.block_size)
        cpu_tokens = tier.tokens or 0
        if chunk is None:
            chunk = pool.block_size  # the OffloadingConnector's chunk: one GPU block
    elif o.cpu_offload_tokens is not None:
        cpu_tokens = parse_count(o.cpu_offload_tokens, what="--cpu-offload-tokens")
    elif o.cpu_offload_bytes is not None:
        if per_token is None:
            raise InvalidParameter("--cpu-offload-bytes needs --kv-bytes-per-token (see `kvplan size MODEL`)",
                                   hint="with --model it comes from fit, for models with one KV-cache group")
        cpu_tokens = parse_bytes(o.cpu_offload_bytes, what="--cpu-offload-bytes") // per_token
    return core.OffloadSettings(
        cpu_tokens, core.LMCACHE_CHUNK_TOKENS if chunk is None else chunk,
        core.DEFAULT_LOAD_MS_PER_KTOK if o.load_ms_per_ktok is None else o.load_ms_per_ktok,
        core.DEFAULT_RECOMPUTE_MS_PER_KTOK if o.recompute_ms_per_ktok is None else o.recompute_ms_per_ktok)


def roofline_step_cost(deployment: SimDeployment, bandwidth_efficiency: float | None = None,
                       compute_efficiency: float | None = None) -> RooflineStepCost:
    """The model's roofline on the deployment's GPU at its TP and KV dtype, as `kvplan roofline` builds it."""
    from kvplan.hardware import roofline as rl

    settings = deployment.settings
    costs, roof = rl.deployment_roofline(
        deployment.model, deployment.gpu, tp=settings.parallel_config.tensor_parallel_size,
        kv_cache_dtype=settings.cache_config.kv_cache_dtype,
        weights_bytes=settings.measured.weights_total_bytes,
        bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency)
    return RooflineStepCost(rl.RooflineCost(costs, roof))


def roofline_cost_notes(settings: ServeSettings) -> tuple[str, ...]:
    """What the roofline's step times leave out for these settings (the pool's notes)."""
    if settings.parallel_config.pipeline_parallel_size > 1:
        return ("Pipeline parallelism: each step is timed as the whole model at this TP (the stages run one after "
                "another; no overlap of micro-batches).",)
    return ()
