"""kvplan's speed model against published, measured inference speeds (tests/fixtures/data/roofline-measured.yaml).

    python benchmarks/speed.py            predicted vs measured per point and per class, both halves
    python benchmarks/speed.py --fit      refit on the calibration half, print the fit and use it
    python benchmarks/speed.py --write    refit and write the fit into kvplan/hardware/speed_model.py (CALIBRATION)

Every point belongs to a half by the sha256 of its id (odd → validation), as the startup-log corpus does
(benchmarks/accuracy.py); the speed model (kvplan/hardware/speed_model.py) is fitted on the calibration half
only. Per point: the physical bound (rated roofs, no overheads), the prediction with its range, and the
measured figure, as times (ms) of what was measured.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvplan.hardware import speed_model as sm  # noqa: E402
from tests.measured_speeds import MeasuredPoint, calibration_fit, load_points, skipped_points  # noqa: E402


def report(points: Sequence[MeasuredPoint], cal: sm.SpeedCalibration) -> list[str]:
    lines = [f"{'point':44} {'half':5} {'bound':>9} {'pred':>9} {'range':>19} {'meas':>9} {'err':>7}  in"]
    errors: dict[tuple[str, str], list[float]] = {}
    inside_range: dict[str, list[bool]] = {}
    beaten = 0
    for p in points:
        o = p.observation
        pred = sm.predict_s(o, cal)
        _, _, over, _ = cal.for_gpu(o.arch, o.link, o.engine)
        lo, hi = pred * over.ratio_low, pred * over.ratio_high
        err = (pred - o.measured_s) / o.measured_s
        inside = lo <= o.measured_s <= hi
        beaten += o.measured_s < sm.physical_bound_s(o)
        errors.setdefault((p.half, p.cls), []).append(err)
        errors.setdefault((p.half, "all"), []).append(err)
        errors.setdefault((p.half, "engine " + o.engine), []).append(err)
        inside_range.setdefault(p.half, []).append(inside)
        lines.append(f"{p.id:44} {p.half[:5]:5} {sm.physical_bound_s(o) * 1e3:9.2f} {pred * 1e3:9.2f} "
                     f"{lo * 1e3:9.2f}…{hi * 1e3:<9.2f} {o.measured_s * 1e3:9.2f} {err:+7.1%}  "
                     f"{'yes' if inside else 'NO'}")
    lines.append("")
    lines.append(f"{'half':12} {'class':14} {'points':>6} {'median |err|':>13} {'max |err|':>10} {'signed median':>14}")
    for (half, cls), errs in sorted(errors.items()):
        a = [abs(e) for e in errs]
        lines.append(f"{half:12} {cls:14} {len(errs):6} {statistics.median(a):13.1%} {max(a):10.1%} "
                     f"{statistics.median(errs):+14.1%}")
    for half, flags in sorted(inside_range.items()):
        lines.append(f"{half}: measured inside the predicted range on {sum(flags)} of {len(flags)}")
    lines.append(f"measured points faster than the physical bound: {beaten} of {len(points)}")
    return lines


def calibration_source(c: sm.SpeedCalibration) -> str:
    """The fit as the Python literal speed_model.py ships (its last statement)."""
    o = c.overheads
    ids = "".join(f"        {i!r},\n" for i in c.fitted_on)
    engines = "".join(
        f"        {e!r}: StepOverheads(layer_s={v.layer_s!r}, moe_layer_s={v.moe_layer_s!r}, "
        f"allreduce_s={v.allreduce_s!r},\n                          step_s={v.step_s!r}, request_s={v.request_s!r}, "
        f"seq_layer_s={v.seq_layer_s!r}, "
        f"ratio_low={v.ratio_low!r}, ratio_high={v.ratio_high!r}),\n" for e, v in c.engine_overheads.items())
    per_arch = "".join(f"        {e!r}: {dict(v)!r},\n" for e, v in c.layer_s_by_arch.items())
    return (f"CALIBRATION = SpeedCalibration(\n"
            f"    bandwidth_efficiency={dict(c.bandwidth_efficiency)!r},\n"
            f"    compute_efficiency={dict(c.compute_efficiency)!r},\n"
            f"    allreduce_s={dict(c.allreduce_s)!r},\n"
            f"    overheads=StepOverheads(layer_s={o.layer_s!r}, moe_layer_s={o.moe_layer_s!r}, step_s={o.step_s!r},\n"
            f"                            seq_layer_s={o.seq_layer_s!r},\n"
            f"                            request_s={o.request_s!r}, ratio_low={o.ratio_low!r}, "
            f"ratio_high={o.ratio_high!r},\n"
            f'                            source="fitted on published measurements '
            f'(tests/fixtures/data/roofline-measured.yaml)"),\n'
            f"    fitted_on=(\n{ids}    ),\n"
            f"    kv_bandwidth_efficiency={dict(c.kv_bandwidth_efficiency)!r},\n"
            f"    engine_overheads={{\n{engines}    }},\n"
            f"    layer_s_by_arch={{\n{per_arch}    }},\n"
            f")\n").replace("'", '"')


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="print the calibration fitted on the calibration half")
    parser.add_argument("--write", action="store_true", help="write that fit into kvplan/hardware/speed_model.py")
    args = parser.parse_args(argv)
    points = load_points()
    fitted = calibration_fit(points)
    cal = fitted if args.fit or args.write else sm.CALIBRATION
    if args.fit:
        print(calibration_source(fitted))
    if args.write:
        path = ROOT / "kvplan" / "hardware" / "speed_model.py"
        text = path.read_text(encoding="utf-8")
        path.write_text(text[:text.index("CALIBRATION = SpeedCalibration(")] + calibration_source(fitted),
                        encoding="utf-8")
    print("\n".join(report(points, cal)))
    for pid, why in skipped_points():
        print(f"not modelled: {pid}: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
