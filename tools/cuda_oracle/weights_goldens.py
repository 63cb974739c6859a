#!/usr/bin/env python
"""Record the bytes of every parameter and buffer of the model vLLM 0.33 builds, per rank (dev tool, oracle venv).

kvplan, its tests and CI never run or import this: it needs the 4 GB vLLM 0.33 CUDA-oracle venv.

    . /work/oracle/vllm033/venv/bin/activate; export CUDA_ORACLE_HOME=/work/oracle/vllm033
    flock /tmp/oracle.lock python tools/cuda_oracle/weights_goldens.py \\
        --oracle-dir /work/shared/tools/vllm-cuda-oracle [--only SUBSTRING ...] [--list] [--force]

It runs the shared vllm-cuda-oracle kit's ``cuda_oracle.py`` unchanged (its ``main()``, imported as a module,
no ``--kv-cache-memory-bytes``: the planner is skipped): ``EngineArgs.create_engine_config`` and the real model
class built by ``model_loader/utils.py:initialize_model`` on the ``meta`` device, with the TP group faked to
rank 0 of ``--tp`` and the PP group to each stage in turn. A read-only wrapper around ``initialize_model``
records, for each stage's model:

* every parameter, deduplicated as ``named_parameters`` does (tied embeddings count once): numel × element
  size of its dtype;
* every buffer, deduplicated as ``named_buffers`` does, split into persistent and non-persistent ones
  (``Module._non_persistent_buffers_set``: the rotary cos/sin cache is a non-persistent buffer);
* tensors held as plain module attributes (neither parameter nor buffer: e.g. Qwen3-VL's
  ``deepstack_input_embeds``), deduplicated by identity;

grouped by top-level child and by kind (``_kind``: embedding, lm_head, attention, moe_experts, router, mlp,
norm, tower, other).

What it does NOT see: ``process_weights_after_loading`` is not run on meta (the checkpoint is never loaded), so
the figures are the layout as built, before any kernel repacking, padding or dequantized copy made after
loading (Marlin / MXFP4 swizzles, MLA's W_UK_T / W_UV, FP8 scale re-layouts); nor anything allocated outside the
model (CUDA graphs, workspaces, the KV cache). One process per case, one case at a time (fork after the
imports, as golden_server.py does), under ``flock /tmp/oracle.lock``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "configs"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
OUT = ROOT / "tests" / "fixtures" / "oracle-weights"
FORMAT = 1


@dataclass(frozen=True)
class Case:
    model: str  # folder name under tests/fixtures/configs or tests/fixtures/corpus/configs
    tp: int = 1
    pp: int = 1
    gpu: str = "h100"

    @property
    def id(self) -> str:
        return f"{self.model}__{self.gpu}-tp{self.tp}" + (f"-pp{self.pp}" if self.pp > 1 else "")

    def config_dir(self) -> Path:
        for base in (CONFIGS, CORPUS):
            if (base / self.model / "config.json").exists():
                return base / self.model
        raise FileNotFoundError(self.model)


CASES: tuple[Case, ...] = (
    Case("Qwen--Qwen3-30B-A3B", tp=1),
    Case("Qwen--Qwen3-30B-A3B", tp=4),
    Case("Qwen--Qwen3-30B-A3B", tp=4, pp=2),
    Case("Qwen--Qwen3-VL-30B-A3B-Instruct", tp=4),
    Case("Qwen--Qwen3-VL-235B-A22B-Instruct-FP8", tp=8),
    Case("Qwen--Qwen3-30B-A3B-FP8", tp=1),
    Case("Qwen--Qwen3-30B-A3B-FP8", tp=2),
    Case("Qwen--Qwen3-235B-A22B-FP8", tp=8),
    Case("Qwen--Qwen3-235B-A22B", tp=8),
    Case("meta-llama--Llama-3.1-8B-Instruct", tp=1),
    Case("meta-llama--Llama-3.1-70B-Instruct", tp=8),
    Case("Qwen--Qwen2.5-7B-Instruct", tp=2),
    Case("Qwen--Qwen3-32B", tp=2),
    Case("Qwen--Qwen3-32B-FP8", tp=2),
    Case("deepseek-ai--DeepSeek-V2-Lite-Chat", tp=1),
    Case("deepseek-ai--DeepSeek-V2-Lite-Chat", tp=2),
    Case("deepseek-ai--DeepSeek-V3-0324", tp=8),
    Case("mistralai--Mixtral-8x22B-v0.1", tp=8),
    Case("zai-org--GLM-4.5-Air", tp=2),
    # pipeline stages: classes that build the embedding and LM head on every stage, and guarded ones
    Case("Qwen--Qwen3-VL-30B-A3B-Instruct", tp=4, pp=2),
    Case("mistralai--Mixtral-8x22B-v0.1", tp=4, pp=2),
    Case("Qwen--Qwen3-Next-80B-A3B-Instruct", tp=2, pp=2),
    Case("Qwen--Qwen3-32B", tp=2, pp=2),
    Case("meta-llama--Llama-3.1-8B-Instruct", tp=1, pp=2),
    Case("deepseek-ai--DeepSeek-V2-Lite-Chat", tp=2, pp=2),
    Case("Qwen--Qwen3-0.6B", tp=1, pp=2),
    # more TP 1 / 2 / 8
    Case("Qwen--Qwen3-0.6B", tp=1),
    Case("Qwen--Qwen3-Next-80B-A3B-Instruct", tp=2),
    Case("Qwen--Qwen3-Next-80B-A3B-Instruct-FP8", tp=2),
    Case("moonshotai--Kimi-K2-Instruct", tp=8),
    Case("google--gemma-4-31B-it", tp=2),
    Case("google--gemma-4-31B-it", tp=2, pp=2),
    Case("google--gemma-4-26B-A4B-it", tp=1),
    Case("google--gemma-4-E2B-it", tp=1),
    Case("mistralai--Mixtral-8x7B-v0.1", tp=2),
)

KINDS = ("embedding", "lm_head", "attention", "moe_experts", "router", "mlp", "norm", "tower", "other")
_TOWER_CHILDREN = ("visual", "vision_tower", "vision_model", "audio_tower", "multi_modal_projector",
                   "vision_embed_tokens", "mm_projector")


def _kind(name: str) -> str:
    """The kind of a parameter or buffer, from its qualified name (vLLM's module names)."""
    parts = name.split(".")
    if parts[0] in _TOWER_CHILDREN:
        return "tower"
    if "lm_head" in parts:
        return "lm_head"
    if any(p in ("embed_tokens", "wte", "word_embeddings", "tok_embeddings") for p in parts):
        return "embedding"
    if "experts" in parts:
        return "moe_experts"
    if any(p in ("gate", "router", "e_score_correction_bias") for p in parts) and "mlp" in parts:
        return "router"
    if parts[-1] == "e_score_correction_bias":
        return "router"
    if any("norm" in p for p in parts[-2:]):
        return "norm"
    if any(p in ("self_attn", "attn", "attention", "self_attention") for p in parts):
        return "attention"
    if any(p in ("mlp", "feed_forward", "shared_expert", "shared_experts") for p in parts):
        return "mlp"
    return "other"


def _elem(t) -> int:  # noqa: ANN001
    return t.element_size()


def _top(name: str) -> str:
    return name.split(".")[0] if "." in name else name


def _add(groups: dict, key: str, nbytes: int) -> None:
    groups[key] = groups.get(key, 0) + nbytes


def model_record(model) -> dict:  # noqa: ANN001
    """Bytes of the built model's parameters, buffers and plain tensor attributes, grouped (see module doc)."""
    import torch

    params, by_child, by_kind, by_dtype = [], {}, {}, {}
    seen: set[int] = set()
    for name, p in model.named_parameters():
        seen.add(id(p))
        nbytes = p.numel() * _elem(p)
        params.append(nbytes)
        _add(by_child, _top(name), nbytes)
        _add(by_kind, _kind(name), nbytes)
        _add(by_dtype, str(p.dtype).replace("torch.", ""), nbytes)
    buffers: list[dict] = []
    for mname, mod in model.named_modules():
        for bname, b in mod._buffers.items():
            if b is None or id(b) in seen:
                continue
            seen.add(id(b))
            full = f"{mname}.{bname}" if mname else bname
            buffers.append({"name": full, "persistent": bname not in mod._non_persistent_buffers_set,
                            "dtype": str(b.dtype).replace("torch.", ""), "shape": list(b.shape),
                            "bytes": b.numel() * _elem(b), "kind": _kind(full)})
    attrs: list[dict] = []
    for mname, mod in model.named_modules():
        for aname, v in vars(mod).items():
            if aname.startswith("_"):
                continue
            vals = v if isinstance(v, (list, tuple)) else [v]
            for i, t in enumerate(vals):
                if not isinstance(t, torch.Tensor) or isinstance(t, torch.nn.Parameter) or id(t) in seen:
                    continue
                seen.add(id(t))
                full = f"{mname}.{aname}" if mname else aname
                attrs.append({"name": full + (f"[{i}]" if v is not t else ""), "device": str(t.device),
                              "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                              "bytes": t.numel() * _elem(t)})
    return {
        "class": type(model).__name__,
        "parameters_bytes": sum(params), "num_parameters_tensors": len(params),
        "persistent_buffers_bytes": sum(b["bytes"] for b in buffers if b["persistent"]),
        "non_persistent_buffers_bytes": sum(b["bytes"] for b in buffers if not b["persistent"]),
        "tensor_attributes_bytes": sum(a["bytes"] for a in attrs),
        "parameters_by_child": dict(sorted(by_child.items())),
        "parameters_by_kind": {k: by_kind[k] for k in KINDS if k in by_kind},
        "parameters_by_dtype": dict(sorted(by_dtype.items())),
        "buffers": sorted(buffers, key=lambda b: (-b["bytes"], b["name"]))[:40],
        "num_buffers": len(buffers),
        "tensor_attributes": sorted(attrs, key=lambda a: (-a["bytes"], a["name"]))[:40],
    }


def run_case(case: Case, oracle_dir: str) -> dict:
    """In a forked child: cuda_oracle.main() with the initialize_model wrapper; the trimmed record."""
    import io

    import cuda_oracle
    import vllm.model_executor.model_loader.utils as mlu

    stages: list[dict] = []
    inner = mlu.initialize_model
    depth = [0]

    def initialize_model(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        # a wrapper's language model is built by a nested call (init_vllm_registered_model): record the outer one
        depth[0] += 1
        try:
            model = inner(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            stages.append(model_record(model))
        return model

    mlu.initialize_model = initialize_model
    world = case.tp * case.pp
    if world > 1:  # as golden_server.py: one node with `world` GPUs
        import torch as _t
        from vllm.platforms import cuda as _cu
        for _c in (_cu.CudaPlatformBase, _cu.NonNvmlCudaPlatform, _cu.NvmlCudaPlatform):
            _c.device_count = classmethod(lambda cls, w=world: w)
        _t.cuda.device_count = lambda w=world: w
    sys.argv = ["cuda_oracle.py", str(case.config_dir()), "--gpu", case.gpu, "--tp", str(case.tp),
                "--pp", str(case.pp)]
    buf, real = io.StringIO(), sys.stdout
    sys.stdout = buf
    try:
        rc = cuda_oracle.main()
    finally:
        sys.stdout = real
    text = buf.getvalue()
    oracle = json.loads(text[text.index("{"):]) if "{" in text else {}
    plan = oracle.get("plan", {})
    return {
        "format": FORMAT, "id": case.id, "model": case.model,
        "config": str(case.config_dir().relative_to(ROOT)), "gpu": case.gpu, "tp": case.tp, "pp": case.pp,
        "tp_rank": 0, "vllm_version": oracle.get("vllm_version"), "torch_version": oracle.get("torch_version"),
        "dtype": oracle.get("config", {}).get("dtype"),
        "max_num_batched_tokens": oracle.get("config", {}).get("max_num_batched_tokens"),
        "oracle_rc": rc, "error": oracle.get("error") or (plan.get("error") if isinstance(plan, dict) else None),
        "built_on": "meta device; process_weights_after_loading not run (layout as built, before repacking)",
        "stages": [{"pp_rank": i, **s} for i, s in enumerate(stages)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle-dir", required=True)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    cases = [c for c in CASES if not a.only or any(s in c.id for s in a.only)]
    if a.list:
        print("\n".join(c.id for c in cases))
        return 0
    sys.path.insert(0, os.path.abspath(a.oracle_dir))
    import fake_cuda  # noqa: F401, I001  (must precede every vllm import)
    import cuda_oracle  # noqa: F401

    cap0, name0, nvml0 = cuda_oracle.GPUS[cases[0].gpu if cases else "h100"]
    fake_cuda.set_gpu(capability=cap0, name=name0, nvml_total=nvml0)  # before the vLLM imports, as golden_server.py
    import vllm  # noqa: F401
    from vllm.engine.arg_utils import EngineArgs  # noqa: F401
    from vllm.model_executor.model_loader.utils import initialize_model  # noqa: F401

    (OUT / "cases").mkdir(parents=True, exist_ok=True)
    for case in cases:
        path = OUT / "cases" / f"{case.id}.json"
        if path.exists() and not a.force:
            continue
        cap, name, nvml = cuda_oracle.GPUS[case.gpu]
        t0 = time.time()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            rc = 1
            try:
                fake_cuda.set_gpu(capability=cap, name=name, nvml_total=nvml)
                rec = run_case(case, a.oracle_dir)
                with os.fdopen(w, "w") as f:
                    json.dump(rec, f)
                rc = 0
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(rc)
        os.close(w)
        with os.fdopen(r) as f:
            data = f.read()
        _, st = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(st)
        print(f"{case.id} rc={rc} {time.time() - t0:.1f}s", file=sys.stderr, flush=True)
        if rc == 0 and data:
            path.write_text(json.dumps(json.loads(data), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
