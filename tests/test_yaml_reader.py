"""The one bounded YAML reader (kvplan/yaml_reader.py): plan files and GPU files share its limits, and a
document nested too deeply is refused before PyYAML reads (and recurses into) it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan import yaml_reader
from kvplan.ci import plan
from kvplan.errors import KvplanError, ParseError
from kvplan.hardware import gpus

ROOT = Path(__file__).resolve().parent.parent


def _depth(data: Any) -> int:
    if isinstance(data, dict):
        return 1 + max((_depth(v) for v in data.values()), default=0)
    if isinstance(data, list):
        return 1 + max((_depth(v) for v in data), default=0)
    return 0


def _nested(depth: int) -> Any:
    """Mappings and sequences alternating, `depth` levels deep."""
    data: Any = "x"
    for level in range(depth):
        data = {"k": data, "n": 1} if level % 2 else [data, 2]
    return data


@pytest.fixture
def no_pyyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyYAML must not be reached (the packaged GPU catalog is read first: it is kvplan's own, cached)."""
    gpus.load_catalog()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("PyYAML was called")

    for name in ("compose", "safe_load", "scan", "load"):
        monkeypatch.setattr(yaml, name, refuse)


DEEP = ["[" * 1000 + "]" * 1000, "[" * 100_000, "{a: " * 500 + "}" * 500,
        "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 200)), "- " * 300 + "x\n"]


@pytest.mark.parametrize("text", DEEP, ids=["flow-1000", "unclosed-100000", "flow-maps", "block-200", "dashes-300"])
def test_deep_nesting_is_refused_before_pyyaml_reads_it(text: str, no_pyyaml: None, tmp_path: Path) -> None:
    with pytest.raises(ParseError) as info:
        plan.parse_yaml(text, "plan.yaml")
    message = str(info.value)
    assert message.startswith("plan.yaml:") and message.endswith(": nested deeper than 40 levels: refused")
    assert "\n" not in message
    path = tmp_path / "gpus.yaml"
    path.write_text(text)
    with pytest.raises(KvplanError) as gpu_info:
        gpus.load_catalog(path)
    assert str(gpu_info.value).endswith(": nested deeper than 40 levels: refused")  # the same limit, worded alike


@pytest.mark.parametrize("style", [True, False], ids=["flow", "block"])
def test_a_document_nested_max_depth_deep_still_reads(style: bool) -> None:
    text = yaml.safe_dump(_nested(yaml_reader.MAX_DEPTH), default_flow_style=style)
    assert _depth(yaml.safe_load(text)) == yaml_reader.MAX_DEPTH
    yaml_reader.check_nesting(text, "doc")  # passes the text check …
    assert yaml_reader.load(text, "doc") == _nested(yaml_reader.MAX_DEPTH)  # … and reads


@pytest.mark.parametrize("depth", [1, 2, 5, 13, 40])
@pytest.mark.parametrize("style", [True, False, None], ids=["flow", "block", "mixed"])
def test_the_measured_depth_is_never_below_pyyamls_nor_above_twice_it(depth: int, style: bool | None) -> None:
    text = yaml.safe_dump(_nested(depth), default_flow_style=style)
    measured, _ = yaml_reader.nesting_depth(text, limit=10**6)
    assert depth <= measured <= 2 * depth + 2


def test_the_measure_holds_for_every_yaml_file_of_the_repository() -> None:
    files = [*ROOT.glob("examples/*.yaml"), *ROOT.glob("tests/fixtures/**/*.yaml"), ROOT / "kvplan/hardware/gpus.yaml"]
    assert len(files) >= 5
    for path in files:
        text = path.read_text()
        measured, _ = yaml_reader.nesting_depth(text, limit=10**6)
        assert _depth(yaml.safe_load(text)) <= measured <= 2 * yaml_reader.MAX_DEPTH, path


def test_quotes_comments_and_block_scalars_are_not_structure() -> None:
    for text in ["a: 'it''s [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['\n",
                 'a: "\\" [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["\n',
                 "a: 1  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n",
                 "a: |\n  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\nb: 2\n"]:
        assert yaml_reader.nesting_depth(text)[0] <= 2, text
        yaml_reader.check_nesting(text, "doc")


def test_plans_and_gpu_files_share_the_limits() -> None:
    assert plan.MAX_NODES == yaml_reader.MAX_NODES and plan.MAX_DEPTH == yaml_reader.MAX_DEPTH
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, n in zip("abcde", "bcdef", strict=True))
    with pytest.raises(ParseError, match=f"more than {yaml_reader.MAX_NODES:,} YAML nodes once aliases are expanded"):
        yaml_reader.load("gpus: []\n" + bomb, "gpus.yaml")
    with pytest.raises(ParseError, match=f"more than {yaml_reader.MAX_NODES:,} YAML nodes"):
        plan.parse_yaml(bomb + "z: *f\n", "plan.yaml")


def test_syntax_errors_stay_one_line_in_each_files_form() -> None:
    with pytest.raises(ParseError) as plan_error:
        plan.parse_yaml("deployments: {\n", "plan.yaml")
    assert str(plan_error.value) == "plan.yaml:2: not valid YAML: expected the node content, but found '<stream end>'"
    with pytest.raises(ParseError) as gpu_error:
        yaml_reader.load("gpus:\n  - id: [unclosed\n", "gpus.yaml")
    assert str(gpu_error.value).startswith("gpus.yaml: not valid YAML at line 3, column 1: ")
    assert "\n" not in str(gpu_error.value)
