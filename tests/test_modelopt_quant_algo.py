"""An unknown ModelOpt quant_algo is refused in vLLM 0.33's words, never counted as BF16 or FP8.

vLLM 0.33: transformers_utils/model_arch_config_convertor.py `_normalize_quantization_config` raises
"Unknown ModelOpt quant algo: X" for an hf_quant_config.json algo outside FP8, FP8_PER_CHANNEL_PER_TOKEN,
FP8_PB_WO, NVFP4 and MIXED_PRECISION; model_executor/layers/quantization/modelopt.py ModelOptFp8Config /
ModelOptNvFp4Config `__init__` refuse a config.json quant_algo outside their LINEAR_ALGOS.
"""
from __future__ import annotations

import pytest

from kvplan.errors import BadConfig
from kvplan.model.quantization import quant_spec

MODELOPT = {"producer": {"name": "modelopt"}}


def test_an_unknown_hf_quant_config_algo_is_refused_in_vllms_words() -> None:
    with pytest.raises(BadConfig) as exc:
        quant_spec(None, {**MODELOPT, "quantization": {"quant_algo": "W9A9"}})
    assert str(exc.value) == ('hf_quant_config.json: vLLM refuses it: "Unknown ModelOpt quant algo: W9A9" '
                              "(transformers_utils/model_arch_config_convertor.py)")


@pytest.mark.parametrize(("algo", "method", "bits"), [
    ("FP8", "modelopt_fp8", 8.0), ("fp8_pb_wo", "modelopt_fp8", 8.0),
    ("FP8_PER_CHANNEL_PER_TOKEN", "modelopt_fp8", 8.0),
    ("NVFP4", "modelopt_fp4", 4.0),
])
def test_the_algos_vllm_maps_are_counted_at_their_bits(algo: str, method: str, bits: float) -> None:
    spec = quant_spec(None, {**MODELOPT, "quantization": {"quant_algo": algo}})
    assert spec is not None and (spec.method, spec.weight_bits) == (method, bits)


def test_an_unknown_config_json_modelopt_algo_is_not_counted_as_fp8() -> None:
    with pytest.raises(BadConfig) as exc:
        quant_spec({"quant_method": "modelopt", "quant_algo": "W9A9"}, None)
    assert str(exc.value) == ("config.json: vLLM refuses its quantization_config: Unsupported ModelOpt FP8 quant_algo "
                              "for vLLM: W9A9. Supported: FP8 / FP8_PER_CHANNEL_PER_TOKEN / FP8_PB_WO.")


def test_an_unknown_config_json_modelopt_fp4_algo_is_refused() -> None:
    with pytest.raises(BadConfig) as exc:
        quant_spec({"quant_method": "modelopt_fp4", "quant_algo": "MXFP4"}, None)
    assert str(exc.value) == ("config.json: vLLM refuses its quantization_config: Unsupported ModelOpt NVFP4 "
                              "quant_algo: MXFP4. Supported: NVFP4 / W4A16_NVFP4.")
