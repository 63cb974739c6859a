"""Llama-4's vision tower and projector (kvplan/model/families/towers.py:_llama4_vision): the parameters vLLM 0.33's
mllama4.py builds, split into replicated and TP-sharded as its parallel linears are, pinned against transformers'
Llama4VisionModel + Llama4MultiModalProjector built from the same config (tests/fixtures/towers/, README there);
kept in the model dtype in the FP8 checkpoint; its encoder profile in `fit` (kvplan/vllm/encoder_llama4.py) and
what `--limit-mm-per-prompt '{"image": 0}'` / `--language-model-only` take away."""
from __future__ import annotations

import json

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.model.spec import ModelSpec
from kvplan.vllm.encoder_llama4 import Llama4Vision, llama4_encoder_phase, vision_of
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.memory.weights import tower_bytes_per_gpu
from kvplan.vllm.multimodal import parse_mm_limits
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS

CORPUS = CONFIGS.parent / "corpus" / "configs"
SCOUT_FP8 = "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic"
COUNT = json.loads((CONFIGS.parent / "towers" / f"{SCOUT_FP8}.llama4-transformers.json").read_text())


def _scout(fp8: bool = True) -> ModelSpec:
    return load_local(str(CORPUS / SCOUT_FP8 if fp8 else CONFIGS / "unsloth--Llama-4-Scout-17B-16E-Instruct"))


@pytest.mark.parametrize("fp8", [True, False])
def test_tower_holds_the_parameters_transformers_builds(fp8: bool) -> None:
    """850,960,896 (vision_model) + 20,971,520 (multi_modal_projector) = 871,932,416."""
    (tower,) = _scout(fp8).towers
    assert tower.params == COUNT["vision_model"] + COUNT["multi_modal_projector"] == 871_932_416
    assert tower.modalities == ("image",) and tower.tp_heads == 16


def test_replicated_and_sharded_parts_by_hand_from_mllama4() -> None:
    """h 1,408, I 5,632, 34 layers, 336² tiles of 14² patches. Replicated: class token 1,408, positions 577 × 1,408,
    LayerNorms pre/post 4 × 1,408, per layer o_proj and fc2 biases and two LayerNorms 6 × 1,408. Sharded: the
    unfold linear 588 × 1,408, per layer qkv 1,408 × 4,224 + 4,224, o 1,408², fc1 1,408 × 5,632 + 5,632, fc2
    5,632 × 1,408; the adapter 5,632 × 4,096 + 4,096²; linear_1 4,096 × 5,120."""
    (tower,) = _scout().towers
    h, i = 1408, 5632
    assert tower.replicated_params == h + 577 * h + 4 * h + 34 * 6 * h == 1_106_688
    layer = h * 3 * h + 3 * h + h * h + h * i + i + i * h
    assert tower.sharded_params == 588 * h + 34 * layer + i * 4096 + 4096 * 4096 + 4096 * 5120 == 870_825_728
    children = COUNT["vision_model_children"]
    assert children["model"] == 34 * (layer + 6 * h) and children["vision_adapter"] == i * 4096 + 4096 * 4096


@pytest.mark.parametrize(("tp", "per_gpu"), [(1, 1_743_864_832), (4, 437_626_240), (8, 219_919_808)])
def test_bytes_per_gpu_in_bf16_even_in_the_fp8_checkpoint(tp: int, per_gpu: int) -> None:
    """vLLM builds the tower with quant_config=None (mllama4.py): bf16 in both checkpoints, parallel linears split
    over TP (mm_encoder_tp_mode "weights", the default), the rest on every rank."""
    for fp8 in (True, False):
        model = _scout(fp8)
        assert tower_bytes_per_gpu(model, model.towers[0], tp=tp) == per_gpu == 2 * (1_106_688 + -(-870_825_728 // tp))


@pytest.mark.parametrize(("tp", "per_gpu"), [(1, 1_743_864_832), (8, 1_707_164_672)])
def test_mm_encoder_tp_mode_data_replicates_the_tower_and_splits_only_the_projector(tp: int, per_gpu: int) -> None:
    """vLLM 0.33 mllama4.py with --mm-encoder-tp-mode data: the tower's linears are built with disable_tp, the
    projector's linear_1 (4,096 × 5,120, ColumnParallelLinear) stays split: 2 × (871,932,416 − 20,971,520 +
    20,971,520 / 8) = 1,707,164,672 B per GPU at TP 8, against 219,919,808 with "weights"."""
    model = _scout()
    assert model.towers[0].data_mode_sharded_params == 4096 * 5120
    assert tower_bytes_per_gpu(model, model.towers[0], tp=tp, mm_encoder_tp_mode="data") == per_gpu
    assert tower_bytes_per_gpu(model, model.towers[0], tp=tp, mm_encoder_tp_mode="weights") == 2 * (
        1_106_688 + -(-870_825_728 // tp))


def test_the_fp8_checkpoint_leaves_every_tower_linear_unquantized() -> None:
    """The compressed-tensors ignore list names the patch linear, q/k/v/o and fc1/fc2 of all 34 layers, the
    adapter's fc1/fc2 and the projector: the checkpoint stores the tower in bf16, as vLLM loads it."""
    ignore = set(json.loads((CORPUS / SCOUT_FP8 / "config.json").read_text())["quantization_config"]["ignore"])
    tower = {f"vision_model.model.layers.{n}.{m}" for n in range(34) for m in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.fc1", "mlp.fc2")}
    tower |= {"vision_model.patch_embedding.linear", "vision_model.vision_adapter.mlp.fc1",
              "vision_model.vision_adapter.mlp.fc2", "multi_modal_projector.linear_1"}
    assert tower == {n for n in ignore if not n.startswith("language_model.")}


def _fit(limits: str | None = None, *, language_model_only: bool = False):  # type: ignore[no-untyped-def]
    s = ServeSettings.of(max_model_len=131072, tensor_parallel_size=8, language_model_only=language_model_only,
                         limit_mm_per_prompt=parse_mm_limits(limits) if limits else ())
    return plan_fit(_scout(), get_gpu("h100-sxm"), s, advise=False)


def _term(report, name: str):  # type: ignore[no-untyped-def]
    return next(t for t in report.memory.terms if t.name == name)


@pytest.mark.parametrize(("limits", "lm_only"), [('{"image": 0}', False), (None, True)])
def test_images_at_0_or_language_model_only_drop_the_tower_and_the_encoder_profile(limits: str | None,
                                                                                  lm_only: bool) -> None:
    full, bare = _fit(), _fit(limits, language_model_only=lm_only)
    assert _term(full, "weights").bytes - _term(bare, "weights").bytes == 219_919_808
    assert [(t.loaded, t.bytes_per_gpu) for t in bare.memory.towers] == [(False, 0)]
    assert "no encoder profile (every multimodal limit is 0)" in _term(bare, "activation").assumption


def test_fit_adds_the_encoder_outputs_model_runner_v2_keeps() -> None:
    """vLLM 0.33 on H100 TP 8 (Model Runner V2): 3 dummy images of 2,448 embeddings × 5,120 × 2 bytes stay through
    the run; the tower's own peak (51 chunks of 577 tokens) is below the language model's."""
    full, bare = _fit(), _fit('{"image": 0}')
    model = _scout()
    geometry = model.towers[0].geometry
    assert geometry is not None and geometry.kind == "llama4"
    assert vision_of(geometry) == Llama4Vision(1408, 5632, 16, 336, 14, 0.5, 5120, 3)
    phase = llama4_encoder_phase(vision_of(geometry), model_runner_v2=True, tp=8, max_num_batched_tokens=8192,
                                 max_num_seqs=1024, max_model_len=131072, image_limit=999)
    assert phase is not None and phase.retained_bytes == 3 * 2448 * 5120 * 2
    assert _term(full, "activation").bytes - _term(bare, "activation").bytes == phase.retained_bytes
    assert phase.forward_peak_bytes < _term(bare, "activation").bytes
    assert "encoder profile: 3 image item(s) × 2,448 embeddings" in _term(full, "activation").assumption


def test_a_config_without_vision_config_takes_images_but_counts_no_tower() -> None:
    """The corpus's Maverick config lacks vision_config (transformers would build Llama4VisionConfig's defaults,
    not the checkpoint's tower): images are its modality, no tower is counted, and the weights say so."""
    model = load_local(str(CORPUS / "meta-llama--Llama-4-Maverick-17B-128E-Instruct"))
    assert (model.mm_modalities, model.towers) == (("image",), ())
    report = plan_fit(model, get_gpu("b200"), ServeSettings.of(max_model_len=131072, tensor_parallel_size=8),
                      advise=False)
    assert "the multimodal encoder tower is not counted" in _term(report, "weights").assumption
    assert "the multimodal encoder's profile is not modelled" in _term(report, "activation").assumption
