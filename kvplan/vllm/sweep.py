"""Which hardware: every catalog GPU × TP size that starts the model and keeps the requested load resident."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import GpuLike, ServeSettings

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

SWEEP_TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class SweepRow:
    """One GPU × TP option that serves the model at the requested context and concurrency."""

    gpu: str
    gpu_name: str
    tp: int
    num_gpus: int
    cuda_total_bytes: int
    available_kv_bytes: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    requests_at_context: int
    context: int


@dataclass(frozen=True)
class SweepReport:
    """`kvplan fit MODEL` without --gpu."""

    model: str
    context: int
    concurrency: int
    rows: tuple[SweepRow, ...]
    skipped: tuple[str, ...] = field(default=())


def sweep_gpus(
    model: ModelSpec, gpus: Iterable[GpuLike], settings: ServeSettings, tp_sizes: Sequence[int] = SWEEP_TP_SIZES
) -> SweepReport:
    """Every GPU × TP size that starts and keeps `concurrency` (default 1) requests of `context`
    (default max_model_len) resident without preemption; sorted by fewest GPUs, then memory."""
    want = settings.concurrency or 1
    rows: list[SweepRow] = []
    skipped: list[str] = []
    context = settings.context
    for gpu in gpus:
        for tp in tp_sizes:
            if model.num_attention_heads % tp:
                continue
            try:
                r = plan_fit(model, gpu, replace(settings, tp=tp, concurrency=want), advise=False)
            except InvalidParameter as exc:
                skipped.append(f"{gpu.id} tp {tp}: {exc}")
                continue
            context = r.preemption.context
            if r.fits and r.preemption.max_requests_at_context >= want:
                rows.append(
                    SweepRow(
                        gpu.id,
                        gpu.name,
                        tp,
                        tp * settings.pp,
                        gpu.cuda_total_bytes,
                        r.available_kv_bytes,
                        r.num_gpu_blocks,
                        r.kv_cache_tokens,
                        r.max_concurrency,
                        r.preemption.max_requests_at_context,
                        r.preemption.context,
                    )
                )
    rows.sort(key=lambda row: (row.num_gpus, row.cuda_total_bytes, row.gpu))
    return SweepReport(
        model.name, context or settings.max_model_len or model.max_model_len, want, tuple(rows), tuple(skipped)
    )
