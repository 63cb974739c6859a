"""What a step really takes: achieved efficiencies per GPU class and the per-step overheads, fitted on
published measurements (tests/fixtures/data/roofline-measured.yaml).

The roofs (roofline.py) say how fast a step could go. Measured engines are slower, and not by one factor:
the gap grows with TP and with faster GPUs (issue 21: Llama-2-7B on 8×A100 runs at 0.27 of its bandwidth
bound, at TP 1 at 0.68). Measured step times fit

    t = max(weights ÷ (η_w × BW) + KV ÷ (η_kv × BW),        the roofs, at the efficiency a GPU class reaches:
            FLOPs ÷ (η_c × peak))                             GEMMs stream weights, attention kernels read KV
        + layers × τ_layer[class]                             kernels per layer: launches, the gaps between them and
                                                              the small kernels' own time, per GPU class
        + layers × decode requests × τ_seq                    per sequence per layer: the decode attention kernel's
                                                              fixed work per sequence (one CTA per request and KV
                                                              head, block-table walk, split-K reduction) and the
                                                              per-token kernels (norms, RoPE, activation, KV write)
        + MoE layers × τ_moe                                  routing, top-k, token permutation, expert dispatch
        + all-reduces × α_link + ring bytes ÷ link            TP: each all-reduce's latency, then its bandwidth
        + τ_step                                              per step: scheduler, input preparation, sampler
        (+ τ_request for the first token: request admission, tokenizer hand-off, first sampling)

where every τ but τ_seq is a cost that does not shrink with TP; τ_seq is one constant for every engine (the
large-batch points that fix it are TensorRT-LLM's and vLLM's; SHARED_TERMS). Without it the fit read the cost of
768 short sequences as slow KV reads (a KV-read efficiency of 0.49 on Hopper) and then over-predicted every
long-context step by 25–75 % (issue 21). τ_layer is fitted per GPU class (PER_ARCH_TERMS): when it was fitted on
vLLM's H200 performance-benchmark rows (build 9515) against vLLM 0.2–0.7 on A100 it read 45 µs against 216 µs, and
one constant over both over-predicted the H200 runs by 50–87 % (the shipped figures are below). A class with no point
of its own takes the largest (pessimistic). The efficiencies and τ_layer trade off where only TP-1 points of one
model fix them (Hopper's weight-read efficiency fitted 0.62 beside 45 µs per layer then): the two together, not
each, are what the points measure. Each
constant below is fitted by `fit_speed_model` on
the calibration half of the measured points (benchmarks/speed.py prints the fit and both halves;
tests/test_speed_model.py refits and checks these figures). Pure: numbers in, numbers out.

A GPU class with fewer calibration points than unknowns of its own gets no efficiencies of its own
(`underdetermined_classes`): its points are timed at the lowest fitted efficiency, as a class without points is.

gpt-fast's Mixtral table is two builds. At pytorch-labs/gpt-fast@89b2502 (78.75 / 118.23 / 203.69 tok/s at TP 2 / 4
/ 8) each expert's w2 was stored [intermediate, dim] and mixtral-moe/model.py ConditionalFeedForward reduced it over
its outer, non-contiguous axis; 48328fb ("transposed w2 to have reduction dim be innermost dim") republished 96.67 /
155.35 / 227.82: 2.4 and 2.0 ms off a TP-2 and TP-4 step, 0.5 ms off TP 8. Fitted on the first build's TP 2 and 4
alone, that cost became a constant of 94 µs per MoE layer and timed TP 8 41 % too slow; both builds are now
measured points (no term is fitted for one build's layout). An expert-bytes cost per engine (shrinking with TP) was
tried in its place (on the 88 points of then): alone it left TP 8 at +29 %, beside the republished points it moved no
class's median or max error on either half by 3 points or more, and TensorRT-LLM's value rested on a single MoE
point, so it is not in the model.

Left as it is (tried, not adopted): TensorRT-LLM 0.5–0.6.1 on Hopper is timed too slow on KV-heavy MHA runs (Llama-2-7B
/13B, +12…+35 %) and too fast on GQA ones (Llama-2-70B, −14…−28 %): its masked-MHA decode kernel launches one block
per query head (cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderMaskedMultiheadAttentionLaunch.h,
`dim3 grid{num_heads, batch_size, 1}`), so each KV head of a GQA group is fetched once per query head, L2 catching
some; 0.10 "integrated the new NVIDIA Hopper XQA kernels for LLaMA 2 70B". A per-engine cost on those repeated fetches
fitted the calibration half to 4.7 % median (high batch 0.8 %) but validated worse (median 13.1 %, max 40.6 %): the
same constant timed 0.7's Llama-2-70B H200 runs 17–41 % too slow (that build reads less than it says), and batch-1
engines, whose KV is a few MB, fitted it freely. It needs each run's decode kernel as an input, which the published
points do not give.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

LinkKind = Literal["nvlink", "pcie"]
# Engines whose measurements calibrate the model. kvplan predicts vLLM; the others' points still fit the
# efficiencies (kernels reading HBM), each with overheads of its own. SGLang (Python scheduler, CUDA graphs,
# FlashInfer/FlashAttention kernels, like vLLM) has too few points for its own and is scored as vLLM.
VLLM = "vllm"
# The least range (measured ÷ predicted) for a GPU class with no measured point: an assumption, not a fit
# (±25 %, wider than the 2 % the fitted weight-read efficiencies of Ampere and Hopper differ by).
UNMEASURED_CLASS_RATIOS = (0.8, 1.25)
ENGINES = (VLLM, "tensorrt-llm", "gpt-fast")


@dataclass(frozen=True)
class StepOverheads:
    """Per-step costs on top of the roofs, each in seconds, and the spread of measured ÷ predicted."""

    layer_s: float = 0.0  # per transformer layer
    moe_layer_s: float = 0.0  # extra per MoE layer
    allreduce_s: float = 0.0  # latency of one TP all-reduce on this link
    step_s: float = 0.0  # per engine step
    request_s: float = 0.0  # once per request, before its first token
    # per decode request per layer: the attention kernel's per-sequence work and the per-token kernels
    seq_layer_s: float = 0.0
    # measured ÷ predicted on the calibration points: the range printed around a prediction.
    ratio_low: float = 1.0
    ratio_high: float = 1.0
    source: str = field(default="", compare=False)

    def time_s(self, *, layers: int, moe_layers: int, all_reduces: int, decode_reqs: int = 0,
               first_token: bool = False) -> float:
        """The overheads of one step with these counts (the first token adds `request_s`)."""
        return (layers * (self.layer_s + decode_reqs * self.seq_layer_s) + moe_layers * self.moe_layer_s
                + all_reduces * self.allreduce_s + self.step_s + (self.request_s if first_token else 0.0))


@dataclass(frozen=True)
class SpeedCalibration:
    """The fitted model: achieved efficiency per GPU class, overheads per link kind, and what it rests on."""

    bandwidth_efficiency: Mapping[str, float]  # arch → share of rated HBM bandwidth weight reads reach
    compute_efficiency: Mapping[str, float]  # arch → share of dense peak FLOP/s reached
    allreduce_s: Mapping[str, float]  # link kind → latency of one all-reduce
    overheads: StepOverheads  # layer/MoE/step/request costs and the ratio range
    fitted_on: tuple[str, ...] = ()  # measured point ids
    kv_bandwidth_efficiency: Mapping[str, float] = field(default_factory=dict)  # arch → KV/state reads' share
    # The overheads of the other engines whose measurements share the efficiencies' fit (allreduce_s inside):
    # their kernels read HBM as fast, their schedulers and launches cost differently.
    engine_overheads: Mapping[str, StepOverheads] = field(default_factory=dict)
    # engine → GPU class → per-layer cost (a class without its own takes the engine's largest: `layer_s` above)
    layer_s_by_arch: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def kv_efficiency(self, arch: str) -> float:
        """The KV-read efficiency of `arch` (its weight-read efficiency where no KV-heavy point fixed it)."""
        return _pick(self.kv_bandwidth_efficiency or self.bandwidth_efficiency, arch)[0]

    def for_gpu(self, arch: str, link: LinkKind | None, engine: str = VLLM) -> tuple[float, float, StepOverheads, str]:
        """Efficiencies and overheads for a GPU of class `arch` on `link` under `engine`, and how they were chosen.

        A class the calibration has no point for takes the lowest fitted efficiency (the pessimistic
        choice: slower, never faster than any measured class) and a range at least UNMEASURED_CLASS_RATIOS.
        """
        bw, bw_known = _pick(self.bandwidth_efficiency, arch)
        fl, fl_known = _pick(self.compute_efficiency, arch)
        if engine != VLLM and engine in self.engine_overheads:
            over = self.engine_overheads[engine]
        else:
            ar = self.allreduce_s.get(link or "", max(self.allreduce_s.values(), default=0.0))
            over = replace(self.overheads, allreduce_s=ar)
        per_arch = self.layer_s_by_arch.get(engine if engine in self.engine_overheads else VLLM, {})
        if arch in per_arch:
            over = replace(over, layer_s=per_arch[arch])
        how = f"calibrated on {len(self.fitted_on)} measured points"
        if not (bw_known and fl_known):
            low, high = UNMEASURED_CLASS_RATIOS
            over = replace(over, ratio_low=min(over.ratio_low, low), ratio_high=max(over.ratio_high, high))
            how += f"; no {arch} point: the lowest efficiency of the measured classes, range widened"
        return bw, fl, over, how


def _pick(by_arch: Mapping[str, float], arch: str) -> tuple[float, bool]:
    if arch in by_arch:
        return by_arch[arch], True
    return (min(by_arch.values()) if by_arch else 1.0), False


# --- fitting ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepShape:
    """One kind of step in a measurement: its rated roof times and overhead counts, and how many ran."""

    memory_s: float  # weight bytes ÷ rated bandwidth
    compute_s: float  # FLOPs ÷ rated peak
    comm_s: float  # ring all-reduce bytes ÷ link (0 without TP)
    layers: int
    moe_layers: int
    all_reduces: int
    count: float = 1.0  # steps of this shape the measured time spans (a static batch: its output length)
    kv_s: float = 0.0  # KV and recurrent-state bytes ÷ rated bandwidth
    decode_reqs: int = 0  # decode requests in the step (each a sequence the attention kernels walk)


@dataclass(frozen=True)
class Observation:
    """One measured time with the steps it spans (a decode step; a prefill; a static batch's whole run)."""

    id: str
    arch: str
    link: LinkKind | None
    steps: tuple[StepShape, ...]
    first_token: bool  # the time includes a request's admission and first token (TTFT, a whole batch)
    measured_s: float
    engine: str = VLLM  # whose overheads the time carries (ENGINES)


def predict_s(obs: Observation, cal: SpeedCalibration) -> float:
    """The model's time for an observation (without the range)."""
    bw, fl, over, _ = cal.for_gpu(obs.arch, obs.link, obs.engine)
    kv = cal.kv_efficiency(obs.arch)
    total = over.request_s if obs.first_token else 0.0
    for s in obs.steps:
        roof = max(s.memory_s / bw + s.kv_s / kv, s.compute_s / fl)
        total += s.count * (roof + s.comm_s + over.time_s(layers=s.layers, moe_layers=s.moe_layers,
                                                          all_reduces=s.all_reduces, decode_reqs=s.decode_reqs))
    return total


def physical_bound_s(obs: Observation) -> float:
    """The observation's physical bound: the rated roofs and the ring's bandwidth, no overheads."""
    return sum(s.count * (max(s.memory_s + s.kv_s, s.compute_s) + s.comm_s) for s in obs.steps)


def fit_speed_model(observations: Sequence[Observation], *, rounds: int = 4) -> SpeedCalibration:
    """Least relative squared error: the efficiencies (as 1/η), τ's and α's that best explain `observations`.

    The model is linear in (1/η_bw[arch], 1/η_c[arch], τ_layer, τ_moe, τ_step, τ_request, α[link]) once each
    step's binding roof is known; the roof is chosen by the current fit (first: the rated roofs) and the fit
    repeated (`rounds`). A coefficient the data drive negative is pinned at 0 and the rest refitted
    (non-negative, by elimination). Efficiencies are capped at 1.0 (no point beats its roof). A GPU class with
    fewer points than unknowns of its own (`underdetermined_classes`) gets no efficiencies: its points are timed
    at the lowest fitted ones, as `SpeedCalibration.for_gpu` times a class without points, and fit only its τ_layer.
    """
    obs = [o for o in observations if o.measured_s > 0]
    if not obs:
        raise ValueError("no observations to fit")
    memory_bound = {(o.id, i): s.memory_s + s.kv_s >= s.compute_s for o in obs for i, s in enumerate(o.steps)}
    weak = underdetermined_classes(obs, memory_bound)
    cal = SpeedCalibration({}, {}, {}, StepOverheads())
    for _ in range(rounds):
        rows = [(_row(o, memory_bound, cal if o.arch in weak else None), o) for o in obs]
        names = sorted({n for (values, _), _ in rows for n in values})
        coef = _nnls(names, rows)
        cal = _calibration(coef, obs)
        memory_bound = _binding_roofs(obs, cal)

    def spread(over: StepOverheads, engine: str | None) -> StepOverheads:
        ratios = [o.measured_s / predict_s(o, cal) for o in obs if engine in (None, o.engine)] or [1.0]
        return replace(over, ratio_low=min(ratios), ratio_high=max(ratios))

    # kvplan's own range is the spread over every engine's points: vLLM's few points alone fit too closely
    # to say how far an unseen deployment may land (the validation half lands outside their spread).
    return replace(cal, overheads=spread(cal.overheads, None),
                   engine_overheads={e: spread(o, e) for e, o in cal.engine_overheads.items()})


def underdetermined_classes(obs: Sequence[Observation], memory_bound: Mapping[tuple[str, int], bool]) -> frozenset[str]:
    """GPU classes with fewer observations than unknowns of their own (efficiencies, per-class τ_layer per engine).

    With one B200 point the fit could split its time between 1/η_bw and τ_layer in any proportion, and the
    smallest-norm split (RIDGE) read it as weights streamed at 0.19 of rated bandwidth, which then timed
    TensorRT-LLM's B200 run 25× too slow: an efficiency needs points that separate it from the overheads.
    """
    counts: dict[str, int] = {}
    own: dict[str, set[str]] = {}
    for o in obs:
        counts[o.arch] = counts.get(o.arch, 0) + 1
        own.setdefault(o.arch, set()).update(n for n in _row(o, memory_bound, None)[0] if n.split("@")[0].endswith(
            ":" + o.arch))
    return frozenset(a for a, n in counts.items() if n < len(own[a]))


# Overheads one constant serves for every engine (the rest are fitted per engine, ENGINES).
SHARED_TERMS: frozenset[str] = frozenset({"seq_layer_s"})
PER_ARCH_TERMS: frozenset[str] = frozenset({"layer_s"})


def _term(name: str, at: str, arch: str = "") -> str:
    """The unknown's name in the fit: shared by every engine, or this engine's own (`at` is "@engine"), and for a
    term fitted per GPU class (PER_ARCH_TERMS), that class's."""
    if name in PER_ARCH_TERMS and arch:
        name += ":" + arch
    return name if name in SHARED_TERMS else name + at


def _row(o: Observation, memory_bound: Mapping[tuple[str, int], bool],
         timed_at: SpeedCalibration | None = None) -> tuple[dict[str, float], float]:
    """Each unknown's multiplier in `o`'s predicted time, and the part that is known (the ring's bandwidth; with
    `timed_at`, also the roofs at that calibration's efficiencies for o's class: an underdetermined class)."""
    at = "@" + o.engine
    values: dict[str, float] = {_term("request_s", at): 1.0} if o.first_token else {}
    known = 0.0

    def add(name: str, x: float) -> None:
        if x:
            values[name] = values.get(name, 0.0) + x

    for i, s in enumerate(o.steps):
        if timed_at is not None:
            bw, fl, _, _ = timed_at.for_gpu(o.arch, o.link, o.engine)
            kv = timed_at.kv_efficiency(o.arch)
            if memory_bound[(o.id, i)]:
                known += s.count * (s.memory_s / bw + s.kv_s / kv)
            else:
                known += s.count * s.compute_s / fl
        elif memory_bound[(o.id, i)]:
            add("inv_bw:" + o.arch, s.count * s.memory_s)
            add("inv_kv:" + o.arch, s.count * s.kv_s)
        else:
            add("inv_fl:" + o.arch, s.count * s.compute_s)
        add(_term("layer_s", at, o.arch), s.count * s.layers)
        add(_term("moe_layer_s", at), s.count * s.moe_layers)
        add(_term("seq_layer_s", at), s.count * s.layers * s.decode_reqs)
        add(_term("step_s", at), s.count)
        if o.link:
            add(_term("ar:" + o.link, at), s.count * s.all_reduces)
        known += s.count * s.comm_s
    return values, known


# Least squares of the relative error (each point weighs the same, whatever its duration). An L1 fit (iteratively
# reweighted) was tried for its robustness to one engine's outliers and dropped: with as few points as unknowns per
# engine it settles on corner solutions that fit a subset exactly, and one added point moved the Hopper KV-read
# efficiency from 1.0 to 0.46 (validation max 44 % → 84 %); least squares spreads the error (validation max 41 %).
RIDGE = 1e-9


def _nnls(names: list[str], rows: Sequence[tuple[tuple[dict[str, float], float], Observation]]) -> dict[str, float]:
    """Non-negative least squares of the relative error: solve, drop the most negative coefficient, repeat."""
    active = list(names)
    while True:
        a = [[values.get(n, 0.0) / o.measured_s for n in active] for (values, _), o in rows]
        b = [(o.measured_s - known) / o.measured_s for (_, known), o in rows]
        sol = _least_squares(a, b)
        worst = min(range(len(sol)), key=lambda i: sol[i], default=None)
        if worst is None or sol[worst] >= 0:
            return dict(zip(active, sol, strict=True))
        del active[worst]


def _least_squares(a: Sequence[Sequence[float]], b: Sequence[float]) -> list[float]:
    """Solve min ‖a·x − b‖ by the normal equations with partial pivoting (a handful of unknowns).

    Columns are scaled to unit norm first, and a ridge of RIDGE keeps the directions the data do not determine
    (two overheads that always occur together, such as one engine's per-layer and per-step costs at a single
    layer count) at the smallest solution instead of failing; determined coefficients move by about RIDGE.
    """
    n = len(a[0]) if a else 0
    norms = [math.sqrt(sum(r[j] * r[j] for r in a)) or 1.0 for j in range(n)]
    scaled = [[r[j] / norms[j] for j in range(n)] for r in a]
    m = [[sum(r[i] * r[j] for r in scaled) for j in range(n)] + [sum(r[i] * y for r, y in zip(scaled, b, strict=True))]
         for i in range(n)]
    for i in range(n):
        m[i][i] += RIDGE
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] / norms[i] for i in range(n)]


def _calibration(coef: Mapping[str, float], obs: Sequence[Observation]) -> SpeedCalibration:
    def eff(prefix: str) -> dict[str, float]:
        return {k.split(":", 1)[1]: min(1.0, 1.0 / v) for k, v in coef.items() if k.startswith(prefix) and v > 0}

    def overheads(engine: str) -> StepOverheads:
        at = "@" + engine
        links = [v for k, v in coef.items() if k.startswith("ar:") and (k.endswith(at) or "@" not in k)]

        def get(name: str) -> float:
            if name in PER_ARCH_TERMS:
                return max((v for k, v in coef.items() if k.startswith(name + ":") and k.endswith(at)), default=0.0)
            return coef.get(_term(name, at), 0.0)

        return StepOverheads(layer_s=get("layer_s"), moe_layer_s=get("moe_layer_s"),
                             allreduce_s=max(links, default=0.0), step_s=get("step_s"),
                             request_s=get("request_s"), seq_layer_s=get("seq_layer_s"))

    links = {k[3:].split("@")[0]: v for k, v in coef.items()
             if k.startswith("ar:") and (k.endswith("@" + VLLM) or "@" not in k)}
    others = {o.engine for o in obs} - {VLLM}
    by_arch: dict[str, dict[str, float]] = {}
    for k, v in coef.items():
        if k.startswith("layer_s:"):
            arch, engine = k[len("layer_s:"):].split("@")
            by_arch.setdefault(engine, {})[arch] = v
    return SpeedCalibration(eff("inv_bw:"), eff("inv_fl:"), links, replace(overheads(VLLM), allreduce_s=0.0),
                            tuple(o.id for o in obs), eff("inv_kv:"), {e: overheads(e) for e in sorted(others)},
                            {e: dict(sorted(a.items())) for e, a in sorted(by_arch.items())})


def _binding_roofs(obs: Sequence[Observation], cal: SpeedCalibration) -> dict[tuple[str, int], bool]:
    out: dict[tuple[str, int], bool] = {}
    for o in obs:
        bw, fl, _, _ = cal.for_gpu(o.arch, o.link, o.engine)
        kv = cal.kv_efficiency(o.arch)
        for i, s in enumerate(o.steps):
            out[(o.id, i)] = s.memory_s / bw + s.kv_s / kv >= s.compute_s / fl
    return out


def rounded(cal: SpeedCalibration, digits: int = 3) -> SpeedCalibration:
    """The calibration at `digits` significant figures (what the module ships and the test compares)."""
    def sig(x: float) -> float:
        return 0.0 if x == 0 else round(x, digits - 1 - math.floor(math.log10(abs(x))))

    def over(o: StepOverheads) -> StepOverheads:
        return StepOverheads(layer_s=sig(o.layer_s), moe_layer_s=sig(o.moe_layer_s), allreduce_s=sig(o.allreduce_s),
                             step_s=sig(o.step_s), request_s=sig(o.request_s), seq_layer_s=sig(o.seq_layer_s),
                             ratio_low=sig(o.ratio_low), ratio_high=sig(o.ratio_high))

    return SpeedCalibration(
        {k: sig(v) for k, v in sorted(cal.bandwidth_efficiency.items())},
        {k: sig(v) for k, v in sorted(cal.compute_efficiency.items())},
        {k: sig(v) for k, v in sorted(cal.allreduce_s.items())},
        over(cal.overheads),
        cal.fitted_on,
        {k: sig(v) for k, v in sorted(cal.kv_bandwidth_efficiency.items())},
        {e: over(v) for e, v in sorted(cal.engine_overheads.items())},
        {e: {a: sig(v) for a, v in sorted(by.items())} for e, by in sorted(cal.layer_s_by_arch.items())},
    )


# The shipped calibration: `fit_speed_model` on the calibration half of tests/fixtures/data/roofline-measured.yaml
# at 3 significant figures (benchmarks/speed.py --fit prints it; tests/test_speed_model.py refits and compares).
CALIBRATION = SpeedCalibration(
    bandwidth_efficiency={"ampere": 0.869, "hopper": 0.664},
    compute_efficiency={"ampere": 0.621, "hopper": 0.635},
    allreduce_s={"nvlink": 6.32e-06},
    overheads=StepOverheads(layer_s=0.000175, moe_layer_s=3.77e-05, step_s=0.0,
                            seq_layer_s=7.46e-07,
                            request_s=0.0, ratio_low=0.826, ratio_high=1.43,
                            source="fitted on published measurements (tests/fixtures/data/roofline-measured.yaml)"),
    fitted_on=(
        "gptfast-llama2-7b-a100-tp1",
        "gptfast-llama2-7b-a100-tp2",
        "gptfast-llama2-7b-a100-tp8",
        "gptfast-mixtral-8x7b-a100-tp2",
        "gptfast-mixtral-8x7b-a100-tp4",
        "trt05-llama70b-a100-tp4-ttft-2048",
        "trt061-llama7b-a100-b384-128-128",
        "trt061-llama7b-h100-fp8-tp1-b768-128-128",
        "trt061-llama70b-h100-fp8-tp4-b480-128-2048",
        "trt061-llama70b-h100-fp8-tp2-b96-2048-128",
        "trt061-llama70b-h100-fp8-tp2-b64-2048-2048",
        "trt05-llama7b-h100-fp8-tp1-ttft-128",
        "trt05-llama70b-h100-fp8-tp4-ttft-128",
        "trt07a-llama70b-h200-fp8-b960-128-128",
        "vllm-blog-fp8kv-gptoss-20b-h100-c8-kvbf16",
        "vllm-blog-fp8kv-gptoss-20b-h100-c8-kvfp8",
        "inferencex-dsr1-0528-h200-sglang-tp8-c64",
        "trtllm-dsr1-fp8-h200-tp8-ep8-adp-c1024",
        "vllm-issue16300-qwq32b-a100-tp2-b16",
        "vllm-issue16300-qwq32b-a100-tp4-b16",
        "vllm-issue16300-qwq32b-a100-tp8-b16",
        "vllm-pr3240-mixtral-8x7b-a100-tp2-b1",
        "vllm-pr3240-mixtral-8x7b-a100-tp2-b4",
        "vllm-pr3240-mixtral-8x7b-a100-tp2-b16",
        "vllm-pr3240-mixtral-8x7b-a100-tp2-b64",
        "nemo-llama2-7b-a100-tp1-b1-128-20",
        "nemo-llama2-7b-a100-tp2-b1-128-20",
        "nemo-llama2-7b-h100-tp2-b1-128-20",
        "nemo-llama2-7b-a100-tp4-b1-128-20",
        "nemo-llama2-7b-a100-tp8-b1-128-20",
        "nemo-llama2-7b-h100-tp8-b1-128-20",
        "nemo-llama2-7b-h100-tp2-b8-128-20",
        "nemo-llama2-7b-h100-tp4-b8-128-20",
        "vllm-perf-b9515-llama31-8b-h200-tp1-b8-32-128",
        "vllm-perf-b9515-mixtral-8x7b-h200-tp2-b8-32-128",
        "vllm-pr4002-mixtral-8x22b-a100-tp4-b32",
        "vllm-pr4002-mixtral-8x22b-a100-tp8-b16",
        "gptfast-48328fb-mixtral-8x7b-a100-tp2",
        "gptfast-48328fb-mixtral-8x7b-a100-tp4",
        "gptfast-48328fb-mixtral-8x7b-a100-tp8",
        "gptfast-llama31-8b-a100-tp4",
        "gptfast-llama31-70b-a100-tp4",
        "vllm-perf-b9555-llama31-8b-h100-tp1-b8-32-128",
        "vllm-perf-b9555-llama3-70b-h100-tp4-b8-32-128",
        "vllm-perf-b9523-llama31-8b-a100-tp1-b8-32-128",
        "vllm-perf-b9523-mixtral-8x7b-a100-tp2-b8-32-128",
    ),
    kv_bandwidth_efficiency={"ampere": 0.79, "hopper": 0.694},
    engine_overheads={
        "gpt-fast": StepOverheads(layer_s=6.31e-05, moe_layer_s=2.89e-05, allreduce_s=3.1e-06,
                          step_s=0.0, request_s=0.0, seq_layer_s=7.46e-07, ratio_low=0.884, ratio_high=1.25),
        "tensorrt-llm": StepOverheads(layer_s=7.99e-05, moe_layer_s=0.00055, allreduce_s=4.44e-05,
                          step_s=0.0, request_s=0.00282, seq_layer_s=7.46e-07, ratio_low=0.826, ratio_high=1.43),
    },
    layer_s_by_arch={
        "gpt-fast": {"ampere": 6.31e-05},
        "tensorrt-llm": {"ampere": 7.99e-05, "hopper": 4.17e-05},
        "vllm": {"ampere": 0.000175, "hopper": 3.92e-05},
    },
)
