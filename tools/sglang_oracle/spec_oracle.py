"""Speculative-decoding wrapper around /work/shared/tools/sglang-oracle/sglang_oracle.py (unmodified).

The shared oracle refuses speculative decoding in its pool step. This wrapper keeps its resolve step
(ServerArgs.resolve_once with faked GPU facts), adds the resolved speculative fields, and replaces the
pool step with the same KVCacheConfigurator construction but with the speculative algorithm and SGLang's
own spec_aux_config (model_runner_components/spec_aux_hidden_state.py:resolve_spec_aux_hidden_state_config),
so DefaultPoolConfigurator adds the draft's KV cells as SGLang 0.5.23 does. Draft pool allocation is not
built (only the target pool's cell size, token count and running requests are reported; with
SPEC_ORACLE_WITH_POOL=1 also the target pool's log line).
Usage: VENV/bin/python spec_oracle.py MODEL_DIR --gpu h100 --tp 1 --set speculative_algorithm=EAGLE ... [--kv-budget-bytes B]
"""
import os
import sys
sys.path.insert(0, "/work/shared/tools/sglang-oracle")
import sglang_oracle as so  # noqa: E402

_resolve = so.resolve


def resolve(a, kw):
    sa, v, out = _resolve(a, kw)
    for k in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
              "speculative_num_draft_tokens", "speculative_draft_model_path", "max_running_requests",
              "enable_mixed_chunk", "disable_overlap_schedule"):
        out[k] = so._get(v, k)
    return sa, v, out


def pool(a, sa):
    import types

    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.mem_cache import kv_cache_dtype as kvd
    from sglang.srt.mem_cache.kv_cache_configurator import KVCacheConfigurator
    from sglang.srt.model_executor.model_runner_components.layer_setup import resolve_layer_indices
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config,
    )
    from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator
    from sglang.srt.runtime_context import get_model, get_parallel, get_schedule, get_spec, publish  # noqa: F401
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    publish(sa, role="scheduler")
    mc = ModelConfig.from_server_args(sa)
    spec = SpeculativeAlgorithm.from_string(get_spec().speculative_algorithm)
    aux = resolve_spec_aux_hidden_state_config(server_args=sa, model_config=mc, spec_algorithm=spec,
                                               is_draft_worker=False)
    layer_info = resolve_layer_indices(model=None, model_config=mc, is_draft_worker=False)
    algo = so._kv_quant_algo(mc)
    fake_model = types.SimpleNamespace(quant_config=types.SimpleNamespace(kv_cache_quant_algo=algo))
    resolved_str, kv_dtype = kvd.configure_kv_cache_dtype(
        server_args_kv_cache_dtype=get_model().kv_cache_dtype, model=fake_model,
        model_dtype=mc.dtype, is_draft_worker=False, is_dflash=False,
        speculative_draft_attention_backend=None,
        speculative_draft_kv_cache_dtype=get_spec().speculative_draft_kv_cache_dtype)
    kv_dtype_str = resolved_str if resolved_str is not None else get_model().kv_cache_dtype
    kvc = KVCacheConfigurator(
        device="meta", gpu_id=0, attn_dp_size=get_parallel().attn_dp_size,
        pp_size=get_parallel().pp_size, pp_group=None, model=None, model_config=mc,
        server_args=sa, kv_cache_dtype=kv_dtype, kv_cache_dtype_str=kv_dtype_str,
        model_dtype=mc.dtype, page_size=get_schedule().page_size,
        sliding_window_size=getattr(mc, "sliding_window_size", None) if mc.is_hybrid_swa else None,
        spec_algorithm=spec, is_draft_worker=False, post_capture_kv_active=False,
        spec_aux_config=aux, is_hybrid_swa=mc.is_hybrid_swa,
        is_hybrid_swa_compress=mc.is_hybrid_swa_compress,
        use_mla_backend=mc.attention_arch == AttentionArch.MLA, layer_info=layer_info,
        forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None,
        memory_pool_config=None,
    )
    configurator = create_memory_pool_configurator(kvc)
    out = {"eagle_draft_num_layers": aux.eagle_draft_num_layers, "draft_kv_num_layers": aux.draft_kv_num_layers,
           "num_kv_layers": layer_info.num_effective_layers, "pool_configurator": type(configurator).__name__,
           "cell_size_bytes": getattr(configurator, "_cell_size", None)}
    budget = a.kv_budget_bytes
    if a.avail_gib is not None:  # as the shared oracle's pool step: SGLang's _profile_available_bytes itself (a
        # Mamba hybrid carves its state slots, with the speculative intermediate state, there)
        from sglang.srt.mem_cache import kv_cache_configurator as kcc
        kcc.get_available_gpu_memory = lambda *args, **kw: a.avail_gib
        get_parallel().override_permanently(world_group=types.SimpleNamespace(cpu_group=None))
        try:
            profiled = kvc._profile_available_bytes(a.pre_gib)
        except ValueError as e:  # SGLang's startup refusal
            out["refusal"] = str(e)
            return out
        out["profiled_budget_bytes"] = profiled
        out["max_mamba_cache_size"] = get_schedule().max_mamba_cache_size
        budget = profiled if budget is None else budget
    if budget is not None:
        a.kv_budget_bytes = budget
        out["kv_budget_bytes"] = a.kv_budget_bytes
        # SPEC_ORACLE_WITH_POOL=1: also build the target's pool on meta tensors (the shared oracle's kv_pool_sizes)
        # for its `KV Cache is allocated` line; the draft worker's pool is still not built.
        with_pool = os.environ.get("SPEC_ORACLE_WITH_POOL") == "1"
        out.update(so.size_for_budget(kvc, configurator, a.kv_budget_bytes, with_pool=with_pool))
    return out


so.resolve = resolve
so.pool = pool
if __name__ == "__main__":
    sys.exit(so.main())
