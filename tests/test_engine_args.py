"""The one table of vLLM's engine arguments (kvplan/vllm/engine_args.py), walked through every surface that reads
vLLM settings: a pasted `vllm serve` line, a plan file's `vllm:` mapping and `vllm_cmd`, `kvplan fit`'s options,
and `kvplan calibrate`'s suggested flags. The same value gives the same ServeSettings on each.

vLLM's own names come from tests/fixtures/vllm-0.33-engine-args.json (extracted from the vllm 0.33.0 wheel's
engine/arg_utils.py and the API server's argument files; the file records how and their sha256)."""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from kvplan.ci.plan import load_plan, parse_plan, parse_yaml
from kvplan.vllm import defaults
from kvplan.vllm.command_line import classify_ignored, parse_vllm_command
from kvplan.vllm.engine_args import BY_NAME, ENGINE_ARGS, SETTING_ARGS, EngineArg, fit_options, lookup, suggested_flags
from kvplan.vllm.flags import settings_from_flags
from kvplan.vllm.settings import ServeSettings

FIXTURES = Path(__file__).parent / "fixtures"

VLLM_033 = json.loads((FIXTURES / "vllm-0.33-engine-args.json").read_text())
ENGINE_FLAGS: dict[str, dict[str, Any]] = {n: row for row in VLLM_033["engine_args"] for n in row["names"]}
FRONTEND_FLAGS = frozenset(VLLM_033["frontend"])
# vLLM's argument group title (its config dataclass) → the table's `config`; VllmConfig's own fields are its
# sub-configs (speculative_config …) or VllmConfig's (performance_mode).
GROUPS = {"ModelConfig": {"model"}, "CacheConfig": {"cache"}, "ParallelConfig": {"parallel"},
          "SchedulerConfig": {"scheduler"}, "LoRAConfig": {"lora"}, "MultiModalConfig": {"multimodal"},
          "OffloadConfig": {"offload"}, "LoadConfig": {"load"}, "ObservabilityConfig": {"observability"},
          "LoggingConfig": {"observability"}, "StructuredOutputsConfig": {"structured_outputs"},
          "VllmConfig": {"speculative", "compilation", "kv_transfer", "vllm"}, "EngineArgs": {"engine"}}

# One real value per settings row (text as typed), and the ServeSettings value it gives.
SAMPLES: dict[str, tuple[str, Any]] = {
    "tensor_parallel_size": ("2", 2), "pipeline_parallel_size": ("2", 2), "gpu_memory_utilization": ("0.8", 0.8),
    "max_model_len": ("8192", 8192), "max_num_seqs": ("64", 64), "max_num_batched_tokens": ("4096", 4096),
    "kv_cache_dtype": ("fp8", "fp8"), "block_size": ("32", 32), "kv_cache_memory_bytes": ("1GiB", 2**30),
    "enforce_eager": ("", True), "enable_prefix_caching": ("", True),
    "disable_hybrid_kv_cache_manager": ("", True), "performance_mode": ("throughput", "throughput"),
    "speculative_config": ('{"method": "ngram", "num_speculative_tokens": 2}',
                           {"method": "ngram", "num_speculative_tokens": 2}),
    "compilation_config": ('{"cudagraph_mode": "PIECEWISE"}', {"cudagraph_mode": "PIECEWISE"}),
    "kv_transfer_config": ('{"kv_connector": "NixlConnector", "kv_role": "kv_both"}',
                           {"kv_connector": "NixlConnector", "kv_role": "kv_both"}),
    "decode_context_parallel_size": ("2", 2), "prefill_context_parallel_size": ("2", 2),
    "data_parallel_size": ("2", 2), "enable_expert_parallel": ("", True), "trust_remote_code": ("", True),
    "dtype": ("bfloat16", "bfloat16"), "mamba_cache_dtype": ("float32", "float32"),
    "mamba_ssm_cache_dtype": ("float32", "float32"), "num_gpu_blocks_override": ("1000", 1000),
    "cpu_offload_gb": ("2", 2 * 2**30), "kv_offloading_size": ("4", 4.0),
    "kv_offloading_backend": ("lmcache", "lmcache"),
    "quantization": ("fp8", "fp8"), "enable_lora": ("", True), "async_scheduling": ("", True),
    "max_loras": ("4", 4), "max_lora_rank": ("32", 32), "limit_mm_per_prompt": ('{"image": 2}', None),
    "language_model_only": ("", True), "enable_mm_embeds": ("", True),
    "mm_encoder_tp_mode": ("data", "data"),
}
MODEL = "Qwen/Qwen2.5-7B"


def _words(arg: EngineArg, spelling: str, text: str) -> list[str]:
    return [spelling] if arg.kind == "bool" else [spelling, text]


def _pasted(words: list[str]) -> ServeSettings:
    command = parse_vllm_command(shlex.join(["vllm", "serve", MODEL, *words]))
    assert command.ignored == ()
    return settings_from_flags(dict(command.options))


def _fit_command() -> Any:
    from kvplan.cli import fit

    app = typer.Typer()
    app.command()(fit.command)
    return typer.main.get_command(app)


def _fit(words: list[str]) -> ServeSettings:
    """What `kvplan fit MODEL WORDS…` sets: Click parses the Typer options, `given` is built as fit builds it."""
    params = _fit_command().make_context("fit", [MODEL, *words]).params
    given: dict[str, object] = {arg.name: params[arg.name] for arg in fit_options()}
    return settings_from_flags(given)


def _plan(key: str, value: object, tmp_path: Path) -> ServeSettings:
    text = ("deployments:\n  - name: d\n    model: " + MODEL + "\n    gpu: h100\n    require: {starts: true}\n"
            f"    vllm: {{{json.dumps(key)}: {json.dumps(value)}}}\n")
    plan = parse_plan(parse_yaml(text, "plan.yaml"), base_dir=tmp_path)
    assert plan.deployments[0].warnings == ()
    return plan.deployments[0].settings


def _expected(arg: EngineArg) -> Any:
    text, value = SAMPLES[arg.name]
    if arg.kind == "mm_limits":
        from kvplan.vllm.multimodal import parse_mm_limits

        return parse_mm_limits(text)
    return value


def test_every_settings_row_has_a_sample() -> None:
    assert set(SAMPLES) == {arg.name for arg in SETTING_ARGS}


@pytest.mark.parametrize("arg", ENGINE_ARGS, ids=lambda a: a.name)
def test_every_row_is_vllm_033s_flag_in_its_config_group(arg: EngineArg) -> None:
    if arg.removed:  # an older release's flag, still read: vLLM 0.33 has it nowhere
        assert arg.flag not in ENGINE_FLAGS and arg.flag not in FRONTEND_FLAGS and arg.effect != "modelled"
        return
    if arg.config == "frontend":
        assert arg.flag in FRONTEND_FLAGS and arg.flag not in ENGINE_FLAGS
        assert all(alias in FRONTEND_FLAGS for alias in arg.aliases)
        return
    row = ENGINE_FLAGS[arg.flag]
    assert arg.config in GROUPS[row["group"]]
    # Each alias is one of the same add_argument call's names, except argparse's abbreviation --kv-cache-memory.
    assert [a for a in arg.aliases if a not in row["names"]] == (["--kv-cache-memory"] if arg.name ==
                                                                  "kv_cache_memory_bytes" else [])


def test_every_modelled_switch_has_its_negation() -> None:
    """vLLM 0.33 gives every bool config field `--x/--no-x` (engine/arg_utils.py:_compute_kwargs:
    argparse.BooleanOptionalAction); enable_lora gets it explicitly."""
    assert [a.name for a in SETTING_ARGS if a.kind == "bool" and not a.negatable] == []


def test_each_default_names_kvplans_version_rule() -> None:
    for arg in ENGINE_ARGS:
        if arg.default_from:
            assert hasattr(defaults, arg.default_from), arg.name


def test_every_settings_field_exists_and_is_set_by_one_row() -> None:
    """Each modelled row sets one field, of the nested config its `config` column names (ServeSettings'
    model_config for "model" …; a top-level field for VllmConfig's own and the JSON objects kept as given)."""
    import dataclasses

    from kvplan.vllm.configs import CONFIG_ATTRS, SETTING_PATHS, field_names

    fields = [a.field for a in SETTING_ARGS]
    assert len(fields) == len(set(fields))
    for arg in SETTING_ARGS:
        group = CONFIG_ATTRS[arg.config]
        owner = field_names(type(getattr(ServeSettings(), group))) if group else {
            f.name for f in dataclasses.fields(ServeSettings)}
        assert arg.field in owner, arg.name
        assert SETTING_PATHS[arg.field] == (group, arg.field)
    assert SETTING_PATHS["tensor_parallel_size"] == ("parallel_config", "tensor_parallel_size")
    assert SETTING_PATHS["max_num_seqs"] == ("scheduler_config", "max_num_seqs")


@pytest.mark.parametrize("arg", SETTING_ARGS, ids=lambda a: a.name)
def test_a_value_gives_the_same_setting_on_every_surface(arg: EngineArg, tmp_path: Path) -> None:
    """The canonical flag, each alias, in a pasted line, `kvplan fit`, a plan's `vllm:` mapping (each spelling
    as a key) and its `vllm_cmd`: the same ServeSettings."""
    assert arg.field is not None
    text, _ = SAMPLES[arg.name]
    expected = _expected(arg)
    reference = _pasted(_words(arg, arg.flag, text))
    assert reference.value(arg.field) == expected
    for spelling in (arg.flag, *arg.aliases):
        assert _pasted(_words(arg, spelling, text)) == reference, spelling
        if arg.fit_option:
            assert _fit(_words(arg, spelling, text)) == reference, spelling
        key = spelling.lstrip("-")
        plan_value = True if arg.kind == "bool" else text
        assert _plan(key, plan_value, tmp_path) == reference, key
        assert _plan(key.replace("-", "_"), plan_value, tmp_path) == reference, key
    cmd = shlex.join(["vllm", "serve", MODEL, *_words(arg, arg.flag, text)])
    text_plan = ("deployments:\n  - name: d\n    gpu: h100\n    require: {starts: true}\n"
                 f"    vllm_cmd: {json.dumps(cmd)}\n")
    deployment = parse_plan(parse_yaml(text_plan, "plan.yaml"), base_dir=tmp_path).deployments[0]
    assert deployment.warnings == () and deployment.settings == reference


@pytest.mark.parametrize("arg", [a for a in SETTING_ARGS if a.negatable], ids=lambda a: a.name)
def test_every_negation_is_read_on_every_surface(arg: EngineArg, tmp_path: Path) -> None:
    assert arg.field is not None
    negated = "--no-" + arg.flag[2:]
    reference = _pasted([negated])
    assert reference.value(arg.field) is False
    if arg.fit_option:
        assert _fit([negated]) == reference
    assert _plan(negated[2:], True, tmp_path) == reference
    assert _plan(arg.flag[2:], False, tmp_path) == reference
    assert lookup(negated) == (arg, False)


def test_fit_has_an_option_for_each_row_it_names() -> None:
    """Each row with `fit_option` is a parameter of `kvplan fit` spelled as vLLM spells it (flag, aliases,
    negation); the others are read from --vllm-cmd only."""
    options = {p.name: p for p in _fit_command().params if p.param_type_name == "option"}
    for arg in fit_options():
        spellings = set(options[arg.name].opts) | set(options[arg.name].secondary_opts)
        assert {arg.flag, *arg.aliases} <= spellings, arg.name
        if arg.negatable:
            assert "--no-" + arg.flag[2:] in spellings, arg.name
    assert {a.name for a in ENGINE_ARGS if a.effect == "modelled" and not a.fit_option} == {
        "model", "disable_hybrid_kv_cache_manager", "performance_mode"}


@pytest.mark.parametrize("arg", [a for a in SETTING_ARGS if a.fit_option], ids=lambda a: a.name)
def test_calibrates_suggested_flags_give_the_settings_back(arg: EngineArg) -> None:
    assert arg.field is not None
    words = _words(arg, arg.flag, SAMPLES[arg.name][0])
    if _pasted(words).value(arg.field) == ServeSettings().value(arg.field):  # on by default: the negation
        words = ["--no-" + arg.flag[2:]]
    settings = _pasted(words)
    flags = suggested_flags(settings, ServeSettings())
    assert len(flags) == 1 and flags[0].split(" ", 1)[0] == words[0]
    assert _fit(shlex.split(flags[0])) == settings


@pytest.mark.parametrize("arg", [a for a in ENGINE_ARGS if a.effect == "ignored"], ids=lambda a: a.name)
def test_an_ignored_flag_is_said_ignored_everywhere(arg: EngineArg, tmp_path: Path) -> None:
    words = [arg.flag] if arg.kind == "bool" else [arg.flag, "x"]
    command = parse_vllm_command(shlex.join(["vllm", "serve", MODEL, *words, "--max-model-len", "4096"]))
    assert command.options == {"max_model_len": "4096"}  # a switch did not swallow the next flag
    shown = [f"{arg.flag}{' ***' if arg.secret else ' x'}" if arg.kind != "bool" else arg.flag]
    assert classify_ignored(command.ignored) == (shown, [], [])
    assert _plan(arg.name, True if arg.kind == "bool" else "x", tmp_path) == _pasted([])  # no warning either
    settings = _pasted(["--max-model-len", "4096"])
    cmd = shlex.join(["vllm", "serve", MODEL, *words, "--max-model-len", "4096"])
    plan = ("deployments:\n  - name: d\n    gpu: h100\n    require: {starts: true}\n"
            f"    vllm_cmd: {json.dumps(cmd)}\n")
    deployment = parse_plan(parse_yaml(plan, "plan.yaml"), base_dir=tmp_path).deployments[0]
    assert deployment.warnings == () and deployment.settings == settings


def test_an_unmodelled_flag_warns_with_its_reason(tmp_path: Path) -> None:
    command = parse_vllm_command("vllm serve M --swap-space 4")
    assert classify_ignored(command.ignored) == ([], [f"--swap-space 4: {BY_NAME['swap_space'].note}"], [])
    text = ("deployments:\n  - name: d\n    model: M\n    gpu: h100\n    require: {starts: true}\n"
            "    vllm_cmd: vllm serve M --swap-space 4\n")
    (tmp_path / "plan.yaml").write_text(text)
    warnings = load_plan(tmp_path / "plan.yaml").deployments[0].warnings
    note = BY_NAME["swap_space"].note
    assert len(warnings) == 1 and warnings[0].endswith(f"--swap-space: {note}; planned without it")


def test_the_disagreements_the_table_fixed(tmp_path: Path) -> None:
    """Each spelling below was read by one surface and refused or dropped by another before the table."""
    base = _pasted([])
    # --device-memory-utilization: a pasted line's, an "unknown key" in a plan.
    assert _plan("device-memory-utilization", 0.8, tmp_path).cache_config.gpu_memory_utilization == 0.8
    # -q: a pasted line's, not a plan key; -ep and -sc: vLLM 0.33's, read nowhere (a pasted -ep was unknown).
    assert _plan("q", "fp8", tmp_path).model_config.quantization == "fp8"
    assert _pasted(["-ep"]).parallel_config.enable_expert_parallel
    assert _plan("ep", True, tmp_path).parallel_config.enable_expert_parallel
    assert _pasted(["-sc", '{"method": "ngram"}']).speculative_config == {"method": "ngram"}
    # --no-trust-remote-code / --no-enable-lora: vLLM's negations, read by no surface.
    assert _pasted(["--no-enable-lora"]) == base and _pasted(["--no-trust-remote-code"]) == base
    # --no-enable-expert-parallel / --no-disable-hybrid-kv-cache-manager: a pasted line's, unknown plan keys.
    assert _plan("no-enable-expert-parallel", True, tmp_path) == base
    no_hma = _plan("no-disable-hybrid-kv-cache-manager", True, tmp_path)
    assert no_hma.scheduler_config.disable_hybrid_kv_cache_manager is False
    # --kv-cache-memory (argparse's abbreviation): a pasted line's and a plan's, not `kvplan fit`'s.
    assert _fit(["--kv-cache-memory", "1GiB"]).cache_config.kv_cache_memory_bytes == 2**30
    # A bool that is ignored on a pasted line (--disable-custom-all-reduce …) was "unknown" in a plan file.
    assert _plan("disable-custom-all-reduce", True, tmp_path) == base
    # --block-size above kvplan's bound: refused by `kvplan fit`, accepted by a plan file.
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match="at most 65,536"):
        _plan("block-size", 2**17, tmp_path)


def test_a_startup_logs_echoed_command_reads_the_tables_spellings() -> None:
    """kvplan/vllm/startup_log.py takes its aliases and switches from the table: --device-memory-utilization
    in an echoed `vllm serve` line was dropped before."""
    from kvplan.vllm.startup_log import parse_startup_log

    log = parse_startup_log("INFO 01-01 api_server.py:1] vllm serve org/m --device-memory-utilization 0.8 -tp 2 "
                            "-q fp8 --no-enable-prefix-caching --enforce-eager")
    assert (log.settings.cache_config.gpu_memory_utilization, log.settings.parallel_config.tensor_parallel_size,
            log.settings.model_config.quantization) == (0.8, 2, "fp8")
    assert (log.settings.cache_config.enable_prefix_caching, log.settings.model_config.enforce_eager) == (False, True)


def test_mm_encoder_tp_mode_takes_vllms_two_values() -> None:
    """config/multimodal.py: MMEncoderTPMode = Literal["weights", "data"]; anything else is refused in one line."""
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.flags import settings_from_flags

    assert settings_from_flags({"mm_encoder_tp_mode": "DATA"}).multimodal_config.mm_encoder_tp_mode == "data"
    with pytest.raises(InvalidParameter, match=r"^--mm-encoder-tp-mode must be weights or data, got 'bogus'$"):
        settings_from_flags({"mm_encoder_tp_mode": "bogus"})
