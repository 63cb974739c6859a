#!/usr/bin/env python
"""Count Llama-4's vision tower and projector as transformers builds them (dev tool; never imported by kvplan, its
tests or CI). Builds modeling_llama4.py's Llama4VisionModel and Llama4MultiModalProjector on the meta device from a
config.json (its quantization_config dropped: vLLM builds the tower with quant_config=None) and prints their
parameter counts, per child, as JSON. The checkpoint's keys are these modules' state dict (vision_model.*,
multi_modal_projector.*), so the totals are what the safetensors files hold for the tower.

    /work/oracle/vllm033/venv/bin/python tools/tower_count/llama4_transformers.py CONFIG.json
"""
from __future__ import annotations

import json
import sys


def main() -> int:
    import torch
    import transformers
    from transformers import Llama4Config
    from transformers.models.llama4 import modeling_llama4 as m

    with open(sys.argv[1], encoding="utf-8") as f:
        data = {k: v for k, v in json.load(f).items() if k != "quantization_config"}
    cfg = Llama4Config(**data)
    with torch.device("meta"):
        vision = m.Llama4VisionModel(cfg.vision_config)
        projector = m.Llama4MultiModalProjector(cfg)
    children = {n: sum(p.numel() for p in c.parameters()) for n, c in vision.named_children()}
    children.update({n: p.numel() for n, p in vision.named_parameters(recurse=False)})
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                      "vision_model": sum(p.numel() for p in vision.parameters()),
                      "multi_modal_projector": sum(p.numel() for p in projector.parameters()),
                      "vision_model_children": children,
                      "layer_0": {n: list(p.shape) for n, p in vision.model.layers[0].named_parameters()}},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
