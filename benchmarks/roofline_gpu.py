#!/usr/bin/env python3
"""Measure a GPU's two roofs with torch and print them next to kvplan's catalog figures.

Validates `kvplan roofline`'s inputs on real hardware (run by hand on a GPU machine, never in CI):

* HBM bandwidth: a large device-to-device copy (read + write of N bytes = 2N bytes moved).
* Decode-like GEMM: y = x @ W with W much larger than L2 and x of batch 1/8/64/256 rows. Reading W
  dominates at small batch, so bytes(W) / time is the bandwidth a decode step gets; 2·B·K·N / time
  is its FLOP rate. The batch at which it stops being bandwidth-bound is the measured ridge.
* Dense BF16 GEMM (8192³) TFLOP/s, and FP8 (torch._scaled_mm) where the GPU supports it.

It prints achieved/rated ratios: the values to pass as `--bandwidth-efficiency` and
`--compute-efficiency`. Usage:

    python benchmarks/roofline_gpu.py [--gpu h100] [--json] [--quick]

torch is imported inside main(); kvplan is optional (without it, pass --rated-bandwidth/--rated-flops).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

GIB = 2**30
DECODE_BATCHES = (1, 8, 64, 256)


def _time_ms(torch: Any, fn: Any, *, warmup: int, iters: int) -> float:
    """Median milliseconds of fn() over `iters` runs, timed with CUDA events after `warmup` runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_copy_bandwidth(torch: Any, size_bytes: int, iters: int) -> float:
    """Bytes/s of dst.copy_(src): each copy reads and writes size_bytes."""
    n = size_bytes // 2
    src = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = _time_ms(torch, lambda: dst.copy_(src), warmup=3, iters=iters)
    return 2 * n * 2 / (ms / 1e3)


def measure_decode_gemm(torch: Any, k: int, n: int, layers: int, batches: tuple[int, ...], iters: int
                        ) -> list[dict[str, float]]:
    """x[B, K] @ W[K, N] over `layers` distinct weights (so nothing stays in L2): bytes/s and FLOP/s."""
    weights = [torch.randn(k, n, dtype=torch.bfloat16, device="cuda") / k**0.5 for _ in range(layers)]
    weight_bytes = layers * k * n * 2
    rows = []
    for b in batches:
        x = torch.randn(b, k, dtype=torch.bfloat16, device="cuda")

        def step(x: Any = x) -> None:
            for w in weights:
                torch.matmul(x, w)

        ms = _time_ms(torch, step, warmup=3, iters=iters)
        seconds = ms / 1e3
        rows.append({
            "batch": b,
            "time_ms": ms,
            "weight_bytes": weight_bytes,
            "bandwidth_bytes_per_s": weight_bytes / seconds,
            "flops_per_s": 2 * b * k * n * layers / seconds,
        })
    return rows


def measure_gemm(torch: Any, m: int, iters: int, dtype: str = "bf16") -> float | None:
    """Dense m×m×m GEMM FLOP/s in bf16, or fp8 via torch._scaled_mm (None where unsupported)."""
    a = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    if dtype == "bf16":
        fn = lambda: torch.matmul(a, b)  # noqa: E731
    else:
        try:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().t().to(torch.float8_e4m3fn)  # column-major second operand
            one = torch.tensor(1.0, device="cuda")
            torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        except Exception:  # no FP8 tensor cores or an older torch
            return None
        fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
    ms = _time_ms(torch, fn, warmup=5, iters=iters)
    return 2 * m**3 / (ms / 1e3)


def catalog_figures(device_name: str, gpu: str | None) -> dict[str, Any] | None:
    """Rated bandwidth and dense FLOP/s from kvplan's catalog, if kvplan (and PyYAML) import."""
    try:
        from kvplan.hardware.gpus import get_gpu
    except Exception:
        return None
    try:
        spec = get_gpu(gpu or device_name)
    except Exception as exc:  # unknown GPU
        print(f"catalog: {exc}", file=sys.stderr)
        return None
    return {"id": spec.id, "bandwidth": spec.memory_bandwidth_bytes_per_s, "flops": dict(spec.flops)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu", help="catalog id (default: match torch.cuda.get_device_name())")
    p.add_argument("--rated-bandwidth", type=float, help="rated bytes/s when kvplan is not importable")
    p.add_argument("--rated-flops", type=float, help="rated dense BF16 FLOP/s when kvplan is not importable")
    p.add_argument("--quick", action="store_true", help="smaller buffers and fewer iterations")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = p.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.cuda.get_device_name()
    iters = 5 if args.quick else 20
    copy_bytes = (1 if args.quick else 4) * GIB
    # 8192 × 28672 bf16 = 448 MiB per matrix (a 70B-class MLP projection); 4 of them ≫ any L2.
    k, n, layers = 8192, 28672, 2 if args.quick else 4

    result: dict[str, Any] = {"device": device, "torch": torch.__version__}
    result["copy_bandwidth_bytes_per_s"] = measure_copy_bandwidth(torch, copy_bytes, iters)
    result["decode_gemm"] = measure_decode_gemm(torch, k, n, layers, DECODE_BATCHES, iters)
    result["bf16_gemm_flops_per_s"] = measure_gemm(torch, 8192, iters, "bf16")
    result["fp8_gemm_flops_per_s"] = measure_gemm(torch, 8192, iters, "fp8")

    cat = catalog_figures(device, args.gpu)
    rated_bw = cat["bandwidth"] if cat else args.rated_bandwidth
    rated = dict(cat["flops"]) if cat else ({"bf16": args.rated_flops} if args.rated_flops else {})
    result["catalog"] = cat
    if rated_bw:
        result["bandwidth_efficiency_copy"] = result["copy_bandwidth_bytes_per_s"] / rated_bw
        result["bandwidth_efficiency_decode_b1"] = result["decode_gemm"][0]["bandwidth_bytes_per_s"] / rated_bw
    if rated.get("bf16"):
        result["compute_efficiency_bf16"] = result["bf16_gemm_flops_per_s"] / rated["bf16"]
    if rated.get("fp8") and result["fp8_gemm_flops_per_s"]:
        result["compute_efficiency_fp8"] = result["fp8_gemm_flops_per_s"] / rated["fp8"]

    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{device} (torch {torch.__version__}); catalog: {cat['id'] if cat else 'not found'}")

    def ratio(x: float | None, of: float | None) -> str:
        return f"{x / of:6.1%}" if x and of else "     —"

    print(f"{'measure':<34}{'achieved':>16}{'rated':>16}{'ratio':>9}")
    bw = result["copy_bandwidth_bytes_per_s"]
    print(f"{'HBM copy (read+write)':<34}{bw / 1e9:>11,.0f} GB/s{(rated_bw or 0) / 1e9:>11,.0f} GB/s"
          f"{ratio(bw, rated_bw):>9}")
    for row in result["decode_gemm"]:
        label = f"decode GEMM batch {row['batch']}"
        print(f"{label + ' (weights)':<34}{row['bandwidth_bytes_per_s'] / 1e9:>11,.0f} GB/s"
              f"{(rated_bw or 0) / 1e9:>11,.0f} GB/s{ratio(row['bandwidth_bytes_per_s'], rated_bw):>9}")
        print(f"{label + ' (FLOP/s)':<34}{row['flops_per_s'] / 1e12:>9,.1f} TFLOP/s"
              f"{(rated.get('bf16') or 0) / 1e12:>9,.1f} TFLOP/s{ratio(row['flops_per_s'], rated.get('bf16')):>9}")
    for dt in ("bf16", "fp8"):
        f = result[f"{dt}_gemm_flops_per_s"]
        print(f"{dt.upper() + ' GEMM 8192³':<34}"
              + (f"{f / 1e12:>9,.1f} TFLOP/s" if f else f"{'unsupported':>16}")
              + f"{(rated.get(dt) or 0) / 1e12:>9,.1f} TFLOP/s{ratio(f, rated.get(dt)):>9}")
    if rated_bw and rated.get("bf16"):
        print(f"\nsuggested: --bandwidth-efficiency {result['bandwidth_efficiency_decode_b1']:.2f} "
              f"--compute-efficiency {result['compute_efficiency_bf16']:.2f}  "
              "(kvplan defaults: 0.70, 0.76)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
