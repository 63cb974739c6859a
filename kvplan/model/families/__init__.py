"""How configs spell what the KV cache and the weights need, one module per concern, each citing the vLLM model
file it follows (what each architecture family *is* — its weight layout, rotary cache, dtype rule and per-model
vLLM behaviour — is its module in kvplan/model/architectures/):

- text_config.py   multimodal and composite wrappers (text_config, thinker_config): the language model's config
- classic.py       GPT-2, OPT, Falcon, ChatGLM, XGLM, CodeGen key dialects and their KV heads
- attention.py     which token mixer each layer has: sliding windows, chunked local, hybrid patterns
- recurrent.py     Mamba-1/2, gated-delta-net and short-convolution state (MambaSpec inputs)
- mla.py           multi-head latent attention and DeepSeek sparse attention's indexer cache
- dsv4.py          DeepSeek-V4's per-layer compress ratios (compressed sparse attention; caches in kv_cache.py)
- moe.py           mixture-of-experts widths and which layers are MoE (weights only)
- heterogeneous.py DeciLM / Llama-Nemotron-Super `block_configs` (per-layer KV heads, no-op attention)

`kvplan.model.config.parse_config` runs them in order; a new architecture is one module in
kvplan/model/architectures/ (plus a reading rule here when its config spells a concern its own way).
"""
