"""Node shapes: how many GPUs of a kind share one server, and how far one tensor-parallel group reaches.

vLLM's practice, followed by the layout search: tensor parallelism inside a node, pipeline stages across
nodes, data-parallel replicas for more requests (docs.vllm.ai "Parallelism and scaling": "use tensor
parallelism within a node and pipeline parallelism across nodes"). Two kinds of machine stretch "inside a
node", and a shape says so with `tp_domain`:

* NVL72 racks (GB200, GB300): a node is a compute tray of 4 GPUs (one host; `nodes` counts trays), but all
  72 GPUs share one NVLink domain, and vLLM 0.33 runs tensor parallelism across trays over it: its custom
  all-reduce takes a multi-node group when every rank is an MNNVL-capable Blackwell GPU
  (distributed/device_communicators/custom_all_reduce.py:_group_can_attempt_mnnvl, "the cross-node MNNVL
  path"), and FlashInfer's "mnnvl" all-reduce is "the only supported FlashInfer backend for a multi-node
  allreduce process group" (distributed/device_communicators/flashinfer_all_reduce.py). So a TP group may
  span trays, up to the search's largest TP (8).
* DGX Spark (GB10): one GPU per box and no NVLink between boxes, but two Sparks linked over ConnectX-7
  (200 GbE RoCE) are served with TP=2 across the pair (the startup-log corpus's sparkdocker-396 and
  miaai-glm53flash-204 records run `-tp 2` on two boxes, the latter with `--nnodes 2`). A TP group may span
  the linked pair, no more; beyond it vLLM's rule (PP across nodes) applies.

A layout whose replica spans more than one node is launched on each node with vLLM's multi-node flags
(`--nnodes`, `--node-rank`, `--master-addr`, or a Ray cluster); the sweep's `vllm serve` lines show the
parallel layout only, as for every other multi-node row.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeShape:
    """GPUs per node (one host), how many GPUs one tensor-parallel group may span, and the sources."""

    gpus_per_node: int
    name: str
    source: str
    tp_domain: int = 0  # GPUs a TP group may span; 0: the node itself
    tp_source: str = ""

    @property
    def max_tp(self) -> int:
        """The largest tensor-parallel group this shape allows."""
        return self.tp_domain or self.gpus_per_node


# NVIDIA HGX baseboards: "HGX H100/H200 … 8-GPU" and "HGX B200/B300 … 8 GPUs" (nvidia.com/en-us/data-center/hgx/);
# the A100 HGX baseboard likewise has 8 SXM4 GPUs (DGX A100 datasheet: "8x NVIDIA A100").
_HGX8 = NodeShape(8, "HGX 8-GPU", "https://www.nvidia.com/en-us/data-center/hgx/ — 8 GPUs on one NVSwitch baseboard")
# GB200 / GB300 NVL72: 18 compute trays, each 2 Grace CPUs + 4 GPUs, joined by 9 NVLink switch trays into one
# 72-GPU NVLink domain.
_NVL72 = NodeShape(
    4, "NVL72 compute tray (72-GPU NVLink domain)",
    "https://www.supermicro.com/datasheet/datasheet_SuperCluster_GB200_NVL72.pdf — '10 + 8 compute trays around "
    "9 NVLink switch trays' (code-index id 67281624509); https://raw.githubusercontent.com/mlcommons/"
    "inference_results_v6.1/main/closed/Crusoe/systems/GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json: "
    "'accelerators_per_node': 4; NVIDIA's GB200 NVL Multi-Node Tuning Guide "
    "(https://docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/, as summarised in code-index id "
    "54503974451): 36 Grace CPUs and 72 Blackwell GPUs with a 72-GPU NVLink domain",
    tp_domain=72,
    tp_source="vLLM 0.33 distributed/device_communicators/custom_all_reduce.py — custom all-reduce over "
              "'the cross-node MNNVL path' when every rank is an MNNVL-capable Blackwell GPU; "
              "flashinfer_all_reduce.py — 'mnnvl' is the FlashInfer backend for a multi-node all-reduce group",
)
_NODES: dict[str, NodeShape] = {
    **{gpu: _HGX8 for gpu in ("h100-sxm", "h200", "h20", "b200", "b300", "a100-80gb-sxm", "a100-40gb-sxm")},
    # gpus.yaml h20-3e cites the same matrix entry; vllm#13074 runs TP 8 × PP 2 on two such nodes.
    "h20-3e": NodeShape(8, "HGX H20 141GB 8-GPU", "https://www.nvidia.com/en-us/data-center/solutions/"
                        "confidential-computing/secure-ai-compatibility-matrix/ — 'NVIDIA HGX H20 141GB HBM3e 8-GPU'"),
    # One Grace Hopper superchip per module (nvidia.com/en-us/data-center/grace-hopper-superchip/).
    "gh200": NodeShape(1, "GH200 superchip", "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/ — "
                                             "one H100/H200 GPU per superchip"),
    "gb200": _NVL72,
    "gb300": _NVL72,
    "gb10": NodeShape(
        1, "DGX Spark (one GB10 per box; pairs linked over ConnectX-7)",
        "https://conselara.dev/notes/dgx-spark-gb10-hardware-reference/ — 'Each DGX Spark presents as one logical "
        "GPU'; https://dgx-spark.warehack.ing/hardware/: 'dual ConnectX-7 200GbE (QSFP56)', 'Two units | up to "
        "~405B parameters over 200GbE'",
        tp_domain=2,
        tp_source="https://conselara.dev/notes/dgx-spark-gb10-hardware-reference/ — 'Tensor parallelism beyond TP=1 "
                  "requires a Ray cluster spanning multiple units — there is no NVLink or NVSwitch'; "
                  "tests/fixtures/startup-logs/records.yaml sparkdocker-396-2xgb10-* and miaai-glm53flash-204-2xgb10-* "
                  "run TP=2 on two DGX Sparks",
    ),
}
# PCIe cards (L40S, L4, RTX, H100 PCIe/NVL, A100 PCIe): no NVSwitch; 8 cards is the largest common server.
PCIE_SERVER = NodeShape(8, "8 × PCIe server", "estimate: 8 PCIe cards per server is the largest common "
                                              "configuration (no NVLink domain beyond bridged pairs)")


def nvswitch_gpus(gpu_id: str) -> int:
    """GPUs one NVSwitch joins in this GPU's node (an HGX baseboard, an NVL72 tray), where CUDA multicast
    works; 0 for PCIe cards, NVLink-bridged pairs, a GH200 or a GB10."""
    shape = node_shape(gpu_id)
    return shape.gpus_per_node if shape in (_HGX8, _NVL72) else 0


def node_shape(gpu_id: str) -> NodeShape:
    """The node a GPU of this catalog id comes in."""
    return _NODES.get(gpu_id, PCIE_SERVER)
