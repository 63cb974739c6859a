"""KV connectors (`--kv-transfer-config`) as vLLM 0.33 lets them change the KV plan.

config/vllm.py:VllmConfig (hybrid KV cache manager): with no explicit --(no-)disable-hybrid-kv-cache-manager,
a connector whose class does not implement SupportsHMA (kv_connector/v1/base.py) turns the hybrid manager off
("Turning off hybrid kv cache manager because `--kv-transfer-config` selects a KV connector that does not
support it"); MultiConnector supports it only when every child does (factory.py:supports_hma_config). The
connectors' own GPU buffers (NIXL, LMCache, Mooncake …) are not modelled.
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


def connector_supports_hma(config: Mapping[str, Any]) -> bool | None:
    """Whether the connector `config` names keeps the hybrid manager on; None for a connector loaded from
    `kv_connector_module_path` (its class is not known here)."""
    name = config.get("kv_connector")
    if not isinstance(name, str) or not name:
        raise InvalidParameter("--kv-transfer-config: kv_connector must name a connector, e.g. "
                               '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}')
    if name in HMA_CONNECTORS | NO_HMA_CONNECTORS:
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
