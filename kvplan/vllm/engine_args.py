"""vLLM's engine arguments as kvplan reads them: one table, one row per argument.

vLLM derives its whole CLI from one `EngineArgs` dataclass (vllm/engine/arg_utils.py, 0.33:
`EngineArgs.add_cli_args`): each field becomes `--field-name`, a bool becomes `--x/--no-x`
(`argparse.BooleanOptionalAction`, `_compute_kwargs`), a few get short or second names (`-tp`,
`--device-memory-utilization`). kvplan does the same from `ENGINE_ARGS` below; every surface that reads
vLLM settings is generated from it:

- a pasted `vllm serve …` line (`kvplan.vllm.command_line`: VALUE_FLAGS, BOOL_FLAGS, SHORT_FLAGS, …),
- plan files and vLLM `--config` files (`kvplan.ci.plan`: VLLM_OPTIONS, VLLM_ALIASES, VLLM_NEGATED),
- `kvplan fit`'s settings (`kvplan.vllm.flags.settings_from_flags`; the Typer options stay hand-written there,
  and `tests/test_engine_args.py` checks each row with `fit_option` has one),
- `kvplan calibrate`'s suggested `kvplan fit` flags (`suggested_flags`),
- the "ignored" / "not modelled" notes (`effect` and `note`).

**A new vLLM flag is one row here.** A row that changes the plan names the field it sets (`field`, vLLM's
name for it) of the nested config its `config` column names (kvplan/vllm/configs.py: ServeSettings'
`cache_config` for "cache" …, built from this table by `ServeSettings.of`; vLLM's default stays the
config's None/default, resolved per vLLM version by the function `default_from` names in
kvplan.vllm.defaults), and a field of that config dataclass; one that does not is `effect="ignored"`; one
that changes memory in a way kvplan does not model is `effect="unmodelled"` with its reason in `note`.

Pure and cheap to import (typing only): the CLI imports it on the `fit`/`check` paths only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, Protocol

# The vLLM config dataclass an argument belongs to (vllm/config/*.py; the title of its argument group in
# `vllm serve --help`). "frontend": the OpenAI API server's own arguments (entrypoints/openai/cli_args.py),
# "engine": EngineArgs' top-level ones outside any config, "vllm": VllmConfig's own fields.
VllmConfigName = Literal[
    "model", "cache", "parallel", "scheduler", "speculative", "lora", "compilation", "load", "multimodal",
    "offload", "kv_transfer", "observability", "structured_outputs", "vllm", "engine", "frontend",
]
# How a value is read (the same kind reads a plan's YAML value and a command line's text; the readers
# are `kvplan.ci.plan._PLAN_READERS` and `read_flag_text` below):
#   count: a whole number ≥ 1 (`8k`, `32K` as vLLM's human_readable_int reads them); max_model_len: a count,
#   or auto / -1; fraction: a number in (0, 1]; bytes: a byte size (`20GiB`); gib: a number of GiB, stored as
#   bytes; offload_gib: a positive number of GiB, stored as GiB; bool; json: a JSON object (a mapping in a
#   plan); mm_limits: --limit-mm-per-prompt's object; choice: one of `choices` (lower-cased); lower: any text,
#   lower-cased; text: any text.
ValueKind = Literal["count", "max_model_len", "fraction", "bytes", "gib", "offload_gib", "bool", "json",
                    "mm_limits", "choice", "lower", "text"]
# modelled: changes the plan (`field`); ignored: no effect on KV memory or speed as kvplan models them;
# unmodelled: changes memory or speed in a way kvplan does not model (a warning says so, with `note`).
Effect = Literal["modelled", "ignored", "unmodelled"]


class EngineArg(NamedTuple):
    """One vLLM engine argument (an immutable row; a NamedTuple because `kvplan fit` imports the table on every
    run: the module executes in 0.9 ms, 4 ms with frozen dataclasses)."""

    name: str  # EngineArgs' field (the argparse dest): max_model_len
    config: VllmConfigName
    kind: ValueKind = "text"
    field: str | None = None  # the field it sets in `config`'s dataclass (configs.py); None for model/revision/…
    aliases: tuple[str, ...] = ()  # vLLM's other spellings: "-tp", "--device-memory-utilization"
    negatable: bool = False  # `--no-NAME` (vLLM: argparse.BooleanOptionalAction)
    effect: Effect = "modelled"
    note: str = ""  # why it is ignored / not modelled
    default_from: str = ""  # the kvplan.vllm.defaults name that gives vLLM's default (per version where it changed)
    choices: str = ""  # for kind "choice": which set of values (choices_of reads it from its owner)
    maximum: int | None = None  # for kind "count": the largest value accepted
    bound: str = ""  # why `maximum` (said when it is exceeded)
    fit_option: bool = True  # `kvplan fit` has a Typer option of this name
    dotted: bool = False  # vLLM's `--flag.key value` spelling is read (utils/argparse_utils.py)
    secret: bool = False  # its value never reaches a note or a report
    removed: bool = False  # an older vLLM's flag that 0.33's CLI no longer has (still read, so old lines work)

    @property
    def flag(self) -> str:
        """`--max-model-len`."""
        return "--" + self.name.replace("_", "-")

    @property
    def takes_value(self) -> bool:
        """A bool flag stands alone (`--enforce-eager`); every other takes a value."""
        return self.kind != "bool"


# vLLM 0.33's CacheConfig.block_size is any int > 0 (`Field(gt=0)`; the fixed BlockSize set of older
# releases is gone): the attention backend's kernels then take 16–128 tokens, and hybrid models' Mamba
# alignment raises the block to a few thousand. 65,536 (the simulator's MAX_BLOCK_SIZE) is far above both.
MAX_BLOCK_SIZE = 2**16
BLOCK_SIZE_BOUND = "a vLLM KV block is 16 to 128 tokens, a hybrid model's a few thousand"


def _ignored(name: str, config: VllmConfigName, kind: ValueKind = "text", **kw: object) -> EngineArg:
    return EngineArg(name, config, kind, effect="ignored", fit_option=False, **kw)  # type: ignore[arg-type]


def _flag(name: str, config: VllmConfigName) -> EngineArg:
    """An ignored flag that takes no value (a bool: it must not swallow the next word)."""
    return _ignored(name, config, "bool")


# Source: vLLM 0.33 vllm/engine/arg_utils.py (EngineArgs.add_cli_args: names, short forms, groups) and
# vllm/config/*.py (types, hence BooleanOptionalAction), entrypoints/openai/cli_args.py (the API server's).
# Order: the modelled rows first, in the order `kvplan calibrate` suggests flags.
ENGINE_ARGS: tuple[EngineArg, ...] = (
    EngineArg("model", "model", fit_option=False),  # `vllm serve MODEL` or --model: the model to plan
    EngineArg("revision", "model"),
    EngineArg("hf_overrides", "model", "json"),  # applied to config.json before it is read
    EngineArg("tensor_parallel_size", "parallel", "count", "tensor_parallel_size", aliases=("-tp",)),
    EngineArg("pipeline_parallel_size", "parallel", "count", "pipeline_parallel_size", aliases=("-pp",)),
    EngineArg("gpu_memory_utilization", "cache", "fraction", "gpu_memory_utilization",
              aliases=("--device-memory-utilization",), default_from="default_gpu_memory_utilization"),
    EngineArg("max_model_len", "model", "max_model_len", "max_model_len"),
    EngineArg("max_num_seqs", "scheduler", "count", "max_num_seqs", default_from="resolve_batch_settings"),
    EngineArg("max_num_batched_tokens", "scheduler", "count", "max_num_batched_tokens",
              default_from="resolve_batch_settings"),
    EngineArg("kv_cache_dtype", "cache", "choice", "kv_cache_dtype", choices="kv_cache_dtype"),
    EngineArg("block_size", "cache", "count", "block_size", maximum=MAX_BLOCK_SIZE, bound=BLOCK_SIZE_BOUND,
              default_from="DEFAULT_BLOCK_SIZE"),
    # argparse's allow_abbrev (FlexibleArgumentParser keeps it) takes --kv-cache-memory for the only flag it begins
    EngineArg("kv_cache_memory_bytes", "cache", "bytes", "kv_cache_memory_bytes", aliases=("--kv-cache-memory",)),
    EngineArg("enforce_eager", "model", "bool", "enforce_eager", negatable=True),
    EngineArg("enable_prefix_caching", "cache", "bool", "enable_prefix_caching", negatable=True),
    EngineArg("disable_hybrid_kv_cache_manager", "scheduler", "bool", "disable_hybrid_kv_cache_manager",
              negatable=True, default_from="hybrid_manager_disabled_by_default", fit_option=False),
    EngineArg("performance_mode", "vllm", "choice", "performance_mode",
              choices="performance_mode", fit_option=False),
    EngineArg("speculative_config", "speculative", "json", "speculative_config", aliases=("-sc",)),
    EngineArg("compilation_config", "compilation", "json", "compilation_config", aliases=("-cc",),
              default_from="max_cudagraph_capture_size"),
    EngineArg("kv_transfer_config", "kv_transfer", "json", "kv_transfer_config"),
    EngineArg("decode_context_parallel_size", "parallel", "count", "decode_context_parallel_size",
              aliases=("-dcp",)),
    EngineArg("prefill_context_parallel_size", "parallel", "count", "prefill_context_parallel_size",
              aliases=("-pcp",)),
    EngineArg("data_parallel_size", "parallel", "count", "data_parallel_size", aliases=("-dp",)),
    EngineArg("enable_expert_parallel", "parallel", "bool", "enable_expert_parallel", aliases=("-ep",),
              negatable=True),
    EngineArg("trust_remote_code", "model", "bool", "trust_remote_code", negatable=True),
    EngineArg("dtype", "model", "choice", "dtype", choices="dtype"),
    EngineArg("mamba_cache_dtype", "cache", "choice", "mamba_cache_dtype", choices="mamba_cache_dtype"),
    EngineArg("mamba_ssm_cache_dtype", "cache", "choice", "mamba_ssm_cache_dtype", choices="mamba_cache_dtype"),
    EngineArg("num_gpu_blocks_override", "cache", "count", "num_gpu_blocks_override"),
    EngineArg("cpu_offload_gb", "offload", "gib", "cpu_offload_bytes"),
    EngineArg("kv_offloading_size", "cache", "offload_gib", "kv_offloading_size"),
    EngineArg("kv_offloading_backend", "cache", "choice", "kv_offloading_backend",
              choices="kv_offloading_backend"),
    EngineArg("quantization", "model", "lower", "quantization", aliases=("-q",)),
    EngineArg("enable_lora", "lora", "bool", "enable_lora", negatable=True),
    EngineArg("async_scheduling", "scheduler", "bool", "async_scheduling", negatable=True,
              default_from="async_scheduling_default"),
    EngineArg("max_loras", "lora", "count", "max_loras"),
    EngineArg("max_lora_rank", "lora", "count", "max_lora_rank"),
    EngineArg("limit_mm_per_prompt", "multimodal", "mm_limits", "limit_mm_per_prompt", dotted=True),
    EngineArg("language_model_only", "multimodal", "bool", "language_model_only", negatable=True),
    EngineArg("enable_mm_embeds", "multimodal", "bool", "enable_mm_embeds", negatable=True),
    EngineArg("mm_encoder_tp_mode", "multimodal", "choice", "mm_encoder_tp_mode", choices="mm_encoder_tp_mode"),
    # --- not modelled: changes memory or speed in a way kvplan does not model ------------------------------
    # V0's CPU swap space: vLLM 0.33's EngineArgs has no swap_space (its CLI rejects --swap-space); the V1
    # engine preempts by recomputation, so it held no GPU memory on 0.8–0.10 either.
    EngineArg("swap_space", "cache", "text", effect="unmodelled", fit_option=False, removed=True,
              note="vLLM 0.33 has no --swap-space (V1 preempts by recomputing; no GPU memory)"),
    # --- ignored: no effect on KV capacity or speed as kvplan models them ------------------------------------
    # So a real `vllm serve` line or --config file can be used as it is. Checked against vLLM 0.33's EngineArgs
    # and API server arguments: the API server (host … middleware, api_server_count), logging and metrics
    # (…log…, otlp_traces_endpoint, enable_server_load_tracking), the tokenizer and chat templates, where the
    # weights come from (download_dir, load_format, code_revision, hf_token), sampling defaults (seed,
    # generation_config, override_generation_config, max_logprobs), the scheduling order (scheduling_policy),
    # the worker process (worker_cls, distributed_executor_backend: Ray or mp changes no KV memory), and
    # enable_chunked_prefill (always on in V1; max_num_batched_tokens is what counts). disable_log_requests,
    # disable_frontend_multiprocessing and hf_overrides_path are older vLLM's: 0.33 has none of them.
    _ignored("host", "frontend"), _ignored("port", "frontend"), _ignored("served_model_name", "model"),
    _ignored("api_key", "frontend", secret=True), _ignored("uvicorn_log_level", "frontend"),
    _ignored("disable_log_requests", "frontend", "bool", removed=True), _flag("disable_log_stats", "engine"),
    _flag("enable_log_requests", "engine"), _ignored("tokenizer", "model"), _ignored("tokenizer_mode", "model"),
    _ignored("tokenizer_revision", "model"), _ignored("code_revision", "model"), _ignored("download_dir", "load"),
    _ignored("load_format", "load"), _ignored("seed", "model"), _ignored("chat_template", "frontend"),
    _ignored("chat_template_content_format", "frontend"), _flag("enable_auto_tool_choice", "frontend"),
    _ignored("tool_call_parser", "frontend"), _ignored("reasoning_parser", "structured_outputs"),
    _ignored("generation_config", "model"), _flag("disable_uvicorn_access_log", "frontend"),
    _ignored("allowed_origins", "frontend"), _ignored("allowed_methods", "frontend"),
    _ignored("allowed_headers", "frontend"), _ignored("ssl_keyfile", "frontend"),
    _ignored("ssl_certfile", "frontend"), _ignored("ssl_ca_certs", "frontend"), _ignored("root_path", "frontend"),
    _ignored("middleware", "frontend"), _ignored("response_role", "frontend"), _ignored("max_logprobs", "model"),
    _flag("disable_fastapi_docs", "frontend"), _flag("enable_prompt_tokens_details", "frontend"),
    _ignored("otlp_traces_endpoint", "observability"), _ignored("hf_token", "model", secret=True),
    _ignored("api_server_count", "frontend"), _flag("enable_force_include_usage", "frontend"),
    _flag("enable_server_load_tracking", "frontend"), _ignored("disable_frontend_multiprocessing", "frontend", "bool",
                                                                                removed=True),
    _ignored("worker_cls", "parallel"), _ignored("distributed_executor_backend", "parallel"),
    _ignored("scheduling_policy", "scheduler"), _flag("enable_chunked_prefill", "scheduler"),
    _ignored("override_generation_config", "model"), _ignored("hf_overrides_path", "model", removed=True),
    _ignored("log_config_file", "observability"),
    _flag("disable_custom_all_reduce", "parallel"), _flag("headless", "frontend"),
    _flag("enable_sleep_mode", "model"), _flag("enable_request_id_headers", "frontend"),
    _flag("kv_cache_metrics", "observability"), _flag("enable_log_outputs", "frontend"),
    _flag("skip_tokenizer_init", "model"), _flag("enable_prompt_embeds", "model"),
)

BY_NAME: Mapping[str, EngineArg] = {arg.name: arg for arg in ENGINE_ARGS}
# Settings rows: the modelled arguments that set a ServeSettings field, in table order.
SETTING_ARGS: tuple[EngineArg, ...] = tuple(a for a in ENGINE_ARGS if a.effect == "modelled" and a.field)


def fit_options() -> tuple[EngineArg, ...]:
    """The rows `kvplan fit` has a Typer option for (a parameter of the row's name)."""
    return tuple(a for a in ENGINE_ARGS if a.effect == "modelled" and a.fit_option)


def lookup(name: str) -> tuple[EngineArg, bool] | None:
    """The row a name spells (`max_model_len`, `tp`, `no_enforce_eager`, `device_memory_utilization`; dashes
    or underscores, with or without leading dashes) and the value a bare negation gives (False for `no_…`,
    else True); None when no row has that name."""
    key = name.lstrip("-").replace("-", "_")
    if key in BY_NAME:
        return BY_NAME[key], True
    if key in _ALIASES:
        return _ALIASES[key], True
    if key.startswith("no_") and key[3:] in BY_NAME and BY_NAME[key[3:]].negatable:
        return BY_NAME[key[3:]], False
    return None


_ALIASES: Mapping[str, EngineArg] = {
    alias.lstrip("-").replace("-", "_"): arg for arg in ENGINE_ARGS for alias in arg.aliases
}


# --kv-offloading-backend's values (vllm/config/cache.py: KVOffloadingBackend); kept here, not in offload.py,
# so the table imports no module that imports the settings built from it.
OFFLOADING_BACKENDS = ("native", "lmcache")


def choices_of(arg: EngineArg) -> tuple[str, ...]:
    """The allowed values of a `choice` row, from the module that owns them (imported on first use: the table
    itself stays cheap)."""
    from typing import get_args

    if arg.choices == "kv_cache_dtype":
        from kvplan.model.kv_cache import KV_CACHE_DTYPES

        return tuple(KV_CACHE_DTYPES)
    if arg.choices == "mamba_cache_dtype":
        from kvplan.model.kv_cache import MAMBA_CACHE_DTYPES

        return tuple(MAMBA_CACHE_DTYPES)
    if arg.choices == "dtype":
        from kvplan.vllm.dtype import DTYPES

        return tuple(DTYPES)
    if arg.choices == "performance_mode":
        from kvplan.vllm.defaults import PerformanceMode

        return get_args(PerformanceMode)
    if arg.choices == "kv_offloading_backend":
        return OFFLOADING_BACKENDS
    if arg.choices == "mm_encoder_tp_mode":  # config/multimodal.py: MMEncoderTPMode = Literal["weights", "data"]
        return ("weights", "data")
    raise ValueError(f"{arg.name}: no choices named {arg.choices!r}")


# =================================================================================================
# Reading a command line's text (`kvplan fit` flags, a pasted `vllm serve` line)
# =================================================================================================


def read_flag_text(arg: EngineArg, value: object) -> object:
    """The ServeSettings value of a flag given as text (or as the bool / int Typer gives): what `kvplan fit`
    and a pasted `vllm serve` line set. Raises InvalidParameter naming the flag. Range checks that need the
    model stay in kvplan.vllm.settings.validate_settings."""
    from kvplan.errors import InvalidParameter
    from kvplan.units import parse_bytes, parse_count

    flag, kind = arg.flag, arg.kind
    if kind == "count":
        return parse_count(value if isinstance(value, int) else str(value), what=flag, minimum=1,
                           maximum=arg.maximum, bound=arg.bound)
    if kind == "max_model_len":
        if str(value).strip().lower() in ("auto", "-1"):
            return -1  # vLLM: --max-model-len auto / -1 auto-fits to the memory
        return parse_count(str(value), what=flag, minimum=1)
    if kind == "fraction":
        try:
            return float(str(value))
        except ValueError:
            raise InvalidParameter(f"{flag}: cannot read {value!r} as a number") from None
    if kind == "bytes":
        return parse_bytes(str(value), what=flag)
    if kind == "gib":
        return cpu_offload_bytes(value, flag)
    if kind == "offload_gib":
        return kv_offloading_gib(value, flag)
    if kind == "bool":
        return bool(value)
    if kind == "json":
        return json_object(value, flag)
    if kind == "mm_limits":
        return mm_limits(value, flag)
    if kind in ("choice", "lower"):
        text = str(value).strip().lower()
        if arg.name in ("performance_mode", "mm_encoder_tp_mode") and text not in (allowed := choices_of(arg)):
            raise InvalidParameter(f"{flag} must be {', '.join(allowed[:-1])} or {allowed[-1]}, got {value!r}")
        return text  # other choices are checked later (validate_settings, the KV layout), as before
    return str(value)


def json_object(value: object, flag: str) -> dict[str, object] | None:
    """A vLLM option given as JSON text (or already a mapping, from a plan file)."""
    if value is None or isinstance(value, dict):
        return value
    import json

    from kvplan.errors import InvalidParameter

    try:
        parsed = json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise InvalidParameter(f"{flag}: not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(parsed, dict):
        raise InvalidParameter(f"{flag} must be a JSON object, got {type(parsed).__name__}")
    return parsed


def mm_limits(value: object, flag: str = "--limit-mm-per-prompt") -> tuple[tuple[str, object], ...]:
    """--limit-mm-per-prompt (JSON text, or a mapping from a plan file), read as vLLM reads it."""
    if value is None:
        return ()
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.multimodal import parse_mm_limits

    try:
        return parse_mm_limits(value)
    except InvalidParameter as exc:
        raise InvalidParameter(f"{flag}: {exc}", hint=exc.hint) from None


def kv_offloading_gib(value: object, flag: str = "--kv-offloading-size") -> float | None:
    """vLLM's --kv-offloading-size: a positive number of GiB (config/cache.py: float), None when absent."""
    if value is None:
        return None
    from kvplan.errors import InvalidParameter

    try:
        gib = float(str(value))
    except ValueError:
        raise InvalidParameter(f"{flag}: cannot read {value!r} as a number of GiB") from None
    if not 0 < gib <= 1 << 20:
        raise InvalidParameter(f"{flag} must be above 0 and at most {1 << 20} GiB, got {value}")
    return gib


def cpu_offload_bytes(value: object, flag: str = "--cpu-offload-gb") -> int:
    """vLLM's --cpu-offload-gb: a number of GiB (vLLM multiplies by 1024**3), 0 when absent."""
    if value is None:
        return 0
    from kvplan.errors import InvalidParameter
    from kvplan.units import GiB

    try:
        gib = float(str(value))
    except ValueError:
        raise InvalidParameter(f"{flag}: cannot read {value!r} as a number of GiB") from None
    if not 0 <= gib <= 1 << 20:
        raise InvalidParameter(f"{flag} must be between 0 and {1 << 20} GiB, got {value}")
    return int(gib * GiB)


# =================================================================================================
# Writing settings back as flags (`kvplan calibrate`'s suggested `kvplan fit` command)
# =================================================================================================


class _Settings(Protocol):
    """What suggested_flags reads of a ServeSettings (kvplan/vllm/configs.py, which imports this table)."""

    def value(self, name: str) -> Any: ...


def suggested_flags(settings: _Settings, default: _Settings) -> tuple[str, ...]:
    """The flags (vLLM's names, in table order: values first, then switches) that give `settings`' modelled
    fields where they differ from `default` (a ServeSettings; None fields are vLLM's default, left out)."""
    import json
    import shlex

    values: list[str] = []
    switches: list[str] = []
    for arg in SETTING_ARGS:
        assert arg.field is not None
        value, base = settings.value(arg.field), default.value(arg.field)
        if value is None or value == base or arg.field == "limit_mm_per_prompt" and not value:
            continue
        if arg.kind == "bool":
            switches.append(arg.flag if value else "--no-" + arg.flag[2:])
            continue
        if arg.kind == "max_model_len" and value == -1:
            text = "auto"
        elif arg.kind == "gib":
            text = f"{value / 2**30:g}"
        elif arg.kind in ("json", "mm_limits"):
            text = shlex.quote(json.dumps(_plain(value), separators=(",", ":")))
        else:
            text = shlex.quote(str(value))
        values.append(f"{arg.flag} {text}")
    return (*values, *switches)


def _plain(value: object) -> object:
    """A setting as the JSON vLLM reads: mappings as objects; --limit-mm-per-prompt's (modality, limit) pairs
    as {modality: count or {count, …}}."""
    from dataclasses import asdict, is_dataclass

    if isinstance(value, tuple):
        out: dict[str, object] = {}
        for modality, limit in value:
            fields = ({k: v for k, v in asdict(limit).items() if v is not None}
                      if is_dataclass(limit) and not isinstance(limit, type) else limit)
            out[modality] = fields["count"] if isinstance(fields, dict) and set(fields) == {"count"} else fields
        return out
    return dict(value) if isinstance(value, Mapping) else value
