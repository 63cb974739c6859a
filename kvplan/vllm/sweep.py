"""Which hardware to rent: per catalog GPU, the TP × PP × DP layout with the fewest GPUs that starts the model
and keeps the requested load resident, node-aware, with the `vllm serve` line of each."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter, NotServed
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import GpuLike, ServeSettings, gpu_platform

if TYPE_CHECKING:
    from kvplan.hardware.nodes import NodeShape
    from kvplan.model.spec import ModelSpec

# Layouts searched: TP inside a node (or the node shape's wider TP domain: an NVL72 NVLink domain, a linked
# pair of DGX Sparks), PP across nodes, then data-parallel replicas for the load.
SWEEP_TP_SIZES = (1, 2, 4, 8)
SWEEP_PP_SIZES = (1, 2, 4)
MAX_SWEEP_GPUS = 1024  # a layout needing more GPUs than this is not listed


@dataclass(frozen=True)
class SweepRow:
    """The cheapest layout of one GPU kind that serves the load: TP × PP per replica, DP replicas."""

    gpu: str
    gpu_name: str
    tp: int
    pp: int
    replicas: int  # data-parallel replicas needed for the requested concurrency
    num_gpus: int  # tp × pp × replicas
    nodes: int
    gpus_per_node: int
    cuda_total_bytes: int
    available_kv_bytes: int  # per GPU
    num_gpu_blocks: int  # per replica
    kv_cache_tokens: int  # per replica
    max_concurrency: float  # per replica, at max_model_len
    requests_at_context: int  # per replica
    context: int
    command: str  # the `vllm serve` line of this layout
    platform: str = "cuda"  # whose vLLM rules planned it: cuda | rocm (gpus.PLATFORMS)


@dataclass(frozen=True)
class SweepReason:
    """Why some GPU × layout combinations do not serve the model, grouped by reason."""

    reason: str
    count: int
    example: str  # one GPU and layout it applies to


@dataclass(frozen=True)
class SweepReport:
    """`kvplan fit MODEL` without --gpu."""

    model: str
    context: int
    concurrency: int
    rows: tuple[SweepRow, ...]
    skipped: tuple[str, ...] = field(default=())
    reasons: tuple[SweepReason, ...] = field(default=())


def _command(model: ModelSpec, settings: ServeSettings, tp: int, pp: int, replicas: int, context: int) -> str:
    parts = ["vllm serve", model.name, f"-tp {tp}"]
    if pp > 1:
        parts.append(f"-pp {pp}")
    if replicas > 1:
        parts.append(f"-dp {replicas}")
    if settings.model_config.max_model_len is not None or context != model.max_model_len:
        parts.append(f"--max-model-len {settings.model_config.max_model_len or context}")
    if settings.cache_config.kv_cache_dtype != "auto":
        parts.append(f"--kv-cache-dtype {settings.cache_config.kv_cache_dtype}")
    if settings.cache_config.gpu_memory_utilization is not None:  # the plan assumed it: the line must carry it
        parts.append(f"--gpu-memory-utilization {settings.cache_config.gpu_memory_utilization:g}")
    return " ".join(parts)


def _reason(text: str) -> str:
    """A failure's reason without its numbers' context (the part before the first colon or parenthesis)."""
    return text.split(" (")[0].split(": ")[0][:160]


def _layouts(model: ModelSpec, gpu: GpuLike, settings: ServeSettings, want: int, shape: NodeShape,
             failures: dict[str, list[str]]) -> list[SweepRow]:
    """Every TP × PP layout of this GPU that starts, with the replicas the load needs. TP stays inside the
    shape's TP domain (a node, an NVL72 rack's NVLink domain, a linked pair of DGX Sparks)."""
    gpus_per_node = shape.gpus_per_node
    out = []
    for pp in SWEEP_PP_SIZES:
        for tp in SWEEP_TP_SIZES:
            if tp > shape.max_tp or model.num_attention_heads % tp or pp > model.num_layers:
                continue
            where = f"{gpu.id} tp {tp} pp {pp}"
            try:
                layout = settings.updated(tensor_parallel_size=tp, pipeline_parallel_size=pp, concurrency=want)
                r = plan_fit(model, gpu, layout, advise=False)
            except InvalidParameter as exc:
                failures.setdefault(_reason(str(exc)), []).append(where)
                continue
            except NotServed as exc:  # vLLM's ROCm rules refuse what its CUDA ones may serve (vllm/rocm.py)
                if gpu_platform(gpu) != "rocm":
                    raise
                failures.setdefault(_reason(str(exc)), []).append(where)
                continue
            per_replica = r.verdict.preemption.max_requests_at_context
            if not r.verdict.fits or per_replica < 1:
                failures.setdefault(_reason(r.verdict.error or "no request of this length fits"), []).append(where)
                continue
            replicas = -(-want // per_replica)
            total = tp * pp * replicas
            if total > MAX_SWEEP_GPUS:
                failures.setdefault(f"needs more than {MAX_SWEEP_GPUS} GPUs", []).append(where)
                continue
            out.append(SweepRow(
                gpu.id, gpu.name, tp, pp, replicas, total, -(-total // gpus_per_node), gpus_per_node,
                gpu.cuda_total_bytes, r.memory.available_kv_bytes, r.cache.num_gpu_blocks, r.cache.kv_cache_tokens,
                r.scheduler.max_concurrency, per_replica, r.verdict.preemption.context,
                _command(model, settings, tp, pp, replicas, r.verdict.preemption.context),
                gpu_platform(gpu)))
    return out


def sweep_gpus(model: ModelSpec, gpus: Iterable[GpuLike], settings: ServeSettings) -> SweepReport:
    """For each GPU kind, the layout with the fewest GPUs (then nodes) that starts and keeps `concurrency`
    (default 1) requests of `context` (default max_model_len) resident without preemption: TP inside a node
    (or its node shape's TP domain, kvplan/hardware/nodes.py), PP across nodes, data-parallel replicas for the
    rest; sorted by GPUs, then memory. The reasons the other
    combinations fail are grouped in `reasons`."""
    from kvplan.hardware.nodes import node_shape

    want = settings.load.concurrency or 1
    failures: dict[str, list[str]] = {}
    rows = []
    for gpu in gpus:
        layouts = _layouts(model, gpu, settings, want, node_shape(gpu.id), failures)
        if layouts:
            rows.append(min(layouts, key=lambda row: (row.num_gpus, row.nodes, row.pp, row.tp)))
    rows.sort(key=lambda row: (row.num_gpus, row.cuda_total_bytes, row.gpu))
    context = rows[0].context if rows else (settings.load.context or settings.model_config.max_model_len
                                            or model.max_model_len)
    reasons = tuple(SweepReason(reason, len(where), where[0])
                    for reason, where in sorted(failures.items(), key=lambda kv: -len(kv[1])))
    return SweepReport(model.name, context, want, tuple(rows), reasons=reasons)
