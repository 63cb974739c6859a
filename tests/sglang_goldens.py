"""kvplan's SGLang rules replayed on the SGLang oracle's goldens (shared by the tests and the coverage count).

Each golden case gives the free memory before / after the weights that SGLang's `_profile_available_bytes`
was fed (`pre_gib`, `avail_gib`); kvplan resolves the same deployment and sizes the pool from the same
figures, so every number must agree exactly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.sglang.budget import FreeMemory
from kvplan.sglang.defaults import SglangDeployment
from kvplan.sglang.fit import SglangFit, plan_sglang_fit

FIXTURES = Path(__file__).parent / "fixtures"
GOLDENS = FIXTURES / "sglang" / "oracle-goldens.json"
# DeepSeek-V4 (tools/sglang_oracle/dsv4_regen.py): DSV4PoolConfigurator's sizes and SGLang's DSV4 log lines.
DSV4_GOLDENS = FIXTURES / "sglang" / "dsv4-oracle-goldens.json"
# SGLang's model-class resolution (model_loader/utils.py:resolve_transformers_arch, tools/sglang_oracle/arch_probe.py)
# for the configs SGLang has no class for: the step after the sizing oracle's, at model load.
MODEL_CLASS_GOLDENS = FIXTURES / "sglang" / "model-class-goldens.json"
GPU_IDS = {"h100": "h100-sxm", "h200": "h200", "b200": "b200", "a100-80": "a100-80gb-sxm", "mi300x": "mi300x",
           "mi355x": "mi355x"}
# Models whose golden is the oracle's fault, not SGLang's rule: kvplan's answer is unchecked there (class
# "oracle-fault"; test_sglang pins that each still disagrees, so the list cannot go stale).
ORACLE_FAULTS = {
    "mistralai--Mistral-Small-4-119B-2603": (
        "the committed fixture has no params.json, which SGLang reads for this Mistral-format checkpoint "
        "(FileNotFoundError): the oracle could not run it"),
}


# kvplan.sglang.architectures.heads_refusal: an assertion in the model class's __init__, which the sizing oracle
# never builds (it sizes from ModelConfig): ported from SGLang's source, counted apart ("refused-source").
HEADS_ASSERTION = "AssertionError: assert "


def load_cases(path: Path = GOLDENS) -> list[dict[str, Any]]:
    """The golden cases, as tools/sglang_oracle/regen.py wrote them (the default: with dsv4_regen.py's)."""
    cases: list[dict[str, Any]] = json.loads(path.read_text())["cases"]
    if path == GOLDENS:
        cases += json.loads(DSV4_GOLDENS.read_text())["cases"]
    return cases


@cache
def model_class_errors() -> dict[str, str]:
    """Model → SGLang's ValueError at model load (without its `ValueError: ` prefix), from MODEL_CLASS_GOLDENS."""
    cases = json.loads(MODEL_CLASS_GOLDENS.read_text())["cases"]
    return {c["model"]: c["error"].removeprefix("ValueError: ") for c in cases if "error" in c}


def load_refusal(case: dict[str, Any]) -> str | None:
    """SGLang's refusal at model load for a case the sizing oracle sized (None: it loads, or sizing refused)."""
    return None if "error" in case else model_class_errors().get(case["model"])


def deployment(case: dict[str, Any]) -> SglangDeployment:
    """The SglangDeployment of a case's oracle flags."""
    flags = list(case["flags"])
    kw: dict[str, Any] = {"tp": case["tp"]}
    names = {"--kv-cache-dtype": ("kv_cache_dtype", str), "--mem-fraction-static": ("mem_fraction_static", float),
             "--max-running-requests": ("max_running_requests", int), "--context-length": ("context_length", int),
             "--page-size": ("page_size", int), "--chunked-prefill-size": ("chunked_prefill_size", int),
             "--dp": ("dp", int), "--max-total-tokens": ("max_total_tokens", int),
             "--attention-backend": ("attention_backend", str)}
    i = 0
    while i < len(flags):
        if flags[i] == "--enable-dp-attention":
            kw["enable_dp_attention"] = True
            i += 1
            continue
        if flags[i] == "--set" and flags[i + 1].startswith("swa_full_tokens_ratio="):
            kw["swa_full_tokens_ratio"] = float(flags[i + 1].split("=", 1)[1])
            i += 2
            continue
        field, cast = names[flags[i]]
        kw[field] = cast(flags[i + 1])
        i += 2
    return SglangDeployment(**kw)


@cache
def model_spec(name: str) -> Any:
    """The case's model, read from the committed config (with its hf_quant_config.json) as the CLI reads it."""
    for base in ("corpus/configs", "configs"):
        path = FIXTURES / base / name
        if (path / "config.json").exists():
            return load_local(str(path))
    raise FileNotFoundError(name)


def sizing_refusal_matches(error: str, startup: str) -> bool:
    """An oracle error that is SGLang's own sizing refusal (a RuntimeError of _handle_max_mamba_cache or
    resolve_max_num_reqs, or the ValueError of validate_swa_pool_size, recorded as `RuntimeError: <text>` cut at
    400 characters) is kvplan's startup verdict."""
    prefix = next((p for p in ("RuntimeError: ", "ValueError: ") if error.startswith(p)), None)
    return prefix is not None and startup != "starts" and (prefix + startup).startswith(error[:399])


@dataclass(frozen=True)
class Outcome:
    """One case: kvplan's plan (or its refusal) next to the oracle's figures."""

    case: dict[str, Any]
    fit: SglangFit | None
    refusal: str | None

    @property
    def mismatches(self) -> list[str]:
        """Every figure where kvplan and SGLang differ ([] when exact or honestly refused)."""
        c, f = self.case, self.fit
        if (load := load_refusal(c)) is not None:  # SGLang sizes it, then refuses the model class
            if self.refusal is not None and load.startswith(self.refusal):
                return []
            said = (self.refusal or "starts")[:60]
            return [f"SGLang refuses the model class ({load[:60]!r}) but kvplan said {said!r}"]
        if "error" in c:  # the oracle could not run it, or SGLang's sizing raised: kvplan must refuse too
            if self.refusal or (f is not None and sizing_refusal_matches(c["error"], f.startup)):
                return []
            return [f"oracle error {c['error'][:60]!r} but kvplan planned ({(f.startup if f else '')[:60]!r})"]
        if f is None:
            return []  # refused by kvplan (counted apart)
        r, p, d = c["resolved"], c["pool"], f.defaults
        out = []
        mine = {"mem_fraction_static": d.mem_fraction_static, "chunked_prefill_size": d.chunked_prefill_size,
                "max_prefill_tokens": d.max_prefill_tokens, "page_size": d.page_size,
                "attention_backend": d.attention_backend, "attn_dp_size": d.attn_dp_size,
                "schedule_conservativeness": d.schedule_conservativeness, "decode_max_bs": d.decode_graph_max_bs,
                "decode_num_bs": d.decode_graph_sizes, "prefill_backend": d.prefill_graph,
                "prefill_max_bs": d.prefill_graph_max_bs, "prefill_num_bs": d.prefill_graph_sizes}
        for k, v in mine.items():
            want = r[k]
            if k == "prefill_max_bs" and r["prefill_backend"] == "disabled":
                continue
            if (round(v, 6) if isinstance(v, float) else v) != (round(want, 6) if isinstance(want, float) else want):
                out.append(f"{k}: kvplan {v!r} sglang {want!r}")
        cell = f.geometry.cell_size if f.geometry is not None else None
        if "dsv4" in p or p.get("pool_configurator") == "DSV4PoolConfigurator":
            cell = None  # DSV4PoolConfigurator has no _cell_size: its figures are compared below (_dsv4_mismatches)
        if p.get("cell_size_bytes") != cell:
            out.append(f"cell: kvplan {cell} sglang {p.get('cell_size_bytes')}")
        if p.get("context_len") != f.context_len:
            out.append(f"context_len: kvplan {f.context_len} sglang {p.get('context_len')}")
        if "refusal" in p:
            if f.startup != p["refusal"]:
                out.append(f"refusal: kvplan {f.startup[:90]!r} sglang {p['refusal'][:90]!r}")
            return out
        if f.budget.budget_bytes != p.get("profiled_budget_bytes"):
            out.append(f"budget: kvplan {f.budget.budget_bytes} sglang {p.get('profiled_budget_bytes')}")
        if f.pool is None:
            return [*out, f"kvplan did not start ({f.startup[:80]}) but SGLang did"]
        for k, v in (("max_total_num_tokens", f.pool.max_total_num_tokens),
                     ("max_running_requests", f.pool.max_running_requests)):
            if p.get(k) != v:
                out.append(f"{k}: kvplan {v} sglang {p.get(k)}")
        if "dsv4" in p:
            return out + _dsv4_mismatches(p, f)
        if p.get("log") and list(p["log"]) != list(f.pool.log_lines):
            out.append(f"log: kvplan {f.pool.log_lines!r} sglang {p['log']!r}")
        return out


def _dsv4_mismatches(p: dict[str, Any], f: SglangFit) -> list[str]:
    """DeepSeek-V4: every pool size and per-token figure of DSV4PoolConfigurator, the log lines SGLang prints
    (those it printed before a pool-build refusal), and the refusal itself."""
    assert f.pool is not None and f.pool.dsv4 is not None and f.geometry is not None and f.geometry.dsv4 is not None
    s, part, g = f.pool.dsv4, f.geometry.dsv4, p["dsv4"]
    mine = {"full_max_total_num_tokens": s.full_tokens, "swa_max_total_num_tokens": s.swa_tokens,
            "c4_max_total_num_tokens": s.c4_tokens, "c128_max_total_num_tokens": s.c128_tokens,
            "c4_state_pool_size": s.c4_state_pool_size, "c128_state_pool_size": s.c128_state_pool_size,
            "bytes_per_full_token": part.bytes_per_full_token, "bytes_per_swa_token": part.bytes_per_swa_token,
            "indexer_bytes_per_token": part.index_bytes, "num_layers_total": part.layers,
            "swa_ratio": part.swa_ratio, "sliding_window_size": part.window,
            "requested_max_running_requests_per_worker": s.requested_reqs,
            "stage_owner_layers": {"4": part.c4_layers, "128": part.c128_layers}}
    out = [f"{k}: kvplan {v!r} sglang {g[k]!r}" for k, v in mine.items() if g[k] != v]
    built = p.get("pool_build_error")
    lines = list(f.pool.log_lines)[:len(p["log"])] if built else list(f.pool.log_lines)
    if lines != list(p["log"]):
        out.append(f"log: kvplan {f.pool.log_lines!r} sglang {p['log']!r}")
    if built and not f.startup.startswith(built):
        out.append(f"pool build: kvplan {f.startup[:60]!r} sglang {built!r}")
    if not built and f.startup != "starts":
        out.append(f"kvplan refuses ({f.startup[:60]!r}) but SGLang builds the pool")
    return out


def replay(case: dict[str, Any]) -> Outcome:
    """kvplan's SGLang plan for one golden case, fed the case's free-memory figures."""
    spec = model_spec(case["model"])
    chip = get_gpu(GPU_IDS[case["gpu"]])
    measured = FreeMemory(case["pre_gib"], case["avail_gib"], (case["pre_gib"],) * 2, (case["avail_gib"],) * 2,
                          "given")
    try:
        fit = plan_sglang_fit(spec, chip, deployment(case), weights_bytes=0, weights_range=(0, 0), measured=measured)
    except InvalidParameter as exc:
        return Outcome(case, None, str(exc))
    return Outcome(case, fit, None)


def classify(outcome: Outcome) -> str:
    """The class of one replayed case: exact (every figure equal), refused-sglang (both refuse, kvplan in
    SGLang's words: a config transformers cannot read without the repository's code, no room for a hybrid's
    Mamba state), refused-source (SGLang's model class asserts the TP split of the heads: ported from its source,
    beyond the oracle), refused-kvplan (a pool this slice does not model, said so), oracle-fault (ORACLE_FAULTS)
    or wrong."""
    if outcome.case["model"] in ORACLE_FAULTS:
        return "oracle-fault"
    if outcome.mismatches:
        return "wrong"
    if outcome.fit is not None and outcome.fit.startup.startswith(("RuntimeError: ", "AssertionError: ")):
        return "refused-sglang"  # SGLang sizes this pool (every figure checked), then fails its first forward
    if outcome.fit is not None and "error" in outcome.case:
        return "refused-sglang"  # SGLang's sizing refusal (a RuntimeError), kvplan's startup verdict in its words
    if outcome.fit is None and "error" not in outcome.case and (outcome.refusal or "").startswith(HEADS_ASSERTION):
        return "refused-source"  # the model class's head-split assertion: past the oracle's reach, ported from source
    if outcome.fit is None and load_refusal(outcome.case) is not None:
        return "refused-sglang"  # SGLang's own ValueError at model load, verbatim (mismatches checked the text)
    if outcome.fit is None:
        same = "error" in outcome.case and (outcome.refusal or "").split(" ", 3)[-1][:40] in outcome.case["error"]
        return "refused-sglang" if same else "refused-kvplan"
    return "exact"
