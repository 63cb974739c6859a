"""Flag texts → a deployment: what `kvplan fit`, `roofline`, `calibrate`, `diagnose --plan`, `simulate` and the
library (kvplan/api.py) read vLLM's options with, out of the CLI so that each reads them the same way.

Each vLLM option is read as its row of kvplan/vllm/engine_args.py says; a pasted `vllm serve` line
(vllm/command_line.py) gives the options the flags leave out; `--num-gpus` implies data-parallel replicas (and
-tp when it is not given). Pure: environment variables come in as a mapping, nothing is loaded except a
speculative draft's config.json (vllm/loading.py). Every bad value raises InvalidParameter.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.environment import VllmEnvironment
    from kvplan.vllm.settings import ServeSettings


def settings_from_flags(
    given: Mapping[str, object],
    usage: str | None = None,
    vllm_version: str | None = None,
    *,
    measured: Mapping[str, str | None] | None = None,
    context: str | None = None,
    concurrency: int | None = None,
    env: VllmEnvironment | None = None,
) -> ServeSettings:
    """Turn flag texts (from the command line or a pasted vLLM command) into ServeSettings.

    `given` maps vLLM option names (`max_model_len`, `tensor_parallel_size`, …) to their texts; each is read
    as its row of kvplan/vllm/engine_args.py says (an absent one keeps ServeSettings' default, vLLM's);
    `moe_backend` is kvplan's own. `measured` the four `--…-memory` overrides (weights, activation, non_torch,
    cuda_graph: byte sizes as text); `context` and `concurrency` the load to judge. Shared by `kvplan fit`,
    `roofline`, `calibrate`, `diagnose --plan`, `simulate` and the library; `env` is vLLM's environment as
    vllm/environment.py reads it (None: all unset). Raises InvalidParameter on a bad value.
    """
    from kvplan.errors import InvalidParameter
    from kvplan.units import parse_bytes, parse_count
    from kvplan.vllm.engine_args import SETTING_ARGS, read_flag_text
    from kvplan.vllm.environment import VllmEnvironment
    from kvplan.vllm.loading import load_speculative_draft
    from kvplan.vllm.memory.weights import MOE_BACKENDS
    from kvplan.vllm.settings import ServeSettings

    env = env or VllmEnvironment()
    memory = dict(measured or {})

    def size(value: str | None, flag: str) -> int | None:
        return None if value is None else parse_bytes(value, what=flag)

    fields: dict[str, Any] = {}
    for arg in SETTING_ARGS:
        value = given.get(arg.name)
        # An empty text keeps the default for the text options (as `x or default` did), not for the numbers.
        if value is None or (value == "" and arg.kind in ("choice", "lower", "text")):
            continue
        assert arg.field is not None
        fields[arg.field] = read_flag_text(arg, value)
    usage_ = (usage or "serve").lower()
    if usage_ not in ("serve", "llm"):
        raise InvalidParameter(f"--usage must be serve or llm, got {usage!r}")
    moe_backend = given.get("moe_backend")
    if moe_backend is not None and moe_backend not in MOE_BACKENDS:
        raise InvalidParameter(f"--moe-backend must be one of {', '.join(MOE_BACKENDS)}, got {moe_backend!r}")
    if given.get("rocm_aiter") is not None:
        fields["rocm_aiter_installed"] = bool(given["rocm_aiter"])
    return ServeSettings.of(
        **fields,
        usage=usage_,
        vllm_version=vllm_version,
        env=env,
        weights_bytes=size(memory.get("weights"), "--weights-memory"),
        activation_bytes=size(memory.get("activation"), "--activation-memory"),
        non_torch_bytes=size(memory.get("non_torch"), "--non-torch-memory"),
        cuda_graph_bytes=size(memory.get("cuda_graph"), "--cuda-graph-memory"),
        context=None if context is None else parse_count(context, what="--context", minimum=1),
        concurrency=concurrency,
        moe_backend=moe_backend,
        speculative_draft=load_speculative_draft(fields.get("speculative_config")),
    )


def json_option(value: object, flag: str) -> dict[str, Any] | None:
    """A vLLM option given as JSON text (or already a mapping, from a plan file)."""
    from kvplan.vllm.engine_args import json_object

    return json_object(value, flag)


def env_flags(values: Iterable[str] | None) -> dict[str, str]:
    """--env NAME=VALUE words as a mapping; a word without '=' or with another name than VLLM_… is an error."""
    from kvplan.errors import InvalidParameter

    out: dict[str, str] = {}
    for word in values or ():
        name, sep, value = word.partition("=")
        if not sep or not name.startswith("VLLM_"):
            raise InvalidParameter(f"--env {word!r}: expected VLLM_NAME=VALUE")
        out[name] = value
    return out


@dataclass(frozen=True)
class FitFlags:
    """One deployment as `kvplan fit`'s flags (and a pasted `vllm serve` line) describe it, before the model is
    loaded: the model's source and revision, the settings, and the pasted line's flags kvplan did not use."""

    model: str
    revision: str | None
    settings: ServeSettings
    hf_overrides: dict[str, Any] | None = None
    num_gpus: int | None = None
    tp_given: bool = True  # False: -tp was implied by --num-gpus
    ignored: tuple[str, ...] = ()  # the pasted line's words kvplan ignored (vllm/command_line.py:classify_ignored)


def fit_flags(
    model: str | None,
    given: Mapping[str, object],
    *,
    vllm_cmd: str | None = None,
    usage: str | None = None,
    vllm_version: str | None = None,
    measured: Mapping[str, str | None] | None = None,
    context: str | None = None,
    concurrency: int | None = None,
    num_gpus: int | None = None,
    environ: Mapping[str, str] | None = None,
    env_words: Iterable[str] | None = None,
    on_ignored: Callable[[tuple[str, ...]], None] | None = None,
) -> FitFlags:
    """The deployment `kvplan fit`'s flags describe: `given` (vLLM option names → texts, as Typer gives them; a
    None is not given), then a pasted `vllm_cmd` line's options; `measured` the four `--…-memory` overrides
    (weights, activation, non_torch, cuda_graph); vLLM's environment is `environ` (the shell's), then the
    pasted line's `VLLM_…=` words, then `env_words` (`--env NAME=VALUE`). `on_ignored` hears the pasted line's
    unused flags as soon as it is read (before a bad value stops the rest)."""
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.environment import vllm_environment

    options = dict(given)
    pasted_env: dict[str, str] = {}
    ignored: tuple[str, ...] = ()
    if vllm_cmd is not None:
        from kvplan.vllm.command_line import parse_vllm_command

        parsed = parse_vllm_command(vllm_cmd)
        pasted_env = parsed.env  # the server's `VLLM_…=` words win over this shell's
        ignored = tuple(parsed.ignored)
        if ignored and on_ignored is not None:
            on_ignored(ignored)
        for key, value in parsed.options.items():
            if options.get(key) is None:
                options[key] = value
        model = model or parsed.model
    if not model:
        raise InvalidParameter('a model is needed: kvplan fit MODEL (or --vllm-cmd "vllm serve MODEL …")')
    settings = settings_from_flags(
        options, usage, vllm_version, measured=measured, context=context, concurrency=concurrency,
        env=vllm_environment({**(environ or {}), **pasted_env, **env_flags(env_words)}),
    )
    tp_given = options.get("tensor_parallel_size") is not None
    if num_gpus is not None:
        settings = _with_num_gpus(settings, num_gpus, tp_given=tp_given)
    revision = options.get("revision")
    return FitFlags(model=model, revision=str(revision) if revision else None, settings=settings,
                    hf_overrides=json_option(options.get("hf_overrides"), "--hf-overrides"),
                    num_gpus=num_gpus, tp_given=tp_given, ignored=ignored)


def _with_num_gpus(settings: ServeSettings, num_gpus: int, *, tp_given: bool) -> ServeSettings:
    """--num-gpus: each replica takes tp × pp GPUs, the rest are data-parallel replicas; without -tp it is
    num_gpus ÷ pp."""
    from kvplan.errors import InvalidParameter

    tp, pp = settings.parallel_config.tensor_parallel_size, settings.parallel_config.pipeline_parallel_size
    if num_gpus < 1:
        raise InvalidParameter(f"--num-gpus must be ≥ 1, got {num_gpus}")
    if not tp_given:
        tp = max(1, num_gpus // pp)
    if tp * pp > num_gpus:
        raise InvalidParameter(f"-tp {tp} × -pp {pp} needs {tp * pp} GPUs, more than --num-gpus {num_gpus}")
    if num_gpus % (tp * pp):
        raise InvalidParameter(
            f"--num-gpus {num_gpus} is not a multiple of -tp {tp} × -pp {pp} = {tp * pp}: each replica "
            f"takes {tp * pp} GPUs", hint=f"give --num-gpus {num_gpus - num_gpus % (tp * pp)} or "
            f"{num_gpus + tp * pp - num_gpus % (tp * pp)}, or a -tp that divides it")
    replicas = num_gpus // (tp * pp)
    return settings.updated(tensor_parallel_size=tp,
                            data_parallel_size=max(replicas, settings.parallel_config.data_parallel_size))


def check_implied_tp(spec: ModelSpec, flags: FitFlags) -> None:
    """A -tp that --num-gpus implied and vLLM would refuse is blamed on --num-gpus, the flag typed."""
    from kvplan.errors import InvalidParameter
    from kvplan.model.parallel import check_tensor_parallel

    if flags.num_gpus is None or flags.tp_given:
        return
    tp = flags.settings.parallel_config.tensor_parallel_size
    try:
        check_tensor_parallel(spec, tp)
    except InvalidParameter as exc:
        text = str(exc).replace(f"--tensor-parallel-size {tp} ", f"--num-gpus {flags.num_gpus} implies -tp {tp}, "
                                "which ", 1)
        raise InvalidParameter(text, hint=exc.hint) from None
