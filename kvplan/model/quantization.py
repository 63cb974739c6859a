"""Weight quantization a checkpoint declares (`quantization_config` in config.json, or ModelOpt's
hf_quant_config.json) and the KV-cache scheme it implies under `--kv-cache-dtype auto`
(vLLM `transformers_utils/model_arch_config_convertor.py:_normalize_quantization_config`,
`config/cache.py:resolve_kv_cache_dtype_string`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import BadConfig
from kvplan.model.reader import names, quant_group, quant_number
from kvplan.model.spec import QuantSpec

_MAX_WEIGHT_BITS = 64.0  # no stored weight format is wider than float64


def _is_modelopt(cfg: Mapping[str, Any]) -> bool:
    """model_arch_config_convertor.py:_normalize_quantization_config: `producer.name == "modelopt"`, or the
    legacy `quantization.modelopt_quant_config`; anything else gets no quant_method (no quantization)."""
    producer = cfg.get("producer")
    inner = cfg.get("quantization")
    return (isinstance(producer, Mapping) and producer.get("name") == "modelopt") or (
        isinstance(inner, Mapping) and "modelopt_quant_config" in inner)


# ModelOpt's kv_cache_quant_algo → vLLM's cache dtype (utils/torch_utils.py:MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP:
# fp8 → fp8_e4m3, kept as kvplan's "fp8" (the same byte a value); nvfp4 → nvfp4). Any other value: vLLM warns and
# falls back to auto.
_MODELOPT_KV = {"FP8": "fp8", "NVFP4": "nvfp4"}


def _modelopt_kv_scheme(scheme: Any) -> str | None:
    """A ModelOpt `kv_cache_scheme` object: 4-bit float is nvfp4 (get_kv_cache_quant_algo_string)."""
    if isinstance(scheme, Mapping) and scheme.get("num_bits") == 4 and scheme.get("type") == "float":
        return "nvfp4"
    return None


# The quant_algo each ModelOpt config accepts: vLLM 0.33 model_executor/layers/quantization/modelopt.py
# LINEAR_ALGOS (owner "modelopt": ModelOptFp8Config, "modelopt_fp4": ModelOptNvFp4Config), whose __init__
# refuses any other with the message _modelopt_refusal repeats.
_MODELOPT_ALGOS: Mapping[str, tuple[str, ...]] = {
    "modelopt": ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"),
    "modelopt_fp4": ("NVFP4", "W4A16_NVFP4"),
}
# hf_quant_config.json's quant_algo → stored weight bits. vLLM 0.33's _normalize_quantization_config
# (transformers_utils/model_arch_config_convertor.py) maps FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4
# and MIXED_PRECISION and raises "Unknown ModelOpt quant algo: …" for any other; the AWQ and MXFP4 entries
# are kept for earlier releases' checkpoints.
_HF_QUANT_BITS: Mapping[str, float] = {
    "FP8": 8.0, "FP8_PER_CHANNEL_PER_TOKEN": 8.0, "FP8_PB_WO": 8.0, "NVFP4": 4.0, "W4A16_NVFP4": 4.0,
    "W4A8_AWQ": 4.0, "W4A16_AWQ": 4.0, "MXFP4": 4.0,
}


def _modelopt_refusal(owner: str, algo: str) -> str:
    """vLLM's words for a quant_algo its ModelOpt config does not take (ModelOptFp8Config / ModelOptNvFp4Config
    __init__)."""
    supported = " / ".join(_MODELOPT_ALGOS[owner])
    if owner == "modelopt":
        return f"Unsupported ModelOpt FP8 quant_algo for vLLM: {algo}. Supported: {supported}."
    return f"Unsupported ModelOpt NVFP4 quant_algo: {algo}. Supported: {supported}."


def _w8a8_type(weights: Mapping[str, Any], activations: Any, bits: float) -> str | None:
    """compressed-tensors W8A8: "float" or "int" when the weights are 8-bit and the input activations are
    quantized too (vLLM compressed_tensors.py: _is_fp8_w8a8 / _is_static_tensor_w8a8 / _is_dynamic_token_w8a8)."""
    kind = weights.get("type")
    if bits == 8 and isinstance(activations, Mapping) and kind in ("float", "int"):
        return str(kind)
    return None


def quant_spec(qc: Any, hf_quant: Mapping[str, Any] | None) -> QuantSpec | None:
    """Weight quantization and any declared KV scheme (vLLM resolve_kv_cache_dtype_string).

    config.json's quantization_config wins; hf_quant_config.json (ModelOpt ≤ 0.29) is read only without it
    (transformers_utils/config.py:get_config)."""
    if qc is None and hf_quant is not None and isinstance(hf_quant.get("quantization"), Mapping):
        if not _is_modelopt(hf_quant):
            return None
        q = hf_quant["quantization"]
        algo = str(q.get("quant_algo") or "").upper()
        kv_algo = str(q.get("kv_cache_quant_algo") or "").upper()
        bits = _HF_QUANT_BITS.get(algo)
        if bits is None and algo and algo != "MIXED_PRECISION":
            raise BadConfig(f"hf_quant_config.json: vLLM refuses it: \"Unknown ModelOpt quant algo: {algo[:40]}\" "
                            "(transformers_utils/model_arch_config_convertor.py)")
        if bits is None:
            raise BadConfig(f"hf_quant_config.json: quant_algo {algo!r} is not understood by kvplan")
        fp8 = _MODELOPT_ALGOS["modelopt"]
        return QuantSpec(method="modelopt_fp4" if "NVFP4" in algo else "modelopt_fp8" if algo in fp8
                         else "modelopt_" + algo.lower(),
                         weight_bits=bits, group_size=quant_group(q.get("group_size"), "group_size"),
                         kv_cache_dtype=_MODELOPT_KV.get(kv_algo),
                         excluded=names(q.get("exclude_modules"), "hf_quant_config.json: exclude_modules"))
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise BadConfig("config.json: quantization_config must be an object")
    method = str(qc.get("quant_method") or "").lower()
    kv_scheme = qc.get("kv_cache_scheme")
    kv: str | None = "fp8" if isinstance(kv_scheme, Mapping) and kv_scheme.get("type") == "float" and \
        kv_scheme.get("num_bits") == 8 else None
    # fp8.py:Fp8Config.from_config reads `ignored_layers`, then `modules_to_not_convert` (Qwen3-VL-FP8 writes the
    # former); compressed-tensors `ignore`.
    excluded = names(qc.get("ignored_layers") or qc.get("modules_to_not_convert") or qc.get("ignore"),
                      "config.json: quantization_config.modules_to_not_convert")
    if method == "fp8" or method == "fbgemm_fp8":
        return QuantSpec("fp8", 8.0, kv_cache_dtype=kv, excluded=excluded)
    if method in {"gptq", "awq", "gptq_marlin", "awq_marlin"}:
        bits = qc.get("bits", qc.get("w_bit", 4))
        gs = qc.get("group_size", qc.get("q_group_size", 128))
        group = quant_group(gs, "group_size")
        return QuantSpec(method.split("_")[0], quant_number(bits, "bits", maximum=_MAX_WEIGHT_BITS),
                         group_size=group, kv_cache_dtype=kv, excluded=excluded,
                         act_order=method.startswith("gptq") and bool(qc.get("desc_act")) and group is not None)
    if method == "mxfp4":
        return QuantSpec("mxfp4", 4.0, group_size=32, excluded=excluded)  # OCP MX: 32-element blocks
    if method == "bitsandbytes":
        return QuantSpec("bitsandbytes", 4.0 if qc.get("load_in_4bit") else 8.0, group_size=64, excluded=excluded)
    if method == "compressed-tensors":
        bits, gs, w8a8 = 8.0, None, None
        groups = qc.get("config_groups")
        if isinstance(groups, Mapping):
            for g in groups.values():
                w = g.get("weights") if isinstance(g, Mapping) else None
                if isinstance(w, Mapping) and w.get("num_bits"):
                    bits = quant_number(w["num_bits"], "num_bits", maximum=_MAX_WEIGHT_BITS)
                    gs = quant_group(w.get("group_size"), "group_size")
                    w8a8 = _w8a8_type(w, g.get("input_activations"), bits)
                    break
        return QuantSpec("compressed-tensors", bits, group_size=gs, kv_cache_dtype=kv, excluded=excluded, w8a8=w8a8)
    if method in {"modelopt", "modelopt_fp4"}:
        algo = str(qc.get("quant_algo") or "FP8").upper()
        owner = "modelopt_fp4" if method == "modelopt_fp4" or "FP4" in algo else "modelopt"
        if algo not in _MODELOPT_ALGOS[owner]:  # vLLM stops; counting it as FP8 would be a guess
            raise BadConfig(f"config.json: vLLM refuses its quantization_config: {_modelopt_refusal(owner, algo[:40])}")
        kv_algo = str(qc.get("kv_cache_quant_algo") or "").upper()
        return QuantSpec("modelopt_fp4" if "FP4" in algo else "modelopt_fp8", 4.0 if "FP4" in algo else 8.0,
                         group_size=quant_group(qc.get("group_size"), "group_size"),
                         kv_cache_dtype=_MODELOPT_KV.get(kv_algo) or kv or _modelopt_kv_scheme(kv_scheme),
                         excluded=excluded)
    raise BadConfig(f"config.json: quantization method {method!r} is not understood by kvplan")
