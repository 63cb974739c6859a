#!/usr/bin/env python3
"""Write kvplan/sglang/model_classes.json: which architectures SGLang 0.5.23 loads, natively or through its
Transformers backend (model_loader/utils.py:get_model_architecture, resolve_transformers_arch).

Dev tool: run it with the python of the sglang-oracle venv (the 0.5.23 wheel and the transformers it pins, 5.19.0):

    /work/oracle/sglang/venv/bin/python tools/sglang_oracle/model_classes.py

It records:
- `sglang`: every class named by an `EntryClass` of sglang/srt/models/*.py, read with `ast` from the wheel
  (models/registry.py:import_model_classes registers `EntryClass.__name__`); importing the modules on a CPU
  machine fails for most of them, so they are not imported;
- `heads_check`: for each class registered by a module whose attention asserts
  `self.total_num_heads % <tp> == 0` when built (the check that refuses a TP not dividing the heads lives in each
  model class), [module, whether it also asserts the KV-head split (`total_num_kv_heads % <tp>`, else
  `<tp> % total_num_kv_heads`), which size <tp> is: "tp" (get_parallel().tp_size, --tp-size even under attention
  DP), "attn_tp" (the attention-TP size) or "unknown"];
- `transformers_compatible` / `transformers_incompatible`: every model class named in transformers' auto
  mappings (models/auto/modeling_auto.py `*_MAPPING_NAMES`) by `_supports_attention_backend`, which is what
  `PreTrainedModel.is_backend_compatible()` returns and what resolve_transformers_arch checks under the default
  `--model-impl auto`.
"""
from __future__ import annotations

import ast
import json
import logging
import re
import warnings
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "kvplan" / "sglang" / "model_classes.json"


def entry_classes(models_dir: Path) -> list[str]:
    """Names registered by SGLang's model registry: each module's EntryClass (a class or a list of them)."""
    names: set[str] = set()
    for path in sorted(models_dir.glob("*.py")):
        tree = ast.parse(path.read_text())
        aliases = {n.targets[0].id: n.value.id for n in tree.body if isinstance(n, ast.Assign)
                   and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Name)}
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if not (isinstance(target, ast.Name) and target.id == "EntryClass"):
                continue
            value = node.value  # type: ignore[attr-defined]
            for e in value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]:
                if not isinstance(e, ast.Name):
                    raise SystemExit(f"{path.name}: EntryClass entry {ast.dump(e)[:60]} is not a name")
                name = e.id
                while name in aliases:
                    name = aliases[name]
                names.add(name)
    return sorted(names)


def heads_checks(models_dir: Path) -> dict[str, list[object]]:
    """Class → [module, asserts the KV-head split, tp or attn_tp] for the modules asserting total_num_heads % tp."""
    out: dict[str, list[object]] = {}
    for path in sorted(models_dir.glob("*.py")):
        text = path.read_text()
        if not re.search(r"assert self\.total_num_heads % \w+ == 0", text):
            continue
        kv = bool(re.search(r"assert self\.total_num_kv_heads % \w+ == 0", text))
        found = re.search(r"assert self\.total_num_heads % (\w+) == 0", text)
        assert found is not None
        var = found.group(1)
        # the last assignment of that name before the assert: --tp-size, or the attention-TP size
        sources = re.findall(rf"\b{var}\s*=\s*([^\n]+)", text[:found.start()])
        rhs = sources[-1] if sources else ""
        size = "attn_tp" if "attn_tp" in rhs or "attention_tp" in rhs else (
            "tp" if ("tp_size" in rhs or "world_size" in rhs) else "unknown")
        for name in entry_classes_of(text):
            out[name] = [f"models/{path.name}", kv, size]
    return out


def entry_classes_of(text: str) -> list[str]:
    """The names one module's EntryClass lists (no alias resolution: enough for heads_checks)."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == "EntryClass":
            v = node.value
            return [e.id for e in (v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v]) if isinstance(e, ast.Name)]
    return []


def main() -> None:
    warnings.filterwarnings("ignore")
    import sglang
    import transformers
    from transformers.models.auto import modeling_auto

    logging.disable(logging.WARNING)
    mapped: set[str] = set()
    for key in dir(modeling_auto):
        table = getattr(modeling_auto, key)
        if key.endswith("_MAPPING_NAMES") and hasattr(table, "values"):
            for v in table.values():
                mapped.update([v] if isinstance(v, str) else [x for x in v if isinstance(x, str)])
    ok, bad = [], []
    for name in sorted(mapped):
        cls = getattr(transformers, name, None)
        if cls is not None:
            (ok if getattr(cls, "_supports_attention_backend", False) else bad).append(name)
    out = {"format": 1, "sglang": sglang.__version__, "transformers": transformers.__version__,
           "generated_by": "tools/sglang_oracle/model_classes.py",
           "sglang_classes": entry_classes(Path(sglang.__file__).parent / "srt" / "models"),
           "heads_check": heads_checks(Path(sglang.__file__).parent / "srt" / "models"),
           "transformers_compatible": ok, "transformers_incompatible": bad}
    OUT.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(out['sglang_classes'])} SGLang classes, {len(ok)} compatible, {len(bad)} incompatible")


if __name__ == "__main__":
    main()
