"""Node shapes that are not NVL72 or DGX Spark (those: test_grace_blackwell.py)."""

from __future__ import annotations

from kvplan.hardware.nodes import PCIE_SERVER, node_shape


def test_h20_3e_is_an_hgx_8_gpu_node_like_the_96_gb_h20() -> None:
    # NVIDIA's Secure AI Compatibility Matrix: "NVIDIA HGX H20 141GB HBM3e 8-GPU"; vllm#13074 runs TP 8 on one.
    shape = node_shape("h20-3e")
    assert shape is not PCIE_SERVER
    assert (shape.gpus_per_node, shape.max_tp) == (8, 8) == (node_shape("h20").gpus_per_node, node_shape("h20").max_tp)
