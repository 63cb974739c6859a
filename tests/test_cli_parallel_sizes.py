"""Every command that takes a tensor- or pipeline-parallel size takes vLLM's spellings (-tp / --tensor-parallel-size,
-pp / --pipeline-parallel-size) and SGLang's (--tp / --tp-size, --pp / --pp-size) under either engine, as one
setting (kvplan/cli/options.py); both spellings with different values are one error line and exit 2."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app as app_module
from kvplan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
QWEN = str(ROOT / "tests/fixtures/configs/Qwen--Qwen2.5-7B")
LLAMA = str(ROOT / "tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B")
runner = CliRunner()

# Each command (and engine) with the arguments of one run, and where its JSON document says the TP and PP sizes.
RUNS: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...] | None]] = {
    "size": (["size", QWEN], ("tp",), ("pp",)),
    "size --engine sglang": (["size", QWEN, "--engine", "sglang"], ("tp",), None),
    "fit": (["fit", QWEN, "--gpu", "h100"], ("deployment", "tp"), ("deployment", "pp")),
    "fit --engine sglang": (["fit", QWEN, "--gpu", "h100", "--engine", "sglang"], ("tp",), ("pp",)),
    "fit --engine both": (["fit", QWEN, "--gpu", "h100", "--engine", "both"], ("tp",), None),
    "roofline": (["roofline", QWEN, "--gpu", "h100", "--batch", "1,8"], ("tp",), None),
    "roofline --engine sglang": (["roofline", QWEN, "--gpu", "h100", "--batch", "1,8", "--engine", "sglang"],
                                 ("tp",), None),
    "simulate prefix": (["simulate", "prefix", "--model", QWEN, "--gpu", "h100", "--docs", "2", "--doc-tokens", "64"],
                        ("deployment", "tp"), ("deployment", "pp")),
    "simulate serve": (["simulate", "serve", "--model", QWEN, "--gpu", "h100", "--num-requests", "4"],
                       ("deployment", "tp"), ("deployment", "pp")),
    "diagnose": (["diagnose", str(ROOT / "examples/metrics.prom"), "--plan", QWEN, "--gpu", "h100"], None, None),
    "calibrate": (["calibrate", str(ROOT / "examples/vllm-startup.log"), "--model", LLAMA, "--gpu", "h100"],
                  ("settings", "tp"), ("settings", "pp")),
}
TP_SPELLINGS = ("-tp", "--tensor-parallel-size", "--tp", "--tp-size")
PP_SPELLINGS = ("-pp", "--pipeline-parallel-size", "--pp", "--pp-size")


def _doc(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.stderr  # 1: a verdict (it would not start), not an error
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _at(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = doc
    for key in path:
        value = value[key]
    return value


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_spelling_of_the_tp_size_is_the_same_plan(name: str) -> None:
    args, tp_at, _ = RUNS[name]
    docs = [_doc([*args, spelling, "2"]) for spelling in TP_SPELLINGS]
    assert all(doc == docs[0] for doc in docs[1:]), name
    assert docs[0] != _doc(args)  # TP 2 changed the plan: the spelling was not dropped
    if tp_at is not None:
        assert _at(docs[0], tp_at) == 2


@pytest.mark.parametrize("name", sorted(n for n, (_, _, pp_at) in RUNS.items() if pp_at is not None))
def test_every_spelling_of_the_pp_size_is_the_same_plan(name: str) -> None:
    args, _, pp_at = RUNS[name]
    assert pp_at is not None
    docs = [_doc([*args, spelling, "2"]) for spelling in PP_SPELLINGS]
    assert all(doc == docs[0] for doc in docs[1:]), name
    assert _at(docs[0], pp_at) == 2


@pytest.mark.parametrize("name", sorted(RUNS))
@pytest.mark.parametrize(("given", "message"), [
    (("-tp", "2", "--tp", "4"), "-tp/--tensor-parallel-size 2 and --tp/--tp-size 4 set the tensor-parallel size "
                                "twice, to different values: they are one setting, give one of them"),
    (("--tp-size", "4", "--tensor-parallel-size", "2"), "-tp/--tensor-parallel-size 2 and --tp/--tp-size 4 set the "
     "tensor-parallel size twice, to different values: they are one setting, give one of them"),
    (("--pp", "2", "-pp", "1"), "-pp/--pipeline-parallel-size 1 and --pp/--pp-size 2 set the pipeline-parallel size "
                                "twice, to different values: they are one setting, give one of them"),
])
def test_both_spellings_with_different_values_are_one_error_line(name: str, given: tuple[str, ...],
                                                                message: str) -> None:
    args, _, _ = RUNS[name]
    if given[0].startswith(("-pp", "--pp")) and name.startswith("roofline"):
        pytest.skip("roofline takes no pipeline-parallel size (pipeline stages are not in its speed model)")
    result = runner.invoke(app, [*args, *given])
    line = f"Error: {message} (see 'kvplan {' '.join(args[:2] if args[0] == 'simulate' else args[:1])} -h')\n"
    assert (result.exit_code, result.stderr, result.stdout) == (2, line, ""), result.stderr


def test_both_spellings_with_the_same_value_are_that_value() -> None:
    args, _, _ = RUNS["fit --engine sglang"]
    assert _doc([*args, "-tp", "2", "--tp", "2"]) == _doc([*args, "--tp-size", "2"])


def test_sglangs_typed_sizes_plan_what_a_pasted_launch_line_does() -> None:
    # -tp / -pp under --engine sglang are SGLang's --tp-size / --pp-size: the plan of the same launch_server line
    typed = _doc(["fit", QWEN, "--gpu", "h100", "--engine", "sglang", "-tp", "2", "-pp", "2"])
    pasted = _doc(["fit", "--gpu", "h100", "--sglang-cmd",
                   f"python -m sglang.launch_server --model-path {QWEN} --tp-size 2 --pp-size 2"])
    assert (typed["tp"], typed["pp"]) == (2, 2)
    assert typed == pasted


def _click_commands() -> dict[str, Any]:
    built = {}
    for name in app_module.COMMANDS:
        command = app_module._build_command(name)
        subcommands = getattr(command, "commands", None)
        if subcommands:
            built.update({f"{name} {sub}": cmd for sub, cmd in subcommands.items()})
        else:
            built[name] = command
    return built


def test_every_command_with_a_parallel_size_takes_all_four_spellings() -> None:
    with_tp, with_pp = set(), set()
    for name, command in _click_commands().items():
        names = {opt for param in command.params for opt in param.opts}
        if names & set(TP_SPELLINGS):
            assert set(TP_SPELLINGS) <= names, name
            with_tp.add(name)
        if names & set(PP_SPELLINGS):
            assert set(PP_SPELLINGS) <= names, name
            with_pp.add(name)
    assert with_tp == {"size", "fit", "roofline", "simulate prefix", "simulate serve", "diagnose", "calibrate"}
    assert with_pp == with_tp - {"roofline"}
