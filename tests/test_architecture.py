"""The package's architecture, pinned by static analysis of kvplan/ (no module is imported).

* no import cycle among kvplan modules, counting every import anywhere in a module;
* imports point one way: base < model < hardware < vllm < sglang < sim < observe < ci < api < render < cli;
* no function over 80 lines outside kvplan/cli/ (whose commands are long Typer option lists);
* typer, rich and huggingface_hub stay at the edges: huggingface_hub in kvplan/model/hub.py only,
  rich in kvplan/render/ and kvplan/cli/, typer in kvplan/cli/.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "kvplan"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("kvplan.errors", "kvplan.units", "kvplan.text", "kvplan.files", "kvplan.yaml_reader",
              "kvplan.command_words")),
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
