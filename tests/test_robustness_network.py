"""The network side as an attacker or a broken proxy would serve it: a Hub on 127.0.0.1 that hangs,
trickles, floods, redirects in a loop, lies about sizes, rate-limits for an hour, gzips what it was asked
to send plain, and serves malformed safetensors metadata; and the environment settings that point kvplan
at it. Each case runs the real CLI (and the real huggingface_hub) in a fresh interpreter with a 1.5 s
deadline (KVPLAN_HUB_TIMEOUT), under a 20 s wall-clock limit and a 3 GiB address-space limit, and must end
in one `Error:` line and exit 2 (or a correct result), leaving no model data in the cache.

benchmarks/robustness.py runs the same CASES and counts their outcomes.
"""
from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import json_out, run_kvplan
from tests.hubserver import HOSTILE, HubServer, fixture_repo

DEADLINE_S = "1.5"  # KVPLAN_HUB_TIMEOUT in these tests
CASE_LIMIT_S = 20  # wall clock per case
ADDRESS_SPACE = 3 * 2**30  # RLIMIT_AS per case


@dataclass(frozen=True)
class NetCase:
    """One hostile case: `kvplan size <repo>` under `env`, expected to fail with `message` (exit 2), or to
    succeed (message "") with `warning` on stderr."""

    name: str
    repo: str
    message: str
    env: dict[str, str] = field(default_factory=dict)
    warning: str = ""
    keeps_config: bool = False  # config.json came whole before the failure: it stays cached, nothing else


def _header(raw: dict[str, object]) -> bytes:
    """A safetensors file made of its header only, written as given (no offsets computed)."""
    data = json.dumps(raw).encode()
    return struct.pack("<Q", len(data)) + data


EMBED = {"dtype": "BF16", "shape": [151936, 1536], "data_offsets": [0, 151936 * 1536 * 2]}
BAD_HEADERS = {  # repo → a model.safetensors header that breaks one rule of the safetensors format
    "meta/negative-shape": _header({"w": {"dtype": "BF16", "shape": [-1, 1536], "data_offsets": [0, 0]}}),
    "meta/huge-shape": _header({"w": {"dtype": "BF16", "shape": [2**50, 2**50], "data_offsets": [0, 0]}}),
    "meta/float-shape": _header({"w": {"dtype": "BF16", "shape": [1.5, 2], "data_offsets": [0, 6]}}),
    "meta/unknown-dtype": _header({"w": {"dtype": "Q7", "shape": [4], "data_offsets": [0, 4]}}),
    "meta/offsets-disagree": _header({"w": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 8]}}),
    "meta/offsets-reversed": _header({"w": {"dtype": "BF16", "shape": [0], "data_offsets": [9, 1]}}),
    "meta/not-json": struct.pack("<Q", 12) + b"{not json at",
    "meta/header-too-long": struct.pack("<Q", 2**62) + b"{}",
    "meta/missing-keys": _header({"w": {"dtype": "BF16"}}),
}
MANY_SHARDS = 5000


def _index(shards: int) -> bytes:
    return json.dumps({"metadata": {}, "weight_map": {f"t{i}": f"model-{i:05d}-of-{shards:05d}.safetensors"
                                                      for i in range(shards)}}).encode()


CASES: tuple[NetCase, ...] = (
    NetCase("hang", "hostile/hang",
            f"the Hub timed out: no answer for config.json of hostile/hang within {DEADLINE_S} s"),
    NetCase("hanging GET", "hostile/hang-get",
            f"the Hub timed out: no answer for config.json of hostile/hang-get within {DEADLINE_S} s"),
    NetCase("trickle", "hostile/trickle", "the Hub sent config.json of hostile/trickle too slowly"),
    NetCase("flood", "hostile/flood",
            "the Hub sent more than 8,388,608 bytes for config.json of hostile/flood, more than kvplan reads"),
    NetCase("Content-Length above the body", "hostile/lie-long",
            "the Hub connection broke off"),
    NetCase("Content-Length of 3 GiB", "hostile/lie-huge",
            "the Hub announced 3,221,225,472 bytes for config.json of hostile/lie-huge, more than kvplan reads"),
    NetCase("redirect loop", "hostile/redirect-loop",
            "the Hub redirected the request for config.json of hostile/redirect-loop more than 10 times in a row"),
    NetCase("429 for an hour", "hostile/429",
            "the Hub is rate-limiting kvplan (HTTP 429) and asks it to wait 3600 s for config.json of hostile/429"),
    NetCase("429 once, then served", "hostile/429-once", "", env={"KVPLAN_HUB_TIMEOUT": "10"}),
    NetCase("hf_quant_config.json hangs", "hostile/quant-hangs",
            f"the Hub timed out: no answer for hf_quant_config.json of hostile/quant-hangs within {DEADLINE_S} s",
            keeps_config=True),
    NetCase("hf_quant_config.json HTTP 500", "hostile/quant-500",
            "the Hub answered HTTP 500 for hostile/quant-500/hf_quant_config.json", keeps_config=True),
    NetCase("HTTP 503 to every GET", "hostile/503-get",
            "the Hub answered HTTP 503 for hostile/503-get/config.json"),
    NetCase("gzip body", "hostile/gzip",
            "the Hub sent config.json of hostile/gzip encoded (gzip) although kvplan asked for it unencoded"),
    NetCase("HF_ENDPOINT with a space", "Qwen/Qwen2.5-1.5B", "HF_ENDPOINT 'not a url' holds a space",
            env={"HF_ENDPOINT": "not a url"}),
    NetCase("HF_ENDPOINT ftp", "Qwen/Qwen2.5-1.5B", "HF_ENDPOINT 'ftp://x' is not an http:// or https:// URL",
            env={"HF_ENDPOINT": "ftp://x"}),
    NetCase("HF_ENDPOINT without host", "Qwen/Qwen2.5-1.5B", "HF_ENDPOINT 'http://' names no host",
            env={"HF_ENDPOINT": "http://"}),
    NetCase("HF_ENDPOINT bad port", "Qwen/Qwen2.5-1.5B", "HF_ENDPOINT 'http://h:99999' is not a valid URL",
            env={"HF_ENDPOINT": "http://h:99999"}),
    NetCase("HF_HUB_ETAG_TIMEOUT=0", "Qwen/Qwen2.5-1.5B", "HF_HUB_ETAG_TIMEOUT=0 must be at least 1 second",
            env={"HF_HUB_ETAG_TIMEOUT": "0"}),
    NetCase("HF_HUB_DOWNLOAD_TIMEOUT=-3", "Qwen/Qwen2.5-1.5B", "HF_HUB_DOWNLOAD_TIMEOUT=-3 must be at least 1 second",
            env={"HF_HUB_DOWNLOAD_TIMEOUT": "-3"}),
    NetCase("HF_HUB_DOWNLOAD_TIMEOUT=nan", "Qwen/Qwen2.5-1.5B",
            "HF_HUB_DOWNLOAD_TIMEOUT='nan' is not a whole number of seconds", env={"HF_HUB_DOWNLOAD_TIMEOUT": "nan"}),
    NetCase("KVPLAN_HUB_TIMEOUT=abc", "Qwen/Qwen2.5-1.5B", "KVPLAN_HUB_TIMEOUT='abc' is not a number of seconds",
            env={"KVPLAN_HUB_TIMEOUT": "abc"}),
    NetCase("KVPLAN_HUB_TIMEOUT=inf", "Qwen/Qwen2.5-1.5B",
            "KVPLAN_HUB_TIMEOUT='inf' must be more than 0 and at most 3600 seconds", env={"KVPLAN_HUB_TIMEOUT": "inf"}),
    NetCase("KVPLAN_HUB_TIMEOUT=0", "Qwen/Qwen2.5-1.5B",
            "KVPLAN_HUB_TIMEOUT='0' must be more than 0 and at most 3600 seconds", env={"KVPLAN_HUB_TIMEOUT": "0"}),
    *(NetCase(f"safetensors {repo.split('/')[1]}", repo, "", warning="safetensors metadata not used (")
      for repo in BAD_HEADERS),
    NetCase("safetensors index of 5000 shards", "meta/many-shards", "",
            warning=f"names {MANY_SHARDS:,} shards, more than kvplan reads (4,096)"),
)


def add_hostile_repos(hub: HubServer) -> None:
    """The repos CASES ask for, on the session's test Hub."""
    for fault in HOSTILE:
        hub.state.repos[f"hostile/{fault}"] = fixture_repo("Qwen--Qwen2.5-1.5B", fault=fault)
    for repo_id, header in BAD_HEADERS.items():
        hub.state.repos[repo_id] = fixture_repo("Qwen--Qwen2.5-1.5B")
        hub.state.repos[repo_id].files["model.safetensors"] = header
    for repo_id, fault in (("hostile/quant-hangs", "hang-get"), ("hostile/quant-500", "500")):
        hub.state.repos[repo_id] = fixture_repo("nvidia--Llama-3.1-70B-Instruct-FP8", fault=fault,
                                                fault_files=("hf_quant_config.json",))
    many = fixture_repo("Qwen--Qwen2.5-1.5B")
    many.files["model.safetensors.index.json"] = _index(MANY_SHARDS)
    hub.state.repos["meta/many-shards"] = many


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cached: tuple[str, ...]  # model data left in the cache


def run_case(case: NetCase, endpoint: str, hf_home: Path) -> Outcome:
    """`kvplan size <repo> --json` in a fresh interpreter, bounded in time and address space."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_"))}
    env.update({"HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home), "HF_HUB_DISABLE_TELEMETRY": "1",
                "KVPLAN_HUB_TIMEOUT": DEADLINE_S, **case.env})
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kvplan", "size", case.repo, "--json"], capture_output=True,
                          text=True, env=env, timeout=CASE_LIMIT_S, check=False, preexec_fn=_limit_address_space)
    return Outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started, model_data(hf_home))


def model_data(hf_home: Path) -> tuple[str, ...]:
    """Files in the cache other than huggingface_hub's CACHEDIR.TAG marker (blobs, .incomplete, locks, refs)."""
    if not hf_home.exists():
        return ()
    return tuple(sorted(str(p.relative_to(hf_home)) for p in hf_home.rglob("*")
                        if (p.is_file() or p.is_symlink()) and p.name != "CACHEDIR.TAG"))


def problem(case: NetCase, out: Outcome) -> str | None:
    """What is wrong with `out` for `case` (None: as expected)."""
    if "Traceback" in out.stderr or "internal error" in out.stderr:
        return "traceback or internal error: " + out.stderr[-300:]
    if case.message:
        lines = out.stderr.splitlines()
        if out.returncode != 2 or out.stdout or len(lines) != 1 or not lines[0].startswith("Error: "):
            return f"not one error line and exit 2: rc={out.returncode} {out.stderr[:300]!r}"
        if case.message not in lines[0]:
            return f"wrong message: {lines[0][:300]!r}"
        cached = out.cached
        if case.keeps_config:  # config.json's snapshot, blob, lock and ref, and nothing of the failed file
            blobs = [p for p in cached if "/blobs/" in p]
            if len(blobs) != 1 or not any(p.endswith("/config.json") for p in cached):
                return f"config.json not kept alone: {cached}"
            cached = tuple(p for p in cached if "hf_quant_config" in p or p.endswith(".incomplete"))
        if cached:
            return f"left in the cache: {cached}"
        return None
    if out.returncode != 0:
        return f"exit {out.returncode}: {out.stderr[:300]!r}"
    if case.warning and case.warning not in out.stderr:
        return f"no warning {case.warning!r}: {out.stderr[:300]!r}"
    return None


@pytest.fixture(scope="module")
def hostile_hub(hub: HubServer) -> Iterator[HubServer]:
    add_hostile_repos(hub)
    yield hub


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_hostile_case_ends_in_one_line_or_a_correct_result_and_leaves_no_model_data(
        hostile_hub: HubServer, tmp_path: Path, case: NetCase) -> None:
    out = run_case(case, hostile_hub.endpoint, tmp_path / "hf")
    assert problem(case, out) is None, problem(case, out)


def test_rate_limited_once_the_download_is_retried_within_the_deadline(hostile_hub: HubServer,
                                                                         tmp_path: Path) -> None:
    hostile_hub.state.rate_limited.discard("hostile/429-once")
    case = next(c for c in CASES if c.repo == "hostile/429-once")
    out = run_case(case, hostile_hub.endpoint, tmp_path / "hf")
    assert json.loads(out.stdout)["kv_bytes_per_token"] == 28_672
    gets = [r for r in hostile_hub.state.requests if r.startswith("GET /hostile/429-once/resolve/main/config.json")]
    assert len(gets) >= 2  # refused once (Retry-After: 0), then served


def test_negative_shapes_never_become_negative_weights(hostile_hub: HubServer, tmp_path: Path) -> None:
    """A shape of [-1, 1536] used to give "Weights: -1.91 MiB"; the metadata is now refused by the safetensors
    rules and the analytic count is used (Qwen2.5-1.5B: 1,543,714,304 parameters × 2 bytes)."""
    case = next(c for c in CASES if c.repo == "meta/negative-shape")
    out = run_case(case, hostile_hub.endpoint, tmp_path / "hf")
    data = json.loads(out.stdout)
    assert data["weights_source"] == "analytic parameter count"
    assert data["weights_bytes"] == 3_087_428_608
    assert ("meta/negative-shape/model.safetensors: tensor 'w' has a shape that is not a list of up to 16 whole "
            "numbers from 0 to 2**40: [-1, 1536]") in out.stderr


def test_offsets_that_disagree_with_the_shape_are_named(hostile_hub: HubServer, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.repo == "meta/offsets-disagree")
    out = run_case(case, hostile_hub.endpoint, tmp_path / "hf")
    assert "tensor 'w' spans 8 bytes, but its shape [4, 4] of BF16 needs 32" in out.stderr


def test_metadata_far_from_the_analytic_count_is_said_not_silently_used(hub: HubServer, tmp_path: Path) -> None:
    """The test Hub's Qwen2.5-1.5B header holds only the embedding and the final norm:
    (151936 × 1536 + 1536) × 2 = 466,750,464 bytes, against 3,087,428,608 analytic (0.15×)."""
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"],
                      {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf")})
    assert json_out(proc)["weights_bytes"] == 466_750_464
    assert ("Warning: the Hub's safetensors metadata holds 0.43 GiB of weights, the config's analytic count "
            "2.88 GiB (0.15×, more than 2× apart)") in proc.stderr


def test_a_failed_download_keeps_what_was_cached_before(hub: HubServer, tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf")}
    json_out(run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--json"], env))
    before = model_data(tmp_path / "hf")
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B", "--revision", "v9.9"], env)
    assert proc.returncode == 2
    assert model_data(tmp_path / "hf") == before
    assert any(p.endswith("snapshots/" + "0123456789abcdef0123456789abcdef01234567/config.json") for p in before)


def test_a_cache_folder_below_a_regular_file_is_named(hub: HubServer, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B"],
                      {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "afile" / "hf")})
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"Error: the Hugging Face cache folder {tmp_path}/afile/hf/hub cannot be made: {tmp_path}/afile is a file, "
        "not a folder (point HF_HOME or HF_HUB_CACHE at a folder)"]

