"""Architecture families: how each family of vLLM model classes spells what the KV cache and the weights
need in its config.json. One module per family, each citing the vLLM model file it follows:

- text_config.py   multimodal and composite wrappers (text_config, thinker_config): the language model's config
- classic.py       GPT-2, OPT, Falcon, ChatGLM, XGLM, CodeGen key dialects; default tie / gating by family
- attention.py     which token mixer each layer has: sliding windows, chunked local, hybrid patterns
- recurrent.py     Mamba-1/2, gated-delta-net and short-convolution state (MambaSpec inputs)
- mla.py           multi-head latent attention and DeepSeek sparse attention's indexer cache
- dsv4.py          DeepSeek-V4's per-layer compress ratios (compressed sparse attention; caches in kv_cache.py)
- moe.py           mixture-of-experts widths and which layers are MoE (weights only)
- heterogeneous.py DeciLM / Llama-Nemotron-Super `block_configs` (per-layer KV heads, no-op attention)

`kvplan.model.config.parse_config` runs them in order; a new family is one module plus its fixtures.
"""
