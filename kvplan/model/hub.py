"""Where a model's config.json comes from: a local folder or file, or the Hugging Face Hub.

The only module that imports `huggingface_hub`. It honours HF_TOKEN, HF_HUB_OFFLINE, HF_ENDPOINT and
HF_HOME itself; kvplan never reads or prints the token. Only JSON is read: no model code is executed.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvplan.errors import (
    BadConfig,
    GatedRepo,
    InvalidParameter,
    KvplanError,
    ModelNotFound,
    NetworkError,
    OfflineCacheMiss,
    RevisionNotFound,
)
from kvplan.model.config import parse_config
from kvplan.model.spec import ModelSpec

CONFIG_NAME = "config.json"
QUANT_CONFIG_NAME = "hf_quant_config.json"  # ModelOpt exports (e.g. nvidia/*-FP8, *-NVFP4)
MAX_CONFIG_BYTES = 8 * 2**20  # a config.json is a few KB; refuse anything absurdly large (files.CONFIG)

# safetensors dtype names → bytes per element (safetensors format spec).
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1,
}


@dataclass(frozen=True)
class WeightsInfo:
    """Stored weight bytes read from the Hub's safetensors metadata (no weight download)."""

    bytes: int
    parameters_by_dtype: Mapping[str, int]


def is_hub_id(source: str) -> bool:
    """`org/name` (or `name`) that is not an existing local path."""
    if os.path.exists(source) or source.startswith((".", "/", "~")) or source.endswith(".json"):
        return False
    parts = source.split("/")
    return 1 <= len(parts) <= 2 and all(parts)


def _too_large(what: str, size: int | None, limit: int = MAX_CONFIG_BYTES) -> BadConfig:
    """`size` None: a pipe or device, which has no size until it is read."""
    return BadConfig(f"{what} is {f'{size:,} bytes, ' if size is not None else ''}larger than any real config "
                     f"({limit:,}{'' if size is not None else ' bytes'})")


def _read_json(path: Path, what: str, kind: Any = None) -> dict[str, Any]:
    """A JSON object from a regular file or an open pipe, within `kind`'s bounds (default kvplan.files.CONFIG:
    MAX_CONFIG_BYTES)."""
    from kvplan import files

    try:
        text = files.read_text(str(path), kind or files.CONFIG, where=what)
    except ModelNotFound:
        raise ModelNotFound(f"no {what} at {path}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadConfig(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # json's decoder recurses once per `[`/`{`
        raise BadConfig(f"{what} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # a number of more than 4,300 digits (int_max_str_digits)
        raise BadConfig(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadConfig(f"{what} must hold a JSON object, not {type(data).__name__}")
    return data


PROCESSOR_FILES = ("preprocessor_config.json", "video_preprocessor_config.json")


def _pixel_bounds(path: Path) -> tuple[int, int] | None:
    """(shortest_edge, longest_edge) of a Qwen-VL processor file: its `size`, or the legacy min_pixels / max_pixels
    (transformers' Qwen2VLImageProcessor.__init__ turns those into `size`). None: the file is absent or names
    neither."""
    if not path.is_file():
        return None
    data = _read_json(path, path.name)
    size = data.get("size")
    pair = ((size.get("shortest_edge"), size.get("longest_edge")) if isinstance(size, dict)
            else (data.get("min_pixels"), data.get("max_pixels")))
    if pair == (None, None):
        return None
    values = [v for v in pair if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**40]
    if len(values) != 2:
        raise BadConfig(f"{path.name}: size must give positive integers shortest_edge and longest_edge, got {pair}")
    lo, hi = values
    if lo > hi:
        raise BadConfig(f"{path.name}: shortest_edge {lo} is above longest_edge {hi}")
    return lo, hi


def _with_processor_files(spec: ModelSpec, folder: Path) -> ModelSpec:
    """A Qwen3-VL tower's processor bounds from the folder's own preprocessor_config.json /
    video_preprocessor_config.json, when it has them (vLLM builds the dummy items with them). Without a video file
    the video processor reads preprocessor_config.json (transformers 4.57.1 video_processing_utils.py:
    get_video_processor_dict tries video_preprocessor_config.json, then preprocessor_config.json)."""
    if not any(t.geometry is not None and t.geometry.kind != "pixtral" for t in spec.towers):
        return spec  # Pixtral's processor gives longest_edge only: its image is vision_config.image_size
    image = _pixel_bounds(folder / PROCESSOR_FILES[0])
    video = _pixel_bounds(folder / PROCESSOR_FILES[1]) or image
    if image is None and video is None:
        return spec
    towers = tuple(replace(t, geometry=replace(t.geometry, image_pixels=image, video_pixels=video))
                   if t.geometry is not None else t for t in spec.towers)
    return replace(spec, towers=towers)


def load_local(source: str, *, hf_overrides: Mapping[str, Any] | None = None) -> ModelSpec:
    """A folder holding config.json (and maybe hf_quant_config.json), or a path to a config.json;
    `hf_overrides` as vLLM's --hf-overrides."""
    from kvplan.model import mistral_format

    path = Path(os.path.expanduser(source))  # `~user` of no such user stays as written (Path raises)
    if path.is_dir():
        folder, cfg = path, path / CONFIG_NAME
        if not cfg.exists():
            if (path / mistral_format.PARAMS_NAME).is_file():
                raise BadConfig(mistral_format.only_params_json_message(str(path)))
            raise ModelNotFound(f"{path} has no {CONFIG_NAME}")
    elif path.exists():
        folder, cfg = path.parent, path
    else:
        raise ModelNotFound(f"no such file or folder: {source}")
    quant_path = folder / QUANT_CONFIG_NAME
    quant = _read_json(quant_path, QUANT_CONFIG_NAME) if quant_path.exists() else None
    name = folder.name if cfg.name == CONFIG_NAME else cfg.stem
    spec = parse_config(_read_json(cfg, str(cfg)), name=name, quant_config=quant, hf_overrides=hf_overrides)
    spec = _with_processor_files(spec, folder)
    params_path = folder / mistral_format.PARAMS_NAME
    if cfg.name != CONFIG_NAME or not params_path.is_file():
        return spec
    # repo_utils.py:is_mistral_model_repo: vLLM reads params.json when consolidated*.safetensors is there
    reads_params = any(folder.glob(mistral_format.CONSOLIDATED_GLOB))
    try:
        params = _read_json(params_path, str(params_path))
    except BadConfig:
        if reads_params:  # the file vLLM would read is broken: say so
            raise
        return spec  # a broken params.json vLLM does not read changes nothing
    note = mistral_format.params_json_note(params, spec, vllm_reads_it=reads_params)
    return replace(spec, config_notes=(*spec.config_notes, note))


def read_config(source: str, revision: str | None = None) -> dict[str, Any]:
    """The raw config.json of a Hub id (`revision` honoured), a local folder or a config.json path."""
    if not is_hub_id(source):
        path = Path(os.path.expanduser(source))
        cfg = path / CONFIG_NAME if path.is_dir() else path
        return _read_json(cfg, str(cfg))
    return _read_json(_download(source, CONFIG_NAME, revision), f"{source}/{CONFIG_NAME}")


def _hub_error(exc: Exception, repo_id: str, revision: str | None, filename: str) -> KvplanError:
    """One clear message per Hub failure (mapping as the hf CLI's CLI_ERROR_MAPPINGS)."""
    from huggingface_hub import errors as e

    at = f" at revision {revision!r}" if revision else ""
    if isinstance(exc, e.HFValidationError):  # e.g. a name with spaces or control characters
        return ModelNotFound(f"{repo_id!r} is neither a local path nor a Hub id",
                             hint="Hub ids look like org/name: letters, digits, '-', '_' and '.'")
    if isinstance(exc, e.GatedRepoError):
        return GatedRepo(f"{repo_id} is a gated repo", hint="accept its licence on the Hub and set HF_TOKEN")
    if isinstance(exc, e.RevisionNotFoundError):
        return RevisionNotFound(f"{repo_id} has no revision {revision!r}")
    if isinstance(exc, e.RepositoryNotFoundError):
        return ModelNotFound(f"no model {repo_id!r} on the Hub (or it is private)",
                             hint="check the name; set HF_TOKEN for a private repo")
    if isinstance(exc, (e.OfflineModeIsEnabled, e.LocalEntryNotFoundError)):
        cause = exc.__cause__
        if not _offline() and isinstance(cause, Exception) and not isinstance(cause, e.LocalEntryNotFoundError):
            return _hub_error(cause, repo_id, revision, filename)  # say why: HTTP 500, a timeout, refused…
        if _offline():
            return OfflineCacheMiss(f"{filename} of {repo_id}{at} is not in the local cache and HF_HUB_OFFLINE is set",
                                    hint="unset HF_HUB_OFFLINE once to download it")
        return NetworkError(f"cannot reach the Hugging Face Hub for {repo_id} and it is not cached",
                            hint="check the network or HF_ENDPOINT")
    if isinstance(exc, e.EntryNotFoundError):  # after LocalEntryNotFoundError, which subclasses it
        return _NoSuchFile(f"{repo_id}{at} has no {filename}")
    if isinstance(exc, e.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return NetworkError(f"the Hub answered HTTP {status} for {repo_id}/{filename}")
    if isinstance(exc, OSError) and "Consistency check failed" in str(exc):  # file_download.http_get
        return NetworkError(f"the Hub sent {filename} of {repo_id} with a size other than it announced "
                            "(Content-Length)", hint="nothing was cached; try again")
    if isinstance(exc, OSError) and exc.filename and not isinstance(exc, ConnectionError):
        return InvalidParameter(f"cannot write the Hugging Face cache: {exc.strerror or exc} ({exc.filename})",
                                hint="point HF_HOME (or HF_HUB_CACHE) at a writable folder")
    kind = type(exc).__name__
    if "Timeout" in kind:
        return NetworkError(f"the Hub timed out while sending {filename} of {repo_id}")
    if "Protocol" in kind or "Incomplete" in kind or "ReadError" in kind:
        return NetworkError(f"the Hub connection broke off while sending {filename} of {repo_id}",
                            hint="nothing was cached; try again")
    if "Connect" in kind:
        return NetworkError(f"cannot reach the Hugging Face Hub for {repo_id}", hint="check the network or HF_ENDPOINT")
    return NetworkError(f"cannot download {filename} of {repo_id}: {kind}")


def _import_hub() -> None:
    """Import huggingface_hub, which reads its HF_* environment variables once, at import, after checking
    the ones it would misread (kvplan.model.hub_net), and guard its HTTP client."""
    from kvplan.model import hub_net

    hub_net.check_hub_environment(os.environ)
    try:
        import huggingface_hub.constants  # noqa: F401 (HF_* variables are parsed here)
    except ValueError as exc:  # another HF_* variable huggingface_hub reads with int()
        raise InvalidParameter(f"huggingface_hub cannot read its environment: {exc}",
                               hint="HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT take whole seconds; "
                               "check the HF_* variables") from None
    _install_guard()


_guard: list[bool] = []  # installed once per process


def _install_guard() -> None:
    """huggingface_hub's shared HTTP client, with every transport wrapped by hub_net.GuardTransport, and its
    retry sleeps (utils/_http.py, file_download.py) bounded by the deadline."""
    if _guard:
        return
    import sys

    from huggingface_hub import file_download, set_client_factory
    from huggingface_hub.utils import _http

    from kvplan.model import hub_net

    default_factory = _http.default_client_factory
    httpx = sys.modules[type(default_factory()).__module__.split(".")[0]]  # httpx2 (hub ≥ 2) or httpx (1.x)
    set_client_factory(lambda: hub_net.wrap_client(default_factory(), httpx))
    for module in (_http, file_download):
        if getattr(module, "time", None) is not None:
            setattr(module, "time", hub_net.BoundedTime())  # noqa: B010 (a module attribute mypy does not see)
    _guard.append(True)


def _quiet_hub() -> None:
    """Keep huggingface_hub's own retry warnings and progress bars off the user's terminal: kvplan
    reports one line per failure itself."""
    import logging

    # above CRITICAL: retries are logged as warnings/errors and then raised, which kvplan reports itself
    logging.getLogger("huggingface_hub").setLevel(logging.CRITICAL + 10)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _download(repo_id: str, filename: str, revision: str | None, max_bytes: int = MAX_CONFIG_BYTES) -> Path:
    """The file from the Hub (or the cache). Online, its size is asked first (a HEAD request), so a file
    larger than `max_bytes` is refused before it is downloaded into the cache; the body is cut at
    `max_bytes` too, and the whole exchange ends within KVPLAN_HUB_TIMEOUT (kvplan.model.hub_net). What
    a failed download leaves in the cache (blob, .incomplete, lock, refs) is removed."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when huggingface_hub is imported
    _import_hub()
    from huggingface_hub import hf_hub_download

    from kvplan.model import hub_net

    _quiet_hub()
    if _offline():
        before: set[Path] | None = None
    else:
        _check_cache_folder()
        try:
            before = _cache_entries(repo_id)  # huggingface_hub's cache layout validates the repo id first
        except Exception as exc:  # noqa: BLE001 (an invalid id, 'org/name@main', is the user's: say so)
            raise _hub_error(exc, repo_id, revision, filename) from None
    try:
        with hub_net.guarded(f"{filename} of {repo_id}", max_body=max_bytes, environ=os.environ):
            if before is not None:
                cached = _check_size_on_hub(repo_id, filename, revision, max_bytes)
                if cached is not None:
                    return cached
            return Path(hf_hub_download(repo_id, filename, revision=revision))
    except Exception as exc:  # every huggingface_hub / httpx failure becomes one typed error
        if before is not None:
            _remove_new_entries(repo_id, before)
        if isinstance(exc, KvplanError):
            raise
        raise _hub_error(exc, repo_id, revision, filename) from None


MAX_CACHE_ENTRIES = 10_000  # a repo's cache folder: a few files per revision; past this, leave it alone


def _repo_cache_folders(repo_id: str) -> tuple[Path, Path]:
    """The repo's folder in the Hub cache and its lock folder (huggingface_hub's cache layout)."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    root = Path(constants.HF_HUB_CACHE)
    folder = repo_folder_name(repo_id=repo_id, repo_type="model")
    return root / folder, root / ".locks" / folder


def _cache_entries(repo_id: str) -> set[Path] | None:
    """Every path under the repo's cache and lock folders (None: too many to track)."""
    entries: set[Path] = set()
    for base in _repo_cache_folders(repo_id):
        for path in (base, *base.parents[:2]):
            if path.exists():
                entries.add(path)
        try:
            for path in base.rglob("*"):
                entries.add(path)
                if len(entries) > MAX_CACHE_ENTRIES:
                    return None
        except OSError:
            return None
    return entries


def _remove_new_entries(repo_id: str, before: set[Path]) -> None:
    """Remove the files and empty folders a failed download added to the cache (nothing that was there)."""
    after = _cache_entries(repo_id)
    if after is None:
        return
    new = after - before
    for path in new:
        if path.is_symlink() or path.is_file():
            try:
                path.unlink()
            except OSError:
                pass
    for path in sorted(new, key=lambda p: len(p.parts), reverse=True):
        try:
            path.rmdir()  # only if empty
        except OSError:
            pass


def _check_cache_folder() -> None:
    """Refuse a cache folder that cannot exist: one below a regular file (huggingface_hub would fail with a
    bare NotADirectoryError or FileExistsError)."""
    from huggingface_hub import constants

    cache = Path(constants.HF_HUB_CACHE)
    for path in (cache, *cache.parents):
        if path.is_dir():
            return
        if path.exists() or path.is_symlink():
            raise InvalidParameter(f"the Hugging Face cache folder {cache} cannot be made: {path} is a file, "
                                   "not a folder", hint="point HF_HOME or HF_HUB_CACHE at a folder")


def _check_size_on_hub(repo_id: str, filename: str, revision: str | None, max_bytes: int) -> Path | None:
    """Raise BadConfig when the Hub reports the file larger than `max_bytes`. When the Hub cannot
    answer, return the cached copy as hf_hub_download would (None: not cached, or the Hub answered)."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    from huggingface_hub import errors as e

    try:
        meta = get_hf_file_metadata(hf_hub_url(repo_id, filename, revision=revision),
                                    timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except (e.RevisionNotFoundError, e.EntryNotFoundError):
        raise  # hf_hub_download does not fall back to the cache for these either
    except Exception:
        cached = try_to_load_from_cache(repo_id, filename, revision=revision)
        if isinstance(cached, str):
            return Path(cached)
        raise
    if meta.size is not None and meta.size > max_bytes:
        raise _too_large(f"{repo_id}/{filename}", meta.size, max_bytes)
    return None


class _NoSuchFile(BadConfig):
    """The repo (at that revision) has no such file: the Hub said so (EntryNotFound)."""


def _optional_download(repo_id: str, filename: str, revision: str | None) -> Path | None:
    """The file, or None when the repo has none (or, offline, the cache has none). Any other failure (a
    timeout, HTTP 500, a file too large) is raised: a quantization config that could not be read must not
    be taken for one that does not exist (the weights would be counted in BF16)."""
    try:
        return _download(repo_id, filename, revision)
    except (_NoSuchFile, OfflineCacheMiss):
        return None


def load_model(source: str, revision: str | None = None, *,
               hf_overrides: Mapping[str, Any] | None = None) -> ModelSpec:
    """A ModelSpec from a Hub id (`--revision` honoured), a local folder, or a config.json path."""
    if not is_hub_id(source):
        if revision:
            raise BadConfig("--revision applies to Hub models, not local paths")
        return load_local(source, hf_overrides=hf_overrides)
    from kvplan.model import mistral_format

    cfg = _download(source, CONFIG_NAME, revision)
    quant_path = _optional_download(source, QUANT_CONFIG_NAME, revision)
    quant = _read_json(quant_path, QUANT_CONFIG_NAME) if quant_path else None
    spec = parse_config(_read_json(cfg, f"{source}/{CONFIG_NAME}"), name=source, quant_config=quant,
                        hf_overrides=hf_overrides)
    params_path = _optional_download(source, mistral_format.PARAMS_NAME, revision)
    if params_path is None:
        return spec
    # whether consolidated*.safetensors is there too would take a listing of the repository: the note says when
    # vLLM reads params.json instead
    try:
        params = _read_json(params_path, f"{source}/{mistral_format.PARAMS_NAME}")
    except BadConfig:
        return spec  # whether vLLM reads it is not known here (no listing): kvplan plans from config.json
    note = mistral_format.params_json_note(params, spec, vllm_reads_it=False)
    return replace(spec, config_notes=(*spec.config_notes, note))


MAX_SHARDS = 4096  # kvplan's bound; the largest public checkpoints have a few hundred shards
MAX_TENSORS = 1_000_000  # kvplan's bound on weight_map entries / header tensors, all shards together
MAX_DIM = 2**40  # no real dimension comes near this (vocabularies and widths are below 2**21)
MAX_TOTAL_BYTES = 2**50  # 1 PiB: beyond any checkpoint
# A shard's header: huggingface_hub reads the first 100,000 bytes, then at most SAFETENSORS_MAX_HEADER_LENGTH
MAX_HEADER_BODY = 25_000_000 + 100_001


def safetensors_weights(repo_id: str, revision: str | None = None) -> WeightsInfo | None:
    """Stored weight bytes from the Hub's safetensors metadata (headers only), or None if unavailable or
    refused (`safetensors_metadata` says why)."""
    return safetensors_metadata(repo_id, revision)[0]


def safetensors_metadata(repo_id: str, revision: str | None = None) -> tuple[WeightsInfo | None, str | None]:
    """(weights, None), or (None, why the metadata was not used: None when the repo has none or kvplan is
    offline). Shards, tensors, dtypes, shapes and data offsets are checked before any count is used."""
    if not is_hub_id(repo_id):
        return None, None
    _import_hub()
    if _offline():
        return _cached_counts(repo_id, revision)
    from huggingface_hub import errors as e

    from kvplan.model import hub_net

    _quiet_hub()
    try:
        with hub_net.guarded(f"the safetensors headers of {repo_id}", max_body=MAX_HEADER_BODY,
                             environ=os.environ):
            files = _safetensors_files(repo_id, revision)
            counts = _header_counts(repo_id, revision, files) if files else {}
    except e.NotASafetensorsRepoError:
        _store_counts(repo_id, revision, {})
        return None, None
    except KvplanError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 (any failure of the optional metadata: say it, count analytically)
        return None, _metadata_problem(exc, repo_id)
    _store_counts(repo_id, revision, counts)
    return _weights(counts), None


def _weights(counts: dict[str, int]) -> WeightsInfo | None:
    """The stored bytes of parameters per safetensors dtype; None for a repo with no safetensors ({})."""
    if not counts:
        return None
    return WeightsInfo(bytes=sum(n * SAFETENSORS_DTYPE_BYTES[dt] for dt, n in counts.items()),
                       parameters_by_dtype=counts)


# kvplan's cache of the headers' counts: a folder inside the repo's Hub cache folder, one JSON per commit
# (huggingface_hub's scan_cache_dir reads only refs/, snapshots/ and blobs/ there). Offline, the commit is the one
# the cached config.json was read at (refs/<revision>), so the counts are those of the same checkpoint.
COUNTS_FOLDER = "kvplan-safetensors"
MAX_COUNTS_BYTES = 64 * 2**10  # {dtype: count} for ≤ 16 dtypes is under 1 KiB


def _counts_file(repo_id: str, revision: str | None) -> Path | None:
    """Where the counts of `repo_id` at `revision` (default main) are cached; None: its commit is not known."""
    import re

    folder = _repo_cache_folders(repo_id)[0]
    rev = revision or "main"
    commit = rev if re.fullmatch(r"[0-9a-f]{40}", rev) else None
    if commit is None and "/" not in rev and rev not in {"", ".", ".."}:
        from kvplan import files

        try:
            text = files.read_text(str(folder / "refs" / rev), files.FileKind("Hub cache ref", 100, 100),
                                   where=f"the cached ref {rev!r} of {repo_id}").strip()
        except (KvplanError, OSError):
            return None
        commit = text if re.fullmatch(r"[0-9a-f]{40}", text) else None
    return None if commit is None else folder / COUNTS_FOLDER / f"{commit}.json"


def _store_counts(repo_id: str, revision: str | None, counts: dict[str, int]) -> None:
    """Cache the counts for offline runs (best effort: a read-only cache only loses the offline answer)."""
    from kvplan import files

    try:
        path = _counts_file(repo_id, revision)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_output(str(path), json.dumps({"parameters_by_dtype": counts}, sort_keys=True),
                           what="the safetensors counts cache")  # atomic: a reader never sees half of it
    except (KvplanError, OSError, ValueError):
        pass


def _cached_counts(repo_id: str, revision: str | None) -> tuple[WeightsInfo | None, str | None]:
    """Offline: the counts an online run cached, checked as the headers are; else why there are none."""
    from kvplan import files

    miss = (f"the safetensors metadata of {repo_id} is not in the local cache and HF_HUB_OFFLINE is set: the "
            "weights are estimated from config.json; run once online to cache it")
    path = _counts_file(repo_id, revision)
    if path is None or not path.is_file():
        return None, miss
    try:
        data = _read_json(path, f"kvplan's cached safetensors counts of {repo_id}",
                          files.FileKind("cached safetensors counts", MAX_COUNTS_BYTES, MAX_COUNTS_BYTES,
                                         error=BadConfig, missing=ModelNotFound))
    except KvplanError as exc:
        return None, str(exc)
    counts = data.get("parameters_by_dtype")
    if (not isinstance(counts, dict) or len(counts) > len(SAFETENSORS_DTYPE_BYTES)
            or any(dt not in SAFETENSORS_DTYPE_BYTES or type(n) is not int or n < 0 for dt, n in counts.items())
            or sum(n * SAFETENSORS_DTYPE_BYTES[dt] for dt, n in counts.items()) > MAX_TOTAL_BYTES):
        return None, f"kvplan's cached safetensors counts of {repo_id} ({path}) are malformed"
    return _weights(counts), None


def _metadata_problem(exc: Exception, repo_id: str) -> str:
    from huggingface_hub import errors as e

    if isinstance(exc, (e.SafetensorsParsingError, KeyError, TypeError, ValueError, AttributeError)):
        return f"a safetensors header of {repo_id} is malformed ({type(exc).__name__})"
    return str(_hub_error(exc, repo_id, None, "the safetensors headers"))


def _safetensors_files(repo_id: str, revision: str | None) -> list[str]:
    """The safetensors files of the repo: the single file, or the index's shards (bounded, names checked)."""
    from huggingface_hub import HfApi, constants

    api = HfApi()
    if api.file_exists(repo_id, constants.SAFETENSORS_SINGLE_FILE, revision=revision):
        return [constants.SAFETENSORS_SINGLE_FILE]
    if not api.file_exists(repo_id, constants.SAFETENSORS_INDEX_FILE, revision=revision):
        return []
    from kvplan import files

    name = constants.SAFETENSORS_INDEX_FILE
    index = _read_json(_download(repo_id, name, revision, files.SAFETENSORS_INDEX.max_bytes),
                       f"{repo_id}/{name}", files.SAFETENSORS_INDEX)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise BadConfig(f"{repo_id}/{name} has no weight_map")
    if len(weight_map) > MAX_TENSORS:
        raise BadConfig(f"{repo_id}/{name} lists {len(weight_map):,} tensors, more than kvplan reads "
                        f"({MAX_TENSORS:,})")
    shards = set(weight_map.values())
    if len(shards) > MAX_SHARDS:
        raise BadConfig(f"{repo_id}/{name} names {len(shards):,} shards, more than kvplan reads ({MAX_SHARDS:,})")
    for shard in shards:
        if (not isinstance(shard, str) or not shard.endswith(".safetensors") or shard.startswith("/")
                or ".." in shard.split("/") or len(shard) > 255):
            raise BadConfig(f"{repo_id}/{name} names a shard that is not a safetensors file of the repo: "
                            f"{str(shard)[:60]!r}")
    return sorted(shards)


def _header_counts(repo_id: str, revision: str | None, shards: list[str]) -> dict[str, int]:
    """Parameters per dtype over the shards' headers (fetched 8 at a time, as huggingface_hub does)."""
    from concurrent.futures import ThreadPoolExecutor

    from huggingface_hub import HfApi

    api = HfApi()

    def parse(shard: str) -> Any:
        return api.parse_safetensors_file_metadata(repo_id, shard, revision=revision)

    counts: dict[str, int] = {}
    seen = 0
    with ThreadPoolExecutor(max_workers=8) as pool:
        for shard, meta in zip(shards, pool.map(parse, shards), strict=True):
            seen += len(meta.tensors)
            if seen > MAX_TENSORS:
                raise BadConfig(f"the safetensors headers of {repo_id} hold more than {MAX_TENSORS:,} tensors")
            for tensor, info in meta.tensors.items():
                dtype, n = _checked_tensor(f"{repo_id}/{shard}", str(tensor), info)
                counts[dtype] = counts.get(dtype, 0) + n
    if sum(n * SAFETENSORS_DTYPE_BYTES[dt] for dt, n in counts.items()) > MAX_TOTAL_BYTES:
        raise BadConfig(f"the safetensors headers of {repo_id} add up to more than 1 PiB")
    return counts


def _checked_tensor(where: str, name: str, info: Any) -> tuple[str, int]:
    """(dtype, elements) of one header entry, after the safetensors format's rules: a known dtype, a shape
    of non-negative integers, and data_offsets [begin, end] spanning exactly elements × dtype bytes."""
    shown = name[:80]
    dtype, shape, offsets = info.dtype, info.shape, info.data_offsets
    if dtype not in SAFETENSORS_DTYPE_BYTES:
        raise BadConfig(f"{where}: tensor {shown!r} has an unknown dtype {str(dtype)[:20]!r}")
    if not isinstance(shape, list) or len(shape) > 16 or not all(
            type(d) is int and 0 <= d <= MAX_DIM for d in shape):
        raise BadConfig(f"{where}: tensor {shown!r} has a shape that is not a list of up to 16 whole numbers "
                        f"from 0 to 2**40: {str(shape)[:60]}")
    n = 1
    for d in shape:
        n *= d
    if n * SAFETENSORS_DTYPE_BYTES[dtype] > MAX_TOTAL_BYTES:
        raise BadConfig(f"{where}: tensor {shown!r} of shape {shape} is larger than 1 PiB")
    if (not isinstance(offsets, (list, tuple)) or len(offsets) != 2
            or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise BadConfig(f"{where}: tensor {shown!r} has data_offsets that are not [begin, end]")
    if offsets[1] - offsets[0] != n * SAFETENSORS_DTYPE_BYTES[dtype]:
        raise BadConfig(f"{where}: tensor {shown!r} spans {offsets[1] - offsets[0]:,} bytes, but its shape "
                        f"{shape} of {dtype} needs {n * SAFETENSORS_DTYPE_BYTES[dtype]:,}")
    return str(dtype), n
