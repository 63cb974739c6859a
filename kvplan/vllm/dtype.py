"""The dtype vLLM runs a model in on a GPU (`--dtype`): the checkpoint's, downcast or replaced where the GPU
or the model type cannot take it (config/model.py:_resolve_auto_dtype, _check_valid_dtype;
platforms/cuda.py:CudaPlatform.supported_dtypes)."""
from __future__ import annotations

from kvplan.errors import InvalidParameter
from kvplan.model.spec import ModelSpec

# platforms/cuda.py:CudaPlatform.supported_dtypes: bfloat16 needs compute capability 8.0.
_NO_BF16_ARCHS = frozenset({"volta", "turing"})


DTYPES = {"auto": "auto", "bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32",
          "float": "float32"}


def served_dtype(model: ModelSpec, arch: str | None, requested: str = "auto") -> str:
    """The dtype vLLM runs the model in on this GPU (config/model.py:_resolve_auto_dtype, _check_valid_dtype):
    `--dtype auto` is the checkpoint's dtype if the GPU supports it (float32 checkpoints are downcast), else the
    GPU's preferred one; before SM80 that is float16, or float32 for the float16-unsafe model types."""
    if requested not in DTYPES:
        raise InvalidParameter(f"--dtype must be one of {', '.join(DTYPES)}, got {requested!r}")
    supported = ["float16", "float32"] if (arch or "") in _NO_BF16_ARCHS else ["bfloat16", "float16", "float32"]
    # config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS ("Numerical instability"): the families that say
    # float16_unsafe (kvplan/model/architectures/); the reader names the model type.
    unsafe = model.facts.float16_unsafe_model_type
    wanted = DTYPES[requested]
    if wanted == "float16" and unsafe:
        raise InvalidParameter(f"The model type {unsafe!r} does not support float16. Reason: Numerical "
                               "instability. Please use bfloat16 or float32 instead.")
    if wanted != "auto":
        if wanted not in supported:  # platforms/cuda.py: bfloat16 needs compute capability 8.0
            raise InvalidParameter(f"--dtype {wanted} is not supported on this GPU ({arch}): bfloat16 needs "
                                   "compute capability 8.0", hint="use --dtype half, as vLLM suggests")
        return wanted
    if unsafe:
        supported.remove("float16")
    preferred = supported[0]
    declared = model.config_dtype or "float32"
    if declared == "float32":
        return preferred
    return declared if declared in supported else preferred
