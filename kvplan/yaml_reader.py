"""The one bounded YAML reader, for plan files (kvplan.ci.plan) and GPU files (kvplan.hardware.gpus).

PyYAML's safe loader only: no tag can create a Python object. Its scanner and composer recurse once per
nesting level and slow down with the depth (1,000 nested `[` took 3.5 s to refuse, most of it in the
scanner, which re-checks every open flow level at each token), so the depth is measured first, on the
text, in one pass (`nesting_depth`), and a document nested deeper than MAX_DEPTH is refused before PyYAML
sees it. Aliases cannot be measured on the text: the readers count the nodes they expand against
MAX_NODES (a "billion laughs" alias bomb) and their depth against MAX_DEPTH (a self-referencing alias).
Same limits for both kinds of file; every error is one line.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kvplan.errors import ParseError

if TYPE_CHECKING:
    import yaml

# Nesting of mappings and sequences: real plans use 5 levels, the packaged GPU catalog 4.
MAX_DEPTH = 40
# A plan of 100 deployments with 10 requirements each is about 5,000 nodes, a GPU file of 100 GPUs about
# 3,000 (the packaged catalog of 30: 900); 20,000 leaves room and stops alias expansion long before it costs
# memory or time (a 9-level "billion laughs" would expand to 10⁹ nodes).
MAX_NODES = 20_000

# Patterns as text, compiled by re on first use (the packaged GPU catalog, read on every `fit`, needs none).
# What the depth scan stops at: brackets, quotes, comments, line ends.
_SPECIAL = r"[\[\]{}'\"#\n]"
# A quote opens a quoted scalar only where a scalar starts (a plain scalar may hold an apostrophe: don't).
_SCALAR_START = frozenset(" \t\n[{,:-?")
_INDENT = r"(?m)^ *(?=[^ \n])"
_DASH_RUN = r"(?m)^ *(?:-[ \t]+)+"
# A line's compact nested sequences: `- - x`.
_DASHES = r"(?:-[ \t]+)+"
# A block scalar's header (`key: |`, `- >-`, `|2+`): its lines are text, not structure.
_BLOCK_SCALAR = r"(?:^|[\s:-])[|>][0-9+-]*\s*(?:#.*)?$"


def nesting_depth(text: str, limit: int = 2 * MAX_DEPTH) -> tuple[int, int]:
    """An upper bound on the nesting depth of a YAML document, and the 1-based line where it is reached.

    One pass over the text: flow collections count their open brackets (outside quoted scalars and
    comments); block collections count two levels per indentation level (a sequence may sit at its parent
    key's indentation) and two per compact `- ` of a line (`- - x` is two sequences, `- a: 1` a sequence
    and a mapping). A block scalar's lines are skipped. It overcounts (real plans, 5 levels deep, measure
    about 10; a plain scalar holding brackets counts them) but never undercounts what PyYAML would nest."""
    deepest, deepest_line = 0, 1
    flow = block = 0
    indents: list[int] = []
    block_scalar_indent: int | None = None  # skipping the lines of a block scalar more indented than this
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if block_scalar_indent is not None:
            if not stripped.strip() or indent > block_scalar_indent:
                continue
            block_scalar_indent = None
        if flow == 0 and stripped and not stripped.startswith("#"):
            while indents and indents[-1] > indent:
                indents.pop()
            if not indents or indents[-1] < indent:
                indents.append(indent)
            dashes = m.group(0).count("-") if (m := re.match(_DASHES, stripped)) else 0
            block = 2 * (len(indents) + dashes)
            if block > deepest:
                deepest, deepest_line = block, number
            if re.search(_BLOCK_SCALAR, line):
                block_scalar_indent = indent
        flow, peak = _flow_depth(line, flow, limit)
        if block + peak > deepest:
            deepest, deepest_line = block + peak, number
        if deepest > limit:
            break
    return deepest, deepest_line


def _flow_depth(line: str, flow: int, limit: int) -> tuple[int, int]:
    """The open flow brackets after `line` and the most open on it, given `flow` open before it (quoted
    scalars and comments skipped; a quoted scalar not closed on its line is taken to run to the line's end)."""
    pos, peak = 0, flow
    special = re.compile(_SPECIAL)  # re's cache: compiled once per process, on first use
    while (m := special.search(line, pos)) is not None:
        char, pos = m.group(0), m.end()
        before = line[m.start() - 1] if m.start() else "\n"
        if char in "[{":
            flow += 1
            peak = max(peak, flow)
            if peak > limit:
                break
        elif char in "]}":
            flow = max(0, flow - 1)
        elif char == "#" and before in " \t\n":
            break
        elif char in "'\"" and before in _SCALAR_START:
            pos = _quote_end(line, pos, char)
    return flow, peak


def _quote_end(line: str, pos: int, quote: str) -> int:
    """Where a quoted scalar that opened before `pos` ends on its line ('' and \\" escapes), else the line's end."""
    while True:
        end = line.find(quote, pos)
        if end < 0:
            return len(line)
        if quote == "'" and line.startswith("''", end):
            pos = end + 2
        elif quote == '"' and (len(line[:end]) - len(line[:end].rstrip("\\"))) % 2:
            pos = end + 1
        else:
            return end + 1


def _quick_bound(text: str) -> int:
    """A cheaper, looser upper bound than nesting_depth's (C-speed scans only): every distinct indentation
    and the longest run of compact dashes twice, plus every bracket."""
    indents = len(set(re.findall(_INDENT, text)))
    dashes = max((run.count("-") for run in re.findall(_DASH_RUN, text)), default=0)
    return 2 * (indents + dashes) + text.count("[") + text.count("{")


def check_nesting(text: str, where: str) -> None:
    """Refuse a document nested deeper than MAX_DEPTH, before PyYAML recurses into it. nesting_depth counts
    at most twice the real depth, so what it measures is held to 2 × MAX_DEPTH: a document PyYAML would nest
    up to MAX_DEPTH deep always passes (the plan reader then holds it to MAX_DEPTH exactly, aliases included)."""
    if _quick_bound(text) <= 2 * MAX_DEPTH:
        return
    depth, line = nesting_depth(text, 2 * MAX_DEPTH)
    if depth > 2 * MAX_DEPTH:
        raise ParseError(f"{where}:{line}: nested deeper than {MAX_DEPTH} levels: refused")


def syntax_problem(exc: Exception) -> tuple[int | None, int | None, str]:
    """A PyYAML error's 1-based line and column (None when it has no mark) and its problem, one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):  # "expected a single document … but found another document"
        problem = f"{context} {problem}"
    if mark is None:
        return None, None, problem
    return mark.line + 1, mark.column + 1, problem


def compose(text: str, where: str) -> yaml.Node | None:
    """The node graph of `text` (None for an empty document), composed by the safe loader after the depth
    check: every node keeps its line, nothing is constructed. Errors: `where:line: not valid YAML: …`."""
    import yaml

    check_nesting(text, where)
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        line, _, problem = syntax_problem(exc)
        raise ParseError(f"{where}:{f'{line}:' if line else ''} not valid YAML: {problem}") from None
    except RecursionError:
        raise ParseError(f"{where}: nested too deeply to read") from None


def load(text: str, where: str, *, packaged: bool = False) -> Any:
    """`text` as plain data (safe loader), after the depth check and within MAX_NODES once aliases are
    expanded. Errors: `where: not valid YAML at line L, column C: …` (the form GPU files have always had).
    `packaged`: kvplan's own file (the GPU catalog, 4 levels deep, tests/test_gpus.py), read on every `fit`:
    its depth is not measured (12 ms)."""
    import yaml

    if not packaged:
        check_nesting(text, where)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line, column, problem = syntax_problem(exc)
        at = f" at line {line}, column {column}" if line is not None else ""
        raise ParseError(f"{where}: not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise ParseError(f"{where}: nested too deeply to read") from None
    _check_expanded_size(data, where)
    return data


def _check_expanded_size(data: Any, where: str) -> None:
    """Refuse data whose aliases expand past MAX_NODES (or refer to themselves)."""
    stack, seen = [data], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ParseError(f"{where}: more than {MAX_NODES:,} YAML nodes once aliases are expanded: refused")
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
