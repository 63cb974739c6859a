"""`--quantization`: what vLLM does with the flag before it loads anything (config/model.py:_verify_quantization).

A quantized checkpoint must be loaded with its own method ("Quantization method specified in the model config
(…) does not match …"); an unquantized one can be quantized online at load time: `fp8` stores every linear
weight in fp8 with per-tensor scales (layers/quantization/fp8.py:Fp8OnlineLinearMethod), the embeddings and
the LM head staying in the model dtype.
"""
from __future__ import annotations

from dataclasses import replace

from kvplan.errors import InvalidParameter, NotServed
from kvplan.model.spec import ModelSpec, QuantSpec

# Methods that are the same checkpoint format under another kernel's name (vLLM's override_quantization_method).
_SAME_FORMAT = {"gptq_marlin": "gptq", "awq_marlin": "awq", "auto_gptq": "gptq", "auto_awq": "awq",
                "modelopt_fp4": "modelopt", "fbgemm_fp8": "fp8"}
# Online methods kvplan can size: the stored bits of a quantized linear weight.
ONLINE_BITS = {"fp8": 8.0}


def _family(method: str) -> str:
    return _SAME_FORMAT.get(method, method)


def apply_quantization(model: ModelSpec, method: str | None, known_methods: tuple[str, ...]) -> ModelSpec:
    """The model as vLLM loads it with `--quantization method` (None: the checkpoint's own scheme)."""
    if method is None:
        return model
    method = method.lower()
    if method not in known_methods:
        raise NotServed(f"Unknown quantization method: {method}. Must be one of {list(known_methods)}.")
    declared = model.quant_method or (model.quant.method if model.quant is not None else None)
    if declared is not None:
        if _family(declared.replace("modelopt_fp8", "modelopt")) != _family(method):
            raise NotServed(f"Quantization method specified in the model config ({declared}) does not match the "
                            f"quantization method specified in the `quantization` argument ({method}).")
        return model
    if method not in ONLINE_BITS:
        raise InvalidParameter(f"--quantization {method} on an unquantized checkpoint is not modelled by kvplan",
                               hint=f"online methods kvplan sizes: {', '.join(ONLINE_BITS)}")
    return replace(model, quant=QuantSpec(method, ONLINE_BITS[method]), quant_method=method)
