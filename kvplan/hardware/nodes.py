"""Node shapes: how many GPUs of a kind share one server (and its NVLink / NVSwitch domain).

vLLM's practice, followed by the layout search: tensor parallelism inside a node, pipeline stages across
nodes, data-parallel replicas for more requests (docs.vllm.ai "Parallelism and scaling": "use tensor
parallelism within a node and pipeline parallelism across nodes").
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeShape:
    """GPUs per node, and where the figure comes from."""

    gpus_per_node: int
    name: str
    source: str


# NVIDIA HGX baseboards: "HGX H100/H200 … 8-GPU" and "HGX B200/B300 … 8 GPUs" (nvidia.com/en-us/data-center/hgx/);
# the A100 HGX baseboard likewise has 8 SXM4 GPUs (DGX A100 datasheet: "8x NVIDIA A100").
_HGX8 = NodeShape(8, "HGX 8-GPU", "https://www.nvidia.com/en-us/data-center/hgx/ — 8 GPUs on one NVSwitch baseboard")
_NODES: dict[str, NodeShape] = {
    **{gpu: _HGX8 for gpu in ("h100-sxm", "h200", "h20", "b200", "b300", "a100-80gb-sxm", "a100-40gb-sxm")},
    # One Grace Hopper superchip per module (nvidia.com/en-us/data-center/grace-hopper-superchip/).
    "gh200": NodeShape(1, "GH200 superchip", "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/ — "
                                             "one H100/H200 GPU per superchip"),
}
# PCIe cards (L40S, L4, RTX, H100 PCIe/NVL, A100 PCIe): no NVSwitch; 8 cards is the largest common server.
PCIE_SERVER = NodeShape(8, "8 × PCIe server", "estimate: 8 PCIe cards per server is the largest common "
                                              "configuration (no NVLink domain beyond bridged pairs)")


def node_shape(gpu_id: str) -> NodeShape:
    """The node a GPU of this catalog id comes in."""
    return _NODES.get(gpu_id, PCIE_SERVER)
