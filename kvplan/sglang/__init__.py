"""SGLang 0.5.23's KV-cache planning rules, ported from its source (never called at run time).

A second engine beside `kvplan.vllm`: the same model reader (`kvplan.model`), GPU catalog
(`kvplan.hardware`) and renderers, with SGLang's own rules. Every rule names the file and function of
the `sglang==0.5.23` wheel it follows (paths relative to `sglang/srt/`):

* `defaults`: the server-argument defaults SGLang resolves for a deployment
  (`arg_groups/memory_hook.py:handle_gpu_memory_settings` and the hooks it relies on);
* `pool`: the token pool a KV byte budget buys (`model_executor/pool_configurator.py`,
  `mem_cache/kv_cache_configurator.py`, `mem_cache/memory_pool.py`);
* `budget`: the byte budget SGLang profiles (`KVCacheConfigurator._profile_available_bytes`) and
  its startup refusal, from kvplan's estimates of the memory it measures;
* `engine_args` / `command_line`: SGLang's flags and a pasted `python -m sglang.launch_server` line;
* `fit`: one deployment's plan.
"""

SGLANG_VERSION = "0.5.23"
