"""ServeSettings nested as vLLM's VllmConfig (kvplan/vllm/configs.py): built from engine_args' table, one flat
name per setting, and the `--json` shape of schema_version 1 kept."""
from __future__ import annotations

import dataclasses

import pytest

from kvplan.vllm.configs import (
    ALIAS_PATHS,
    JSON_KEYS,
    SETTING_PATHS,
    CacheConfig,
    ParallelConfig,
    ServeSettings,
    field_names,
)
from kvplan.vllm.engine_args import BY_NAME
from kvplan.vllm.environment import VllmEnvironment


def _leaves() -> set[str]:
    """Every field of every nested config and every top-level field that is not a config."""
    groups = {f.name for f in dataclasses.fields(ServeSettings) if callable(f.default_factory)}
    names = {f.name for f in dataclasses.fields(ServeSettings) if f.name not in groups}
    for group in groups:
        names |= set(field_names(type(getattr(ServeSettings(), group))))
    return names


def test_every_setting_has_one_flat_name_and_one_place() -> None:
    leaves = _leaves()
    flat = {name for name, (group, _) in SETTING_PATHS.items() if name not in
            {f.name for f in dataclasses.fields(ServeSettings) if callable(f.default_factory)}}
    assert flat == leaves
    assert len(leaves) >= 55  # the 55 fields the flat ServeSettings had, each still there


def test_the_json_keeps_schema_version_1s_flat_object() -> None:
    """`--json` documents (calibrate's `settings`) carry the flat object, keys in the old order and names."""
    assert len(JSON_KEYS) == len({name for _, name in JSON_KEYS}) == len(_leaves())
    keys = [key for key, _ in JSON_KEYS]
    assert keys[:3] == ["tp", "pp", "gpu_memory_utilization"] and keys[-2:] == ["context", "concurrency"]
    assert "allow_custom_code" in keys and "flashinfer_sampler" in keys
    data = ServeSettings.of(tp=2, context=4096).json_data()
    assert list(data) == keys and data["tp"] == 2 and data["context"] == 4096


def test_of_routes_each_name_to_its_vllm_config() -> None:
    s = ServeSettings.of(tp=2, max_model_len=4096, kv_cache_dtype="fp8", max_num_seqs=8, context=1000,
                         weights_bytes=5, use_v2_model_runner=True, speculative_config={"method": "mtp"})
    assert s.parallel_config == ParallelConfig(tensor_parallel_size=2)
    assert s.cache_config == CacheConfig(kv_cache_dtype="fp8")
    assert s.model_config.max_model_len == 4096 and s.scheduler_config.max_num_seqs == 8
    assert (s.load.context, s.measured.weights_bytes, s.env.use_v2_model_runner) == (1000, 5, True)
    assert s.speculative_config == {"method": "mtp"}
    assert ServeSettings.of() == ServeSettings()


def test_vllms_short_aliases_name_the_same_field() -> None:
    """engine_args' aliases (-tp, -pp, -dp, --device-memory-utilization …) route as their flag does."""
    for alias, path in ALIAS_PATHS.items():
        assert path in SETTING_PATHS.values(), alias
    assert ServeSettings.of(tp=4) == ServeSettings.of(tensor_parallel_size=4)
    assert ServeSettings.of(device_memory_utilization=0.8).cache_config.gpu_memory_utilization == 0.8
    assert ServeSettings.of(dp=2).value("data_parallel_size") == 2
    assert BY_NAME["tensor_parallel_size"].aliases == ("-tp",)


def test_updated_applies_a_whole_group_then_its_fields() -> None:
    env = VllmEnvironment(rocm_use_aiter=True)
    s = ServeSettings.of(env=env, rocm_aiter_installed=False)
    assert s.env == VllmEnvironment(rocm_use_aiter=True, rocm_aiter_installed=False)
    t = s.updated(tp=2, max_model_len=-1)
    assert (t.parallel_config.tensor_parallel_size, t.model_config.max_model_len, t.env) == (2, -1, s.env)
    assert s.parallel_config.tensor_parallel_size == 1  # frozen: the original is unchanged


def test_an_unknown_name_is_refused() -> None:
    with pytest.raises(TypeError, match="no setting 'tensor_parallel'"):
        ServeSettings.of(tensor_parallel=2)
    with pytest.raises(TypeError, match="no setting 'allow_custom_code'"):  # vLLM's name is trust_remote_code
        ServeSettings().updated(allow_custom_code=True)


def test_world_size_is_vllms() -> None:
    """config/parallel.py: world_size = pp × tp × pcp; world_size_across_dp × dp."""
    par = ParallelConfig(tensor_parallel_size=2, pipeline_parallel_size=3, prefill_context_parallel_size=2,
                         data_parallel_size=4)
    assert (par.world_size, par.world_size_across_dp) == (12, 48)


def test_each_flag_keeps_vllms_name_in_its_config() -> None:
    """The field a row sets is vLLM's own name for it (EngineArgs' field = the config's), except
    --cpu-offload-gb, which kvplan holds in bytes (OffloadConfig.cpu_offload_bytes)."""
    from kvplan.vllm.engine_args import SETTING_ARGS

    assert [(a.name, a.field) for a in SETTING_ARGS if a.name != a.field] == [("cpu_offload_gb", "cpu_offload_bytes")]
