"""Plan files for `kvplan check`: deployments and the capacity requirements CI holds them to.

A plan is YAML. It is read with PyYAML's *safe* composer only (`yaml.compose(…, Loader=SafeLoader)`):
the node graph is walked here, never constructed by a loader, so every key and value keeps its line,
no Python object can be created from a tag, and anchors/aliases are expanded under a node budget
(`MAX_NODES`) and a depth limit (measured on the text before PyYAML reads it: kvplan/yaml_reader.py, the
reader GPU files use too), so an alias bomb ("billion laughs") or a self-referencing alias
stops with a clear error instead of hanging. Every mistake is a `ParseError` whose message names the
file, the line and the key: `plan.yaml:7: deployments[0].require.min_concurency: unknown key (did you
mean min_concurrency?)`.

Shape (keys may be spelled with `-` or `_`)::

    version: 1                       # optional
    gpus_file: gpus.yaml             # optional extra GPU catalog, relative to the plan
    deployments:
      - name: chat
        model: Qwen/Qwen2.5-7B-Instruct   # Hub id, or a path relative to the plan's folder
        revision: main                    # Hub only
        gpu: h100
        gpu_link: pcie                    # optional: nvlink or pcie (nvidia-smi topo -m), as fit's --gpu-link
        num_gpus: 1                       # = tensor × pipeline parallel size
        vllm: {max-model-len: 32768, gpu-memory-utilization: 0.9}
        vllm_cmd: "vllm serve … --max-model-len 32768"   # or a pasted command line
        vllm_config: serve.yaml           # or vLLM's --config file
        vllm_version: "0.33"
        env: {VLLM_USE_V2_MODEL_RUNNER: "0"}  # vLLM's environment variables (as `kvplan fit` reads them)
        aiter: false                      # AMD GPUs: a bare pip install (default true: vLLM's ROCm images)
        measured: {weights-memory: 14.3GiB}  # replaces kvplan's estimate (as `kvplan fit` flags)
        workload: {num_requests: 200, request_rate: 4, prompt_len: 2048, output_len: 256}
        require:
          estimate: pessimistic           # optional: judge the memory requirements at kvplan's low end
          starts: true
          min_concurrency: {value: 8, context: 32768}
          …
      - name: chat-sglang
        engine: sglang                    # judged by SGLang 0.5.23's rules (kvplan/sglang/)
        model: Qwen/Qwen2.5-7B-Instruct
        gpu: h100
        sglang: {tp: 1, context-length: 32768, mem-fraction-static: 0.85}   # SGLang's own flag names
        sglang_cmd: "python -m sglang.launch_server --model-path … --tp 2"    # or a pasted line
        measured: {weights-memory: 14.3GiB}
        require: {starts: true, min_kv_tokens: 500000, min_concurrency: {value: 8, context: 32768}}

vLLM settings combine as vLLM combines them: the `--config` file first, the command line over it,
and the plan's `vllm:` mapping over both. Top-level keys starting with `x-` are ignored, so a plan can
hold YAML anchors to reuse (`<<: *defaults` merge keys are honoured). Pure except `load_plan`, which
reads the plan and any `vllm_config` file it names.
"""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from kvplan import yaml_reader
from kvplan.errors import KvplanError, ParseError, close_matches
from kvplan.vllm.command_line import VLLM_IGNORED, VLLM_UNMODELLED
from kvplan.vllm.engine_args import ENGINE_ARGS, SETTING_ARGS, EngineArg

if TYPE_CHECKING:
    import yaml

    from kvplan.sglang.defaults import SglangDeployment
    from kvplan.vllm.command_line import VllmCommand
    from kvplan.vllm.settings import ServeSettings

# --- limits ---------------------------------------------------------------------------------------
# The YAML reader's, shared with GPU files (kvplan/yaml_reader.py): nodes once aliases are expanded, nesting.
MAX_NODES = yaml_reader.MAX_NODES
MAX_DEPTH = yaml_reader.MAX_DEPTH
MAX_PLAN_BYTES = 1 << 20  # 1 MiB: a plan is a few KB (kvplan.files.PLAN)
_SHOWN_DEPTH = 8  # path components shown in a message
PLAN_VERSION = 1

RequirementKind = Literal[
    "starts", "min_concurrency", "no_preemption", "min_kv_tokens", "min_decode_throughput", "max_itl_ms",
    "max_p99_ttft_ms", "min_headroom_pct",
]
REQUIREMENT_KINDS: tuple[str, ...] = get_args(RequirementKind)
# The requirements on the KV cache's size, which `estimate: pessimistic` judges at the low end of the available KV
# memory kvplan prints (every estimated term at its high end, vllm/memory/budget.py).
PESSIMISTIC_KINDS = ("starts", "min_kv_tokens", "min_concurrency", "no_preemption")

Path_ = tuple[str | int, ...]

# The YAML 1.1 scalar tags a plan may hold; others (timestamps, binary, custom `!tags`) are refused.
_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null"))
_MERGE_TAG = f"{_TAG}merge"


# =================================================================================================
# Located YAML: plain data plus the line of every key and value
# =================================================================================================


def format_path(path: Path_) -> str:
    """`("deployments", 0, "require", "starts")` → `deployments[0].require.starts`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def norm_key(key: str) -> str:
    """Plan keys may be spelled with dashes or underscores (`max-model-len` = `max_model_len`)."""
    return key.strip().replace("-", "_").lower()


@dataclass
class Doc:
    """A YAML document as plain data, with the 1-based line of every key and value by path."""

    where: str  # the file as the user named it
    data: Any
    key_lines: dict[Path_, int] = field(default_factory=dict)
    value_lines: dict[Path_, int] = field(default_factory=dict)
    spelled: dict[Path_, str] = field(default_factory=dict)  # the key as written (before normalising)
    # A scalar's text as written, where YAML read a number from it (`vllm_version: 0.10` is the float 0.1).
    written: dict[Path_, str] = field(default_factory=dict)

    def line(self, path: Path_) -> int:
        """Line of the key at `path` (or of the value, for list items), else of the nearest parent."""
        while path:
            if path in self.key_lines:
                return self.key_lines[path]
            if path in self.value_lines:
                return self.value_lines[path]
            path = path[:-1]
        return self.value_lines.get((), 1)

    def value_line(self, path: Path_) -> int:
        """Line of the value at `path` (falls back to its key's line)."""
        return self.value_lines.get(path) or self.line(path)

    def name_parts(self, path: Path_) -> Path_:
        """The path with the keys as the user spelled them."""
        return tuple(self.spelled.get(path[:i + 1], p) for i, p in enumerate(path))

    def name(self, path: Path_) -> str:
        """`deployments[0].vllm.max-model-len`, spelled as in the file; very deep paths are cut short."""
        parts = self.name_parts(path)
        return format_path(parts[:_SHOWN_DEPTH]) + ("…" if len(parts) > _SHOWN_DEPTH else "")

    def error(self, path: Path_, message: str, *, hint: str | None = None, at_value: bool = False) -> ParseError:
        """`file:line: key: message`."""
        line = self.value_line(path) if at_value else self.line(path)
        where = f"{self.where}:{line}: "
        return ParseError(f"{where}{self.name(path) + ': ' if path else ''}{message}", hint=hint)


class _Walker:
    """Turn a composed node graph into plain data, counting every node visited (aliases included)."""

    def __init__(self, doc: Doc) -> None:
        import yaml

        self.doc = doc
        self.count = 0
        self.constructor = yaml.constructor.SafeConstructor()

    def _visit(self, path: Path_, depth: int) -> None:
        """Count one node against MAX_NODES and check its depth (every node, merged mappings included)."""
        self.count += 1
        if self.count > MAX_NODES:
            raise self.doc.error(path, f"more than {MAX_NODES:,} YAML nodes (aliases expanding?): refused",
                                 at_value=True)
        if depth > MAX_DEPTH:
            raise self.doc.error(path, f"nested deeper than {MAX_DEPTH} levels (a self-referencing alias?)",
                                 at_value=True)

    def walk(self, node: yaml.Node, path: Path_, depth: int = 0) -> Any:
        import yaml

        self._visit(path, depth)
        self.doc.value_lines[path] = node.start_mark.line + 1
        allowed = (_SCALAR_TAGS if isinstance(node, yaml.ScalarNode) else
                   {f"{_TAG}seq"} if isinstance(node, yaml.SequenceNode) else {f"{_TAG}map"})
        if node.tag not in allowed:
            tag = node.tag.replace(_TAG, "!!")
            raise self.doc.error(path, f"unsupported YAML tag {tag} (use plain strings and numbers)",
                                 at_value=True)
        if isinstance(node, yaml.ScalarNode):
            if node.tag == f"{_TAG}float":
                self.doc.written[path] = node.value
            try:
                return self.constructor.construct_object(node)
            except (yaml.YAMLError, ValueError) as exc:
                raise self.doc.error(path, f"cannot read {node.value!r}: {exc}", at_value=True) from None
        if isinstance(node, yaml.SequenceNode):
            return [self.walk(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        raise self.doc.error(path, f"unexpected YAML node {type(node).__name__}", at_value=True)

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int,
                 merging: tuple[yaml.MappingNode, ...] = ()) -> dict[str, Any]:
        """A mapping; `<<` merge keys first (so the explicit keys' lines win), then the explicit keys.

        `merging`: the mappings whose `<<` led here, so a mapping that merges itself (`a: &a {<<: *a}`)
        is named instead of recursing; merged mappings count against MAX_NODES and MAX_DEPTH like any node.
        """
        import yaml

        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for src in sources:
                    if not isinstance(src, yaml.MappingNode):
                        raise self.doc.error(path, "`<<` merges mappings only", at_value=True)
                    if src is node or src in merging:
                        line = key_node.start_mark.line + 1
                        raise ParseError(f"{self.doc.where}:{line}: {self.doc.name(path) or 'document'}: `<<` "
                                         "merges a mapping into itself (through an alias)")
                    self._visit(path, depth + 1)
                    for key, value in self._mapping(src, path, depth + 1, (*merging, node)).items():
                        out.setdefault(key, value)  # the first merged mapping wins (YAML merge-key spec)
        explicit: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != f"{_TAG}str":
                line = key_node.start_mark.line + 1
                raise ParseError(f"{self.doc.where}:{line}: {self.doc.name(path) or 'document'}: "
                                 f"keys must be plain strings, got {key_node.value!r}"
                                 + (" (YAML 1.1 reads yes/no/on/off as booleans: quote the key)"
                                    if key_node.tag == f"{_TAG}bool" else ""))
            spelled = str(key_node.value)
            key = norm_key(spelled)
            child = (*path, key)
            if key in explicit:
                first = self.doc.spelled[child]
                raise ParseError(f"{self.doc.where}:{key_node.start_mark.line + 1}: "
                                 f"{format_path((*self.doc.name_parts(path), spelled))}: given twice (also on line "
                                 f"{self.doc.key_lines[child]}{f' as {first}' if first != spelled else ''})")
            explicit.add(key)
            self.doc.key_lines[child] = key_node.start_mark.line + 1
            self.doc.spelled[child] = spelled
            out[key] = self.walk(value_node, child, depth + 1)  # explicit keys override merged ones
        return out


def parse_yaml(text: str, where: str) -> Doc:
    """Compose `text` with the bounded safe reader (kvplan/yaml_reader.py) and walk it into a `Doc` (plain
    data plus lines)."""
    from kvplan import yaml_reader

    node = yaml_reader.compose(text, where)
    doc = Doc(where, None)
    if node is None:
        return doc
    doc.data = _Walker(doc).walk(node, ())
    return doc


def read_yaml(path: Path, where: str) -> Doc:
    """Read and parse a YAML file through kvplan.files (a regular file or an open pipe such as `<(…)`, at
    most MAX_PLAN_BYTES, UTF-8)."""
    from kvplan import files

    return parse_yaml(files.read_text(str(path), files.PLAN, where=where), where)


# =================================================================================================
# The plan's data model
# =================================================================================================


@dataclass(frozen=True)
class Workload:
    """A synthetic serving workload for the simulator (the `kvplan simulate serve` options)."""

    num_requests: int = 200
    request_rate: float = math.inf  # requests/s; inf sends all at once
    arrival: str = "poisson"
    prompt_len: str = "1024"  # a length distribution: 2048, uniform:512:4096, lognormal:256:0.5
    output_len: str = "128"
    shared_prefix_tokens: int = 0
    seed: int = 0


@dataclass(frozen=True)
class Requirement:
    """One requirement of a deployment, with where it is written.

    `value` is the threshold (None for `starts` and `no_preemption`); `context`, `batch` and
    `concurrency` are the load it is judged at (None: the deployment's max_model_len / max_num_seqs).
    """

    kind: RequirementKind
    key: str  # deployments[0].require.min_concurrency
    line: int
    value: float | None = None
    context: int | None = None
    batch: int | None = None
    concurrency: int | None = None
    workload: Workload | None = None
    # `starts: pessimistic`, `{…, estimate: pessimistic}` on min_kv_tokens / min_concurrency / no_preemption, or
    # `estimate: pessimistic` beside the requirements: judged at the pessimistic end of kvplan's range (every
    # estimated term at its high end, vllm/memory/budget.py), not its best value.
    pessimistic: bool = False


@dataclass(frozen=True)
class Deployment:
    """One deployment of a plan: what runs where, with which vLLM settings, held to which requirements."""

    name: str
    plan: str  # the plan file, as the user named it
    key: str  # deployments[0]
    line: int
    lines: Mapping[str, int]  # line of each key of the deployment (model, gpu, vllm, …)
    model: str  # as written in the plan (for reports)
    model_source: str  # Hub id, or the absolute local path
    model_is_local: bool
    revision: str | None
    gpu: str
    num_gpus: int
    settings: ServeSettings
    vllm_options: Mapping[str, Any]  # the vLLM options given (canonical names), for reports
    requirements: tuple[Requirement, ...]
    warnings: tuple[str, ...] = ()  # options given but not modelled (said on stderr)
    hf_overrides: Mapping[str, Any] | None = None  # vLLM's --hf-overrides, applied when the model is read
    engine: str = "vllm"  # whose rules judge it: vllm, or sglang (then `sglang` holds the deployment)
    sglang: SglangDeployment | None = None
    gpu_link: str | None = None  # nvlink or pcie (GpuSpec.with_link); None: the catalog's figure decides

    def locate(self, exc: KvplanError, key: str | None = None) -> KvplanError:
        """`exc` with `plan:line: deployments[i].key:` in front of its message (same type, same hint)."""
        line = self.lines.get(key, self.line) if key else self.line
        return locate(exc, self.plan, line, f"{self.key}.{key}" if key else self.key)


def locate(exc: KvplanError, where: str, line: int, key: str) -> KvplanError:
    """Put `where:line: key:` in front of a kvplan error's message, keeping its type and hint."""
    exc.args = (f"{where}:{line}: {key}: {exc}", *exc.args[1:])
    return exc


@dataclass(frozen=True)
class Plan:
    """A validated plan file."""

    path: str  # as the user named it
    deployments: tuple[Deployment, ...]
    gpus_file: str | None = None  # absolute


# =================================================================================================
# vLLM options (capacity-relevant ones are modelled; harmless ones ignored; the rest refused)
# =================================================================================================

# Option (canonical: underscores, no dashes) → ServeSettings field and a converter.
_Converter = Callable[[Any, str], Any]


def _as_int(value: Any, what: str, *, maximum: int | None = None, bound: str = "") -> int:
    from kvplan.units import parse_count

    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, (int, str)) or isinstance(value, bool):
        raise ParseError(f"{what}: expected a whole number, got {value!r}")
    return parse_count(value, what=what, minimum=1, maximum=maximum, bound=bound)


def _as_max_model_len(value: Any, what: str) -> int:
    if (isinstance(value, str) and value.strip().lower() == "auto") or value == -1 or value == "-1":
        return -1  # vLLM: --max-model-len auto / -1 auto-fits to the memory
    return _as_int(value, what)


def _as_fraction(value: Any, what: str) -> float:
    f = _as_float(value, what)
    if not 0 < f <= 1:
        raise ParseError(f"{what}: must be in (0, 1], got {value!r}")
    return f


def _as_float(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ParseError(f"{what}: expected a number, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ParseError(f"{what}: expected a number, got {value!r}") from None
    if not math.isfinite(f):
        raise ParseError(f"{what}: expected a finite number, got {value!r}")
    return f


def _as_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ParseError(f"{what}: expected true or false, got {value!r}")


def _as_bytes(value: Any, what: str) -> int:
    from kvplan.units import parse_bytes

    try:
        return parse_bytes(value, what=what)
    except KvplanError as exc:
        raise ParseError(str(exc)) from None


def _as_mapping(value: Any, what: str) -> Mapping[str, Any]:
    """A JSON-object option (`speculative_config`): a mapping in the plan, or its JSON text."""
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{what}: not valid JSON ({exc.msg})") from None
    if not isinstance(value, Mapping):
        raise ParseError(f"{what}: expected an object, got {value!r}")
    return dict(value)


def _mm_limits(value: Any) -> Any:
    """--limit-mm-per-prompt: a mapping in the plan, or its JSON text (vllm/multimodal.py:parse_mm_limits)."""
    from kvplan.vllm.multimodal import parse_mm_limits

    return parse_mm_limits(value)


def _choice(*choices: str) -> _Converter:
    def convert(value: Any, what: str) -> str:
        text = str(value).strip().lower() if not isinstance(value, bool) else ""
        if text not in choices:
            raise ParseError(f"{what}: must be one of {', '.join(choices)}, got {value!r}")
        return text

    return convert


def _reader(arg: EngineArg) -> _Converter:
    """How a plan reads one vLLM option's value (by the row's kind, kvplan/vllm/engine_args.py)."""
    from kvplan.vllm import engine_args as ea

    kind = arg.kind
    if kind == "count":
        return functools.partial(_as_int, maximum=arg.maximum, bound=arg.bound) if arg.maximum else _as_int
    if kind == "choice":
        return _choice(*ea.choices_of(arg))
    if kind == "gib":
        return lambda v, w: ea.cpu_offload_bytes(_as_float(v, w), w)
    if kind == "offload_gib":
        return lambda v, w: ea.kv_offloading_gib(_as_float(v, w), w)
    return _PLAN_READERS[kind]


_PLAN_READERS: Mapping[str, _Converter] = {
    "max_model_len": _as_max_model_len, "fraction": _as_fraction, "bytes": _as_bytes, "bool": _as_bool,
    "json": _as_mapping, "mm_limits": lambda v, w: _mm_limits(v), "lower": lambda v, w: str(v).strip().lower(),
}
# Generated from the one table of vLLM's engine arguments (kvplan/vllm/engine_args.py): a new option is a row
# there. vLLM option → (ServeSettings field, converter); names as `vllm serve --help` prints them.
VLLM_OPTIONS: Mapping[str, tuple[str, _Converter]] = {
    arg.name: (arg.field, _reader(arg)) for arg in SETTING_ARGS if arg.field is not None
}
# vLLM's short and second spellings (-tp, --device-memory-utilization) and its `--no-…` negations.
VLLM_ALIASES: Mapping[str, str] = {
    norm_key(alias.lstrip("-")): arg.name for arg in ENGINE_ARGS if arg.effect == "modelled" for alias in arg.aliases
}
VLLM_NEGATED: Mapping[str, str] = {"no_" + arg.name: arg.name for arg in SETTING_ARGS if arg.negatable}
# =================================================================================================
# Loading and validating
# =================================================================================================

_TOP_KEYS = ("version", "gpus_file", "deployments")
_DEPLOYMENT_KEYS = ("name", "model", "revision", "gpu", "gpu_link", "num_gpus", "vllm", "vllm_cmd", "vllm_config",
                    "vllm_version", "env", "aiter", "measured", "workload", "require", "engine", "sglang",
                    "sglang_cmd")
# `engine: sglang`: the deployment is SGLang's (kvplan/sglang/), its flags in `sglang:` (SGLang's names) or a
# pasted `sglang_cmd`; these vLLM keys and requirements mean nothing there.
_VLLM_ONLY_KEYS = ("vllm", "vllm_cmd", "vllm_config", "vllm_version", "env", "aiter", "gpu_link")
SGLANG_REQUIREMENTS = ("starts", "min_concurrency", "min_kv_tokens")
_MEASURED = {  # the `kvplan fit` flags that replace an estimate with a measured value
    "weights_memory": "weights_bytes", "activation_memory": "activation_bytes",
    "non_torch_memory": "non_torch_bytes", "cuda_graph_memory": "cuda_graph_bytes",
}
_WORKLOAD_KEYS = ("num_requests", "request_rate", "arrival", "prompt_len", "output_len",
                  "shared_prefix_tokens", "seed")
# Requirement → keys its mapping takes (the first is what a bare scalar means).
_REQUIREMENT_KEYS: Mapping[str, tuple[str, ...]] = {
    "starts": (),
    "min_concurrency": ("value", "context", "estimate"),
    "no_preemption": ("concurrency", "context", "estimate"),
    "min_kv_tokens": ("value", "estimate"),
    "min_decode_throughput": ("value", "batch", "context"),
    "max_itl_ms": ("value", "batch", "context"),
    "max_p99_ttft_ms": ("value", "workload"),
    "min_headroom_pct": ("value", "concurrency", "context"),
}
_REQUIRED_KEYS: Mapping[str, tuple[str, ...]] = {
    "min_decode_throughput": ("value", "batch"), "max_itl_ms": ("value", "batch"), "max_p99_ttft_ms": ("value",),
}


class _Checker:
    """Validation helpers bound to one document."""

    def __init__(self, doc: Doc) -> None:
        self.doc = doc

    def mapping(self, value: Any, path: Path_, what: str = "a mapping") -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.doc.error(path, f"expected {what}, got {_kind(value)}", at_value=True)
        return value

    def keys(self, value: dict[str, Any], path: Path_, allowed: tuple[str, ...] | frozenset[str],
             *, ignore: Callable[[str], bool] = lambda k: False) -> None:
        for key in value:
            if key not in allowed and not ignore(key):
                suggestions = suggest(key, allowed)
                raise self.doc.error((*path, key), "unknown key",
                                     hint=f"did you mean {' or '.join(suggestions)}?" if suggestions
                                     else f"expected one of {', '.join(allowed)}")

    def string(self, value: Any, path: Path_) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value).strip() == "":
            raise self.doc.error(path, f"expected a non-empty string, got {_kind(value)}", at_value=True)
        return str(value).strip()

    def command_line(self, value: Any, path: Path_) -> str:
        """A pasted command line: text only. `string` also takes a bare number (a YAML `revision: 2` or a numeric
        name), but a number is no command line: `vllm_cmd: 5` was parsed as `vllm serve 5` (model '5')."""
        if not isinstance(value, str):
            raise self.doc.error(path, f"expected a command line (text), got {_kind(value)}", at_value=True)
        return self.string(value, path)

    def convert(self, value: Any, path: Path_, converter: _Converter) -> Any:
        try:
            return converter(value, "value")
        except KvplanError as exc:
            message = str(exc).removeprefix("value: ").removeprefix("value ")
            raise self.doc.error(path, message, hint=exc.hint, at_value=True) from None

    def count(self, value: Any, path: Path_) -> int:
        return int(self.convert(value, path, _as_int))

    def number(self, value: Any, path: Path_, *, minimum: float = 0.0) -> float:
        f = float(self.convert(value, path, _as_float))
        if f < minimum:
            raise self.doc.error(path, f"must be ≥ {minimum:g}, got {value!r}", at_value=True)
        return int(f) if isinstance(value, int) else f  # keep 1000 as 1000, not 1000.0


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {dict: "a mapping", list: "a list", str: f"the string {value!r}", bool: f"the boolean {value}",
            int: f"the number {value}", float: f"the number {value}"}.get(type(value), type(value).__name__)


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read and validate a plan file; every error names the file, line and key (`ParseError`)."""
    where = str(path)
    doc = read_yaml(Path(path), where)
    return parse_plan(doc, base_dir=Path(path).resolve().parent)


def parse_plan(doc: Doc, *, base_dir: Path) -> Plan:
    """Validate a parsed plan document; relative paths resolve against `base_dir`."""
    c = _Checker(doc)
    if doc.data is None:
        raise ParseError(f"{doc.where}: the plan is empty", hint="it needs a `deployments:` list")
    if not isinstance(doc.data, dict):
        raise ParseError(f"{doc.where}:{doc.value_line(())}: the plan must be a mapping with a `deployments:` "
                         f"list, not {_kind(doc.data)}")
    top = doc.data
    c.keys(top, (), _TOP_KEYS, ignore=lambda k: k.startswith("x_"))
    if "version" in top and top["version"] != PLAN_VERSION:
        raise doc.error(("version",), f"unsupported plan version {top['version']!r} (this kvplan reads {PLAN_VERSION})",
                        at_value=True)
    gpus_file = None
    if top.get("gpus_file") is not None:
        gpus_file = str(_resolve(c.string(top["gpus_file"], ("gpus_file",)), base_dir))
    if "deployments" not in top:
        raise ParseError(f"{doc.where}:{doc.value_line(())}: the plan has no `deployments:` list")
    items = top["deployments"]
    if not isinstance(items, list) or not items:
        raise doc.error(("deployments",), f"expected a non-empty list of deployments, got {_kind(items)}",
                        at_value=True)
    deployments: list[Deployment] = []
    names: dict[str, int] = {}
    for i, item in enumerate(items):
        dep = _deployment(c, item, ("deployments", i), base_dir)
        if dep.name in names:
            raise doc.error(("deployments", i, "name"), f"{dep.name!r} is used twice (also on line {names[dep.name]})",
                            at_value=True)
        names[dep.name] = dep.line
        deployments.append(dep)
    return Plan(path=doc.where, deployments=tuple(deployments), gpus_file=gpus_file)


def _resolve(text: str, base_dir: Path) -> Path:
    p = Path(os.path.expanduser(text))
    return p if p.is_absolute() else base_dir / p


def _looks_like_hub_id(source: str) -> bool:
    parts = source.split("/")
    return 1 <= len(parts) <= 2 and all(parts) and not source.startswith((".", "~")) and not source.endswith(".json")


def resolve_model(source: str, base_dir: Path) -> tuple[str, bool]:
    """(Hub id or absolute path, is local). A path that exists relative to the plan's folder, or that
    cannot be a Hub id (`./x`, `/x`, `a/b/c`, `*.json`), is local; `org/name` otherwise is a Hub id."""
    candidate = _resolve(source, base_dir)
    if candidate.exists() or not _looks_like_hub_id(source):
        return str(candidate), True
    return source, False


@dataclass
class _Options:
    """vLLM options gathered from the --config file, the command line and the `vllm:` mapping, in that
    order (later sources override earlier ones, as in vLLM), plus the model/revision they name."""

    values: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the command line's leading `VLLM_…=` words
    model: tuple[str, Callable[[str], ParseError]] | None = None  # (value, makes an error located at it)
    revision: tuple[str, Callable[[str], ParseError]] | None = None
    warnings: list[str] = field(default_factory=list)
    hf_overrides: Mapping[str, Any] | None = None  # applied to the model's config before it is read

    def take(self, doc: Doc, path: Path_, key: str, value: Any, *, strict: bool, flag: bool = False) -> None:
        """Validate one option and store it under its canonical name.

        `strict` (the plan's own `vllm:` mapping): an option kvplan does not know is an error with
        suggestions. Otherwise (a real --config file or command line, which may hold any of vLLM's many
        options) only a near-miss of a modelled option is an error; anything else is a warning."""
        name = norm_key(key.lstrip("-"))
        shown = "--" + name.replace("_", "-") if flag else None

        def err(message: str, hint: str | None = None) -> ParseError:
            return doc.error(path, f"{shown}: {message}" if shown else message, hint=hint, at_value=flag)

        name = VLLM_ALIASES.get(name, name)
        if name in VLLM_NEGATED:
            name, value = VLLM_NEGATED[name], not _convert_or(err, value, _as_bool)
        if name in ("model", "revision"):
            text = "" if value is None or isinstance(value, (bool, dict, list)) else str(value).strip()
            if not text:
                raise err(f"expected a non-empty string, got {_kind(value)}")
            setattr(self, name, (text, err))
            return
        if name == "hf_overrides":  # a change to the model's config, not a serving setting
            self.hf_overrides = _convert_or(err, value, _as_mapping)
            return
        if name in VLLM_OPTIONS:
            self.values[name] = _convert_or(err, value, VLLM_OPTIONS[name][1])
            return
        if name in VLLM_IGNORED:
            return
        where = f"{doc.where}:{doc.line(path)}: {doc.name(path)}" + (f": {shown}" if shown else "")
        if name in VLLM_UNMODELLED:
            self.warnings.append(f"{where}: {VLLM_UNMODELLED[name]}; planned without it")
            return
        near = suggest(name, [*VLLM_OPTIONS, *VLLM_NEGATED])
        hint = f"did you mean {' or '.join(_dashed(n, flag) for n in near)}?" if near else None
        if strict:
            raise err("unknown key" if near else "unknown key: not a vLLM option kvplan models",
                      hint=hint or "modelled: " + ", ".join(_dashed(n, False) for n in VLLM_OPTIONS))
        if near and _similarity(name, near[0]) >= _CLEAR_MATCH:  # a typo of a modelled option, not another option
            raise err("unknown vLLM option", hint=hint)
        self.warnings.append(f"{where}: ignored: kvplan does not know this vLLM option")


# A suggestion this similar (difflib ratio) to the typo is given alone; in a --config file or command line,
# an unknown option this close to a modelled one is taken for a typo (an error), not another vLLM option.
_CLEAR_MATCH = 0.8


def suggest(word: str, choices: Iterable[str]) -> list[str]:
    """Names to suggest for a mistyped key: the one clear match, else up to three close ones."""
    options = list(choices)
    best = max(options, key=lambda c: _similarity(word, c), default=None)
    if best is not None and _similarity(word, best) >= _CLEAR_MATCH:
        return [best]
    return close_matches(word, options)


def _similarity(a: str, b: str) -> float:
    """difflib's ratio (what `close_matches` ranks by)."""
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio()


def _dashed(name: str, flag: bool) -> str:
    return ("--" if flag else "") + name.replace("_", "-")


def _take_vllm_config(c: _Checker, d: dict[str, Any], path: Path_, base_dir: Path, opts: _Options) -> None:
    """Take the options of the deployment's vLLM --config file (`vllm_config`) into opts."""
    cfg_path = _resolve(c.string(d["vllm_config"], (*path, "vllm_config")), base_dir)
    cfg = read_yaml(cfg_path, _shown_path(cfg_path))
    if cfg.data is not None and not isinstance(cfg.data, dict):
        raise ParseError(f"{cfg.where}:{cfg.value_line(())}: a vLLM --config file must be a mapping of "
                         f"options, not {_kind(cfg.data)}")
    for key, value in (cfg.data or {}).items():
        opts.take(cfg, (key,), cfg.spelled.get((key,)) or key, value, strict=False)


def _take_vllm_cmd(c: _Checker, d: dict[str, Any], path: Path_, opts: _Options) -> None:
    """Take the model and options of the deployment's `vllm serve` command line (`vllm_cmd`) into opts."""
    from kvplan.vllm import command_line as vllm_cmd

    doc = c.doc
    cmd_path = (*path, "vllm_cmd")
    command = _parse_vllm_cmd(c.command_line(d["vllm_cmd"], cmd_path), doc, cmd_path)
    opts.env.update(command.env)
    if command.model is not None:
        opts.take(doc, cmd_path, "model", command.model, strict=False, flag=True)
    for key, value in command.options.items():
        opts.take(doc, cmd_path, key, value, strict=False, flag=True)
    for word in command.ignored:
        flag, _, value = word.replace(" ", "=", 1).partition("=")
        if flag.startswith("-"):
            flag = vllm_cmd.SHORT_FLAGS.get(flag, flag)
            opts.take(doc, cmd_path, flag, value if value else True, strict=False, flag=True)
        else:
            opts.warnings.append(f"{doc.where}:{doc.line(cmd_path)}: {doc.name(cmd_path)}: ignored the extra "
                                 f"word {flag!r}")


def _deployment_options(c: _Checker, d: dict[str, Any], path: Path_, base_dir: Path) -> _Options:
    """The vLLM options of a deployment: its --config file, then its command line, then its `vllm:` mapping."""
    doc = c.doc
    opts = _Options()
    if d.get("vllm_config") is not None:
        _take_vllm_config(c, d, path, base_dir, opts)
    if d.get("vllm_cmd") is not None:
        _take_vllm_cmd(c, d, path, opts)
    if d.get("vllm") is not None:
        vpath = (*path, "vllm")
        for key, value in c.mapping(d["vllm"], vpath, "a mapping of vLLM options").items():
            opts.take(doc, (*vpath, key), doc.spelled.get((*vpath, key)) or key, value, strict=True)
    return opts


def _model_and_revision(
    c: _Checker, d: dict[str, Any], path: Path_, base_dir: Path, opts: _Options,
) -> tuple[str, str, bool, str | None]:
    """The model as written, where it is loaded from, whether that is a local path, and the revision."""
    doc = c.doc
    # The plan's `model` wins over one in the command line or --config file (CI may point at a local copy).
    if d.get("model") is not None:
        model = c.string(d["model"], (*path, "model"))
    elif opts.model is not None:
        model = opts.model[0]
    else:
        raise doc.error(path, "missing `model` (a Hub id or a path; or give it in vllm_cmd / vllm_config)")
    model_source, is_local = resolve_model(model, base_dir)
    revision: str | None = None
    if d.get("revision") is not None:
        revision = c.string(d["revision"], (*path, "revision"))
        opts.revision = (revision, lambda m: doc.error((*path, "revision"), m, at_value=True))
    elif opts.revision is not None:
        revision = opts.revision[0]
    if revision is not None and is_local and opts.revision is not None:
        raise opts.revision[1](f"a revision applies to Hub models, but {model!r} is a local path")
    return model, model_source, is_local, revision


def _setting_fields(c: _Checker, d: dict[str, Any], path: Path_, opts: _Options) -> dict[str, Any]:
    """ServeSettings fields from the vLLM options, `vllm_version`, `measured` and `num_gpus`."""
    doc = c.doc
    fields: dict[str, Any] = {VLLM_OPTIONS[k][0]: v for k, v in opts.values.items()}
    if d.get("vllm_version") is not None:
        fields["vllm_version"] = _vllm_version(c, d["vllm_version"], (*path, "vllm_version"))
    if d.get("aiter") is not None:  # `kvplan fit --aiter/--no-aiter` (kvplan/vllm/rocm.py:RocmAiter.installed)
        if not isinstance(d["aiter"], bool):
            raise doc.error((*path, "aiter"), "true (aiter installed, as in vLLM's ROCm images) or false (a bare "
                                              "pip install)", at_value=True)
        fields["rocm_aiter_installed"] = d["aiter"]
    if d.get("measured") is not None:
        mpath = (*path, "measured")
        measured = c.mapping(d["measured"], mpath)
        c.keys(measured, mpath, tuple(_MEASURED))
        for key, value in measured.items():
            fields[_MEASURED[key]] = c.convert(value, (*mpath, key), _as_bytes)
    tp, pp = int(fields.get("tensor_parallel_size", 1)), int(fields.get("pipeline_parallel_size", 1))
    if d.get("num_gpus") is not None:
        gpath = (*path, "num_gpus")
        num_gpus = c.count(d["num_gpus"], gpath)
        if "tensor_parallel_size" not in fields:
            if num_gpus % pp:
                raise doc.error(gpath, f"{num_gpus} GPUs cannot be split into {pp} pipeline stages", at_value=True)
            fields["tensor_parallel_size"] = num_gpus // pp
        elif num_gpus != tp * pp:
            raise doc.error(gpath, f"{num_gpus} GPUs, but tensor-parallel-size {tp} × pipeline-parallel-size {pp} "
                                   f"uses {tp * pp}", at_value=True)
    return fields


def _draft_source(spec: Mapping[str, Any] | None, base_dir: Path) -> dict[str, Any]:
    """A speculative draft named by a path, resolved like the deployment's `model` (relative to the plan's
    folder when it exists there); the CLI loads it with the model."""
    from kvplan.vllm.speculative import needs_draft_config

    if spec is None or not needs_draft_config(spec) or not isinstance(spec.get("model"), str):
        return {}
    source, _ = resolve_model(spec["model"], base_dir)
    return {"speculative_config": {**spec, "model": source}}


def _environment_fields(c: _Checker, d: dict[str, Any], path: Path_, opts: _Options) -> dict[str, Any]:
    """vLLM's environment for the deployment: the command line's `VLLM_…=` words, then the plan's `env:`
    mapping over them (names and values as strings, read as vllm/environment.py reads them)."""
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.environment import vllm_environment

    env = dict(opts.env)
    if d.get("env") is not None:
        epath = (*path, "env")
        for key, value in c.mapping(d["env"], epath, "a mapping of vLLM environment variables").items():
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise c.doc.error((*epath, key), "a value is a string or an integer, as in a shell", at_value=True)
            env[c.doc.spelled.get((*epath, key)) or str(key)] = str(value)  # the name as written: plan keys are folded
    if not env:
        return {}
    try:
        return {"env": vllm_environment(env)}
    except InvalidParameter as exc:
        raise c.doc.error((*path, "env") if d.get("env") is not None else (*path, "vllm_cmd"), str(exc)) from None


def _deployment(c: _Checker, item: Any, path: Path_, base_dir: Path) -> Deployment:
    """Validate one deployment of a plan: its name, model, GPU, vLLM settings, workload and requirements."""

    from kvplan.hardware.gpus import GPU_LINKS
    from kvplan.vllm.settings import ServeSettings

    doc = c.doc
    d = c.mapping(item, path, "a deployment (a mapping with name, model, gpu, require)")
    c.keys(d, path, _DEPLOYMENT_KEYS)
    for key in ("name", "gpu", "require"):
        if key not in d:
            raise doc.error(path, f"missing `{key}`")
    engine = "vllm" if d.get("engine") is None else c.convert(d["engine"], (*path, "engine"),
                                                               _choice("vllm", "sglang"))
    if engine == "sglang":
        return _sglang_deployment(c, d, path, base_dir)
    for key in ("sglang", "sglang_cmd"):
        if key in d:
            raise doc.error((*path, key), "SGLang flags need `engine: sglang`")
    name = c.string(d["name"], (*path, "name"))
    opts = _deployment_options(c, d, path, base_dir)
    model, model_source, is_local, revision = _model_and_revision(c, d, path, base_dir, opts)
    gpu = c.string(d["gpu"], (*path, "gpu"))
    gpu_link = None if d.get("gpu_link") is None else c.convert(d["gpu_link"], (*path, "gpu_link"),
                                                                 _choice(*GPU_LINKS))
    fields = _setting_fields(c, d, path, opts)
    fields.update(_draft_source(fields.get("speculative_config"), base_dir))
    fields.update(_environment_fields(c, d, path, opts))
    tp, pp = int(fields.get("tensor_parallel_size", 1)), int(fields.get("pipeline_parallel_size", 1))
    settings = ServeSettings.of(**fields)
    workload = None
    if d.get("workload") is not None:
        workload = _workload(c, d["workload"], (*path, "workload"))
    requirements = _requirements(c, d["require"], (*path, "require"), workload)
    return Deployment(
        name=name, plan=doc.where, key=format_path(path), line=doc.line(path),
        lines={k: doc.line((*path, k)) for k in d}, model=model, model_source=model_source, model_is_local=is_local,
        revision=revision, gpu=gpu, num_gpus=tp * pp, settings=settings, vllm_options=dict(opts.values),
        requirements=requirements, warnings=tuple(opts.warnings), hf_overrides=opts.hf_overrides, gpu_link=gpu_link,
    )


def _sglang_options(c: _Checker, d: dict[str, Any], path: Path_) -> tuple[dict[str, object], str | None, str | None]:
    """SGLang options by dest: a pasted `sglang_cmd` first, the `sglang:` mapping over it; and its model and
    --revision."""
    from kvplan.sglang.command_line import parse_sglang_command
    from kvplan.sglang.engine_args import MODELLED, resolve_flag

    options: dict[str, object] = {}
    model = revision = None
    if d.get("sglang_cmd") is not None:
        cpath = (*path, "sglang_cmd")
        line = c.command_line(d["sglang_cmd"], cpath)  # located already
        try:
            cmd = parse_sglang_command(line)
        except KvplanError as exc:
            raise c.doc.error(cpath, str(exc), at_value=True) from None
        options.update(cmd.options)
        model, revision = cmd.model, cmd.revision
    if d.get("sglang") is not None:
        spath = (*path, "sglang")
        given: dict[str, str] = {}  # dest -> the flag that set it in this mapping
        for key, value in c.mapping(d["sglang"], spath, "a mapping of SGLang flags").items():
            flag = "--" + str(c.doc.spelled.get((*spath, key)) or key).replace("_", "-")
            try:
                found = resolve_flag(flag)
            except KvplanError as exc:
                raise c.doc.error((*spath, key), str(exc)) from None
            if found is None or found[0] not in MODELLED:
                raise c.doc.error((*spath, key), f"{flag} is not an SGLang flag kvplan models",
                                  hint=", ".join(a.flag for a in MODELLED.values()))
            if found[0] == "model_path":
                raise c.doc.error((*spath, key), "the model goes in the deployment's `model:` (or in sglang_cmd)")
            if found[0] in given:
                raise c.doc.error((*spath, key), f"{MODELLED[found[0]].flag} given twice "
                                  f"({given[found[0]]} and {flag})", hint="give it once")
            given[found[0]] = flag
            options[found[0]] = value
    return options, model, revision


def _sglang_deployment(c: _Checker, d: dict[str, Any], path: Path_, base_dir: Path) -> Deployment:
    """An `engine: sglang` deployment: SGLang's flags, the requirements SGLang's plan can judge."""
    from dataclasses import replace as dc_replace

    from kvplan.sglang.defaults import SglangDeployment, check_deployment
    from kvplan.sglang.engine_args import deployment_fields
    from kvplan.sglang.model_override import deployment_config_overrides
    from kvplan.vllm.settings import ServeSettings

    doc = c.doc
    for key in _VLLM_ONLY_KEYS:
        if key in d:
            raise doc.error((*path, key), "a vLLM key: this deployment is `engine: sglang`",
                            hint="give SGLang's flags in `sglang:` or `sglang_cmd`")
    options, cmd_model, cmd_revision = _sglang_options(c, d, path)
    if d.get("model") is not None:
        model = c.string(d["model"], (*path, "model"))
    elif cmd_model is not None:
        model = cmd_model
    else:
        raise doc.error(path, "missing `model` (a Hub id or a path; or give it in sglang_cmd)")
    model_source, is_local = resolve_model(model, base_dir)
    # The plan's `revision` wins over the pasted line's --revision, as its `model` does over --model-path.
    revision = c.string(d["revision"], (*path, "revision")) if d.get("revision") is not None else cmd_revision
    try:
        dep = SglangDeployment(**deployment_fields(options))  # type: ignore[arg-type]
        # the values, before num_gpus divides by pp; TP ÷ attention DP once num_gpus has set the TP
        check_deployment(dc_replace(dep, enable_dp_attention=False))
    except KvplanError as exc:
        raise doc.error((*path, "sglang"), str(exc)) from None
    if d.get("num_gpus") is not None:
        gpath = (*path, "num_gpus")
        num_gpus = c.count(d["num_gpus"], gpath)
        if num_gpus % dep.pp:
            raise doc.error(gpath, f"{num_gpus} GPUs are not a whole number of SGLang's {dep.pp} pipeline stages",
                            at_value=True)
        if "tp_size" not in options:
            dep = dc_replace(dep, tp=num_gpus // dep.pp)
        elif num_gpus != dep.tp * dep.pp:
            raise doc.error(gpath, f"{num_gpus} GPUs, but SGLang's tp {dep.tp} × pp {dep.pp} uses {dep.tp * dep.pp}",
                            at_value=True)
    try:
        check_deployment(dep)  # before the weights estimate divides by tp
    except KvplanError as exc:
        raise doc.error((*path, "sglang"), str(exc)) from None
    fields: dict[str, Any] = {}
    if d.get("measured") is not None:
        mpath = (*path, "measured")
        measured = c.mapping(d["measured"], mpath)
        c.keys(measured, mpath, ("weights_memory",))
        fields["weights_bytes"] = c.convert(measured["weights_memory"], (*mpath, "weights_memory"), _as_bytes)
    workload = _workload(c, d["workload"], (*path, "workload")) if d.get("workload") is not None else None
    requirements = _requirements(c, d["require"], (*path, "require"), workload)
    for q in requirements:
        if q.kind not in SGLANG_REQUIREMENTS:
            raise ParseError(f"{doc.where}:{q.line}: {q.key}: not judged for `engine: sglang` (kvplan models "
                             f"SGLang's pool, not its scheduler or speed): use {', '.join(SGLANG_REQUIREMENTS)}")
    from dataclasses import replace as dc_replace

    return Deployment(
        name=c.string(d["name"], (*path, "name")), plan=doc.where, key=format_path(path), line=doc.line(path),
        lines={k: doc.line((*path, k)) for k in d}, model=model, model_source=model_source, model_is_local=is_local,
        revision=revision, gpu=c.string(d["gpu"], (*path, "gpu")), num_gpus=dep.tp * dep.pp,
        settings=ServeSettings.of(**fields), vllm_options={k: v for k, v in options.items()},
        requirements=requirements, engine="sglang", sglang=dep,
        hf_overrides=deployment_config_overrides(dep.json_model_override_args))


def _shown_path(path: Path) -> str:
    """A path for messages: relative to the working directory when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _convert_or(err: Callable[..., ParseError], value: Any, converter: _Converter) -> Any:
    try:
        return converter(value, "value")
    except KvplanError as exc:
        raise err(str(exc).removeprefix("value: ").removeprefix("value "), exc.hint) from None


def _vllm_version(c: _Checker, value: Any, path: Path_) -> str:
    from kvplan.vllm.defaults import parse_vllm_version

    # A release written unquoted is read by YAML as a number: 0.10 is the float 0.1, so the text as written is used.
    text = c.doc.written.get(path, str(value)) if isinstance(value, float) else str(value)
    c.convert(text, path, lambda v, w: parse_vllm_version(v))
    return text


def _parse_vllm_cmd(text: str, doc: Doc, path: Path_) -> VllmCommand:
    """A pasted `vllm serve MODEL --flag value …` line, read by kvplan.vllm.command_line (shared with `kvplan fit`)."""
    from kvplan.vllm import command_line as vllm_cmd

    try:
        return vllm_cmd.parse_vllm_command(text)
    except KvplanError as exc:
        raise doc.error(path, str(exc).removeprefix("--vllm-cmd: "), hint=exc.hint, at_value=True) from None


def _workload(c: _Checker, value: Any, path: Path_) -> Workload:
    from kvplan.sim.workloads import ARRIVALS, parse_length_dist

    w = c.mapping(value, path, "a workload mapping")
    c.keys(w, path, _WORKLOAD_KEYS)
    kwargs: dict[str, Any] = {}
    if "num_requests" in w:
        kwargs["num_requests"] = c.count(w["num_requests"], (*path, "num_requests"))
    if "request_rate" in w:
        rpath = (*path, "request_rate")
        rate = w["request_rate"]
        if isinstance(rate, str) and rate.strip().lower() in ("inf", "infinity"):
            kwargs["request_rate"] = math.inf
        else:
            kwargs["request_rate"] = c.number(rate, rpath)
            if kwargs["request_rate"] <= 0:
                raise _value_error(c, rpath, "must be > 0 (or inf)")
    if "arrival" in w:
        kwargs["arrival"] = c.convert(w["arrival"], (*path, "arrival"), _choice(*ARRIVALS))
    for key in ("prompt_len", "output_len"):
        if key in w:
            spec = c.string(w[key], (*path, key))
            c.convert(spec, (*path, key), functools.partial(_length_dist, parse_length_dist))
            if spec.lower().startswith("empirical"):
                raise _value_error(c, (*path, key), "empirical length files are not supported in plans")
            kwargs[key] = spec
    if "shared_prefix_tokens" in w:
        kwargs["shared_prefix_tokens"] = _nonneg_int(c, w["shared_prefix_tokens"], (*path, "shared_prefix_tokens"))
    if "seed" in w:
        kwargs["seed"] = _nonneg_int(c, w["seed"], (*path, "seed"))
    return Workload(**kwargs)


def _length_dist(parse: Callable[..., Any], value: Any, what: str) -> Any:
    return parse(value, what=what)


def _value_error(c: _Checker, path: Path_, message: str) -> ParseError:
    """An error at the value of `path`."""
    return c.doc.error(path, message, at_value=True)


def _nonneg_int(c: _Checker, value: Any, path: Path_) -> int:
    if value == 0 and not isinstance(value, bool):
        return 0
    return c.count(value, path)


def _requirements(c: _Checker, value: Any, path: Path_, workload: Workload | None) -> tuple[Requirement, ...]:
    doc = c.doc
    r = c.mapping(value, path, "a mapping of requirements")
    if not r:
        raise doc.error(path, "no requirements", hint=f"give at least one of {', '.join(REQUIREMENT_KINDS)}")
    c.keys(r, path, (*REQUIREMENT_KINDS, "estimate"))
    # `estimate: pessimistic` beside the requirements: every memory requirement (PESSIMISTIC_KINDS) is judged at
    # the pessimistic end of kvplan's range unless it says `estimate: best` itself.
    pessimistic = False
    if "estimate" in r:
        if r["estimate"] not in ("best", "pessimistic"):
            raise doc.error((*path, "estimate"), f"must be best or pessimistic, got {r['estimate']!r}",
                            at_value=True)
        pessimistic = r["estimate"] == "pessimistic"
    if not any(k != "estimate" for k in r):
        raise doc.error(path, "no requirements", hint=f"give at least one of {', '.join(REQUIREMENT_KINDS)}")
    out: list[Requirement] = []
    for kind, spec in r.items():
        if kind == "estimate":
            continue
        q = _requirement(c, kind, spec, (*path, kind), workload)
        own = isinstance(spec, dict) and "estimate" in spec
        if pessimistic and kind in PESSIMISTIC_KINDS and not own:
            q = _with(q, pessimistic=True)
        out.append(q)
    # min_headroom_pct without its own load borrows the one of no_preemption, else min_concurrency.
    fixed: list[Requirement] = []
    by_kind = {q.kind: q for q in out}
    for q in out:
        if q.kind == "min_headroom_pct" and q.concurrency is None:
            src = by_kind.get("no_preemption")
            if src is not None and src.concurrency is not None:
                q = _with(q, concurrency=src.concurrency, context=q.context or src.context)
            elif "min_concurrency" in by_kind:
                mc = by_kind["min_concurrency"]
                q = _with(q, concurrency=int(mc.value or 0), context=q.context or mc.context)
            else:
                raise doc.error((*path, "min_headroom_pct"), "needs `concurrency` (and `context`): the load to "
                                "measure the headroom at", hint="or add a no_preemption / min_concurrency requirement "
                                "to take it from")
        fixed.append(q)
    return tuple(fixed)


def _with(q: Requirement, **changes: Any) -> Requirement:
    from dataclasses import replace as dc_replace

    return dc_replace(q, **changes)


def _requirement(c: _Checker, kind: str, spec: Any, path: Path_, workload: Workload | None) -> Requirement:
    doc = c.doc
    base = Requirement(kind=kind, key=format_path(path), line=doc.line(path))  # type: ignore[arg-type]
    allowed = _REQUIREMENT_KEYS[kind]
    if kind == "starts":
        if spec == "pessimistic":
            return _with(base, pessimistic=True)
        if spec is not True:
            raise doc.error(path, f"expected `true` or `pessimistic`, got {_kind(spec)}",
                            hint="`starts: true` judges kvplan's best estimate, `starts: pessimistic` the "
                                 "pessimistic end of its range; remove the key to skip the check",
                            at_value=True)
        return base
    if kind == "no_preemption" and spec is True:
        return base  # max_num_seqs requests of max_model_len tokens
    if not isinstance(spec, dict):
        if isinstance(spec, list) or spec is None or isinstance(spec, bool):
            raise doc.error(path, f"expected a number or a mapping with {', '.join(allowed)}, got {_kind(spec)}",
                            at_value=True)
        if kind == "no_preemption":
            raise doc.error(path, "expected `true` or a mapping with concurrency and context", at_value=True)
        missing = [k for k in _REQUIRED_KEYS.get(kind, ()) if k != allowed[0]]
        if missing:
            raise doc.error(path, f"give a mapping: {{value: …, {', '.join(f'{k}: …' for k in missing)}}}",
                            at_value=True)
        return _with(base, **_requirement_fields(c, kind, {allowed[0]: spec}, path, workload, scalar=True))
    c.keys(spec, path, allowed)
    for key in _REQUIRED_KEYS.get(kind, ()):
        if key not in spec:
            raise doc.error(path, f"missing `{key}`")
    return _with(base, **_requirement_fields(c, kind, spec, path, workload, scalar=False))


def _requirement_fields(c: _Checker, kind: str, spec: dict[str, Any], path: Path_, workload: Workload | None,
                        *, scalar: bool) -> dict[str, Any]:
    """The thresholds and load of one requirement; `scalar`: given as a bare number (errors point at it)."""
    doc = c.doc

    def at(key: str) -> Path_:
        return path if scalar else (*path, key)

    kw: dict[str, Any] = {}
    if "value" in spec:
        integer = kind in ("min_concurrency", "min_kv_tokens")
        vpath = at("value")
        kw["value"] = c.count(spec["value"], vpath) if integer else c.number(spec["value"], vpath)
        if kind.startswith("max_") and kw["value"] <= 0:
            raise doc.error(vpath, "must be > 0", at_value=True)
        if kind == "min_headroom_pct" and kw["value"] > 100:
            raise doc.error(vpath, f"a percentage ≤ 100, got {spec['value']!r}", at_value=True)
    for key in ("context", "batch", "concurrency"):
        if key in spec:
            kw[key] = c.count(spec[key], at(key))
    if "estimate" in spec:
        if spec["estimate"] not in ("best", "pessimistic"):
            raise doc.error(at("estimate"), f"must be best or pessimistic, got {spec['estimate']!r}", at_value=True)
        kw["pessimistic"] = spec["estimate"] == "pessimistic"
    if kind == "max_p99_ttft_ms":
        if "workload" in spec:
            kw["workload"] = _workload(c, spec["workload"], at("workload"))
        elif workload is not None:
            kw["workload"] = workload
        else:
            raise doc.error(path, "needs a workload: give `workload:` here or on the deployment")
    return kw
