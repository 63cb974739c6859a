"""KV connectors (`--kv-transfer-config`) as vLLM 0.33 lets them change the KV plan.

config/vllm.py:VllmConfig (hybrid KV cache manager): with no explicit --(no-)disable-hybrid-kv-cache-manager,
a connector whose class does not implement SupportsHMA (kv_connector/v1/base.py) turns the hybrid manager off
("Turning off hybrid kv cache manager because `--kv-transfer-config` selects a KV connector that does not
support it"); MultiConnector supports it only when every child does (factory.py:supports_hma_config). The
connectors' own GPU buffers (NIXL, LMCache, Mooncake …) are not modelled.

`kv_connector_extra_config.cpu_bytes_to_use` (the CPU tier of OffloadingConnector and SimpleCPUOffloadConnector) is
read and validated only (`cpu_bytes_to_use`): the CPU tier kvplan plans is `--kv-offloading-size`'s (vllm/offload.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import InvalidParameter

# kv_connector/factory.py's registry in vLLM 0.33, each with supports_hma() of its class (read in the oracle
# venv; HF3FSKVConnector, LMCacheMPConnector and MoRIIOConnector from their class definitions, their optional
# packages being absent there).
HMA_CONNECTORS = frozenset({
    "DecodeBenchConnector", "ExampleHiddenStatesConnector", "HiSparseConnector", "MoRIIOConnector",
    "MooncakeConnector", "MooncakeStoreConnector", "MultiConnector", "NixlConnector", "NixlPullConnector",
    "NixlPushConnector", "OffloadingConnector", "SimpleCPUOffloadConnector",
})
NO_HMA_CONNECTORS = frozenset({"ExampleConnector", "FlexKVConnectorV1", "HF3FSKVConnector", "LMCacheConnectorV1",
                               "LMCacheMPConnector"})
MAX_CHILD_CONNECTORS = 16  # bounds a MultiConnector's list
MAX_CPU_BYTES = 1 << 60  # 1 EiB: bounds cpu_bytes_to_use as the GPU files' figures are bounded
# kv_offload/factory.py:OffloadingSpecFactory.create_spec: OffloadingConnector's spec when extra config names none
DEFAULT_OFFLOADING_SPEC = "CPUOffloadingSpec"


def connector_supports_hma(config: Mapping[str, Any]) -> bool | None:
    """Whether the connector `config` names keeps the hybrid manager on; None for a connector loaded from
    `kv_connector_module_path` (its class is not known here)."""
    name = config.get("kv_connector")
    if not isinstance(name, str) or not name:
        raise InvalidParameter("--kv-transfer-config: kv_connector must name a connector, e.g. "
                               '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}')
    if name in HMA_CONNECTORS | NO_HMA_CONNECTORS:
        cpu_bytes_to_use(config)
        if name != "MultiConnector":
            return name in HMA_CONNECTORS
        return _children_support_hma(config)
    if config.get("kv_connector_module_path"):
        return None
    raise InvalidParameter(f"--kv-transfer-config: Unsupported connector type: {name[:80]}",
                           hint="vLLM 0.33 registers " + ", ".join(sorted(HMA_CONNECTORS | NO_HMA_CONNECTORS)))


def _children_support_hma(config: Mapping[str, Any]) -> bool | None:
    """multi_connector.py:MultiConnector.all_children_support_hma: kv_connector_extra_config.connectors."""
    extra = config.get("kv_connector_extra_config")
    children = extra.get("connectors") if isinstance(extra, Mapping) else None
    if not isinstance(children, list) or not children or len(children) > MAX_CHILD_CONNECTORS:
        raise InvalidParameter("--kv-transfer-config: MultiConnector needs kv_connector_extra_config.connectors, a "
                               f"list of 1–{MAX_CHILD_CONNECTORS} connector configs")
    results = [connector_supports_hma(c if isinstance(c, Mapping) else {}) for c in children]
    if any(r is False for r in results):
        return False
    return None if any(r is None for r in results) else True


def cpu_bytes_to_use(config: Mapping[str, Any]) -> int | None:
    """`kv_connector_extra_config.cpu_bytes_to_use` of a connector config, validated; None where it is not given.

    vLLM 0.33 reads it as `int(value)` (v1/kv_offload/cpu/spec.py:CPUOffloadingSpec.__init__, which also refuses a
    missing or zero one: "cpu_bytes_to_use must be specified in kv_connector_extra_config";
    simple_cpu_offload_connector.py, whose default is 8 GiB). A negative, fractional or non-numeric value sizes no
    CPU tier, so it is refused here; the size itself is not modelled (only `--kv-offloading-size`'s tier is).
    """
    extra = config.get("kv_connector_extra_config")
    if extra is None:
        extra = {}
    if not isinstance(extra, Mapping):
        raise InvalidParameter("--kv-transfer-config: kv_connector_extra_config must be a JSON object")
    value = extra.get("cpu_bytes_to_use")
    if value is None:
        if (config.get("kv_connector") == "OffloadingConnector"
                and extra.get("spec_name", DEFAULT_OFFLOADING_SPEC) == DEFAULT_OFFLOADING_SPEC):
            raise InvalidParameter("--kv-transfer-config: OffloadingConnector needs "
                                   "kv_connector_extra_config.cpu_bytes_to_use, the bytes of its CPU tier "
                                   "(vLLM: cpu_bytes_to_use must be specified in kv_connector_extra_config)",
                                   hint="or plan the CPU tier with --kv-offloading-size GiB")
        return None
    whole = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, float) and value.is_integer():
        whole = int(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value) <= 40:  # int("10737418240") reads it
        whole = int(value)
    if whole is None or not 0 < whole <= MAX_CPU_BYTES:
        raise InvalidParameter("--kv-transfer-config: kv_connector_extra_config.cpu_bytes_to_use must be a whole "
                               f"number of bytes from 1 to 2**60, got {str(value)[:40]!r}",
                               hint="kvplan does not model this CPU tier; --kv-offloading-size GiB plans one")
    return whole


def connector_cpu_note(config: Mapping[str, Any]) -> str:
    """What a connector's `cpu_bytes_to_use` leaves out of the plan, as a sentence ("" where none is given)."""
    cpu = cpu_bytes_to_use(config)
    if cpu is None:
        return ""
    return (f" Its CPU tier (cpu_bytes_to_use {cpu:,} bytes = {cpu / 2**30:,.2f} GiB) is not modelled: "
            "--kv-offloading-size GiB plans OffloadingConnector's CPU tier.")
