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


def _too_large(what: str, size: int | None) -> BadConfig:
    """`size` None: a pipe or device, which has no size until it is read."""
    return BadConfig(f"{what} is {f'{size:,} bytes, ' if size is not None else ''}larger than any real config "
                     f"({MAX_CONFIG_BYTES:,}{'' if size is not None else ' bytes'})")


def _read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from a regular file or an open pipe, at most MAX_CONFIG_BYTES (kvplan.files.CONFIG)."""
    from kvplan import files

    try:
        text = files.read_text(str(path), files.CONFIG, where=what)
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
        return BadConfig(f"{repo_id}{at} has no {filename}")
    if isinstance(exc, e.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return NetworkError(f"the Hub answered HTTP {status} for {repo_id}/{filename}")
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
    """Import huggingface_hub, which reads its HF_* environment variables once, at import."""
    try:
        import huggingface_hub.constants  # noqa: F401 (HF_* variables are parsed here)
    except ValueError as exc:  # e.g. HF_HUB_ETAG_TIMEOUT=0.5: huggingface_hub reads it with int()
        raise InvalidParameter(f"huggingface_hub cannot read its environment: {exc}",
                               hint="HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT take whole seconds; "
                               "check the HF_* variables") from None


def _quiet_hub() -> None:
    """Keep huggingface_hub's own retry warnings and progress bars off the user's terminal: kvplan
    reports one line per failure itself."""
    import logging

    # above CRITICAL: retries are logged as warnings/errors and then raised, which kvplan reports itself
    logging.getLogger("huggingface_hub").setLevel(logging.CRITICAL + 10)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _download(repo_id: str, filename: str, revision: str | None) -> Path:
    """The file from the Hub (or the cache). Online, its size is asked first (a HEAD request), so a file
    larger than MAX_CONFIG_BYTES is refused before it is downloaded into the cache."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when huggingface_hub is imported
    _import_hub()
    from huggingface_hub import hf_hub_download

    _quiet_hub()
    try:
        if not _offline():
            cached = _check_size_on_hub(repo_id, filename, revision)
            if cached is not None:
                return cached
        return Path(hf_hub_download(repo_id, filename, revision=revision))
    except KvplanError:
        raise
    except Exception as exc:  # every huggingface_hub / httpx failure becomes one typed error
        raise _hub_error(exc, repo_id, revision, filename) from None


def _check_size_on_hub(repo_id: str, filename: str, revision: str | None) -> Path | None:
    """Raise BadConfig when the Hub reports the file larger than MAX_CONFIG_BYTES. When the Hub cannot
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
    if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
        raise _too_large(f"{repo_id}/{filename}", meta.size)
    return None


def _optional_download(repo_id: str, filename: str, revision: str | None) -> Path | None:
    try:
        return _download(repo_id, filename, revision)
    except KvplanError:
        return None  # the optional file does not exist (or is not cached offline)


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


def safetensors_weights(repo_id: str, revision: str | None = None) -> WeightsInfo | None:
    """Stored weight bytes from the Hub's safetensors metadata (headers only), or None if unavailable."""
    if not is_hub_id(repo_id) or _offline():
        return None
    _import_hub()
    from huggingface_hub import get_safetensors_metadata

    _quiet_hub()
    try:
        meta = get_safetensors_metadata(repo_id, revision=revision)
    except Exception:  # not a safetensors repo, no network, …: fall back to the analytic count
        return None
    counts = {str(dt): int(n) for dt, n in meta.parameter_count.items()}
    total = sum(n * SAFETENSORS_DTYPE_BYTES.get(dt, 2) for dt, n in counts.items())
    return WeightsInfo(bytes=total, parameters_by_dtype=counts)
