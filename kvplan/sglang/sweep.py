"""`kvplan fit MODEL --engine sglang` without --gpu: every catalog GPU, the smallest TP at which SGLang 0.5.23
starts the deployment, and what its pool holds there. Pure: a weight estimate is passed in per GPU and TP.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

from kvplan.errors import InvalidParameter, KvplanError
from kvplan.hardware.gpus import GpuSpec
from kvplan.model.spec import ModelSpec
from kvplan.sglang import SGLANG_VERSION
from kvplan.sglang.defaults import SglangDeployment
from kvplan.sglang.engine_args import launch_server_line
from kvplan.sglang.fit import SglangFit, plan_sglang_fit

SWEEP_TPS = (1, 2, 4, 8)  # one node's tensor-parallel sizes
NOT_MODELLED = f"SGLang {SGLANG_VERSION} rules: "  # how plan_sglang_fit words a refusal as not modelled


@dataclass(frozen=True)
class SglangSweepRow:
    """The smallest TP of one GPU kind at which SGLang starts."""

    gpu: str
    gpu_name: str
    tp: int
    num_gpus: int
    mem_fraction_static: float
    max_total_num_tokens: int  # per attention-DP worker
    total_tokens: int
    max_running_requests: int  # per attention-DP worker
    requests_at_context: int
    context_len: int
    command: str  # the launch_server line of this layout


@dataclass(frozen=True)
class SglangSweep:
    """`kvplan fit MODEL --engine sglang` without --gpu."""

    model: str
    engine: str
    sglang_version: str
    rows: tuple[SglangSweepRow, ...]
    skipped: tuple[str, ...] = field(default=())  # "gpu: why" for each GPU no TP up to 8 starts on


def _command(spec: ModelSpec, dep: SglangDeployment, revision: str | None = None) -> str:
    """The row's launch_server line: every flag of `dep` that differs from SGLang's default, so pasting it plans
    the row again (engine_args.launch_server_line)."""
    return launch_server_line(spec.name, asdict(dep), asdict(SglangDeployment()), revision)


def _row(spec: ModelSpec, chip: GpuSpec, dep: SglangDeployment, fit: SglangFit,
         revision: str | None) -> SglangSweepRow:
    return SglangSweepRow(chip.id, chip.name, dep.tp, fit.num_gpus, fit.defaults.mem_fraction_static,
                          fit.max_total_num_tokens, fit.total_tokens, fit.max_running_requests,
                          fit.requests_at_context, fit.context_len, _command(spec, dep, revision))


def sweep_sglang(spec: ModelSpec, catalog: Sequence[GpuSpec], dep: SglangDeployment,
                 weights: Callable[[GpuSpec, int], tuple[int, int, int]], *,
                 revision: str | None = None) -> SglangSweep:
    """Per GPU, the smallest TP in SWEEP_TPS (from the deployment's own, if larger) at which SGLang starts;
    `weights(chip, tp)` is (best, low, high) bytes per GPU;
    `revision` goes into each row's command. A deployment refused as not modelled is raised."""
    rows: list[SglangSweepRow] = []
    skipped: list[str] = []
    for chip in catalog:
        why = "no tensor-parallel size up to 8 starts"
        for tp in (t for t in SWEEP_TPS if t >= dep.tp):
            at = replace(dep, tp=tp)
            try:
                best, low, high = weights(chip, tp)
                fit = plan_sglang_fit(spec, chip, at, weights_bytes=best, weights_range=(low, high))
            except KvplanError as exc:
                why = str(exc)
                if why.startswith(NOT_MODELLED):
                    break  # not modelled at any TP on this GPU
                continue
            if fit.fits:
                rows.append(_row(spec, chip, at, fit, revision))
                break
            why = fit.startup
        else:
            skipped.append(f"{chip.id}: {why}")
    if not rows and skipped and all(x.split(": ", 1)[1].startswith(NOT_MODELLED) for x in skipped):
        raise InvalidParameter(skipped[0].split(": ", 1)[1])  # not modelled on any GPU: say it once
    return SglangSweep(spec.name, "sglang", SGLANG_VERSION, tuple(rows), tuple(skipped))
