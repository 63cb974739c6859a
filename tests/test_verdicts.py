"""Verdicts are enums in code and their strings in `--json` and the tables (kvplan/vllm/verdicts.py)."""
from __future__ import annotations

import json

from kvplan.hardware.gpus import get_gpu
from kvplan.render.json import dumps
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from kvplan.vllm.verdicts import Startup, StartupRange
from tests.conftest import load_fixture


def test_the_verdict_strings_are_the_ones_the_json_has_always_carried() -> None:
    assert [v.value for v in Startup] == [
        "ok", "OOM loading weights", "OOM allocating the KV cache", "refuses: free memory", "refuses: no KV memory",
        "refuses: max_model_len"]
    assert [v.value for v in StartupRange] == ["starts", "starts only if the estimate is optimistic", "does not start"]
    assert [v for v in Startup if v.out_of_memory] == [Startup.OOM_LOADING_WEIGHTS, Startup.OOM_ALLOCATING_KV_CACHE]


def test_a_report_carries_members_and_prints_and_serialises_their_strings() -> None:
    model = load_fixture("Qwen--Qwen2.5-7B")
    ok = plan_fit(model, get_gpu("h100"), ServeSettings.of(max_model_len=32768), advise=False)
    too_long = plan_fit(model, get_gpu("l4"), ServeSettings.of(max_model_len=131072), advise=False)
    assert ok.verdict.startup is Startup.OK and ok.verdict.startup_range is StartupRange.STARTS
    assert too_long.verdict.startup is Startup.REFUSES_MAX_MODEL_LEN and not too_long.verdict.fits
    assert (f"({too_long.verdict.startup})", str(ok.verdict.startup_range)) == ("(refuses: max_model_len)", "starts")
    data = json.loads(dumps("fit", too_long))
    verdict = data["verdict"]
    assert (verdict["startup"], verdict["startup_range"]) == ("refuses: max_model_len", "does not start")
