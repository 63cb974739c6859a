#!/usr/bin/env python3
"""Write kvplan/vllm/transformers_backend.json: what vLLM 0.33 can serve beyond its own registry.

Dev tool: run it with the python of an environment that has vLLM and the transformers release vLLM pins
(the vllm-cuda-oracle venv: vLLM 0.33.0, transformers 5.19.0, within 0.33's `>=5.16.1,<5.21.0`):

    /tmp/vllm033/venv/bin/python tools/vllm_registry/transformers_backend.py

It records, as vLLM 0.33 itself decides them:
- `compatible`: transformers model classes vLLM's Transformers backend accepts
  (model_executor/models/registry.py:_try_resolve_transformers: `is_backend_compatible()` or
  `_can_set_attn_implementation()`); an architecture outside vLLM's registry falls back to them;
- `transformers_model_types`: model_types transformers' AutoConfig knows (CONFIG_MAPPING_NAMES), and
  `vllm_model_types`: those vLLM parses with its own config classes (transformers_utils/config.py
  _CONFIG_REGISTRY); a config of any other model_type needs its repository's custom code;
- `quantization_methods`: vLLM's QUANTIZATION_METHODS (config/model.py:_verify_quantization);
- `causal_lm_model_types`: transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES keys, and
  `text_config_wrappers`: the registry's architectures whose model file builds the language model with
  `init_vllm_registered_model(hf_config=….text_config)` naming no architectures. config/vllm.py:with_hf_config
  then names the text model's class only when its model_type is in that mapping; otherwise the registry
  stops with "No model architectures are specified" (models/registry.py:_normalize_arch).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

_BUILD_CALL = re.compile(r"init_vllm_registered_model\((.*?)\n\s*\)", re.S)

OUT = Path(__file__).resolve().parents[2] / "kvplan" / "vllm" / "transformers_backend.json"


def main() -> None:
    import transformers
    import vllm
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    compatible = []
    for name in dir(transformers):
        if not re.match(r"^[A-Z]\w*(For[A-Z][A-Za-z]*|Model)$", name) or name.endswith("PreTrainedModel"):
            continue
        try:
            cls = getattr(transformers, name)
            if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel) and (
                    cls.is_backend_compatible() or cls._can_set_attn_implementation()):
                compatible.append(name)
        except Exception:  # noqa: BLE001 - a class that cannot even be imported is not servable
            continue
    table = {
        "format": 1,
        "vllm": vllm.__version__,
        "transformers": transformers.__version__,
        "generated_by": "tools/vllm_registry/transformers_backend.py",
        "compatible": sorted(compatible),
        "transformers_model_types": sorted(CONFIG_MAPPING_NAMES),
        "vllm_model_types": sorted(_CONFIG_REGISTRY),
        "quantization_methods": list(QUANTIZATION_METHODS),
        "causal_lm_model_types": sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
        "text_config_wrappers": _text_config_wrappers(),
    }
    OUT.write_text(json.dumps(table, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(compatible)} compatible classes, {OUT.stat().st_size:,} bytes")


def _text_config_wrappers() -> list[str]:
    """Architectures whose model file builds its language model from text_config without naming one."""
    import vllm.model_executor.models as models
    from vllm.model_executor.models.registry import _VLLM_MODELS

    folder = Path(models.__file__).parent
    files = set()
    for path in folder.glob("*.py"):
        for call in _BUILD_CALL.finditer(path.read_text()):
            if "text_config" in call.group(1) and "architectures" not in call.group(1):
                files.add(path.stem)
    return sorted(arch for arch, (module, _cls) in _VLLM_MODELS.items() if module in files)


if __name__ == "__main__":
    main()
