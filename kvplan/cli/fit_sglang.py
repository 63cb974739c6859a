"""`kvplan fit --engine sglang`: SGLang 0.5.23's defaults, KV pool and startup verdict for one deployment.

The options are SGLang's flags (declared here, used by kvplan/cli/fit.py); a pasted
`python -m sglang.launch_server …` line (`--sglang-cmd`) is read by kvplan/sglang/command_line.py.
"""
from __future__ import annotations

from typing import Annotated, Any

import typer

SGLANG_PANEL = "Deployment (SGLang's flags, with --engine sglang)"


def _sgl(help_: str, *names: str) -> Any:
    return typer.Option(*names, help=help_, show_default=False, rich_help_panel=SGLANG_PANEL)


EngineOpt = Annotated[str | None, typer.Option(
    "--engine", help="Whose rules: vllm (default), sglang (SGLang 0.5.23), or both side by side (needs --gpu).",
    show_default=False)]
SglangCmdOpt = Annotated[str | None, _sgl("A whole `python -m sglang.launch_server --model-path M …` line, quoted "
                                          "(implies --engine sglang).", "--sglang-cmd")]
MemFractionStaticOpt = Annotated[float | None, _sgl(
    "(weights + KV pool) / free memory (default: SGLang's, from the GPU's memory).", "--mem-fraction-static")]
ChunkedPrefillSizeOpt = Annotated[int | None, _sgl("Tokens per prefill chunk (default: by GPU memory).",
                                                   "--chunked-prefill-size")]
MaxRunningRequestsOpt = Annotated[int | None, _sgl("Running requests at most (default: from the pool).",
                                                   "--max-running-requests")]
MaxTotalTokensOpt = Annotated[int | None, _sgl("Cap on the pool's tokens.", "--max-total-tokens")]
PageSizeOpt = Annotated[int | None, _sgl("Tokens per page (default 1; 64 with trtllm_mha).", "--page-size")]
SglDpOpt = Annotated[int | None, _sgl("Data-parallel size (SGLang's --dp-size): replicas, or attention-DP groups "
                                      "with --enable-dp-attention.", "--dp", "--dp-size")]
EnableDpAttentionOpt = Annotated[bool | None, _sgl("Attention data parallelism over --dp groups.",
                                                   "--enable-dp-attention")]
SglangWeightLogOpt = Annotated[str | None, _sgl(
    "SGLang's own `Load weight end. … avail mem=A GB, mem usage=W GB.` line: the free memory it measured after "
    "(A) and before (A + W) the weights, used instead of kvplan's estimate.", "--sglang-weight-log")]
ContextLengthOpt = Annotated[int | None, _sgl("Context length (default: the model's).", "--context-length")]

# fit's options that both engines' rules read; the others mean something only under vLLM's rules (refused with
# --engine sglang, not ignored). The TP and PP sizes are one option each in either spelling (kvplan.cli.options):
# tensor_parallel_size and pipeline_parallel_size hold -tp / --tp and -pp / --pp (tp_size and pp_size stay None).
_SHARED = frozenset({"model", "gpu", "gpus_file", "gpu_total_bytes", "kv_cache_dtype", "revision", "weights_memory",
                     "trust_remote_code", "json_", "engine", "sglang_cmd", "mem_fraction_static", "sglang_weight_log",
                     "chunked_prefill_size", "max_running_requests", "max_total_tokens", "page_size",
                     "tensor_parallel_size", "pipeline_parallel_size", "tp_size", "pp_size",
                     "sgl_dp", "enable_dp_attention", "context_length"})
SGLANG_ONLY = ("mem_fraction_static", "chunked_prefill_size", "max_running_requests", "max_total_tokens",
               "page_size", "sgl_dp", "enable_dp_attention", "context_length", "sglang_cmd",
               "sglang_weight_log")


# fit's parameters whose flag is not their name with dashes (kvplan/cli/fit.py)
_FLAG_NAMES = {"env_vars": "--env", "json_": "--json", "sgl_dp": "--dp"}


def _flag_of(name: str) -> str:
    """The command-line spelling of fit's parameter `name` (`env_vars` is `--env`)."""
    return _FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def wants_sglang(params: dict[str, Any]) -> bool:
    """Whether fit runs SGLang's rules; an SGLang flag without them is refused."""
    from kvplan.errors import InvalidParameter

    engine = (params.get("engine") or "vllm").lower()
    if engine not in ("vllm", "sglang", "both"):
        raise InvalidParameter(f"--engine must be vllm, sglang or both, got {params.get('engine')!r}")
    if params.get("sglang_cmd") is not None:
        if engine == "both":
            raise InvalidParameter("--sglang-cmd plans SGLang alone",
                                   hint="with --engine both, give the deployment as flags (vLLM's and SGLang's)")
        if params.get("engine") is not None and engine == "vllm":
            raise InvalidParameter("--sglang-cmd plans with SGLang's rules, not --engine vllm",
                                   hint="drop --engine vllm, or paste a vllm serve line with --vllm-cmd")
        return True
    if engine == "vllm":
        given = [n for n in SGLANG_ONLY if params.get(n) is not None]
        if given:
            raise InvalidParameter(f"{_flag_of(given[0])} is an SGLang flag", hint="add --engine sglang")
    return engine == "sglang"


def _deployment(params: dict[str, Any], pasted: dict[str, str | bool], *, check: bool = True) -> Any:
    """The deployment of the typed SGLang flags over a pasted line's (kvplan.sglang.engine_args), checked
    (`check`) before anything divides by its sizes."""
    from kvplan.errors import InvalidParameter, ParseError
    from kvplan.sglang.defaults import SglangDeployment, check_deployment
    from kvplan.sglang.engine_args import deployment_fields

    typed = {"tp_size": params.get("tensor_parallel_size"), "pp_size": params.get("pipeline_parallel_size"),
             "dp_size": params.get("sgl_dp"),
             "enable_dp_attention": params.get("enable_dp_attention"),
             **{dest: params.get(dest) for dest in ("mem_fraction_static", "chunked_prefill_size",
                                                    "max_running_requests", "max_total_tokens", "page_size",
                                                    "kv_cache_dtype", "context_length", "trust_remote_code")}}
    options: dict[str, object] = {**pasted, **{k: v for k, v in typed.items() if v is not None}}
    try:
        dep = SglangDeployment(**deployment_fields(options))  # type: ignore[arg-type]
    except ParseError as exc:
        raise InvalidParameter(str(exc)) from None
    if check:
        check_deployment(dep)  # before the weights estimate divides by --tp
    return dep


def run_sglang_fit(params: dict[str, Any]) -> None:
    """Plan one deployment with SGLang's rules and print it (exit 1 when SGLang would not start)."""
    from kvplan.cli.common import notice
    from kvplan.cli.console import out, print_json
    from kvplan.errors import InvalidParameter

    # `is not None`: every vLLM option defaults to None, so a given 0 or --no-… is refused too (0 == False)
    refused = [n for n, v in params.items() if n not in _SHARED and v is not None]
    if refused:
        flag = _flag_of(refused[0])
        raise InvalidParameter(f"{flag} is a vLLM flag: --engine sglang plans with SGLang's flags",
                               hint="see `kvplan fit --help`, Deployment (SGLang's flags)")
    pasted: dict[str, str | bool] = {}
    model = params.get("model")
    json_ = bool(params.get("json_"))
    if params.get("sglang_cmd") is not None:
        from kvplan.sglang.command_line import parse_sglang_command

        cmd = parse_sglang_command(str(params["sglang_cmd"]))
        pasted = cmd.options
        model = model or cmd.model
        if params.get("revision") is None and cmd.revision is not None:  # kvplan's --revision wins, as --model-path
            params = {**params, "revision": cmd.revision}
        if not json_:
            if cmd.ignored:
                notice(f"ignored SGLang flags that do not change the KV plan: {' '.join(cmd.ignored)}", "Note")
            for line in cmd.unmodelled:
                notice(f"not modelled: {line}")
    if not model:
        raise InvalidParameter('a model is needed: kvplan fit MODEL --engine sglang (or --sglang-cmd '
                               '"python -m sglang.launch_server --model-path MODEL …")')
    if params.get("gpu") is None:
        for name in ("sglang_weight_log", "gpu_total_bytes"):
            if params.get(name) is not None:
                raise InvalidParameter(f"--{name.replace('_', '-')} is measured on one GPU: the catalog sweep "
                                       "(no --gpu) cannot use it", hint="name that GPU with --gpu")
        from dataclasses import replace

        from kvplan.sglang.defaults import check_deployment

        dep = _deployment(params, pasted, check=False)
        check_deployment(replace(dep, enable_dp_attention=False))  # the sweep tries each TP against the DP size
        _sweep(str(model), params, dep, json_=json_)
        return
    report = _plan(str(model), params, _deployment(params, pasted), quiet=json_)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit-sglang", report))
    else:
        from kvplan.render.sglang_fit import render_sglang_fit

        out().print(render_sglang_fit(report))
    if not report.fits:
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        raise typer.Exit(EXIT_CHECK_FAILED)


def _plan(model: str, params: dict[str, Any], dep: Any, *, quiet: bool) -> Any:
    from kvplan.cli.common import load_model_with_weights
    from kvplan.hardware import gpus
    from kvplan.sglang.fit import plan_sglang_fit
    from kvplan.sglang.model_override import deployment_config_overrides
    from kvplan.sglang.speculative import target_weights_bytes
    from kvplan.units import parse_bytes
    from kvplan.vllm.memory.weights import given_or_estimated_weights

    overrides = deployment_config_overrides(dep.json_model_override_args)  # the draft's config takes them too
    spec, stored = load_model_with_weights(model, params.get("revision"), quiet=quiet, hf_overrides=overrides)
    chip = gpus.get_gpu(str(params["gpu"]), params.get("gpus_file"))
    if params.get("gpu_total_bytes") is not None:
        chip = chip.with_cuda_total(parse_bytes(params["gpu_total_bytes"], what="--gpu-total-bytes"))
    given = parse_bytes(params["weights_memory"], what="--weights-memory") if params.get("weights_memory") else None
    draft = None
    path = dep.speculative_draft_model_path
    if path == model:  # the target's own checkpoint (an MTP draft), named as plan_sglang_fit names the target
        from dataclasses import replace

        dep = replace(dep, speculative_draft_model_path=spec.name)
    w, low, high = target_weights_bytes(spec, dep, arch=chip.arch, given=given,
                                        total_bytes=stored.bytes if stored else None)
    if path is not None and path != spec.name and path != model and \
            str(dep.speculative_algorithm).upper() != "NGRAM":
        draft, draft_stored = load_model_with_weights(path, None, quiet=quiet, hf_overrides=overrides)
        if given is None:  # SGLang loads the draft's weights before it sizes the pool, split by the target's TP
            dw, dlow, dhigh = given_or_estimated_weights(draft, given=None, tp=dep.tp, pp=dep.pp, arch=chip.arch,
                                                         total_bytes=draft_stored.bytes if draft_stored else None)
            w, low, high = w + dw, low + dlow, high + dhigh
    measured = None
    if params.get("sglang_weight_log") is not None:
        from kvplan.sglang.budget import free_memory_from_log

        measured = free_memory_from_log(str(params["sglang_weight_log"]))
        w = low = high = int((measured.pre_gib - measured.avail_gib) * (1 << 30))
    return plan_sglang_fit(spec, chip, dep, weights_bytes=w, weights_range=(low, high), measured=measured,
                           draft=draft)


def plan_sglang_beside(params: dict[str, Any], *, model: str, tp: int, pp: int, context: int | None) -> Any:
    """`--engine both`: SGLang's plan of the deployment vLLM's flags describe. SGLang's own flags win where given;
    its TP is vLLM's (-tp and --tp are one option, kvplan.cli.options; or --num-gpus's, or the --vllm-cmd line's)
    and its --context-length defaults to a given --max-model-len (one deployment: a different one is refused)."""
    from dataclasses import replace

    from kvplan.errors import InvalidParameter

    if params.get("gpu") is None:
        raise InvalidParameter("--engine both needs --gpu (one deployment on one GPU type)")
    from kvplan.sglang.defaults import check_deployment

    dep = _deployment(params, {}, check=False)  # its TP is vLLM's: checked once that is in
    if dep.context_length is not None and dep.context_length != context:
        vllm_len = f"--max-model-len {context}" if context is not None else "default max_model_len"
        raise InvalidParameter(f"--engine both compares one deployment: SGLang's --context-length "
                               f"{dep.context_length} differs from vLLM's {vllm_len}",
                               hint="give --max-model-len alone (SGLang's --context-length follows it)")
    if pp != 1:
        raise InvalidParameter("--engine both: pipeline parallelism is not modelled for SGLang yet")
    dep = replace(dep, tp=tp, context_length=dep.context_length if dep.context_length is not None else context)
    check_deployment(dep)
    return _plan(model, params, dep, quiet=True)


def _sweep(model: str, params: dict[str, Any], dep: Any, *, json_: bool) -> None:
    """`kvplan fit MODEL --engine sglang` without --gpu: every catalog GPU at its smallest starting TP."""
    from dataclasses import replace

    from kvplan.cli.common import load_model_with_weights
    from kvplan.cli.console import out, print_json
    from kvplan.hardware import gpus
    from kvplan.sglang.fit import check_model
    from kvplan.sglang.model_override import deployment_config_overrides
    from kvplan.sglang.speculative import target_weights_bytes
    from kvplan.sglang.sweep import sweep_sglang
    from kvplan.units import parse_bytes

    spec, stored = load_model_with_weights(model, params.get("revision"), quiet=json_,
                                           hf_overrides=deployment_config_overrides(dep.json_model_override_args))
    check_model(spec, dep)  # a refusal for every GPU and TP: bad input, not "no GPU serves it"
    given = parse_bytes(params["weights_memory"], what="--weights-memory") if params.get("weights_memory") else None

    def weights(chip: Any, tp: int) -> tuple[int, int, int]:
        return target_weights_bytes(spec, replace(dep, tp=tp), arch=chip.arch, given=given,
                                    total_bytes=stored.bytes if stored else None)

    report = sweep_sglang(spec, list(gpus.load_catalog(params.get("gpus_file")).values()), dep, weights,
                          revision=params.get("revision"))
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("fit-sweep-sglang", report))
    else:
        from kvplan.render.sglang_fit import render_sglang_sweep

        out().print(render_sglang_sweep(report))
    if not report.rows:
        from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

        raise typer.Exit(EXIT_CHECK_FAILED)  # no catalog GPU serves it
