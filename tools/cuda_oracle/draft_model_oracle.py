#!/usr/bin/env python
"""The shared kit's cuda_oracle_ext.py plus the `draft_model` speculative method (dev tool).

Runs with the CUDA-oracle venv's python (never imported by kvplan, its tests or CI):

    python tools/cuda_oracle/draft_model_oracle.py --oracle-dir /path/to/vllm-cuda-oracle -- \\
        CONFIG_DIR --gpu h100 --kv-cache-memory-bytes 21474836480 --max-model-len 8192 \\
        --engine-arg 'speculative_config={"method": "draft_model", "model": "DRAFT_DIR", "num_speculative_tokens": 3}'

cuda_oracle_ext.py builds MTP / EAGLE drafts only. With method `draft_model`, after the target model is
built on meta, the draft model is built exactly as Model Runner V2's
v1/worker/gpu/spec_decode/standalone_ar/speculator.py:StandaloneARSpeculator.load_draft_model does:
`replace(vllm_config, model_config=draft_model_config, quant_config=None, cache_config=<cache_dtype from
the speculative config's kv_cache_dtype when set>, parallel_config=replace(draft_parallel_config, rank))`,
`set_model_tag("draft_model")`, prefix "draft_model" (get_model → initialize_model with the draft's model
config, in its dtype); then its new attention layers are marked is_draft_layer, as
v1/worker/gpu/spec_decode/speculator.py:DraftModelSpeculator.load_model does. Everything after ``--`` is
cuda_oracle.py's CLI; one JSON object on stdout, as cuda_oracle.py prints it.
"""
from __future__ import annotations

import argparse
import os
import sys


def install(oracle_dir: str) -> object:
    sys.path.insert(0, oracle_dir)
    import cuda_oracle_ext  # noqa: PLC0415  (imports fake_cuda first; patches initialize_model)
    import vllm.model_executor.model_loader.utils as mlu  # noqa: PLC0415

    ext_init = mlu.initialize_model
    orig_init = cuda_oracle_ext._orig_init

    def initialize_model(vllm_config, *, prefix="", model_class=None, model_config=None):  # noqa: ANN001, ANN202
        model = ext_init(vllm_config=vllm_config, prefix=prefix, model_class=model_class, model_config=model_config)
        sc = vllm_config.speculative_config
        if model_config is None and sc is not None and sc.method == "draft_model":
            from vllm.compilation.backends import set_model_tag
            from vllm.config import get_layers_from_vllm_config, replace
            from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
            from vllm.utils.torch_utils import set_default_torch_dtype

            target = set(get_layers_from_vllm_config(vllm_config, AttentionLayerBase))
            cache_config = vllm_config.cache_config
            if sc.kv_cache_dtype is not None:
                cache_config = replace(cache_config, cache_dtype=sc.kv_cache_dtype)
            dcfg = replace(vllm_config, model_config=sc.draft_model_config, quant_config=None,
                           cache_config=cache_config,
                           parallel_config=replace(sc.draft_parallel_config, rank=vllm_config.parallel_config.rank))
            with set_model_tag("draft_model"), set_default_torch_dtype(sc.draft_model_config.dtype):
                draft = orig_init(vllm_config=dcfg, model_config=sc.draft_model_config, prefix="draft_model")
            layers = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
            new = set(layers) - target
            for name in new:
                layers[name].is_draft_layer = True
            print(f"draft_model_oracle: draft {type(draft).__name__} with {len(new)} attention layers "
                  f"(num_speculative_tokens={sc.num_speculative_tokens}, draft TP "
                  f"{sc.draft_parallel_config.tensor_parallel_size}, dtype {sc.draft_model_config.dtype}, "
                  f"draft max_model_len {sc.draft_model_config.max_model_len})", file=sys.stderr)
            model._oracle_draft_model = draft
        return model

    mlu.initialize_model = initialize_model
    return cuda_oracle_ext


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle-dir", required=True)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    ext = install(os.path.abspath(args.oracle_dir))
    sys.argv = ["cuda_oracle.py", *rest]
    return int(ext.main())  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
