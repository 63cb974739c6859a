"""Architecture lists of SGLang 0.5.23 that change how it sizes a model (paths relative to `sglang/srt/`)."""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# configs/model_config.py:multimodal_model_archs (read from the 0.5.23 wheel with ast): a model whose
# architecture is listed, or whose config nests a text config (ModelConfig: hf_config is not hf_text_config),
# is multimodal: its mem_fraction_static is scaled by adjust_mem_fraction_for_vlm and its budget loses the
# multimodal reservation.
MULTIMODAL_ARCHITECTURES = frozenset({
    "BailingMM2NativeForConditionalGeneration",
    "BailingMMNativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration",
    "CLIPModel",
    "Cohere2VisionForConditionalGeneration",
    "Cosmos3EdgeForConditionalGeneration",
    "DeepseekOCRForCausalLM",
    "DeepseekVL2ForCausalLM",
    "DiffusionGemmaForBlockDiffusion",
    "Dots3NoteForCausalLM",
    "DotsOCRForCausalLM",
    "DotsVLMForCausalLM",
    "EmbeddingGemma2Model",
    "Ernie4_5_VLMoeForConditionalGeneration",
    "Gemma3ForConditionalGeneration",
    "Gemma3nForConditionalGeneration",
    "Gemma4ForConditionalGeneration",
    "Gemma4UnifiedForConditionalGeneration",
    "Glm4vForConditionalGeneration",
    "Glm4vMoeForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    "GlmAsrForConditionalGeneration",
    "GlmImageForConditionalGeneration",
    "GlmOcrForConditionalGeneration",
    "Grok1AForCausalLM",
    "Grok1VForCausalLM",
    "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration",
    "InternVLChatModel",
    "JetVLMForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
    "KimiVLForConditionalGeneration",
    "Lfm2VlForConditionalGeneration",
    "LightOnOCRForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "LlavaForConditionalGeneration",
    "LlavaLlamaForCausalLM",
    "LlavaMistralForCausalLM",
    "LlavaQwenForCausalLM",
    "LlavaVidForCausalLM",
    "LocateAnythingForConditionalGeneration",
    "MiDashengLMModel",
    "MiMoV2ASRForCausalLM",
    "MiniCPMO",
    "MiniCPMV",
    "MiniMaxM3SparseForConditionalGeneration",
    "Mistral3ForConditionalGeneration",
    "MllamaForConditionalGeneration",
    "MossVLForConditionalGeneration",
    "MultiModalityCausalLM",
    "MuseGlimmerForConditionalGeneration",
    "MuseSparkForConditionalGeneration",
    "NVILAForConditionalGeneration",
    "NVILALiteForConditionalGeneration",
    "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Nano_VL_V2",
    "NemotronH_Omni_Reasoning_V3",
    "POINTSV15ChatModel",
    "PaddleOCRVLForConditionalGeneration",
    "Phi4MMForCausalLM",
    "PixtralForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration",
    "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration",
    "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration",
    "Sarashina2VisionForCausalLM",
    "Step3VLForConditionalGeneration",
    "Step3p7ForConditionalGeneration",
    "StepVLForConditionalGeneration",
    "UnlimitedOCRForCausalLM",
    "VoxtralForConditionalGeneration",
    "WhisperForConditionalGeneration",
})

# The model types SGLang can read a config of without running the repository's code
# (utils/hf_transformers/common.py:get_config): SGLang's own _CONFIG_REGISTRY, then transformers' AutoConfig
# (CONFIG_MAPPING_NAMES of transformers 5.19.0, the version the 0.5.23 wheel pins). Both read from the oracle's
# install. Another model_type needs --trust-remote-code (with auto_map) or is refused by transformers.
SGLANG_CONFIG_REGISTRY = frozenset({
    "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Nano_VL_V2", "afmoe", "bailing_hybrid", "bailing_moe_v3_vl",
    "bailingmm_moe_v2_lite", "beam", "chatglm", "dbrx", "deepseek-ocr", "deepseek_v32", "deepseek_v4",
    "deepseek_v41", "deepseek_v41_text", "deepseek_v41_vision", "deepseek_vl_v2", "dots3_note", "dots_ocr",
    "dots_vlm", "exaone", "falcon_h1", "falcon_mamba", "gemma4_unified", "gigachat3_5", "glm5_next",
    "glm5_next_text", "granitemoehybrid", "hy_v4", "inkling_audio_model", "inkling_mm_model", "inkling_model",
    "inkling_vision_model", "intern_s2_preview", "interns2_mobius", "interns2_mobius_text", "internvl_chat",
    "iquest_q1", "iquest_q1_mtp", "jet_nemotron", "jet_vlm", "k2_horizon", "kimi_k2", "kimi_k25", "kimi_k3",
    "kimi_linear", "kimi_vl", "laguna", "locateanything", "longcat_flash", "mamba", "mamba2", "mellum",
    "minicpm_sala", "minicpmv4_6", "minicpmv4_6_vision", "minicpmv4_7", "minimax_m3_vl", "multi_modality",
    "muse_glimmer", "muse_glimmer_assistant", "nanbeige", "nemotron_h", "nemotron_h_omni", "nemotron_h_puzzle",
    "olmo3", "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_next", "qwen4_exp",
    "qwen4_exp_text", "spark2_5", "step3_vl", "step3p5", "step3p7", "xllm",
})
TRANSFORMERS_MODEL_TYPES = frozenset({
    "EvollaModel", "afmoe", "aimv2", "aimv2_text_model", "aimv2_vision_model", "albert", "align",
    "align_text_model", "align_vision_model", "altclip", "altclip_text_model", "altclip_vision_model", "apertus",
    "arcee", "aria", "aria_text", "audio-spectrogram-transformer", "audioflamingo3", "audioflamingo3_encoder",
    "autoformer", "axk1", "axk2", "aya_vision", "bamba", "bark", "bart", "beit", "bert", "bert-generation",
    "big_bird", "bigbird_pegasus", "biogpt", "bit", "bitnet", "blenderbot", "blenderbot-small", "blip", "blip-2",
    "blip_2_qformer", "blip_2_vision_model", "blip_text_model", "blip_vision_model", "bloom", "blt",
    "blt_global_transformer", "blt_local_decoder", "blt_local_encoder", "blt_patcher", "bridgetower",
    "bridgetower_text_model", "bridgetower_vision_model", "bros", "camembert", "canary", "canary_decoder", "canine",
    "chameleon", "chameleon_vqgan", "chinese_clip", "chinese_clip_text_model", "chinese_clip_vision_model", "chmv2",
    "clap", "clap_audio_model", "clap_text_model", "clip", "clip_text_model", "clip_vision_model", "clipseg",
    "clipseg_text_model", "clipseg_vision_model", "clvp", "clvp_decoder", "clvp_encoder", "codegen", "cohere",
    "cohere2", "cohere2_moe", "cohere2_vision", "cohere_asr", "cohere_compass", "cohere_compass_text",
    "cohere_compass_vision", "colmodernvbert", "colpali", "colqwen2", "conditional_detr", "convbert", "convnext",
    "convnextv2", "cosmos3_edge", "cosmos3_edge_text", "cosmos3_edge_vision", "cosmos3_omni", "cpmant", "csm",
    "csm_depth_decoder_model", "ctrl", "cvt", "cwm", "d_fine", "dab-detr", "dac", "data2vec-audio", "data2vec-text",
    "data2vec-vision", "dbrx", "deberta", "deberta-v2", "decision_transformer", "deepseek_ocr2",
    "deepseek_ocr2_encoder", "deepseek_ocr2_sam_vision_model", "deepseek_ocr2_text", "deepseek_ocr2_vision",
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_vl", "deepseek_vl_hybrid",
    "deformable_detr", "deimv2", "deit", "depth_anything", "depth_pro", "detr", "dia", "dia_decoder", "dia_encoder",
    "diffllama", "diffusion_gemma", "diffusion_gemma_text", "dinat", "dinov2", "dinov2_with_registers",
    "dinov3_convnext", "dinov3_vit", "distilbert", "doge", "donut-swin", "dots1", "dpr", "dpt", "edgetam",
    "edgetam_video", "edgetam_vision_model", "efficientloftr", "efficientnet", "electra", "embedding_gemma2",
    "embedding_gemma2_text", "emu3", "emu3_text_model", "emu3_vqgan", "encodec", "encoder-decoder", "eomt",
    "eomt_dinov3", "ernie", "ernie4_5", "ernie4_5_moe", "ernie4_5_vl_moe", "ernie4_5_vl_moe_text",
    "ernie4_5_vl_moe_vision", "esm", "esmc", "esmfold2", "eurobert", "evolla", "exaone4", "exaone4_5",
    "exaone4_5_vision", "exaone_moe", "falcon", "falcon_h1", "falcon_mamba", "fast_vlm", "fastspeech2_conformer",
    "fastspeech2_conformer_hifigan", "fastspeech2_conformer_with_hifigan", "flaubert", "flava", "flava_image_model",
    "flava_multimodal_model", "flava_text_model", "flex_olmo", "florence2", "florence_vision", "fnet", "focalnet",
    "fsmt", "fun_asr_nano", "fun_asr_nano_encoder", "funnel", "fuyu", "gemma", "gemma2", "gemma3", "gemma3_text",
    "gemma3n", "gemma3n_audio", "gemma3n_text", "gemma3n_vision", "gemma4", "gemma4_assistant", "gemma4_audio",
    "gemma4_text", "gemma4_unified", "gemma4_unified_assistant", "gemma4_unified_audio", "gemma4_unified_text",
    "gemma4_unified_vision", "gemma4_vision", "git", "git_vision_model", "glm", "glm4", "glm46v", "glm4_moe",
    "glm4_moe_lite", "glm4v", "glm4v_moe", "glm4v_moe_text", "glm4v_moe_vision", "glm4v_text", "glm4v_vision",
    "glm5_next", "glm5_next_text", "glm5_next_vision", "glm_image", "glm_image_text", "glm_image_vision",
    "glm_image_vqmodel", "glm_moe_dsa", "glm_ocr", "glm_ocr_text", "glm_ocr_vision", "glmasr", "glmasr_encoder",
    "glmga", "glpn", "got_ocr2", "gpt-sw3", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gpt_neox_japanese",
    "gpt_oss", "gptj", "granite", "granite4_vision", "granite4_vision_text", "granite_speech",
    "granite_speech5_ctc", "granite_speech5_encoder", "granite_speech_encoder", "granite_speech_plus",
    "granite_speech_plus_encoder", "granite_swa", "granitemoe", "granitemoe_swa", "granitemoehybrid",
    "granitemoeshared", "grounding-dino", "groupvit", "groupvit_text_model", "groupvit_vision_model", "gte",
    "helium", "hgnet_v2", "hiera", "higgs_audio_v2", "higgs_audio_v2_tokenizer", "hrm_text", "hubert",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl", "hunyuan_vl_text", "hunyuan_vl_vision", "hy_v3", "hy_v4",
    "hyperclovax", "hyperclovax_vision_v2", "ibert", "idefics", "idefics2", "idefics2_perceiver", "idefics2_vision",
    "idefics3", "idefics3_vision", "idefics_perciever", "idefics_vision", "ijepa", "imagegpt", "informer",
    "inkling_audio", "inkling_mm_model", "inkling_text", "inkling_vision", "instructblip", "instructblip_qformer",
    "instructblip_vision_model", "instructblipvideo", "instructblipvideo_qformer", "instructblipvideo_vision_model",
    "internvl", "internvl_vision", "jais2", "jamba", "janus", "janus_vision_model", "janus_vqgan", "jetmoe",
    "jina_embeddings_v3", "kimi_k25", "kimi_k25_vision", "kimi_linear", "kosmos-2", "kosmos-2.5",
    "kosmos_2_5_text_model", "kosmos_2_5_vision_model", "kosmos_2_text_model", "kosmos_2_vision_model",
    "kyutai_speech_to_text", "laguna", "lasr_ctc", "lasr_encoder", "layoutlm", "layoutlmv2", "layoutlmv3",
    "layoutxlm", "led", "levit", "lfm2", "lfm2_moe", "lfm2_vl", "lightglue", "lighton_ocr", "lilt", "llama",
    "llama4", "llama4_text", "llama4_vision_model", "llava", "llava_next", "llava_next_video", "llava_onevision",
    "longcat_flash", "longformer", "longt5", "luke", "lw_detr", "lw_detr_vit", "lxmert", "m2m_100", "mamba",
    "mamba2", "marian", "markuplm", "mask2former", "maskformer", "maskformer-swin", "mbart", "megatron-bert",
    "mellum", "metaclip_2", "metaclip_2_text_model", "metaclip_2_vision_model", "mgp-str", "mimi", "mimo_v2_flash",
    "minicpm3", "minicpmv4_6", "minicpmv4_6_vision", "minicpmv4_7", "minicpmv4_7_vision", "minimax", "minimax_m2",
    "minimax_m3_vl", "minimax_m3_vl_text", "minimax_m3_vl_vision", "ministral", "ministral3", "mistral", "mistral3",
    "mistral4", "mixtral", "mlcd", "mlcd_vision_model", "mllama", "mllama_text_model", "mllama_vision_model",
    "mm-grounding-dino", "mobilebert", "mobilenet_v1", "mobilenet_v2", "mobilevit", "mobilevitv2", "modernbert",
    "modernbert-decoder", "modernvbert", "moonshine", "moonshine_streaming", "moonshine_streaming_encoder", "moshi",
    "moshi_depth", "mpnet", "mpt", "mra", "mt5", "muse_glimmer", "muse_glimmer_assistant", "muse_glimmer_text",
    "muse_glimmer_vision", "musicflamingo", "musicgen", "musicgen_decoder", "musicgen_melody",
    "musicgen_melody_decoder", "mvp", "nanochat", "nemotron", "nemotron3_5_asr", "nemotron3_diarization",
    "nemotron3_diarization_audio", "nemotron_asr_streaming", "nemotron_asr_streaming_encoder", "nemotron_h",
    "nemotron_h_omni", "neomme", "neucodec", "nllb-moe", "nomic_bert", "nougat", "nystromformer", "olmo", "olmo2",
    "olmo3", "olmo_hybrid", "olmoe", "omdet-turbo", "oneformer", "openai-gpt", "openai_privacy_filter", "opt",
    "ovis2", "owlv2", "owlv2_text_model", "owlv2_vision_model", "owlvit", "owlvit_text_model",
    "owlvit_vision_model", "paddleocr_vl", "paddleocr_vl_text", "paddleocr_vl_vision", "paligemma", "parakeet_ctc",
    "parakeet_encoder", "parakeet_rnnt", "parakeet_tdt", "patchtsmixer", "patchtst", "pe_audio", "pe_audio_encoder",
    "pe_audio_video", "pe_audio_video_encoder", "pe_video", "pe_video_encoder", "pegasus", "pegasus_x", "perceiver",
    "perception_lm", "persimmon", "phi", "phi3", "phi4_multimodal", "phi4_multimodal_audio",
    "phi4_multimodal_vision", "phimoe", "pi0", "pix2struct", "pix2struct_text_model", "pix2struct_vision_model",
    "pixio", "pixtral", "plbart", "poolformer", "pop2piano", "pp_chart2table", "pp_doclayout_v2", "pp_doclayout_v3",
    "pp_formulanet", "pp_lcnet", "pp_lcnet_v3", "pp_lcnet_v4", "pp_ocrv5_mobile_det", "pp_ocrv5_mobile_rec",
    "pp_ocrv5_server_det", "pp_ocrv5_server_rec", "pp_ocrv6_medium_det", "pp_ocrv6_small_det", "pp_ocrv6_small_rec",
    "pp_ocrv6_tiny_rec", "prompt_depth_anything", "prophetnet", "pvt", "pvt_v2", "qianfan_ocr",
    "qianfan_ocr_vision", "qwen2", "qwen2_5_omni", "qwen2_5_omni_audio_encoder", "qwen2_5_omni_bigvgan",
    "qwen2_5_omni_dit", "qwen2_5_omni_talker", "qwen2_5_omni_text", "qwen2_5_omni_thinker",
    "qwen2_5_omni_token2wav", "qwen2_5_omni_vision_encoder", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_5_vl_vision",
    "qwen2_audio", "qwen2_audio_encoder", "qwen2_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_vl_vision", "qwen3",
    "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_moe_vision", "qwen3_5_text", "qwen3_5_vision",
    "qwen3_asr", "qwen3_asr_encoder", "qwen3_moe", "qwen3_next", "qwen3_omni_moe", "qwen3_omni_moe_audio_encoder",
    "qwen3_omni_moe_talker_code_predictor", "qwen3_omni_moe_talker_text", "qwen3_omni_moe_text",
    "qwen3_omni_moe_thinker", "qwen3_omni_moe_vision_encoder", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_moe_text",
    "qwen3_vl_moe_vision", "qwen3_vl_text", "qwen3_vl_vision", "qwen4_exp", "qwen4_exp_text", "qwen4_exp_vision",
    "radio", "rag", "recurrent_gemma", "reformer", "regnet", "rembert", "resnet", "rf_detr", "rf_detr_dinov2",
    "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "rt_detr", "rt_detr_resnet", "rt_detr_v2", "rwkv",
    "sam", "sam2", "sam2_hiera_det_model", "sam2_video", "sam2_vision_model", "sam3", "sam3_detr_decoder",
    "sam3_detr_encoder", "sam3_geometry_encoder", "sam3_lite_text", "sam3_lite_text_detr_decoder",
    "sam3_lite_text_detr_encoder", "sam3_lite_text_geometry_encoder", "sam3_lite_text_mask_decoder",
    "sam3_lite_text_text_model", "sam3_mask_decoder", "sam3_tracker", "sam3_tracker_video", "sam3_video",
    "sam3_vision_model", "sam3_vit_model", "sam_hq", "sam_hq_vision_model", "sam_vision_model", "sapiens2",
    "sapiens2_head", "seamless_m4t", "seamless_m4t_v2", "seed_oss", "segformer", "seggpt", "sew", "sew-d",
    "shieldgemma2", "siglip", "siglip2", "siglip2_text_model", "siglip2_vision_model", "siglip_text_model",
    "siglip_vision_model", "slanet", "slanext", "smollm3", "smolvlm", "smolvlm_vision", "solar_open",
    "speech-encoder-decoder", "speech_to_text", "speecht5", "speecht5_hifigan", "splinter", "squeezebert",
    "stablelm", "starcoder2", "step3p5", "step3p5_vision", "step3p7", "superglue", "superpoint", "swiftformer",
    "swin", "swin2sr", "swinv2", "switch_transformers", "t5", "t5_gemma_module", "t5gemma", "t5gemma2",
    "t5gemma2_decoder", "t5gemma2_encoder", "t5gemma2_text", "table-transformer", "tapas", "textnet",
    "time_series_transformer", "timesfm", "timesfm2_5", "timesformer", "timm_backbone", "timm_wrapper", "tipsv2",
    "tipsv2_dpt", "tipsv2_text_model", "tipsv2_vision_model", "trocr", "tvp", "udop", "umt5", "unispeech",
    "unispeech-sat", "univnet", "upernet", "uvdoc", "uvdoc_backbone", "vaultgemma", "vibevoice",
    "vibevoice_acoustic_tokenizer", "vibevoice_acoustic_tokenizer_decoder", "vibevoice_acoustic_tokenizer_encoder",
    "vibevoice_asr", "video_llama_3", "video_llama_3_vision", "video_llava", "videomae", "videomt", "videoprism",
    "videoprism_text_model", "videoprism_vision_model", "vilt", "vipllava", "vision-encoder-decoder",
    "vision-text-dual-encoder", "visual_bert", "vit", "vit_mae", "vit_msn", "vitdet", "vitmatte", "vitpose",
    "vitpose_backbone", "vits", "vivit", "vjepa2", "voxtral", "voxtral_encoder", "voxtral_realtime",
    "voxtral_realtime_encoder", "voxtral_realtime_text", "wav2vec2", "wav2vec2-bert", "wav2vec2-conformer", "wavlm",
    "whisper", "xclip", "xclip_text_model", "xclip_vision_model", "xcodec", "xcodec2", "xglm", "xlm", "xlm-roberta",
    "xlm-roberta-xl", "xlnet", "xlstm", "xmod", "yolos", "yoso", "youtu", "zamba", "zamba2", "zaya", "zoedepth",
})


@lru_cache(maxsize=1)
def _model_classes() -> dict[str, Any]:
    """kvplan/sglang/model_classes.json (tools/sglang_oracle/model_classes.py, from the 0.5.23 wheel and the
    transformers 5.19.0 it pins): SGLang's registered classes, and transformers' classes by backend compatibility."""
    with open(os.path.join(os.path.dirname(__file__), "model_classes.json"), encoding="utf-8") as f:
        table = json.load(f)
    out: dict[str, Any] = {k: frozenset(table[k])
                           for k in ("sglang_classes", "transformers_compatible", "transformers_incompatible")}
    out["heads_check"] = {k: (str(v[0]), bool(v[1]), str(v[2])) for k, v in table["heads_check"].items()}
    return out


def is_sglang_class(architecture: str) -> bool:
    """Whether SGLang 0.5.23 registers a model class of that name (models/registry.py: each module's EntryClass)."""
    return architecture in _model_classes()["sglang_classes"]


def model_class_refusal(architectures: Sequence[str], *, auto_model: bool) -> str | None:
    """SGLang's refusal at model load for architectures it has no class for, under the default --model-impl auto
    (model_loader/utils.py:get_model_architecture → resolve_transformers_arch), in its words; None when one
    architecture is SGLang's own, or falls back to its Transformers backend (a transformers class whose
    `is_backend_compatible()`, i.e. `_supports_attention_backend`, is true), or kvplan cannot tell (no
    architectures: SGLang loads TransformersForCausalLM; a repository's own AutoModel class)."""
    table = _model_classes()
    if any(a in table["sglang_classes"] for a in architectures):
        return None
    for arch in architectures:
        if arch.startswith("Transformers"):
            continue
        if arch in table["transformers_incompatible"]:
            return (f"{arch} has no SGlang implementation and the Transformers implementation is not compatible "
                    "with SGLang.")
        if arch not in table["transformers_compatible"] and not auto_model:
            return (f"Cannot find model module. '{arch}' is not a registered model in the Transformers library (only "
                    "relevant if the model is meant to be in Transformers) and 'AutoModel' is not present in the model "
                    "config's 'auto_map' (relevant if the model is custom).")
    return None


def heads_refusal(architectures: Sequence[str], *, heads: int, kv_heads: int, tp: int, attn_tp: int) -> str | None:
    """The assertion SGLang's model class fails when TP does not split the heads (None: it splits them, or kvplan
    has no record of the class's check). The check lives in each class's attention __init__ (models/llama.py:
    LlamaAttention and the modules of model_classes.json `heads_check`): total_num_heads % tp_size == 0, then
    total_num_kv_heads % tp_size == 0 when kv heads ≥ tp_size, else tp_size % total_num_kv_heads == 0; tp_size is
    --tp-size in the modules that read get_parallel().tp_size (even under attention DP), the attention-TP size in
    those that read attn_tp_size; a module whose size kvplan could not tell is checked without attention DP only."""
    checked = next((_model_classes()["heads_check"][a] for a in architectures[:1]
                    if a in _model_classes()["heads_check"]), None)
    if checked is None:
        return None
    module, kv_checked, size = checked
    if size == "unknown" and attn_tp != tp:
        return None
    n = attn_tp if size == "attn_tp" else tp
    name = "attn_tp_size" if size == "attn_tp" else "tp_size"
    where = f"({module}; {heads} attention heads, {kv_heads} KV heads, {name} {n})"
    if n <= 1:
        return None
    if heads % n:
        return f"AssertionError: assert self.total_num_heads % {name} == 0 {where}"
    if kv_checked and kv_heads >= n and kv_heads % n:
        return f"AssertionError: assert self.total_num_kv_heads % {name} == 0 {where}"
    if kv_checked and 0 < kv_heads < n and n % kv_heads:
        return f"AssertionError: assert {name} % self.total_num_kv_heads == 0 {where}"
    return None
