"""`vllm serve` settings nested as vLLM nests them (vllm/config/vllm.py:VllmConfig holds ModelConfig,
CacheConfig, ParallelConfig, SchedulerConfig, LoRAConfig, …), each frozen, each field named as vLLM's config
names it; None means "vLLM's default" (resolved per version in kvplan/vllm/settings.py:resolve_settings).

Beside vLLM's configs: the environment (`env`, vllm/environment.py: the VLLM_* variables and ROCm's aiter
packages), the values the user measured that replace kvplan's estimates (`measured`), and the load to judge
preemption at (`load`). Which config a flag belongs to is its row's `config` in kvplan/vllm/engine_args.py:
`ServeSettings.of(max_model_len=…, tensor_parallel_size=…)` and `settings.updated(…)` route each name there
(`SETTING_PATHS`), so a flag is still one row.

kvplan keeps three flags' JSON objects as given (`speculative_config`, `compilation_config`,
`kv_transfer_config`: the objects vLLM builds its SpeculativeConfig, CompilationConfig and KVTransferConfig
from); kvplan/vllm/speculative.py, memory/cuda_graphs.py:compilation_settings and kv_connectors.py read the
keys it models. vLLM's LoadConfig has no field that changes the plan (download_dir, load_format: ignored rows).

Each config is an immutable NamedTuple (as engine_args' rows: `kvplan fit` imports them on every run, and a
NamedTuple class is built in a quarter of a frozen dataclass's time); ServeSettings is a frozen dataclass.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from kvplan.vllm.environment import VllmEnvironment

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.defaults import PerformanceMode, Usage
    from kvplan.vllm.memory.weights import MoeBackend
    from kvplan.vllm.multimodal import ModalityLimit


class ModelConfig(NamedTuple):
    """vllm/config/model.py:ModelConfig's fields that change the plan."""

    max_model_len: int | None = None  # -1: vLLM's auto-fit
    enforce_eager: bool = False
    trust_remote_code: bool = False  # kvplan never runs the code either way
    dtype: str = "auto"  # the model (and `auto` KV cache) dtype
    quantization: str | None = None  # the checkpoint's method, or an online one (fp8)


class CacheConfig(NamedTuple):
    """vllm/config/cache.py:CacheConfig's fields that change the plan."""

    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    kv_cache_memory_bytes: int | None = None
    enable_prefix_caching: bool = True
    mamba_cache_dtype: str = "auto"  # conv state
    mamba_ssm_cache_dtype: str = "auto"  # SSM state
    num_gpu_blocks_override: int | None = None  # the block count, whatever the memory
    kv_offloading_size: float | None = None  # GiB of CPU memory for offloaded KV blocks
    kv_offloading_backend: str = "native"  # native (OffloadingConnector) | lmcache


class ParallelConfig(NamedTuple):
    """vllm/config/parallel.py:ParallelConfig's fields that change the plan."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    data_parallel_size: int = 1  # independent replicas, each its own KV pool
    enable_expert_parallel: bool = False  # experts split over TP×DP ranks

    @property
    def world_size(self) -> int:
        """The GPUs of one replica: pp × tp × pcp (config/parallel.py:ParallelConfig.__post_init__)."""
        return self.pipeline_parallel_size * self.tensor_parallel_size * self.prefill_context_parallel_size

    @property
    def world_size_across_dp(self) -> int:
        """The GPUs of every replica (config/parallel.py:ParallelConfig.world_size_across_dp)."""
        return self.world_size * self.data_parallel_size


class SchedulerConfig(NamedTuple):
    """vllm/config/scheduler.py:SchedulerConfig's fields that change the plan."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    async_scheduling: bool | None = None  # None: vLLM's choice (on where supported)
    disable_hybrid_kv_cache_manager: bool | None = None


class LoRAConfig(NamedTuple):
    """vllm/config/lora.py:LoRAConfig (vLLM builds it when --enable-lora is given)."""

    enable_lora: bool = False  # adapter slots on every GPU
    max_loras: int = 1  # vLLM's default
    max_lora_rank: int = 16  # vLLM's default


class MultiModalConfig(NamedTuple):
    """vllm/config/multimodal.py:MultiModalConfig (--limit-mm-per-prompt parsed by multimodal.parse_mm_limits)."""

    limit_mm_per_prompt: tuple[tuple[str, ModalityLimit], ...] = ()
    language_model_only: bool = False
    enable_mm_embeds: bool = False
    # --mm-encoder-tp-mode: "weights" (vLLM's default: the tower's linears split over TP) or "data" (replicated,
    # the batch split: model_executor/models/vision.py:is_vit_use_data_parallel, run_dp_sharded_mrope_vision_model)
    mm_encoder_tp_mode: str = "weights"


class OffloadConfig(NamedTuple):
    """vllm/config/offload.py:OffloadConfig: weights kept in CPU memory, per GPU. kvplan holds bytes where
    vLLM's `cpu_offload_gb` holds GiB (engine_args.cpu_offload_bytes: GiB × 1024**3, as vLLM multiplies)."""

    cpu_offload_bytes: int = 0


class KernelConfig(NamedTuple):
    """vllm/config/kernel.py:KernelConfig.moe_backend: here the MXFP4 MoE kernel whose weight layout to assume
    (memory/weights.py:MOE_BACKENDS, kvplan's own `--moe-backend`); None: vLLM's default for the GPU."""

    moe_backend: MoeBackend | None = None


class MeasuredMemory(NamedTuple):
    """Measured values that replace kvplan's estimates (bytes per GPU), and the checkpoint's stored bytes."""

    weights_bytes: int | None = None
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    # Stored bytes of the whole checkpoint (e.g. from the Hub's safetensors metadata), split per GPU
    # like the analytic count; None: parameters × bytes from config.json.
    weights_total_bytes: int | None = None


class Load(NamedTuple):
    """The load to judge preemption at (defaults: max_model_len, max_num_seqs)."""

    context: int | None = None
    concurrency: int | None = None


@dataclass(frozen=True)
class ServeSettings:
    """`vllm serve` settings nested as VllmConfig nests them (field names are vLLM's), with the environment,
    the measured overrides and the load to judge apart. Build one with `ServeSettings.of(name=value, …)`."""

    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    lora_config: LoRAConfig = field(default_factory=LoRAConfig)
    multimodal_config: MultiModalConfig = field(default_factory=MultiModalConfig)
    offload_config: OffloadConfig = field(default_factory=OffloadConfig)
    kernel_config: KernelConfig = field(default_factory=KernelConfig)
    speculative_config: Mapping[str, Any] | None = None  # --speculative-config, e.g. {"method": "mtp", …}
    speculative_draft: ModelSpec | None = None  # the EAGLE / draft model its `model` names, loaded
    compilation_config: Mapping[str, Any] | None = None  # --compilation-config / -cc: cudagraph_mode, sizes
    kv_transfer_config: Mapping[str, Any] | None = None  # --kv-transfer-config: a KV connector
    performance_mode: PerformanceMode = "balanced"  # VllmConfig.performance_mode
    usage: Usage = "serve"  # `vllm serve` or the offline LLM class (UsageContext)
    vllm_version: str | None = None
    env: VllmEnvironment = field(default_factory=VllmEnvironment)
    measured: MeasuredMemory = field(default_factory=MeasuredMemory)
    load: Load = field(default_factory=Load)

    @classmethod
    def of(cls, **values: Any) -> ServeSettings:
        """Settings from flat names (`max_model_len=4096, tensor_parallel_size=2, context=8192`): each vLLM
        flag's name or its short alias (`tp=2`, `pp`, `dp`, `dcp`, `pcp`, `ep`, `q`, `sc`, `cc`, as `vllm serve`
        takes them), an environment, measured or load field's, or a top-level field; the rest vLLM's defaults."""
        top, groups = _route(values)
        for group, changes in groups.items():  # a whole group given (env=VllmEnvironment(…)), then its fields
            top[group] = _with(top[group], changes) if group in top else _GROUP_TYPES[group](**changes)
        return cls(**top)

    def updated(self, **values: Any) -> ServeSettings:
        """A copy with the flat-named values changed (names as `of` takes them); an unknown name is a TypeError."""
        top, groups = _route(values)
        base = replace(self, **top)  # a whole group given (env=VllmEnvironment(…)), then its fields over it
        return replace(base, **{group: _with(getattr(base, group), changes) for group, changes in groups.items()})

    def value(self, name: str) -> Any:
        """The value of a flat-named setting (as `of` names it, aliases too)."""
        group, attr = SETTING_PATHS.get(name) or ALIAS_PATHS[name]
        return getattr(getattr(self, group) if group else self, attr)

    def json_data(self) -> dict[str, Any]:
        """The settings as `--json` documents carry them (kvplan/render/json.py:to_data): one flat object,
        keys and order as schema_version 1 has them (`JSON_KEYS`)."""
        return {key: self.value(name) for key, name in JSON_KEYS}


# engine_args' `config` column → the ServeSettings attribute that holds that vLLM config ("" : a top-level field:
# VllmConfig's own, or a JSON object kept as given).
CONFIG_ATTRS: Mapping[str, str] = {
    "model": "model_config", "cache": "cache_config", "parallel": "parallel_config",
    "scheduler": "scheduler_config", "lora": "lora_config", "multimodal": "multimodal_config",
    "offload": "offload_config", "speculative": "", "compilation": "", "kv_transfer": "", "vllm": "",
}
_GROUPS: tuple[tuple[str, type], ...] = (
    ("kernel_config", KernelConfig), ("env", VllmEnvironment), ("measured", MeasuredMemory), ("load", Load),
)


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a config: a NamedTuple's, or a dataclass's (VllmEnvironment)."""
    names: tuple[str, ...] | None = getattr(cls, "_fields", None)
    return names if names is not None else tuple(f.name for f in fields(cls))


def _with(config: Any, changes: Mapping[str, Any]) -> Any:
    """A config with some fields changed (NamedTuple._replace, or dataclasses.replace for VllmEnvironment)."""
    return config._replace(**changes) if hasattr(config, "_replace") else replace(config, **changes)


def _setting_paths() -> dict[str, tuple[str, str]]:
    """Flat name → (group attribute or "", field): the flags from engine_args' table (name and config), then
    the groups that are no vLLM flag, then the top-level fields."""
    from kvplan.vllm.engine_args import SETTING_ARGS

    paths: dict[str, tuple[str, str]] = {}
    for arg in SETTING_ARGS:
        assert arg.field is not None
        paths[arg.field] = (CONFIG_ATTRS[arg.config], arg.field)
    for group, cls in _GROUPS:
        for name in field_names(cls):
            paths.setdefault(name, (group, name))
    for f in fields(ServeSettings):
        paths.setdefault(f.name, ("", f.name))
    return paths


SETTING_PATHS: Mapping[str, tuple[str, str]] = _setting_paths()
_GROUP_TYPES: Mapping[str, Any] = {
    f.name: f.default_factory for f in fields(ServeSettings) if callable(f.default_factory)
}


def _route(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Flat-named values split into top-level fields and {group: its fields}; an unknown name is a TypeError."""
    groups: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for name, value in values.items():
        path = SETTING_PATHS.get(name) or ALIAS_PATHS.get(name)
        if path is None:
            raise TypeError(f"ServeSettings has no setting {name!r}")
        group, attr = path
        if group:
            groups.setdefault(group, {})[attr] = value
        else:
            top[attr] = value
    return top, groups


def _alias_paths() -> dict[str, tuple[str, str]]:
    """vLLM's other spellings of the flags (engine_args' `aliases`: -tp → tp, --device-memory-utilization …)."""
    from kvplan.vllm.engine_args import SETTING_ARGS

    return {alias.lstrip("-").replace("-", "_"): SETTING_PATHS[arg.field]
            for arg in SETTING_ARGS if arg.field is not None for alias in arg.aliases}


ALIAS_PATHS: Mapping[str, tuple[str, str]] = _alias_paths()

# The four flat names whose schema_version 1 JSON key (and kvplan's older field name) differs.
LEGACY_KEYS: Mapping[str, str] = {
    "tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "trust_remote_code": "allow_custom_code",
    "use_flashinfer_sampler": "flashinfer_sampler",
}
# (JSON key, flat name) in the order schema_version 1 documents list them (docs/json-schema.md); a new setting
# is appended here (an additive key; tests/test_configs.py fails until it is).
JSON_KEYS: tuple[tuple[str, str], ...] = tuple((LEGACY_KEYS.get(name, name), name) for name in (
    "tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "kv_cache_dtype", "block_size", "enforce_eager", "kv_cache_memory_bytes",
    "enable_prefix_caching", "async_scheduling", "kv_transfer_config", "disable_hybrid_kv_cache_manager",
    "performance_mode", "usage", "vllm_version", "allow_long_max_model_len", "use_v2_model_runner",
    "estimate_cudagraphs", "use_flashinfer_sampler", "rocm_aiter_installed", "rocm_use_aiter", "rocm_use_aiter_mha",
    "rocm_use_aiter_mla", "trust_remote_code", "speculative_config", "speculative_draft",
    "decode_context_parallel_size", "prefill_context_parallel_size", "enable_expert_parallel", "data_parallel_size",
    "dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype", "num_gpu_blocks_override", "cpu_offload_bytes",
    "kv_offloading_size", "kv_offloading_backend", "quantization", "enable_lora", "max_loras", "max_lora_rank",
    "limit_mm_per_prompt", "language_model_only", "enable_mm_embeds", "weights_bytes", "activation_bytes",
    "non_torch_bytes", "cuda_graph_bytes", "weights_total_bytes", "moe_backend", "compilation_config",
    "use_flashinfer_moe_fp8", "mm_encoder_tp_mode", "context", "concurrency"))
