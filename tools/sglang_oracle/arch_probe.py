#!/usr/bin/env python3
"""Write tests/fixtures/sglang/model-class-goldens.json: SGLang 0.5.23's own model-class resolution for every
committed config whose architectures SGLang has no class for (kvplan/sglang/model_classes.json `sglang_classes`).

Runs in the sglang-oracle venv with its faked H100 (the oracle's fake_gpu / sgl_stubs):

    /work/oracle/sglang/venv/bin/python tools/sglang_oracle/arch_probe.py /work/shared/tools/sglang-oracle

Per config: ServerArgs(model_path=DIR).resolve_once(), publish, ModelConfig.from_server_args, then
model_loader/utils.py:resolve_transformers_arch (what get_model_architecture calls when no architecture is native
to SGLang, under the default --model-impl auto): the Transformers-backend class SGLang would load, or SGLang's
ValueError. The sizing oracle never reaches this step (it sizes the pool from ModelConfig alone), so a config it
sized may still be refused here, at model load.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/sglang/model-class-goldens.json"


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.ERROR)
    import fake_gpu
    import sgl_stubs

    sgl_stubs.install()
    fake_gpu.install("h100", world=8)
    import sglang
    import sglang_oracle as so

    native = set(json.loads((ROOT / "kvplan/sglang/model_classes.json").read_text())["sglang_classes"])
    dirs = sorted(p.parent for base in ("tests/fixtures/corpus/configs", "tests/fixtures/configs")
                  for p in (ROOT / base).glob("*/config.json"))
    environment = dict(os.environ)
    cases = []
    for d in dirs:
        archs = list(json.loads((d / "config.json").read_text()).get("architectures") or [])
        if any(a in native for a in archs):
            continue
        os.environ.clear()
        os.environ.update(environment)
        case: dict[str, object] = {"model": d.name, "architectures": archs}
        try:
            from sglang.srt.configs.model_config import ModelConfig
            from sglang.srt.model_loader.utils import resolve_transformers_arch
            from sglang.srt.runtime_context import publish

            a = so.parse_args([str(d), "--gpu", "h100"])
            sa, _view, _resolved = so.resolve(a, so.server_kwargs(a))
            publish(sa, role="scheduler")
            mc = ModelConfig.from_server_args(sa)
            case["resolved"] = resolve_transformers_arch(mc, list(archs))
        except BaseException as e:  # SGLang's own refusal (or one before this step: config, quantization)
            case["error"] = f"{type(e).__name__}: {e}".replace(str(d), d.name)[:400]
        print(json.dumps(case), file=sys.stderr, flush=True)
        cases.append(case)
    OUT.write_text(json.dumps({"source": "SGLang 0.5.23 (PyPI wheel), model_loader/utils.py:resolve_transformers_arch "
                               "run by tools/sglang_oracle/arch_probe.py in the sglang-oracle venv",
                               "sglang_version": sglang.__version__, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
