#!/usr/bin/env python3
"""Extract the model architectures each vLLM release serves (dev tool, stdlib only).

Source
------
vLLM's own model registry, ``vllm/model_executor/models/registry.py``, read at
the release tag of the last patch release of every minor version (0.8.5.post1,
0.9.2, 0.10.2, ...).  Nothing from vLLM is imported or executed.

Per release we record:

* ``architectures``: every key of the module-level ``_XXX_MODELS = {...}`` dicts
  whose values are ``(module, class)`` tuples and that vLLM merges into
  ``_VLLM_MODELS`` (text generation, multimodal, speculative decoding, embedding,
  cross-encoder / classification / reward / late interaction, Transformers
  backend ...), mapped to ONE category string.  If an architecture is in several
  dicts the first category in ``CATEGORY_ORDER`` wins; the others are listed in
  ``also`` (only for those architectures).
* ``impl``: the ``module:Class`` vLLM maps the architecture to (stored once at
  top level, with per-version overrides where it changed; see ``format_doc``).
* ``previously_supported`` / ``out_of_tree``: registry.py's
  ``_PREVIOUSLY_SUPPORTED_MODELS`` (arch -> last vLLM version that served it)
  and ``_OOT_SUPPORTED_MODELS`` (arch -> plugin URL), where present.  These are
  NOT served by that release.
* ``vllm_config_model_types``: keys of ``_CONFIG_REGISTRY`` in
  ``vllm/transformers_utils/config.py`` (a dict literal up to 0.9, a
  ``LazyConfigDict(key=...)`` call later, including ``**{"odd-key": ...}``).
  These HF ``model_type`` values are parsed with vLLM's own config classes and
  do not need ``trust_remote_code``.
* ``transformers``: the ``transformers`` requirement line from
  ``requirements/common.txt`` (or ``requirements-common.txt``), spaces removed;
  from a wheel, its ``Requires-Dist: transformers...`` line.

Method
------
``ast.parse`` the files and evaluate the dict displays with a tiny literal
evaluator that understands string keys, tuple values, ``**OTHER_DICT`` and the
``**{k: (mod, arch) for k, (mod, arch) in D.items() if arch == "X"}`` pattern
used in ``_EMBEDDING_MODELS``.  Anything else is reported as a warning.

Usage
-----
  python tools/vllm_registry/extract.py --git-dir /path/to/vllm.git --out FILE
      reads tags ``vX.Y.Z[.postN]`` (no rc), keeps the newest per minor from
      0.8 on; commit = full 40-hex commit of the tag.
  python tools/vllm_registry/extract.py --pypi --out FILE
      same releases from PyPI: streams each sdist and reads only the needed
      members (or, for a release without an sdist, reads the x86_64 wheel with
      HTTP range requests); commit = the short ``g<hash>`` setuptools_scm wrote
      into ``vllm/_version.py`` (None for releases that predate that), the tag
      is assumed to be ``v<version>``.
Options: ``--min-minor 8`` ``--versions 0.9.2,0.33.0`` (explicit list).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tarfile
import urllib.request
import zipfile

REGISTRY = "vllm/model_executor/models/registry.py"
HF_CONFIG = "vllm/transformers_utils/config.py"
VERSION_PY = "vllm/_version.py"
REQ_FILES = ("requirements/common.txt", "requirements-common.txt")

# dict name -> category; order = priority when an arch is in several dicts
CATEGORY_ORDER = [
    ("_TEXT_GENERATION_MODELS", "text"),
    ("_MULTIMODAL_MODELS", "multimodal"),
    ("_SPECULATIVE_DECODING_MODELS", "speculative"),
    ("_EMBEDDING_MODELS", "embedding"),
    ("_CROSS_ENCODER_MODELS", "cross-encoder"),
    ("_SEQUENCE_CLASSIFICATION_MODELS", "sequence-classification"),
    ("_TOKEN_CLASSIFICATION_MODELS", "token-classification"),
    ("_REWARD_MODELS", "reward"),
    ("_LATE_INTERACTION_MODELS", "late-interaction"),
    ("_TRANSFORMERS_MODELS", "transformers"),
    ("_TRANSFORMERS_SUPPORTED_MODELS", "transformers"),
    ("_TRANSFORMERS_BACKEND_MODELS", "transformers-backend"),
]
CATEGORY = dict(CATEGORY_ORDER)
UNION_DICT = "_VLLM_MODELS"
PREV_DICT = "_PREVIOUSLY_SUPPORTED_MODELS"
OOT_DICT = "_OOT_SUPPORTED_MODELS"

WARNINGS: list[str] = []


def warn(msg: str) -> None:
    WARNINGS.append(msg)
    print("warning:", msg, file=sys.stderr)


# ---------------------------------------------------------------- versions

VER_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?$")


def vkey(v: str):
    m = VER_RE.match(v)
    if not m:
        return None
    a, b, c, d, p = m.groups()
    return (int(a), int(b), int(c), int(d or 0), int(p or 0))


def last_per_minor(versions, min_minor: int) -> list[str]:
    best: dict[tuple, str] = {}
    for v in versions:
        k = vkey(v)
        if k is None or k[0] != 0 or k[1] < min_minor:
            continue
        mk = k[:2]
        if mk not in best or vkey(best[mk]) < k:
            best[mk] = v
    return [best[k] for k in sorted(best)]


# ---------------------------------------------------------------- sources


class GitSource:
    def __init__(self, git_dir: str):
        self.git_dir = git_dir

    def _git(self, *args: str, check: bool = True) -> str | None:
        r = subprocess.run(["git", "--git-dir", self.git_dir, *args],
                           capture_output=True, text=True)
        if r.returncode != 0:
            if check:
                raise RuntimeError(r.stderr.strip())
            return None
        return r.stdout

    def versions(self) -> list[str]:
        return [t[1:] for t in self._git("tag", "-l", "v*").split()
                if VER_RE.match(t)]

    def open(self, version: str) -> dict:
        tag = "v" + version
        commit = self._git("rev-parse", tag + "^{commit}").strip()

        def read(path: str) -> str | None:
            return self._git("show", f"{commit}:{path}", check=False)

        return {"tag": tag, "commit": commit, "read": read, "metadata": None}


PYPI_JSON = "https://pypi.org/simple/vllm/"
WANT_MEMBERS = (REGISTRY, HF_CONFIG, VERSION_PY) + REQ_FILES


def _http(url: str, headers: dict | None = None) -> bytes:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.read()


class _HTTPRangeFile(io.RawIOBase):
    """Seekable read-only file over HTTP range requests (for zip central dir)."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0

    def seekable(self):
        return True

    def readable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, off, whence=0):
        self.pos = {0: off, 1: self.pos + off, 2: self.size + off}[whence]
        return self.pos

    def readinto(self, b):
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        data = _http(self.url, {"Range": f"bytes={self.pos}-{self.pos + n - 1}"})
        b[: len(data)] = data
        self.pos += len(data)
        return len(data)


class PyPISource:
    def __init__(self):
        idx = json.loads(_http(PYPI_JSON, {
            "Accept": "application/vnd.pypi.simple.v1+json"}))
        self.files: dict[str, dict] = {}
        for f in idx["files"]:
            fn = f["filename"]
            m = re.match(r"^vllm-([^-]+?)(\.tar\.gz|-cp\d+-abi3-manylinux[^-]*_x86_64\.whl)$", fn)
            if m and not f.get("yanked"):
                kind = "sdist" if m.group(2) == ".tar.gz" else "wheel"
                self.files.setdefault(m.group(1), {}).setdefault(kind, f)

    def versions(self) -> list[str]:
        return list(self.files)

    def open(self, version: str) -> dict:
        files = self.files[version]
        got: dict[str, str] = {}
        metadata = None
        if "sdist" in files:
            f = files["sdist"]
            prefix = f"vllm-{version}/"
            req = urllib.request.Request(f["url"])
            with urllib.request.urlopen(req, timeout=600) as r, \
                    tarfile.open(fileobj=r, mode="r|gz") as tf:
                for m in tf:
                    name = m.name[len(prefix):] if m.name.startswith(prefix) else m.name
                    if name in WANT_MEMBERS and m.isfile():
                        got[name] = tf.extractfile(m).read().decode()
            src = f["filename"]
        else:
            f = files["wheel"]
            raw = _HTTPRangeFile(f["url"], int(f["size"]))
            with zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as zf:
                names = zf.namelist()
                for n in WANT_MEMBERS:
                    if n in names:
                        got[n] = zf.read(n).decode()
                meta = [n for n in names if n.endswith(".dist-info/METADATA")]
                if meta:
                    metadata = zf.read(meta[0]).decode()
            src = f["filename"]
        commit = None
        vp = got.get(VERSION_PY) or ""
        m = re.search(r"commit_id\s*=\s*['\"]g?([0-9a-f]{7,40})['\"]", vp)
        if m:
            commit = m.group(1)
        return {"tag": "v" + version, "commit": commit, "read": got.get,
                "metadata": metadata, "file": src,
                "sha256": f.get("hashes", {}).get("sha256")}


# ---------------------------------------------------------------- parsing


class Unsupported(Exception):
    pass


def _lit(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_lit(e) for e in node.elts)
    if isinstance(node, ast.JoinedStr):
        raise Unsupported("f-string")
    raise Unsupported(ast.unparse(node)[:80])


def _eval_dict(node, env: dict, where: str) -> dict:
    out: dict = {}
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            if k is None:  # **something
                out.update(_eval_dict(v, env, where))
            else:
                try:
                    out[_lit(k)] = _lit(v)
                except Unsupported as e:
                    warn(f"{where}: unsupported entry {e}")
        return out
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise Unsupported(f"unknown name {node.id}")
        return dict(env[node.id])
    if isinstance(node, ast.DictComp):
        return _eval_dictcomp(node, env, where)
    raise Unsupported(ast.unparse(node)[:80])


def _bind(target, value, scope):
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if len(target.elts) != len(value):
            raise Unsupported("unpack length")
        for t, v in zip(target.elts, value):
            _bind(t, v, scope)
    else:
        raise Unsupported("target")


def _expr(node, scope):
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        raise Unsupported(f"name {node.id}")
    if isinstance(node, ast.Compare):
        left = _expr(node.left, scope)
        for op, right in zip(node.ops, node.comparators):
            r = _expr(right, scope)
            if isinstance(op, ast.Eq):
                ok = left == r
            elif isinstance(op, ast.NotEq):
                ok = left != r
            elif isinstance(op, ast.In):
                ok = left in r
            elif isinstance(op, ast.NotIn):
                ok = left not in r
            else:
                raise Unsupported("compare op")
            if not ok:
                return False
            left = r
        return True
    if isinstance(node, ast.BoolOp):
        vals = [_expr(v, scope) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("startswith", "endswith") and not node.keywords:
        obj = _expr(node.func.value, scope)
        return getattr(obj, node.func.attr)(*[_expr(a, scope) for a in node.args])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return tuple(_expr(e, scope) for e in node.elts)
    return _lit(node)


def _eval_dictcomp(node: ast.DictComp, env: dict, where: str) -> dict:
    if len(node.generators) != 1:
        raise Unsupported("nested comprehension")
    g = node.generators[0]
    it = g.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr == "items" and isinstance(it.func.value, ast.Name)
            and it.func.value.id in env):
        raise Unsupported("comprehension iterable " + ast.unparse(it)[:60])
    out = {}
    for k, v in env[it.func.value.id].items():
        scope: dict = {}
        _bind(g.target, (k, v), scope)
        if all(_expr(c, scope) for c in g.ifs):
            out[_expr(node.key, scope)] = _expr(node.value, scope)
    return out


def _top_assignments(tree):
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name):
            yield n.targets[0].id, n.value, n
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) \
                and n.value is not None:
            yield n.target.id, n.value, n


def parse_registry(src: str, where: str) -> dict:
    tree = ast.parse(src)
    env: dict[str, dict] = {}
    union_members: list[str] | None = None
    for name, value, _ in _top_assignments(tree):
        if not re.fullmatch(r"_[A-Z0-9_]*MODELS", name) or not isinstance(value, ast.Dict):
            continue
        if name == UNION_DICT:
            union_members = [v.id for k, v in zip(value.keys, value.values)
                             if k is None and isinstance(v, ast.Name)]
        try:
            env[name] = _eval_dict(value, env, f"{where}:{name}")
        except Unsupported as e:
            warn(f"{where}:{name}: {e}")
    # module-level mutation of the dicts would be missed: flag it
    for n in tree.body:
        for sub in ast.walk(n) if not isinstance(n, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store) \
                    and isinstance(sub.value, ast.Name) and sub.value.id in env:
                warn(f"{where}: module-level item assignment to {sub.value.id}")
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                    and isinstance(sub.func.value, ast.Name) and sub.func.value.id in env \
                    and sub.func.attr in ("update", "pop", "setdefault"):
                warn(f"{where}: module-level {sub.func.value.id}.{sub.func.attr}()")

    if union_members is None:
        warn(f"{where}: no {UNION_DICT}; using all tuple-valued dicts")
        union_members = [n for n, d in env.items() if d and all(
            isinstance(v, tuple) for v in d.values())]
    order = [n for n, _ in CATEGORY_ORDER if n in union_members]
    extra = [n for n in union_members if n not in CATEGORY]
    for n in extra:
        warn(f"{where}: unknown registry dict {n}")
        CATEGORY[n] = n.strip("_").lower().replace("_models", "").replace("_", "-")
    order += extra

    archs: dict[str, dict] = {}
    for dname in order:
        for arch, target in env.get(dname, {}).items():
            if not (isinstance(target, tuple) and len(target) == 2):
                warn(f"{where}:{dname}:{arch}: value {target!r}")
                continue
            e = archs.setdefault(arch, {"cats": [], "impl": f"{target[0]}:{target[1]}"})
            if CATEGORY[dname] not in e["cats"]:
                e["cats"].append(CATEGORY[dname])
    return {
        "archs": archs,
        "previously_supported": env.get(PREV_DICT),
        "out_of_tree": env.get(OOT_DICT),
        "dicts": order,
    }


def parse_config_registry(src: str | None, where: str) -> list[str] | None:
    if src is None:
        warn(f"{where}: {HF_CONFIG} missing")
        return None
    tree = ast.parse(src)
    env: dict[str, dict] = {}
    for name, value, _ in _top_assignments(tree):
        if name == "_CONFIG_REGISTRY_OVERRIDE_HF" and isinstance(value, ast.Dict):
            env[name] = {_lit(k): None for k in value.keys if k is not None}
        if name != "_CONFIG_REGISTRY":
            continue
        keys: list[str] = []
        if isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values):
                if k is None:
                    try:
                        keys += list(_eval_dict(v, env, where).keys()) \
                            if not isinstance(v, ast.Dict) else \
                            [_lit(x) for x in v.keys if x is not None]
                    except Unsupported as e:
                        warn(f"{where}:_CONFIG_REGISTRY **{e}")
                else:
                    keys.append(_lit(k))
        elif isinstance(value, ast.Call):
            for kw in value.keywords:
                if kw.arg is not None:
                    keys.append(kw.arg)
                elif isinstance(kw.value, ast.Dict):
                    keys += [_lit(x) for x in kw.value.keys if x is not None]
                else:
                    warn(f"{where}:_CONFIG_REGISTRY **{ast.unparse(kw.value)[:60]}")
            for a in value.args:
                if isinstance(a, ast.Dict):
                    keys += [_lit(x) for x in a.keys if x is not None]
                else:
                    warn(f"{where}:_CONFIG_REGISTRY arg {ast.unparse(a)[:60]}")
        else:
            warn(f"{where}:_CONFIG_REGISTRY is {type(value).__name__}")
        return sorted(set(keys))
    warn(f"{where}: _CONFIG_REGISTRY not found")
    return None


def transformers_req(read, metadata: str | None, where: str) -> str | None:
    lines = []
    for p in REQ_FILES:
        txt = read(p)
        if txt is None:
            continue
        for ln in txt.splitlines():
            ln = ln.split("#", 1)[0].strip()
            if re.match(r"^transformers\s*(\[.*\])?\s*([<>=!~;]|$)", ln):
                lines.append(ln)
        break
    if not lines and metadata:
        for ln in metadata.splitlines():
            m = re.match(r"^Requires-Dist:\s*(transformers\b.*)$", ln)
            if m:
                lines.append(m.group(1).strip())
    if not lines:
        warn(f"{where}: no transformers requirement found")
        return None
    specs = []
    for ln in lines:
        spec, _, marker = ln.partition(";")
        spec = re.sub(r"\s+", "", spec[len("transformers"):])
        spec = spec.strip("()")
        specs.append(spec + (f"; {marker.strip()}" if marker.strip() else ""))
    return " | ".join(specs)


# ---------------------------------------------------------------- main


def build(source, versions: list[str], source_desc: str) -> dict:
    per: dict[str, dict] = {}
    impl_hist: dict[str, dict[str, str]] = {}
    for v in versions:
        print(f"reading {v} ...", file=sys.stderr)
        h = source.open(v)
        reg_src = h["read"](REGISTRY)
        if reg_src is None:
            warn(f"{v}: {REGISTRY} missing")
            continue
        reg = parse_registry(reg_src, v)
        entry: dict = {"tag": h["tag"], "commit": h["commit"]}
        if h.get("file"):
            entry["from"] = h["file"]
        entry["architectures"] = {a: e["cats"][0] for a, e in sorted(reg["archs"].items())}
        also = {a: e["cats"][1:] for a, e in sorted(reg["archs"].items()) if len(e["cats"]) > 1}
        if also:
            entry["also"] = also
        entry["vllm_config_model_types"] = parse_config_registry(h["read"](HF_CONFIG), v)
        entry["transformers"] = transformers_req(h["read"], h.get("metadata"), v)
        if reg["previously_supported"]:
            entry["previously_supported"] = dict(sorted(reg["previously_supported"].items()))
        if reg["out_of_tree"]:
            entry["out_of_tree"] = dict(sorted(reg["out_of_tree"].items()))
        per[v] = entry
        for a, e in reg["archs"].items():
            impl_hist.setdefault(a, {})[v] = e["impl"]

    # impl: most recent value at top level; per-version differences listed
    impl: dict[str, str] = {}
    impl_changes: dict[str, dict[str, str]] = {}
    for a in sorted(impl_hist):
        hist = impl_hist[a]
        last = hist[max(hist, key=vkey)]
        impl[a] = last
        diff = {v: i for v, i in hist.items() if i != last}
        if diff:
            impl_changes[a] = dict(sorted(diff.items(), key=lambda kv: vkey(kv[0])))

    # presence summary
    vs = list(per)
    presence = {}
    for a in sorted(impl_hist):
        have = [v for v in vs if a in per[v]["architectures"]]
        gaps = [v for v in vs[vs.index(have[0]):vs.index(have[-1]) + 1] if v not in have]
        presence[a] = {"first": have[0], "last": have[-1]}
        if gaps:
            presence[a]["missing"] = gaps
    return {
        "format": 1,
        "source": "vllm-project/vllm vllm/model_executor/models/registry.py at each tag",
        "generated_by": "tools/vllm_registry/extract.py",
        "read_from": source_desc,
        "format_doc": (
            "versions: one entry per vLLM minor (its last patch release), keyed by "
            "version. architectures: arch -> category of the first registry dict "
            "holding it, priority text > multimodal > speculative > embedding > "
            "cross-encoder > sequence-classification > token-classification > reward > "
            "late-interaction > transformers (_TRANSFORMERS[_SUPPORTED]_MODELS: served "
            "via the Transformers backend) > transformers-backend (generic "
            "Transformers* classes); also: other categories of the same arch (only "
            "archs in several dicts). vllm_config_model_types: _CONFIG_REGISTRY keys "
            "in vllm/transformers_utils/config.py (model_types vLLM parses with its "
            "own config classes, no trust_remote_code needed). transformers: "
            "transformers specifier from requirements/common.txt. "
            "previously_supported / out_of_tree: registry.py "
            "_PREVIOUSLY_SUPPORTED_MODELS (arch -> last version serving it) and "
            "_OOT_SUPPORTED_MODELS (arch -> plugin), NOT served by that release. "
            "commit: full hash from git, or the short setuptools_scm hash from "
            "vllm/_version.py when read from PyPI (null if the release predates it). "
            "impl: arch -> 'module:Class' (module under vllm/model_executor/models) "
            "as of the newest version serving it; impl_changes: arch -> {version: "
            "'module:Class'} for versions where it differed. presence: arch -> "
            "first/last listed version serving it, missing = listed versions in "
            "between where it was absent."),
        "versions": per,
        "impl": impl,
        "impl_changes": impl_changes,
        "presence": presence,
        "warnings": WARNINGS,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--git-dir", help="path to a vllm-project/vllm git (mirror) dir")
    g.add_argument("--pypi", action="store_true", help="read releases from PyPI")
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-minor", type=int, default=8)
    ap.add_argument("--versions", help="comma-separated explicit versions")
    a = ap.parse_args(argv)
    if a.git_dir:
        src, desc = GitSource(a.git_dir), "git tags"
    else:
        src, desc = PyPISource(), "PyPI sdists (wheel via HTTP range where no sdist)"
    versions = a.versions.split(",") if a.versions else \
        last_per_minor(src.versions(), a.min_minor)
    data = build(src, versions, desc)
    with open(a.out, "w") as f:
        json.dump(data, f, separators=(",", ":"), sort_keys=False)
        f.write("\n")
    print(f"wrote {a.out}: {len(data['versions'])} versions, "
          f"{len(data['impl'])} architectures, {len(WARNINGS)} warnings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
