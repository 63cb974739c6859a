"""Multimodal checkpoints: the vision/audio towers vLLM 0.33 builds and what `--limit-mm-per-prompt` /
`--language-model-only` change, against vLLM's own modules and KV planner
(tests/fixtures/oracle-cuda/multimodal/, made with tools/cuda_oracle/mm_oracle.py; README there) and the Hub's
published parameter total."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import InvalidParameter
from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import count_parameters
from kvplan.units import GiB
from kvplan.vllm.command_line import parse_vllm_command
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.memory.weights import estimate_weights
from kvplan.vllm.multimodal import MmLimits, ModalityLimit, apply_mm_limits, parse_mm_limits
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS

runner = CliRunner()
CORPUS = CONFIGS.parent / "corpus" / "configs"
GOLDENS = CONFIGS.parent / "oracle-cuda" / "multimodal"
GEMMA = "google--gemma-4-26B-A4B-it"
QWEN = "Qwen--Qwen3-VL-8B-Instruct"
GPUS = {"h100": "h100-sxm", "l40s": "l40s", "b200": "b200"}


def _model(name: str) -> ModelSpec:
    return load_local(str(CORPUS / name))


def _golden(case: str) -> dict[str, Any]:
    return json.loads((GOLDENS / f"{case}.json").read_text())  # type: ignore[no-any-return]


def _built(case: str) -> dict[str, int]:
    """Parameters of each top-level module of the model vLLM built (the multimodal wrapper's)."""
    return _golden(case)["mm_oracle"]["models"][-1]["children"]  # type: ignore[no-any-return]


# --- Towers: parameters as vLLM's model classes build them -------------------------------------------------

@pytest.mark.parametrize(("name", "vision", "audio"), [
    (GEMMA, 572_792_112, None),  # vision_tower 569,548,080 + embed_vision 3,244,032
    ("google--gemma-4-31B-it", 575_741_232, None),
    ("google--gemma-4-E4B-it", 169_330_688, 308_756_768),
    ("google--gemma-4-E2B-it", 168_544_256, 307_183_904),
    (QWEN, 576_388_336, None),
    ("Qwen--Qwen3-VL-2B-Instruct", 406_957_056, None),
    ("Qwen--Qwen3-VL-30B-A3B-Instruct", 538_631_408, None),
    ("Qwen--Qwen2.5-VL-3B-Instruct", 668_684_288, None),
    ("google--gemma-3-4b-it", 419_816_304, None),  # vision_tower 416,866,032 + multi_modal_projector 2,950,272
    ("zai-org--GLM-4.5V", 858_681_856, None),
])
def test_tower_parameters_equal_the_modules_vllm_builds(name: str, vision: int, audio: int | None) -> None:
    gemma3 = name == "google--gemma-3-4b-it"
    towers = {t.name: t.params for t in (load_local(str(CONFIGS / name)) if gemma3 else _model(name)).towers}
    built = _built(f"{name}__b200-mml8192" if gemma3 else f"{name}__h100-mml8192")
    assert towers["vision tower + projector"] == vision == sum(
        built.get(k, 0) for k in ("vision_tower", "embed_vision", "visual", "multi_modal_projector"))
    assert towers.get("audio tower + projector") == audio
    if audio is not None:
        assert audio == built["audio_tower"] + built["embed_audio"]


def test_qwen3_vl_8b_counts_the_hubs_published_total() -> None:
    # huggingface.co/api/models/Qwen/Qwen3-VL-8B-Instruct (sha 0c351dd0…): "safetensors": {"total": 8767123696}
    m = _model(QWEN)
    assert count_parameters(m).total + sum(t.params for t in m.towers) == 8_767_123_696
    assert count_parameters(m).total == _built(f"{QWEN}__h100-mml8192")["language_model"] == 8_190_735_360


def test_qwen2_5_vl_3b_counts_its_published_total() -> None:
    # MTEB's model meta for Qwen/Qwen2.5-VL-3B-Instruct: n_parameters=3754622976, n_embedding_parameters=311164928
    m = _model("Qwen--Qwen2.5-VL-3B-Instruct")
    assert count_parameters(m).total + m.towers[0].params == 3_754_622_976
    assert count_parameters(m).total == _built("Qwen--Qwen2.5-VL-3B-Instruct__h100-mml8192")["language_model"]


def test_gemma4_tower_is_replicated_on_every_tp_rank() -> None:
    built = _built(f"{GEMMA}__h100-mml8192-tp2")
    t = _model(GEMMA).towers[0]
    assert (t.replicated_params, t.sharded_params) == (built["vision_tower"] + built["embed_vision"], 0)
    w1 = estimate_weights(_model(GEMMA), tp=2, pp=1, arch="hopper")
    assert "vision tower + projector (image, video) +1.07 GiB" in w1.assumption


def test_qwen3_vl_tower_splits_its_parallel_linears_over_tp() -> None:
    t = _model(QWEN).towers[0]
    assert t.replicated_params + -(-t.sharded_params // 2) == _built(f"{QWEN}__h100-mml8192-tp2")["visual"] \
        == 290_523_064


@pytest.mark.parametrize(("case", "limits", "loaded"), [
    (f"{GEMMA}__h100-mml8192-image0-video0", '{"image": 0, "video": 0}', ()),
    (f"{GEMMA}__h100-mml8192-image1-video0", '{"image": 1, "video": 0}', ("vision tower + projector",)),
    (f"{GEMMA}__h100-mml8192-language-model-only", None, ()),
    ("google--gemma-4-E4B-it__h100-mml8192-image0-video0", '{"image": 0, "video": 0}', ("audio tower + projector",)),
    (f"{QWEN}__h100-mml8192-image0-video0", '{"image": 0, "video": 0}', ()),
])
def test_a_tower_whose_modalities_are_all_0_is_not_built(case: str, limits: str | None,
                                                         loaded: tuple[str, ...]) -> None:
    model = _model(case.split("__")[0])
    mm = MmLimits(language_model_only=True) if limits is None else MmLimits(parse_mm_limits(limits))
    applied, _ = apply_mm_limits(model, mm)
    assert tuple(t.name for t in applied.towers if t.loaded) == loaded
    built = _built(case)
    kept = sum(t.params for t in applied.towers if t.loaded)
    assert kept == sum(v for k, v in built.items() if k != "language_model")


# --- Weights -----------------------------------------------------------------------------------------------

def test_the_loaded_tower_joins_the_weights_and_leaves_them_at_limits_0() -> None:
    m = _model(GEMMA)
    text_only, _ = apply_mm_limits(m, MmLimits(parse_mm_limits('{"image": 0, "video": 0}')))
    full = estimate_weights(m, tp=1, pp=1, arch="ampere")
    bare = estimate_weights(text_only, tp=1, pp=1, arch="ampere")
    assert full.bytes - bare.bytes == 572_792_112 * 2
    assert "vision tower + projector (image, video) +1.07 GiB" in full.assumption
    assert "vision tower + projector not loaded (limits 0)" in bare.assumption


def test_a_safetensors_total_less_a_skipped_tower() -> None:
    m = _model(QWEN)
    total = 8_767_123_696 * 2  # the Hub's BF16 total
    text_only, _ = apply_mm_limits(m, MmLimits(language_model_only=True))
    full = estimate_weights(m, tp=1, pp=1, arch="hopper", total_bytes=total)
    bare = estimate_weights(text_only, tp=1, pp=1, arch="hopper", total_bytes=total)
    assert full.bytes - bare.bytes == 576_388_336 * 2  # no deepstack buffers without max_num_batched_tokens
    assert "vision tower + projector not loaded (limits 0) −1.07 GiB" in bare.assumption


def test_qwen3_vl_deepstack_buffers_are_allocated_with_the_tower() -> None:
    m = _model(QWEN)
    plain = estimate_weights(m, tp=1, pp=1, arch="hopper")
    with_buffers = estimate_weights(m, tp=1, pp=1, arch="hopper", max_num_batched_tokens=8192)
    assert with_buffers.bytes - plain.bytes == 3 * 8192 * 4096 * 2
    assert "deepstack buffers (3 × 8,192 tokens) +0.19 GiB" in with_buffers.assumption


def test_gemma4_26b_a100_record_weights_with_the_tower() -> None:
    """myoceane-a100-gemma-4-26b-a4b-131k-eager (validation) logs 48.50 GiB; kvplan said 46.15 without the tower
    and 47.22 without the dense MLP each MoE layer keeps beside its experts, 48.22 without the full layers' own
    rotary cache (262,144 × 512 bf16, gemma4_rope.py; tests/test_weights_built.py)."""
    w = estimate_weights(_model(GEMMA), tp=1, pp=1, arch="ampere")
    assert round(w.bytes / GiB, 2) == 48.47


def test_gemma4_moe_language_model_count_is_what_vllm_builds() -> None:
    """vLLM 0.33 builds Gemma4ForCausalLM with 25,247,559,680 parameters (mm_oracle's meta-built count,
    tests/fixtures/oracle-cuda/multimodal/google--gemma-4-26B-A4B-it__h100-mml8192.json): the dense MLP, the
    router's scales and the MoE block's norms included; 168,960 (0.0007%) are left uncounted."""
    from kvplan.model.weights import count_parameters

    golden = json.loads((GOLDENS / "google--gemma-4-26B-A4B-it__h100-mml8192.json").read_text())
    built = golden["mm_oracle"]["models"][0]["total"]
    assert built == 25_247_559_680
    assert built - count_parameters(_model(GEMMA)).total == 168_960


# --- The KV plan: vLLM's planner with the limits ----------------------------------------------------------

@pytest.mark.parametrize(("case", "limits", "settings"), [
    (f"{GEMMA}__h100-mml8192", None, {}),
    (f"{GEMMA}__h100-mml8192-image0-video0", '{"image": 0, "video": 0}', {}),
    (f"{GEMMA}__h100-mml8192-image1-video0", '{"image": 1, "video": 0}', {}),
    (f"{GEMMA}__h100-mml8192-language-model-only", None, {"language_model_only": True}),
    (f"{GEMMA}__h100-mml8192-mnbt2048-image1-video0", '{"image": 1, "video": 0}', {"max_num_batched_tokens": 2048}),
    (f"{GEMMA}__l40s-mml8192", None, {}),
    (f"{GEMMA}__l40s-mml8192-image0-video0", '{"image": 0, "video": 0}', {}),
    (f"{GEMMA}__l40s-mml8192-image1-video0", '{"image": 1, "video": 0}', {}),
    (f"{GEMMA}__l40s-mml8192-image4-video1x8frames", '{"image": 4, "video": {"count": 1, "num_frames": 8}}', {}),
    (f"{GEMMA}__b200-mml8192", None, {}),
    (f"{GEMMA}__b200-mml8192-image0-video0", '{"image": 0, "video": 0}', {}),
    (f"{QWEN}__h100-mml8192", None, {}),
    (f"{QWEN}__h100-mml8192-image0-video0", '{"image": 0, "video": 0}', {}),
    ("google--gemma-4-E4B-it__h100-mml8192-image0-video0-audio0", '{"image": 0, "video": 0, "audio": 0}', {}),
    (f"{GEMMA}__b200-mml8192-image0-video0-mm-embeds", '{"image": 0, "video": 0}', {"enable_mm_embeds": True}),
    ("google--gemma-3-4b-it__b200-mml8192", None, {}),
    ("google--gemma-3-4b-it__b200-mml8192-image0", '{"image": 0}', {}),
])
def test_kv_plan_under_the_limits_matches_vllms_planner(case: str, limits: str | None,
                                                        settings: dict[str, Any]) -> None:
    g = _golden(case)
    name, rest = case.split("__")
    s = ServeSettings.of(max_model_len=8192, kv_cache_memory_bytes=20 * GiB, weights_bytes=0,
                      limit_mm_per_prompt=parse_mm_limits(limits) if limits else (), **settings)
    model = load_local(str(CONFIGS / name)) if name == "google--gemma-3-4b-it" else _model(name)
    r = plan_fit(model, get_gpu(GPUS[rest.split("-")[0]]), s, advise=False)
    kv = g["plan"]["kv_cache_config"]
    assert (r.scheduler.max_num_batched_tokens, r.deployment.attention_backend, r.cache.block_size,
            r.cache.num_gpu_blocks, r.cache.kv_cache_tokens) == (
        g["config"]["max_num_batched_tokens"], *g["plan"]["attn_backends"], g["plan"]["block_size"],
        kv["num_blocks"], kv["kv_cache_size_tokens"])
    assert r.verdict.log_line == kv["log_line"]


def test_all_limits_0_turn_gemma4_into_a_text_model_on_b200() -> None:
    """The prefix-LM backend (TRITON_FLASHINFER, 64-token blocks) gives way to FLASHINFER's 16."""
    assert _golden(f"{GEMMA}__b200-mml8192")["plan"]["kv_cache_config"]["num_blocks"] == 8_192
    assert _golden(f"{GEMMA}__b200-mml8192-image0-video0")["plan"]["kv_cache_config"]["num_blocks"] == 32_768
    assert _golden(f"{GEMMA}__b200-mml8192-image0-video0")["mm_oracle"]["config"]["is_mm_prefix_lm"] is False


def test_gemma4_refuses_a_batch_smaller_than_one_video_as_vllm_does() -> None:
    info = _golden(f"{GEMMA}__h100-mml8192-mnbt2048")["mm_oracle"]["config"]["info"]
    s = ServeSettings.of(max_model_len=8192, max_num_batched_tokens=2048)
    with pytest.raises(InvalidParameter) as exc:
        plan_fit(_model(GEMMA), get_gpu("h100-sxm"), s, advise=False)
    assert f"ValueError: {exc.value.args[0]}" == info["encoder_budget_error"] == (
        "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than "
        "max_num_batched_tokens (2048). Please increase max_num_batched_tokens.")


# --- Reading the flag as vLLM reads it --------------------------------------------------------------------

def test_limits_read_every_form_vllm_accepts() -> None:
    assert parse_mm_limits('{"image": 16, "video": {"count": 1, "num_frames": 32}, "audio": {"length": 8}}') == (
        ("image", ModalityLimit(16)), ("video", ModalityLimit(1, num_frames=32)),
        ("audio", ModalityLimit(length=8)))
    assert parse_mm_limits({"image": True, "foo": {"count": 2, "bar": 1}}) == (
        ("image", ModalityLimit(1)), ("foo", ModalityLimit(2)))


@pytest.mark.parametrize(("text", "message"), [
    ('{"image": -1}', "1 validation error for MultiModalConfig: limit_per_prompt.count: Input should be greater "
                      "than or equal to 0 [type=greater_than_equal, input_value=-1, input_type=int]"),
    ('{"video": {"count": 1, "num_frames": 0}}', "1 validation error for MultiModalConfig: limit_per_prompt."
     "num_frames: Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]"),
    ('{"video": {"count": 1, "fps": 2}}', "1 validation error for MultiModalConfig: limit_per_prompt.fps: "
     "Unexpected keyword argument [type=unexpected_keyword_argument, input_value=2, input_type=int]"),
    ('{"image": "2"}', "vllm.config.multimodal.ImageDummyOptions() argument after ** must be a mapping, not str"),
    ("[1, 2]", "'list' object has no attribute 'items'"),
    ("image=0", "Value image=0 cannot be converted to <function loads>."),
])
def test_bad_limits_are_refused_with_vllms_sentence(text: str, message: str) -> None:
    with pytest.raises(InvalidParameter) as exc:
        parse_mm_limits(text)
    assert exc.value.args[0] == message


def test_fit_refuses_a_bad_limit_on_one_line_with_exit_2() -> None:
    result = runner.invoke(app, ["fit", str(CORPUS / GEMMA), "--gpu", "h100", "--limit-mm-per-prompt",
                                 '{"image": -1}'])
    assert result.exit_code == 2
    assert "--limit-mm-per-prompt: 1 validation error for MultiModalConfig: limit_per_prompt.count" in result.output


def test_pasted_vllm_serve_lines_take_json_and_dotted_limits() -> None:
    cmd = parse_vllm_command("vllm serve m --limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video.count=1 "
                             "--limit-mm-per-prompt.video.num_frames 8 --language-model-only")
    assert json.loads(str(cmd.options["limit_mm_per_prompt"])) == {"image": 0, "video": {"count": 1, "num_frames": 8}}
    assert cmd.options["language_model_only"] is True
    cmd = parse_vllm_command("""vllm serve m --limit-mm-per-prompt '{"image": 0, "video": 0}'""")
    assert cmd.options["limit_mm_per_prompt"] == '{"image": 0, "video": 0}' and cmd.ignored == ()


def test_fit_with_a_pasted_line_drops_the_tower_and_the_prefix_lm_backend() -> None:
    cmd = (f"vllm serve {CORPUS / GEMMA} --max-model-len 8192 --kv-cache-memory-bytes 21474836480 "
           "--limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video 0")
    result = runner.invoke(app, ["fit", "--vllm-cmd", cmd, "--gpu", "h100", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert (r["deployment"]["attention_backend"], r["verdict"]["log_line"]) == (
        "FLASH_ATTN", _golden(f"{GEMMA}__h100-mml8192-image0-video0")["plan"]["kv_cache_config"]["log_line"])
    assert any("running in text-only mode" in n for n in r["notes"])


def test_plan_files_take_the_limits(tmp_path: Path) -> None:
    from kvplan.ci.plan import load_plan

    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    model: {CORPUS / GEMMA}\n    gpu: h100\n"
                    "    vllm: {limit_mm_per_prompt: {image: 0, video: 0}, language_model_only: false}\n"
                    "    require: {starts: true}\n")
    dep = load_plan(plan).deployments[0]
    assert dep.settings.multimodal_config.limit_mm_per_prompt == (
        ("image", ModalityLimit(0)), ("video", ModalityLimit(0)))
    assert dep.warnings == ()


def test_fit_json_lists_each_tower_with_its_bytes_per_gpu() -> None:
    result = runner.invoke(app, ["fit", str(CORPUS / "google--gemma-4-E4B-it"), "--gpu", "h100", "--max-model-len",
                                 "8192", "--limit-mm-per-prompt", '{"image": 0, "video": 0}', "--json"])
    assert result.exit_code == 0, result.output
    towers = json.loads(result.stdout)["memory"]["towers"]
    assert [(t["name"], t["loaded"], t["parameters"], t["bytes_per_gpu"]) for t in towers] == [
        ("vision tower + projector", False, 169_330_688, 0),
        ("audio tower + projector", True, 308_756_768, 308_756_768 * 2)]


@pytest.mark.parametrize(("limits", "items", "detail"), [
    (None, 3, "encoder profile: 3 video item(s) × 2,240 embeddings held +0.04 GiB (estimate, +0.04 … +0.07 GiB)"),
    ('{"image": 1, "video": 0}', 29, "encoder profile: 29 image item(s) × 280 embeddings held +0.04 GiB"),
    ('{"image": 0, "video": 0}', 0, "no encoder profile (every multimodal limit is 0)"),
])
def test_gemma4_encoder_profile_holds_its_dummy_outputs_through_the_profiling_run(
        limits: str | None, items: int, detail: str) -> None:
    """8,192 tokens of budget: 8,192 // 2,496 = 3 videos of 32 frames × 70 embeddings, or 8,192 // 280 = 29 images,
    each embedding 2,816 × 2 bytes (estimate: the encoder's own forward peak is not modelled)."""
    s = ServeSettings.of(max_model_len=8192, limit_mm_per_prompt=parse_mm_limits(limits) if limits else ())
    r = plan_fit(_model(GEMMA), get_gpu("h100-sxm"), s, advise=False)
    activation = next(t for t in r.memory.terms if t.name == "activation")
    bare = plan_fit(_model(GEMMA), get_gpu("h100-sxm"), ServeSettings.of(max_model_len=8192, language_model_only=True),
                    advise=False)
    embeds = {3: 3 * 2240, 29: 29 * 280, 0: 0}[items]
    assert activation.bytes - next(t for t in bare.memory.terms if t.name == "activation").bytes == embeds * 2816 * 2
    assert detail in activation.assumption


def test_mistral_small_3_2_pixtral_tower_as_vllm_builds_it() -> None:
    """vision_tower 403,305,472 + multi_modal_projector 35,652,608; with it the llm-d H100 record's logged
    'Model loading took 44.76 GiB' is met (tests/fixtures/startup-logs, llmd-h100-mistral-small-32-24b)."""
    m = _model("mistralai--Mistral-Small-3.2-24B-Instruct-2506")
    built = _built("mistralai--Mistral-Small-3.2-24B-Instruct-2506__h100-mml8192")
    assert m.towers[0].params == built["vision_tower"] + built["multi_modal_projector"] == 438_958_080
    assert round(estimate_weights(m, tp=1, pp=1, arch="hopper").bytes / GiB, 2) == 44.76


def test_size_notes_the_towers_the_language_model_count_leaves_out() -> None:
    result = runner.invoke(app, ["size", str(CORPUS / QWEN), "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert "vision tower + projector (image, video): 576,388,336 parameters (1.07 GiB) in the checkpoint besides " \
           "these weights; vLLM loads it unless --limit-mm-per-prompt sets its modalities to 0" in notes


def test_limits_on_a_model_kvplan_knows_no_modalities_of_say_so() -> None:
    model = load_local(str(CONFIGS / "Qwen--Qwen2.5-7B"))
    applied, notes = apply_mm_limits(model, MmLimits(language_model_only=True))
    assert applied is model
    assert notes == ["--limit-mm-per-prompt / --language-model-only: not applied: kvplan does not know "
                     "Qwen2ForCausalLM's modalities (a text model ignores them)"]


def test_precomputed_embeddings_keep_a_model_with_limits_0_multimodal_without_its_tower() -> None:
    built = _golden(f"{GEMMA}__b200-mml8192-image0-video0-mm-embeds")["mm_oracle"]
    assert built["config"]["is_mm_prefix_lm"] is True and built["models"][-1]["children"]["vision_tower"] == 0
    applied, notes = apply_mm_limits(_model(GEMMA), MmLimits(parse_mm_limits('{"image": 0, "video": 0}'),
                                                            enable_mm_embeds=True))
    assert applied.mm_prefix_lm and not any(t.loaded for t in applied.towers)
    assert parse_vllm_command("vllm serve m --enable-mm-embeds").options == {"enable_mm_embeds": True}


def test_fit_of_gemma4_on_a100_skips_advice_vllm_would_refuse() -> None:
    """Advice re-plans candidates; an fp8 KV cache on A100's Triton backend (the prefix-LM's) is refused by
    vLLM, so it is not advice, and fit still answers."""
    result = runner.invoke(app, ["fit", str(CONFIGS / "google--gemma-4-26B-A4B"), "--gpu", "a100-80gb-sxm",
                                 "--max-model-len", "8192", "--enforce-eager", "--gpu-memory-utilization", "0.9",
                                 "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["deployment"]["attention_backend"] == "TRITON_ATTN"
    assert not any("fp8" in a["change"] for a in r["verdict"]["advice"])
