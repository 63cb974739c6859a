"""The package's architecture, pinned by static analysis of kvplan/ (no module is imported).

* no import cycle among kvplan modules, counting every import anywhere in a module;
* imports point one way: base < model < hardware < vllm < sglang < sim < observe < ci < api < render < cli;
* no function over 80 lines outside kvplan/cli/ (whose commands are long Typer option lists);
* typer, rich and huggingface_hub stay at the edges: huggingface_hub in kvplan/model/hub.py only,
  rich in kvplan/render/ and kvplan/cli/, typer in kvplan/cli/;
* per-architecture knowledge stays in the registry: outside kvplan/model/architectures/ no module tests a
  model_type against a literal (the reader included), no module outside the reader (kvplan/model/config.py,
  reader.py, spelt.py, families/) reads a `.raw` config, and an architecture name (`…For…`) is written only in the
  registry and in the engines' own per-architecture tables listed in ENGINE_ARCHITECTURE_TABLES.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "kvplan"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("kvplan.errors", "kvplan.units", "kvplan.text", "kvplan.files", "kvplan.yaml_reader",
              "kvplan.command_words", "kvplan.verdict")),
    ("model", ("kvplan.model",)),
    ("hardware", ("kvplan.hardware",)),
    ("vllm", ("kvplan.vllm",)),
    ("sglang", ("kvplan.sglang",)),
    ("sim", ("kvplan.sim",)),
    ("observe", ("kvplan.observe",)),
    ("ci", ("kvplan.ci",)),
    ("api", ("kvplan.api",)),
    ("render", ("kvplan.render",)),
    ("cli", ("kvplan.cli",)),
)
EXEMPT_FROM_LAYERS = frozenset({"kvplan", "kvplan.__main__"})
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS_ALLOWED_UNDER = ("kvplan.cli",)
# Where the raw config may be read: the reader and the registry.
ARCHITECTURE_KNOWLEDGE = ("kvplan.model.config", "kvplan.model.reader", "kvplan.model.spelt", "kvplan.model.families",
                          "kvplan.model.architectures")
# Where a model_type may be tested against literal names: the registry only (the reader asks it: ModelTypeRules).
MODEL_TYPE_NAMES_IN = ("kvplan.model.architectures",)
# vLLM's registry names (model_executor/models/registry.py: `…ForCausalLM`, `…ForConditionalGeneration` …).
ARCHITECTURE_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*For[A-Z][A-Za-z0-9_]*")
# Modules outside the registry that hold an engine's own table keyed by architecture names, copied from its source
# as it stands (each cites it), with how many names each holds: a new name anywhere else fails, and so does one
# added here without raising its count. A fact about a family kvplan models goes on its Family instead.
ENGINE_ARCHITECTURE_TABLES: dict[str, int] = {
    "kvplan.sglang.architectures": 69,  # SGLang's multimodal / transformers-backend registries
    "kvplan.sglang.defaults": 28,  # SGLang server_args' per-architecture backend defaults
    "kvplan.sglang.dsa": 15,  # SGLang's DSA architectures
    "kvplan.sglang.dsv4": 1,  # configs/model_config.py:is_deepseek_v4's architecture
    "kvplan.sglang.mamba": 21,  # SGLang's hybrid (mamba-state) architectures
    "kvplan.sglang.multimodal": 19,  # SGLang's per-architecture multimodal rules
    "kvplan.sglang.pool": 18,  # SGLang's pool-kind architecture lists
    "kvplan.sglang.swa": 7,  # SGLang's SWA architectures
    "kvplan.sglang.speculative": 36,  # speculative_hook.py's MTP / auto-parameter lists, model_config.py's NextN
    "kvplan.vllm.model_runner": 13,  # config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES per release
    "kvplan.vllm.speculative": 1,  # the draft architecture vLLM's speculators conversion assigns
}
_MODEL_TYPE_FIELDS = frozenset({"model_type", "config_model_type", "unnamed_text_model_type"})
# Third-party packages that only some places may import: package -> module prefixes allowed to.
EDGE_PACKAGES: dict[str, tuple[str, ...]] = {
    "huggingface_hub": ("kvplan.model.hub",),
    "rich": ("kvplan.render", "kvplan.cli"),
    "typer": ("kvplan.cli",),
}


@dataclass(frozen=True)
class Import:
    """One import statement's target, as written, and where it is."""

    importer: str
    target: str
    lineno: int

    def where(self) -> str:
        """`module:line imports target`, for test messages."""
        return f"{self.importer}:{self.lineno} imports {self.target}"


def _module_name(path: Path) -> str:
    """The dotted module name of a file under kvplan/ (a package's __init__ is the package)."""
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    """Every kvplan module, by dotted name."""
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


@cache
def _tree(module: str) -> ast.Module:
    """The parsed source of one kvplan module."""
    path = _modules()[module]
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_package(module: str) -> bool:
    """Whether the module is a package (its file is an __init__.py)."""
    return _modules()[module].name == "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a `from … import` names, resolving relative imports."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _raw_imports(module: str) -> list[Import]:
    """Every import in a module, anywhere (module level, functions, TYPE_CHECKING), with `from` names."""
    found: list[Import] = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            found.append(Import(module, source, node.lineno))
            # `from kvplan.cli import check` imports the submodule kvplan.cli.check
            found += [Import(module, f"{source}.{alias.name}", node.lineno) for alias in node.names
                      if f"{source}.{alias.name}" in _modules()]
    return found


def _kvplan_module(target: str) -> str | None:
    """The kvplan module an import target names (its longest known prefix), or None when outside kvplan."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in _modules():
            return name
        parts.pop()
    return None


def _internal_imports() -> list[Import]:
    """Every import of one kvplan module by another, resolved to the kvplan module it names."""
    imports = []
    for module in _modules():
        for imp in _raw_imports(module):
            target = _kvplan_module(imp.target)
            if target is not None and target != module:
                imports.append(Import(module, target, imp.lineno))
    return imports


def _layer(module: str) -> int:
    """The index of a module's layer in LAYERS."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_architecture.py")


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the import graph as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a module is one of prefixes or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_scan_sees_the_package() -> None:
    """The scan finds every folder and resolves the imports it must (guards against a silent empty scan)."""
    modules = _modules()
    expected = {"kvplan", "kvplan.errors", "kvplan.vllm.block_plan", "kvplan.cli.app", "kvplan.cli.exit_codes"}
    assert expected <= set(modules)
    edges = {(i.importer, i.target) for i in _internal_imports()}
    assert ("kvplan.cli.app", "kvplan.cli.check") in edges  # a `from kvplan.cli import check` inside a function
    assert ("kvplan.cli.check", "kvplan.cli.exit_codes") in edges
    for module in modules:
        if module not in EXEMPT_FROM_LAYERS:
            _layer(module)


def test_no_import_cycle() -> None:
    """No kvplan module reaches itself through imports, wherever in a module they are written."""
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], Import] = {}
    for imp in _internal_imports():
        graph.setdefault(imp.importer, set()).add(imp.target)
        where.setdefault((imp.importer, imp.target), imp)
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle:\n  " + "\n  ".join(
        where[(a, b)].where() for a, b in zip(cycle, cycle[1:], strict=False))


def test_imports_point_down_the_layers() -> None:
    """Each module imports only from its own layer or lower ones (kvplan/__init__ and __main__ exempt)."""
    bad = []
    for imp in _internal_imports():
        if imp.importer in EXEMPT_FROM_LAYERS or imp.target in EXEMPT_FROM_LAYERS:
            continue
        low, high = _layer(imp.importer), _layer(imp.target)
        if high > low:
            bad.append(f"{imp.where()} ({LAYERS[low][0]} may not import {LAYERS[high][0]})")
    assert not bad, "imports against the layer order " + " < ".join(n for n, _ in LAYERS) + ":\n  " + "\n  ".join(bad)


def test_no_long_functions_in_the_core() -> None:
    """No function or method outside kvplan/cli/ is over 80 lines (end_lineno - lineno + 1)."""
    long = []
    for module in _modules():
        if _under(module, LONG_FUNCTIONS_ALLOWED_UNDER):
            continue
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module}:{node.lineno} {node.name} is {lines} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines; split them into named stages:\n  " + "\n  ".join(long)


def test_edge_packages_stay_at_the_edges() -> None:
    """huggingface_hub only in kvplan/model/hub.py; rich only in render/ and cli/; typer only in cli/."""
    bad = []
    for module in _modules():
        for imp in _raw_imports(module):
            package = imp.target.split(".")[0]
            allowed = EDGE_PACKAGES.get(package)
            if allowed is not None and not _under(module, allowed):
                bad.append(f"{imp.where()} (allowed only in {', '.join(allowed)})")
    assert not bad, "edge packages imported in the core:\n  " + "\n  ".join(bad)


def _mentions_model_type(node: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    """Whether an expression reads a model_type: `x.model_type` (config_model_type …), a name holding one (or
    assigned one: `mt = model.model_type`), or `….get("model_type")`."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in _MODEL_TYPE_FIELDS:
            return True
        if isinstance(sub, ast.Name) and ("model_type" in sub.id or sub.id in aliases):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get" and any(
                isinstance(a, ast.Constant) and a.value == "model_type" for a in sub.args):
            return True
    return False


def _model_type_aliases(tree: ast.Module) -> frozenset[str]:
    """Names a module assigns a model_type to (`mt = model.model_type`, `h, mt = …, model.model_type`)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (zip(target.elts, node.value.elts, strict=False)
                     if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) else [(target, node.value)])
            found |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _mentions_model_type(v)}
    return frozenset(found)


def _string_literals(node: ast.AST, names: dict[str, ast.AST]) -> bool:
    """Whether an expression is a string literal, a literal collection (or frozenset / dict) of them, or a
    module-level name bound to one."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"frozenset", "set", "tuple"}:
        return bool(node.args) and _string_literals(node.args[0], names)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        return any(_string_literals(e, names) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(k is not None and _string_literals(k, names) for k in node.keys)
    return False


def model_type_literal_tests(tree: ast.Module) -> list[int]:
    """Lines that test a model_type against literal names: `==` / `in` / `not in` a literal (or a module-level
    literal table), `&` with one, `.startswith("…")`, or a literal table indexed by a model_type (`T[mt]`,
    `T.get(mt)`)."""
    names = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Name)}
    names |= {n.target.id: n.value for n in tree.body if isinstance(n, ast.AnnAssign)
              and isinstance(n.target, ast.Name) and n.value is not None}
    aliases = _model_type_aliases(tree)

    def mentions(node: ast.AST) -> bool:
        return _mentions_model_type(node, aliases)

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare | ast.BinOp):
            operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else [node.left, node.right]
            if any(mentions(o) for o in operands) and any(_string_literals(o, names) for o in operands):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"startswith", "endswith"} and mentions(node.func.value) and any(
                    _string_literals(a, names) for a in node.args):
                lines.append(node.lineno)
            elif node.func.attr == "get" and node.args and mentions(node.args[0]) and \
                    _string_literals(node.func.value, names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and mentions(node.slice) and _string_literals(node.value, names):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_model_type_scan_finds_each_form_of_test() -> None:
    """The scan flags every way a module has tested a model_type by name (so the rule below can fail)."""
    source = """
_UNSAFE = frozenset({"gemma2", "glm4"})
_ROPE = {"gpt_oss": 4}
a = model.model_type == "gpt_oss"
b = model.config_model_type in {"gemma3", "gemma3_text"}
c = model.model_type in _UNSAFE
d = str(raw.get("model_type", "")).startswith("gemma")
e = _ROPE.get(model.model_type, 2)
f = _ROPE[spec.model_type]
g = model.architectures[0] == "GptOssForCausalLM"
h = model.model_type in _backend()["model_types"]
size, mt = model.hidden_size, model.model_type
i = mt in _UNSAFE
j = {model.model_type, model.config_model_type} & _UNSAFE
"""
    assert model_type_literal_tests(ast.parse(source)) == [4, 5, 6, 7, 8, 9, 13, 14]


def test_model_types_are_tested_only_by_the_reader_and_the_registry() -> None:
    """Per-architecture knowledge lives in one place (issue 23): outside kvplan/model/architectures/ no module, the
    reader included, compares a model_type with literal names; a rule about a family is a field of its Family (a
    rule vLLM keys by model_type: a ModelTypeRules field, asked with model_types_for)."""
    bad = [f"{module}:{line}" for module in _modules() if not _under(module, MODEL_TYPE_NAMES_IN)
           for line in model_type_literal_tests(_tree(module))]
    assert not bad, ("model_type tested by name outside the registry (add a field to "
                     "kvplan/model/architectures/base.py:Family or ModelTypeRules instead):\n  " + "\n  ".join(bad))


def architecture_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every string constant that is a whole architecture name (`GptOssForCausalLM`); a docstring or
    message that mentions one is not."""
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and ARCHITECTURE_NAME.fullmatch(n.value))


def test_the_architecture_name_scan_finds_names_not_prose() -> None:
    """The scan flags a compared or tabled name, not a sentence naming one (so the rule below can fail)."""
    source = (
        'a = "GptOssForCausalLM" in model.architectures\n'
        'T = frozenset({"MiMoV2FlashForCausalLM", "Gemma3ForConditionalGeneration"})\n'
        '"""models/gpt_oss.py: GptOssForCausalLM"""\n'
        'b = "gpt-oss (GptOssForCausalLM) is refused"\n'
        'c = "LlamaForCausalLM"[0]\n'
    )
    assert architecture_names(ast.parse(source)) == [(1, "GptOssForCausalLM"), (2, "Gemma3ForConditionalGeneration"),
                                                     (2, "MiMoV2FlashForCausalLM"), (5, "LlamaForCausalLM")]


def test_architecture_names_are_written_only_in_the_registry_and_the_engines_tables() -> None:
    """A new architecture-name literal outside kvplan/model/architectures/ fails (issue 23: `"GptOssForCausalLM" in
    model.architectures` becomes a Family field); the engines' own tables keep exactly the names they hold."""
    counts = Counter(module for module in _modules() if not _under(module, ("kvplan.model.architectures",))
                     for _ in architecture_names(_tree(module)))
    assert dict(counts) == ENGINE_ARCHITECTURE_TABLES, (
        "architecture names outside the registry (put the fact on the family's FAMILY in "
        "kvplan/model/architectures/, or, for an engine's own table, its count in ENGINE_ARCHITECTURE_TABLES):\n  "
        + "\n  ".join(f"{m}:{line} {name}" for m in sorted(set(counts) | set(ENGINE_ARCHITECTURE_TABLES))
                       if counts.get(m) != ENGINE_ARCHITECTURE_TABLES.get(m)
                       for line, name in architecture_names(_tree(m))))


def test_nothing_past_the_reader_reads_the_raw_config() -> None:
    """No module outside the reader reads a `.raw` config: what a consumer needs is a typed ModelSpec field."""
    bad = [f"{module}:{node.lineno}" for module in _modules() if not _under(module, ARCHITECTURE_KNOWLEDGE)
           for node in ast.walk(_tree(module)) if isinstance(node, ast.Attribute) and node.attr == "raw"]
    assert not bad, "raw config read past the reader:\n  " + "\n  ".join(bad)


def test_model_spec_carries_no_untyped_config_mapping() -> None:
    """ModelSpec and its NamedTuple parts hold typed fields only: no `Mapping` / `dict` / `Any` field (the raw text
    config or a sub-config as written, such as vision_config) for a consumer to read past the reader."""
    tree = _tree("kvplan.model.spec")
    bad = [f"{cls.name}.{node.target.id}" for cls in tree.body if isinstance(cls, ast.ClassDef)
           for node in cls.body if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
           and any(isinstance(n, ast.Name) and n.id in {"Mapping", "dict", "Any"} for n in ast.walk(node.annotation))]
    assert not bad, "untyped config mappings on ModelSpec's parts:\n  " + "\n  ".join(bad)


# --- verdicts are compared as enum members (issue 23) ---------------------------------------------------------------

VERDICT_BASE = "Verdict"  # kvplan/verdict.py: every verdict enum derives from it
# A requirement's `kind` ("starts" in a plan file's `require:`) is the plan's word for a check, not a verdict.
_NOT_A_VERDICT_FIELDS = frozenset({"kind"})


def verdict_values(trees: dict[str, ast.Module]) -> dict[str, str]:
    """Every verdict's text, mapped to its enum members (`"ok"` → `Startup.OK`): the str values assigned in each
    class that derives, directly or through another verdict, from Verdict."""
    classes = {node.name: node for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    verdicts = {VERDICT_BASE}
    grew = True
    while grew:
        more = {name for name, node in classes.items() if any(isinstance(b, ast.Name) and b.id in verdicts
                                                               for b in node.bases)}
        grew = bool(more - verdicts)
        verdicts |= more
    members: dict[str, list[str]] = {}
    for name in sorted(verdicts - {VERDICT_BASE}):
        for stmt in classes[name].body if name in classes else []:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value,
                                                                                                    str):
                members.setdefault(stmt.value.value, []).extend(
                    f"{name}.{t.id}" for t in stmt.targets if isinstance(t, ast.Name))
    return {text: " or ".join(names) for text, names in members.items()}


def _verdict_texts(node: ast.AST, values: dict[str, str]) -> list[str]:
    """The verdict texts an expression writes out: a literal, or literals in a tuple / list / set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values:
        return [node.value]
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        return [t for e in node.elts for t in _verdict_texts(e, values)]
    return []


def _names_a_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in _NOT_A_VERDICT_FIELDS) or (
        isinstance(node, ast.Attribute) and node.attr in _NOT_A_VERDICT_FIELDS)


def verdict_literal_comparisons(tree: ast.AST, values: dict[str, str]) -> list[tuple[int, str]]:
    """(line, text) where a verdict's text is compared instead of its member: `==` / `!=` / `in` / `is` a literal
    (or a literal collection), `.startswith("refuses")` on a prefix of a verdict, or `case "starts":`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if not any(_names_a_kind(o) for o in operands):
                found += [(node.lineno, t) for o in operands for t in _verdict_texts(o, values)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in {"startswith", "endswith"}:
            found += [(node.lineno, a.value) for a in node.args if isinstance(a, ast.Constant)
                      and isinstance(a.value, str) and len(a.value) > 2
                      and any(v.startswith(a.value) or v.endswith(a.value) for v in values)]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, t) for t in _verdict_texts(node.value, values)]
    return sorted(set(found))


def test_the_verdict_scan_reads_every_verdict_enum() -> None:
    """The scan knows each verdict kvplan has (so a new member is guarded as soon as it is written)."""
    values = verdict_values({m: _tree(m) for m in _modules()})
    assert values["refuses: max_model_len"] == "Startup.REFUSES_MAX_MODEL_LEN"
    assert values["does not start"] == "StartupRange.DOES_NOT_START"
    assert values["starts"] == "SglangStartup.STARTS or StartupRange.STARTS"
    assert {"ok", "OOM loading weights", "refuses: free memory", "starts only if the estimate is optimistic"} <= set(
        values)


def test_the_verdict_scan_finds_each_form_of_comparison() -> None:
    """The scan flags every way a verdict's text can be compared (so the rule below can fail), and leaves a
    requirement's kind, members and messages alone."""
    source = """
a = report.startup == "refuses: max_model_len"
b = fit.startup_range != "starts"
c = startup in ("ok", "OOM loading weights")
d = str(fit.startup).startswith("refuses")
match verdict:
    case "does not start":
        pass
e = q.kind == "starts"
f = report.startup is Startup.OK
g = fit.startup == "refuses, and says why"
h = kind in ("starts", "min_concurrency")
"""
    values = {"refuses: max_model_len": "Startup.REFUSES_MAX_MODEL_LEN", "starts": "StartupRange.STARTS",
              "ok": "Startup.OK", "OOM loading weights": "Startup.OOM_LOADING_WEIGHTS",
              "does not start": "StartupRange.DOES_NOT_START"}
    assert [line for line, _ in verdict_literal_comparisons(ast.parse(source), values)] == [2, 3, 4, 4, 5, 7]


def test_verdicts_are_compared_as_members_not_text() -> None:
    """A verdict is compared as its enum member (`report.startup is Startup.REFUSES_MAX_MODEL_LEN`), never as the
    text it prints: a reworded verdict then cannot silently stop matching (issue 23)."""
    trees = {m: _tree(m) for m in _modules()}
    values = verdict_values(trees)
    bad = [f"{module}:{line} compares {text!r} (use {values[text]})" for module, tree in trees.items()
           for line, text in verdict_literal_comparisons(tree, values)]
    assert not bad, "verdict compared as text:\n  " + "\n  ".join(bad)
