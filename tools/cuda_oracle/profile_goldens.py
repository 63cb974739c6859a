#!/usr/bin/env python
"""Regenerate tests/fixtures/oracle-profile/ from vLLM 0.33's own profile run (dev tool, oracle venv only).

kvplan, its tests and CI never run or import this: it needs the 4 GB vLLM 0.33 CUDA-oracle venv.

    . /work/oracle/vllm033/venv/bin/activate; export CUDA_ORACLE_HOME=/work/oracle/vllm033
    python tools/cuda_oracle/profile_goldens.py --oracle-dir /work/shared/tools/vllm-cuda-oracle \\
        [--only SUBSTRING ...] [--list] [--timeout 900] [--force]

It runs the shared vllm-cuda-oracle kit's ``profile_probe.py`` unchanged (its ``main()``, imported as a
module): vLLM 0.33's V1-runner ``profile_run`` on meta tensors — the multimodal encoder profile, the forward
of the profile batch (fused-MoE workspaces, FP8 linears through their Python paths), and
``GPUModelRunner._dummy_sampler_run`` — counting every GPU tensor while it lives (512-byte blocks). Read the
probe's docstring for what it counts and does not. One server process per GPU imports vLLM once after the
fake GPU is set (as a standalone run does), then forks one child per case, one at a time (``-j 1``: the
machine's two cores are shared).

What this script adds to the probe, without changing it:

* a case matrix over the corpus (dense, MoE, MLA, hybrid, multimodal, quantized × H100/H200/A100/B200 ×
  TP 1–8, ``--max-num-batched-tokens`` / ``--max-num-seqs`` variants, the deployments whose startup logs
  print "peak activation");
* one more fake GPU, ``gb10`` (DGX Spark: capability 12.1, "NVIDIA GB10", 121.63 GiB as the MiaAI log
  prints it), added to the probe's GPUS table;
* pipeline-parallel stages at TP 1 (``Case.pp``, ``pp_rank``): patches around the probe's calls
  (``_install_pp_stage``);
* Model Runner V2's sampler (``Case.runner = "v2"``, vLLM 0.33's default runner): its own ``_dummy_sampler_run``
  in place of the probe's V1 one (``_install_v2_sampler``);
* the trimmed record per case (``cases/<id>.json``) and ``index.json`` (one line per case: the phase peaks).

Not covered (the probe's limits, see its docstring): TP ranks other than 0 (they build the
same shard shapes: vLLM pads vocab and heads evenly), Model Runner V2's own forward path (its execute_model: the
model's forward is the same code; the runner's buffers are persistent), and processor files for the corpus's
multimodal configs but the cases with ``Case.processor`` (tests/fixtures/processors/<name>/ and a stand-in
tokenizer, _probe_dir): elsewhere the corpus holds config.json only, so the encoder phase is skipped and says why.
``write_goldens`` keeps a case's committed golden when its raw output is not in --raw-dir (``--only`` reruns leave
the rest of index.json as it was).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "configs"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
OUT = ROOT / "tests" / "fixtures" / "oracle-profile"
FORMAT = 1
# DGX Spark: compute capability 12.1 (CUDA's sm_121), device name as nvidia-smi prints it, total as the MiaAI
# startup log (tests/fixtures/startup-logs/raw/miaai-dsv4flash-4-gb10-mnbt2048.log) prints it: 121.63 GiB.
EXTRA_GPUS = {"gb10": ((12, 1), "NVIDIA GB10", int(121.63 * 2**30))}


@dataclass(frozen=True)
class Case:
    config: str  # folder under tests/fixtures/corpus/configs or tests/fixtures/configs
    gpu: str
    tp: int = 1
    args: tuple[str, ...] = ()  # more profile_probe.py options
    family: str = ""
    why: str = ""
    pp: int = 1  # pipeline-parallel size; the case is stage `pp_rank` of it
    pp_rank: int = 0
    runner: str = "v1"  # "v2": Model Runner V2's _dummy_sampler_run (_install_v2_sampler)
    # processor files under tests/fixtures/processors/ (e.g. "qwen3-vl"): the encoder profile runs (_probe_dir)
    processor: str = ""

    @property
    def id(self) -> str:
        extra = "".join(f"_{a.lstrip('-').replace('max-num-batched-tokens', 'mnbt').replace('max-num-seqs', 'seqs')}"
                        .replace("max-model-len", "mml").replace("=", "") for a in self.args)
        stage = f"-pp{self.pp}r{self.pp_rank}" if self.pp > 1 else ""
        runner = "-mrv2" if self.runner == "v2" else ""
        enc = "-enc" if self.processor else ""
        return f"{self.config}__{self.gpu}-tp{self.tp}{stage}{runner}{enc}{extra}".replace(" ", "")

    @property
    def model_dir(self) -> Path:
        return CORPUS / self.config if (CORPUS / self.config).is_dir() else CONFIGS / self.config


def _c(config: str, family: str, gpus: tuple[str, ...], tps: tuple[int, ...] = (1,),
       args: tuple[str, ...] = (), why: str = "") -> list[Case]:
    return [Case(config, g, t, args, family, why) for g in gpus for t in tps]


def _pp(config: str, family: str, gpu: str, tp: int, pp: int, args: tuple[str, ...] = (), why: str = "") -> list[Case]:
    return [Case(config, gpu, tp, args, family, why, pp, r) for r in range(pp)]


def _enc(config: str, family: str, gpus: tuple[str, ...], tps: tuple[int, ...] = (1,),
         args: tuple[str, ...] = (), why: str = "", processor: str = "qwen3-vl") -> list[Case]:
    return [Case(config, g, t, args, family, why, processor=processor) for g in gpus for t in tps]


def _v2(config: str, family: str, gpus: tuple[str, ...], tps: tuple[int, ...] = (1,),
        args: tuple[str, ...] = (), why: str = "") -> list[Case]:
    return [Case(config, g, t, args, family, why, runner="v2") for g in gpus for t in tps]


ALL3 = ("h100", "a100-80", "b200")
EP = ("--engine-arg", "enable_expert_parallel=True")
CASES: list[Case] = [
    # dense
    *_c("Qwen--Qwen2.5-7B-Instruct", "dense", ALL3),
    *_c("Qwen--Qwen2.5-7B-Instruct", "dense", ("h100",), (2, 4)),
    *_c("Qwen--Qwen2.5-7B-Instruct", "dense", ("h100",), args=("--max-num-batched-tokens", "2048")),
    *_c("Qwen--Qwen2.5-7B-Instruct", "dense", ("h100",), args=("--max-num-seqs", "256")),
    *_c("Qwen--Qwen2.5-7B-Instruct", "dense", ("h100",),
        args=("--max-num-batched-tokens", "16384", "--max-num-seqs", "64")),
    *_c("meta-llama--Llama-3.1-8B-Instruct", "dense", ("h100",), args=("--max-model-len", "16000"),
        why="llm-d H100 log (vLLM 0.11): torch peak memory increase 4.76 GiB"),
    *_c("meta-llama--Llama-3.1-8B-Instruct", "dense", ("a100-80",),
        why="ghlog A100 log (vLLM 0.31, Model Runner V2): 1.44 GiB for peak activation"),
    *_c("Qwen--Qwen3-0.6B", "dense", ("h100",), args=("--max-model-len", "16000"),
        why="llm-d H100 log (vLLM 0.11): 5.56 GiB"),
    *_c("Qwen--Qwen3-32B", "dense", ("h100",), (1, 2), args=("--max-model-len", "16000"),
        why="llm-d H100 logs (vLLM 0.11): 5.64 GiB"),
    *_c("meta-llama--Llama-3.1-70B-Instruct", "dense", ("h100", "b200"), (4, 8)),
    # MoE
    *_c("Qwen--Qwen3-30B-A3B", "moe", ALL3),
    *_c("Qwen--Qwen3-30B-A3B", "moe", ("h100",), (2, 4)),
    *_c("Qwen--Qwen3-30B-A3B", "moe", ("h100",), args=("--max-num-batched-tokens", "2048")),
    *_c("Qwen--Qwen3-235B-A22B", "moe", ("h100", "b200"), (8,)),
    *_c("openai--gpt-oss-20b", "moe", ("h100",), args=("--max-model-len", "16000"),
        why="llm-d H100 log (vLLM 0.11): 7.38 GiB"),
    *_c("openai--gpt-oss-120b", "moe", ("h100",), args=("--max-model-len", "16000"),
        why="llm-d H100 log (vLLM 0.11): 7.38 GiB"),
    *_c("mistralai--Mixtral-8x22B-v0.1", "moe", ("h100",), (8,)),
    # MLA
    *_c("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", ALL3),
    *_c("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", ("h100",), (2,)),
    *_c("deepseek-ai--DeepSeek-R1", "mla", ("h200", "b200"), (8,)),
    *_c("deepseek-ai--DeepSeek-V4-Flash", "mla", ("gb10",),
        args=("--max-model-len", "262144", "--max-num-seqs", "1", "--max-num-batched-tokens", "2048"),
        why="MiaAI GB10 log: 1.39 GiB of peak activation"),
    *_c("deepseek-ai--DeepSeek-V4-Flash", "mla", ("gb10",),
        args=("--max-model-len", "262144", "--max-num-seqs", "1", "--max-num-batched-tokens", "8224"),
        why="MiaAI GB10 log: 5.30 GiB of peak activation"),
    # the GB10 cases fail (DeepGEMM is unavailable at SM 12.1 in the stock wheel; the MiaAI recipe image is not
    # stock vLLM): the same batch shapes on an H200 (SM 9.0), for the shape of the activation peak
    *_c("deepseek-ai--DeepSeek-V4-Flash", "mla", ("h200",),
        args=("--max-model-len", "262144", "--max-num-seqs", "1", "--max-num-batched-tokens", "2048"),
        why="MiaAI GB10 log: 1.39 GiB of peak activation (run on H200: the GB10 case fails)"),
    *_c("deepseek-ai--DeepSeek-V4-Flash", "mla", ("h200",),
        args=("--max-model-len", "262144", "--max-num-seqs", "1", "--max-num-batched-tokens", "8224"),
        why="MiaAI GB10 log: 5.30 GiB of peak activation (run on H200: the GB10 case fails)"),
    # hybrid
    *_c("Qwen--Qwen3-Next-80B-A3B-Instruct", "hybrid", ("h200",), (2,), args=("--max-model-len", "262144"),
        why="ghlog 2xH200 log (vLLM 0.10.2): 5.58 GiB for peak activation"),
    *_c("ibm-granite--granite-4.0-h-small", "hybrid", ("h100",)),
    *_c("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "hybrid", ("h100",)),
    # multimodal (the corpus has no processor files: the encoder phase is skipped and says why)
    *_c("Qwen--Qwen3-VL-8B-Instruct", "multimodal", ("h100",)),
    *_c("Qwen--Qwen3-VL-30B-A3B-Instruct", "multimodal", ("h100",), (4,)),
    *_c("mistralai--Mistral-Small-3.2-24B-Instruct-2506", "multimodal", ("h100",), args=("--max-model-len", "16000"),
        why="llm-d H100 log (vLLM 0.11): 2.12 GiB"),
    # quantized
    *_c("Qwen--Qwen3-32B-FP8", "quantized", ("h100", "a100-80")),
    *_c("nvidia--Llama-3.1-70B-Instruct-FP8", "quantized", ("h100",), (2,), args=("--max-model-len", "16000"),
        why="llm-d H100 log of Llama-3.3-70B FP8-dynamic (same shapes, vLLM 0.11): 4.84 GiB"),
    *_c("MiniMaxAI--MiniMax-M2.7", "quantized", ("h200", "b200"), (2,)),
    *_c("MiniMaxAI--MiniMax-M2.7", "quantized", ("a100-80",), (4,)),
    *_c("nvidia--Qwen3-235B-A22B-NVFP4", "quantized", ("b200",), (4,)),
    # more architectures (each model file's MLP and attention liveness), batch variants where the forward is the peak
    *_c("meta-llama--Llama-3.1-8B-Instruct", "dense", ("h100",), (2,), args=("--max-num-seqs", "32")),
    *_c("Qwen--Qwen3-32B", "dense", ("h100",), (4,), args=("--max-num-seqs", "64")),
    *_c("mistralai--Mistral-7B-Instruct-v0.2", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("google--gemma-4-31B-it", "multimodal", ("h100",), (2,)),
    *_c("google--gemma-4-E2B-it", "multimodal", ("h100",), args=("--max-num-seqs", "64"),
        why="use_double_wide_mlp: the KV-shared layers' MLP is 2 x intermediate_size (gemma4.py)"),
    *_c("unsloth--gemma-2-27b-it", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("allenai--OLMo-2-1124-13B", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("ibm-granite--granite-3.3-8b-instruct", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("CohereForAI--c4ai-command-r-v01", "dense", ("h100",), (2,), args=("--max-num-seqs", "64")),
    *_c("tencent--Hunyuan-7B-Instruct", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("zai-org--GLM-4-9B-0414", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("bigcode--starcoder2-15b", "dense", ("h100",), args=("--max-num-seqs", "64")),
    *_c("Qwen--Qwen2.5-7B-Instruct", "dense", ("h100",), (2,), args=("--max-num-seqs", "32")),
    *_c("Qwen--Qwen3-30B-A3B", "moe", ("h100",), (2,), args=("--max-num-seqs", "16")),
    *_c("zai-org--GLM-4.5-Air", "moe", ("h100",), (4,)),
    *_c("mistralai--Mixtral-8x22B-v0.1", "moe", ("h100",), (8,), args=("--max-num-seqs", "16")),
    *_c("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", ("h100",), args=("--max-num-seqs", "16")),
    *_c("deepseek-ai--DeepSeek-V3-0324", "mla", ("h200",), (8,)),
    *_c("moonshotai--Kimi-K2-Instruct", "mla", ("h200",), (8,)),
    *_c("Qwen--Qwen3.5-35B-A3B", "hybrid", ("h100",), (2,)),
    *_c("RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "quantized", ("h100",), (4,)),
    *_c("zai-org--GLM-4.5-Air-FP8", "quantized", ("h100",), (2,)),
    *_c("Qwen--Qwen3-30B-A3B-FP8", "quantized", ("h100",)),
    *_c("Qwen--Qwen3-30B-A3B-FP8", "quantized", ("a100-80",)),
    # pipeline-parallel stages (the first holds the embedding, the last the LM head and the sampler's dummy run)
    *_pp("Qwen--Qwen2.5-7B-Instruct", "dense", "h100", 1, 2),
    *_pp("meta-llama--Llama-3.1-8B-Instruct", "dense", "h100", 1, 2, args=("--max-num-seqs", "64")),
    *_pp("Qwen--Qwen3-30B-A3B", "moe", "h100", 1, 2),
    *_pp("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", "h100", 1, 2),
    *_pp("meta-llama--Llama-3.1-70B-Instruct", "dense", "h100", 1, 4),
    # PP × TP > 1: each stage's TP rank 0
    *_pp("meta-llama--Llama-3.1-8B-Instruct", "dense", "h100", 2, 2, args=("--max-num-seqs", "64")),
    *_pp("Qwen--Qwen3-30B-A3B", "moe", "h100", 2, 2),
    *_pp("Qwen--Qwen3-30B-A3B", "moe", "h200", 4, 2,
         why="isambard 2×4 GH200 log (Qwen3-30B-A3B-2507, TP 4 × PP 2; vLLM 0.10.1): the shapes of its stages"),
    *_pp("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", "h100", 2, 2),
    # Model Runner V2's sampler (vLLM 0.33's default runner): same forward, its own _dummy_sampler_run
    *_v2("Qwen--Qwen2.5-7B-Instruct", "dense", ALL3),
    *_v2("Qwen--Qwen2.5-7B-Instruct", "dense", ("h100",), args=("--max-num-seqs", "256")),
    *_v2("meta-llama--Llama-3.1-8B-Instruct", "dense", ("a100-80",),
         why="ghlog A100 log (vLLM 0.31, Model Runner V2): 1.44 GiB for peak activation"),
    *_v2("meta-llama--Llama-3.1-8B-Instruct", "dense", ("h100",), args=("--max-model-len", "16000")),
    *_v2("meta-llama--Llama-3.1-70B-Instruct", "dense", ("h100",), (4,)),
    *_v2("Qwen--Qwen3-30B-A3B", "moe", ("h100",), (1, 2)),
    *_v2("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", ("h100",)),
    *_v2("deepseek-ai--DeepSeek-R1", "mla", ("h200",), (8,)),
    *_v2("Qwen--Qwen3-Next-80B-A3B-Instruct", "hybrid", ("h200",), (2,), args=("--max-model-len", "262144")),
    *_v2("Qwen--Qwen3-VL-8B-Instruct", "multimodal", ("h100",)),
    *_v2("Qwen--Qwen3-32B-FP8", "quantized", ("h100",)),
    # the encoder profile (issue 20): the corpus config with the Qwen3-VL processor files and a stand-in tokenizer
    *_enc("Qwen--Qwen3-VL-30B-A3B-Instruct", "multimodal", ("h100",), (1, 4),
          why="vllm-cuda-oracle README: encoder 1.27 GiB at TP 4 with 0.33's dummy image"),
    *_enc("Qwen--Qwen3-VL-8B-Instruct", "multimodal", ("h100", "a100-80")),
    *_enc("Qwen--Qwen3-VL-8B-Instruct", "multimodal", ("h100",), args=("--max-num-batched-tokens", "32768")),
    *_enc("Qwen--Qwen3-VL-8B-Instruct", "multimodal", ("h100",), args=("--mm-limit", "image=0")),
    # --mm-encoder-tp-mode data: the tower replicated, the dummy item on one rank (vision.py:
    # run_dp_sharded_mrope_vision_model), its output all-gathered over the TP group
    *_enc("Qwen--Qwen3-VL-30B-A3B-Instruct", "multimodal", ("h100",), (4,),
          args=("--engine-arg", "mm_encoder_tp_mode=data")),
    # Qwen2.5-VL (Qwen2VLProcessingInfo: a video of up to 14 frames at the factorized image size; the image alone)
    *_enc("Qwen--Qwen2.5-VL-3B-Instruct", "multimodal", ("h100",), processor="qwen2.5-vl"),
    *_enc("Qwen--Qwen2.5-VL-3B-Instruct", "multimodal", ("h100",), args=("--max-model-len", "32768"),
          processor="qwen2.5-vl"),
    *_enc("Qwen--Qwen2.5-VL-3B-Instruct", "multimodal", ("h100",), args=("--mm-limit", "video=0"),
          processor="qwen2.5-vl"),
    *_enc("Qwen--Qwen2.5-VL-72B-Instruct", "multimodal", ("h100",), (4,), processor="qwen2.5-vl"),
    *_enc("Qwen--Qwen2.5-VL-3B-Instruct", "multimodal", ("h100",), (2,), processor="qwen2.5-vl"),
    *_enc("Qwen--Qwen2.5-VL-3B-Instruct", "multimodal", ("h100",), (2,), args=("--engine-arg", "mm_encoder_tp_mode=data"),
          processor="qwen2.5-vl"),
    # Llama-4 (no processor file in the corpus: transformers' Llama4ImageProcessorFast / Llama4Processor defaults,
    # tests/fixtures/processors/llama4/SOURCE.md); the FP8 MoE forward fails after the encoder (ORACLE_FAILURES)
    *_enc("RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "multimodal", ("h100",), (1, 4), processor="llama4"),
    *_enc("RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "multimodal", ("h100",), (4,),
          args=("--engine-arg", "mm_encoder_tp_mode=data"), processor="llama4"),
    # Gemma-4 (no processor file in the corpus: transformers' Gemma4 image/video processor defaults); the video
    # dummy stops the probe (gemma4_mm.py sizes its frame chunks from the device's free memory: ORACLE_FAILURES)
    *_enc("google--gemma-4-31B-it", "multimodal", ("h100",), (2,), processor="gemma4"),
    *_enc("google--gemma-4-31B-it", "multimodal", ("h100",), (2,), args=("--mm-limit", "video=0"),
          processor="gemma4"),
    *_enc("Qwen--Qwen2.5-VL-3B-Instruct", "multimodal", ("h100",),
          args=("--max-num-batched-tokens", "32768", "--mm-limit", "video=0"), processor="qwen2.5-vl"),
    # --enable-expert-parallel: each rank holds whole experts (FusedMoEParallelConfig.make: ep_size = TP, moe tp 1),
    # so the fused-MoE workspace and intermediates are the unsplit expert width over the rank's tokens
    *_c("Qwen--Qwen3-30B-A3B", "moe", ("h100",), (2, 4), args=EP),
    *_c("Qwen--Qwen3-235B-A22B", "moe", ("h100",), (8,), args=EP,
        why="joshi 8xH100 (Qwen3-VL-235B), l40s x8 and utho 4xRTX PRO 6000 logs run this family with EP"),
    *_c("mistralai--Mixtral-8x22B-v0.1", "moe", ("h100",), (8,), args=EP),
    *_c("deepseek-ai--DeepSeek-V2-Lite-Chat", "mla", ("h100",), (2,), args=EP),
    *_c("MiniMaxAI--MiniMax-M2.7", "quantized", ("h200",), (2,), args=EP),
    *_c("Qwen--Qwen3-VL-30B-A3B-Instruct", "multimodal", ("h100",), (4,), args=EP),
    # TP > 1 on A100 (2,048 tokens / 256 sequences by default) and on B200 (16,384 / 1,024)
    *_c("meta-llama--Llama-3.1-70B-Instruct", "dense", ("a100-80",), (4,)),
    *_c("Qwen--Qwen3-30B-A3B", "moe", ("a100-80", "b200"), (2,)),
]


PROCESSORS = ROOT / "tests" / "fixtures" / "processors"
# Qwen's special tokens at their ids in the Qwen2/Qwen3 vocabulary (151643 …, the configs' image_token_id 151655 and
# video_token_id 151656): the ids vLLM's prompt updates look up in the tokenizer.
QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
QWEN_FIRST_SPECIAL = 151643


# Fields the probe's copy of a processor file changes (tests/fixtures/processors/<name>/SOURCE.md says why): the
# committed Qwen2.5-VL file names its image processor "Qwen2_5_VLImageProcessor", a class transformers 5.19 does not
# have; the official Qwen/Qwen2.5-VL-*-Instruct files name "Qwen2VLImageProcessor" (the class it resolves to).
PROBE_FIELDS = {("qwen2.5-vl", "preprocessor_config.json"): {"image_processor_type": "Qwen2VLImageProcessor"}}
# Files the probe's folder gets where the corpus has no processor file (tests/fixtures/processors/<name>/SOURCE.md):
# they name the classes only, so every value is transformers 5.19's class default (Llama4ImageProcessorFast:
# max_patches 16, size 336 × 336, resize_to_max_canvas false).
PROBE_FILES = {"llama4": {"preprocessor_config.json": {"image_processor_type": "Llama4ImageProcessorFast",
                                                       "processor_class": "Llama4Processor"}},
               "gemma4": {"preprocessor_config.json": {"image_processor_type": "Gemma4ImageProcessor",
                                                       "processor_class": "Gemma4Processor"},
                          "video_preprocessor_config.json": {"video_processor_type": "Gemma4VideoProcessor",
                                                             "processor_class": "Gemma4Processor"}}}


def _probe_dir(case: Case, raw: Path) -> Path:
    """The folder the probe reads: the config's own, or for a case with processor files a folder of its config.json,
    tests/fixtures/processors/<processor>/*.json and a stand-in tokenizer (_standin_tokenizer)."""
    if not case.processor:
        return case.model_dir
    out = raw / "models" / f"{case.config}+{case.processor}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_bytes((case.model_dir / "config.json").read_bytes())
    for f in sorted((PROCESSORS / case.processor).glob("*.json")):
        (out / f.name).write_bytes(f.read_bytes())
        if fields := PROBE_FIELDS.get((case.processor, f.name)):
            (out / f.name).write_text(json.dumps({**json.loads(f.read_bytes()), **fields}, indent=2))
    for name, fields in PROBE_FILES.get(case.processor, {}).items():
        (out / name).write_text(json.dumps(fields, indent=2))
    if not (out / "tokenizer.json").exists():
        _standin_tokenizer(out, case.processor)
    return out


# Llama-4's image tokens (Llama4Processor's defaults): <|image_start|>, <|image_end|> and <|patch|> at the ids the
# Llama-4 configs give (boi_token_index 200080, eoi_token_index 200081, image_token_index 200092); the others at free
# ids after them, which only name the separators (vLLM counts the <|patch|> positions: mllama4.py
# PromptUpdateDetails.select_token_ids(repl_ids, img_patch_token_ids)).
LLAMA4_SPECIALS = {200000: "<|begin_of_text|>", 200001: "<|end_of_text|>", 200080: "<|image_start|>",
                   200081: "<|image_end|>", 200092: "<|patch|>", 200093: "<|image|>", 200094: "<|tile_x_separator|>",
                   200095: "<|tile_y_separator|>"}
# Gemma-4's multimodal tokens at the configs' ids (boi_token_id 255999, boa_token_id 256000, image_token_id 258880,
# audio_token_id 258881, eoi_token_id 258882, eoa_token_id 258883, video_token_id 258884), named as the tokenizer's
# attributes Gemma4Processor reads (tokenizer.image_token, boi_token, ...; extra_special_tokens below); <|video|> is
# the name Gemma4Processor adds itself.
GEMMA4_SPECIALS = {0: "<pad>", 1: "<eos>", 2: "<bos>", 255999: "<|image>", 256000: "<|audio>", 258880: "<|image|>",
                   258881: "<|audio|>", 258882: "<image|>", 258883: "<audio|>", 258884: "<|video|>"}
GEMMA4_ATTRIBUTES = {"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
                     "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}
# processor name → (special tokens by id, eos, pad, tokenizer_class, extra_special_tokens)
STANDIN_TOKENS = {
    "llama4": (LLAMA4_SPECIALS, "<|end_of_text|>", "<|end_of_text|>", "PreTrainedTokenizerFast", {}),
    "gemma4": (GEMMA4_SPECIALS, "<eos>", "<pad>", "PreTrainedTokenizerFast", GEMMA4_ATTRIBUTES),
}
QWEN_STANDIN = ({QWEN_FIRST_SPECIAL + i: t for i, t in enumerate(QWEN_SPECIALS)}, "<|im_end|>", "<|endoftext|>",
                "Qwen2TokenizerFast", {})


def _standin_tokenizer(out: Path, processor: str = "qwen3-vl") -> None:
    """A byte-level BPE tokenizer with no merges, padded with filler entries so the family's special tokens sit at
    their real ids (Qwen's; Llama-4's: LLAMA4_SPECIALS). Not the model's vocabulary (the corpus has none): the
    profile's dummy prompt is only placeholders, and the encoder's inputs and outputs come from the image processor
    and the model, not from the text's tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    specials, eos, pad, cls, attributes = STANDIN_TOKENS.get(processor, QWEN_STANDIN)
    alphabet = [ch for ch in sorted(pre_tokenizers.ByteLevel.alphabet())]
    low = [i for i in specials if i < len(alphabet)]  # Gemma's <pad>/<eos>/<bos> at 0-2: the alphabet after them
    vocab = {ch: i + len(low) for i, ch in enumerate(alphabet)}
    vocab.update({specials[i]: i for i in low})
    vocab.update({specials.get(i, f"<filler_{i}>"): i for i in range(len(vocab), max(specials) + 1)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials.values()])
    assert all(tok.token_to_id(t) == i for i, t in specials.items())
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=pad,
                                   **({"extra_special_tokens": attributes} if attributes else {}))
    fast.save_pretrained(out)
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    cfg["tokenizer_class"] = cls
    (out / "tokenizer_config.json").write_text(json.dumps(cfg))


def _trim(raw: dict, case: Case) -> dict:
    """The golden: the probe's figures, the largest tensors at each phase's peak, its own notes."""
    phases = {}
    for name, ph in (raw.get("phases") or {}).items():
        keep = {k: v for k, v in ph.items() if k not in ("largest_at_peak",)}
        keep["largest_at_peak"] = ph.get("largest_at_peak", [])[:6]
        phases[name] = keep
    rec = {k: raw.get(k) for k in ("tokens", "max_num_seqs", "max_model_len", "dtype", "quantization",
                                    "moe_backends", "linear_methods", "process_weights_errors",
                                    "moe_workspace_bytes", "peak_bytes", "error")}
    return {"format": FORMAT, "id": case.id, "config": case.config, "family": case.family, "gpu": case.gpu,
            "tp": case.tp, "pp": case.pp, "pp_rank": case.pp_rank, "runner": case.runner, "args": list(case.args),
            **({"processor": case.processor} if case.processor else {}), "why": case.why, **rec,
            "phases": phases}


def serve(gpu: str, jobs: list[dict], oracle_dir: str, timeout: int) -> None:
    """One vLLM import per GPU (after the fake GPU is set), one forked child per case."""
    sys.path.insert(0, oracle_dir)
    import profile_probe  # noqa: PLC0415  (its import-time patches must precede vLLM's)

    profile_probe.GPUS.update(EXTRA_GPUS)
    # A shape- and dtype-true torchvision normalize for processors that normalize on the CPU (Llama-4's; the probe's
    # own shims cover resize and pad, enough for the Qwen processors, which vLLM has normalize on the GPU): the
    # float32 pixels keep their shape, as tvF.normalize returns them.
    import torch  # noqa: PLC0415
    profile_probe._TV_SHIMS.setdefault("normalize", lambda image, mean, std, inplace=False: image.to(torch.float32))
    # gemma4_mm.py sizes its encoder chunks from torch.accelerator.get_memory_info() (_encoder_chunk: min(free / 2,
    # total / 10)), which has no device here: the fake GPU's total, all free — the chunk is total / 10's whenever at
    # least a fifth of the GPU is free when the profile runs.
    torch.accelerator.get_memory_info = lambda *a, **k: (nvml, nvml)  # type: ignore[assignment]
    cap, name, nvml = profile_probe.GPUS[gpu]
    profile_probe.fake_cuda.set_gpu(capability=cap, name=name, nvml_total=nvml)
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    import vllm  # noqa: F401,PLC0415
    from vllm.engine.arg_utils import EngineArgs  # noqa: F401,PLC0415
    from vllm.model_executor.model_loader.utils import initialize_model  # noqa: F401,PLC0415
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner  # noqa: F401,PLC0415
    sys.stdout = real_stdout
    for j in jobs:
        t0 = time.time()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            rc = 1
            try:
                fo = os.open(j["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                fe = os.open(j["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fo, 1)
                os.dup2(fe, 2)
                argv = list(j["argv"])
                if j.get("runner") == "v2":
                    _install_v2_sampler(profile_probe)
                if j.get("pp", 1) > 1:
                    argv += _install_pp_stage(profile_probe, j["pp"], j["pp_rank"], int(argv[argv.index("--tp") + 1]))
                sys.argv = ["profile_probe.py", *argv, "--gpu", gpu]
                rc = profile_probe.main()
            except BaseException:  # noqa: BLE001
                import traceback  # noqa: PLC0415
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc or 0)
        deadline = t0 + timeout
        while True:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.time() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                st = -9
                break
            time.sleep(0.2)
        print(f"[{gpu}] {j['id']} status={st} {time.time() - t0:.1f}s", file=sys.stderr, flush=True)


def _install_pp_stage(probe, pp: int, rank: int, tp: int) -> list[str]:  # type: ignore[no-untyped-def]
    """Stage `rank` of `pp` pipeline stages, by patching what the probe calls (the probe is not changed):

    * ParallelConfig sees pp × tp devices (config/parallel.py checks device_count() >= world_size); the probe
      re-patches the count to TP when TP > 1, so EngineArgs.create_engine_config is wrapped to set it back to
      pp × tp just before the config is built;
    * after ensure_model_parallel_initialized, the PP group reports `pp` ranks with this process at `rank`
      (GroupCoordinator.is_first_rank / is_last_rank compare the global rank 0 with ranks[0] / ranks[-1]), so
      make_layers builds this stage's layers (distributed/utils.py:get_pp_indices) and PPMissingLayer elsewhere;
    * the forward of a stage after the first takes the runner's persistent intermediate tensors (hidden states and
      residual: v1/worker/gpu_model_runner.py allocates them before the profile, so they are not counted) and one
      before the last returns IntermediateTensors; the sampler runs on the last stage only and the encoder on the
      first (profile_run: "Only run sampler/pooler on last PP rank").
    Returns the probe options this adds."""
    import torch  # noqa: PLC0415
    from vllm.distributed import parallel_state as ps  # noqa: PLC0415
    from vllm.engine.arg_utils import EngineArgs  # noqa: PLC0415
    from vllm.platforms import cuda as cu  # noqa: PLC0415

    def devices(n: int) -> None:
        for cls in (cu.CudaPlatformBase, cu.NonNvmlCudaPlatform, cu.NvmlCudaPlatform):
            cls.device_count = classmethod(lambda c, w=n: w)
        torch.cuda.device_count = lambda w=n: w

    devices(pp * tp)
    orig_create = EngineArgs.create_engine_config

    def create(self, *a, **k):  # type: ignore[no-untyped-def]
        devices(pp * tp)  # main() has set the count to tp when tp > 1
        return orig_create(self, *a, **k)

    EngineArgs.create_engine_config = create
    orig_init = ps.ensure_model_parallel_initialized

    def init(*a, **k):  # type: ignore[no-untyped-def]
        orig_init(*a, **k)
        g = ps._PP
        g.world_size, g.rank_in_group, g.ranks = pp, rank, [i - rank for i in range(pp)]

    ps.ensure_model_parallel_initialized = init
    orig_forward = probe.run_forward

    def run_forward(cfg, model, mode, tokens, set_forward_context):  # type: ignore[no-untyped-def]
        if rank == 0 and pp == 1:
            return orig_forward(cfg, model, mode, tokens, set_forward_context)
        mc = cfg.model_config
        it = None
        if rank > 0:
            it = model.make_empty_intermediate_tensors(batch_size=tokens, dtype=mc.dtype, device=torch.device("meta"))
        ids = torch.zeros(tokens, dtype=torch.long, device="meta")
        pos = torch.zeros((3, tokens) if getattr(mc, "uses_mrope", False) else (tokens,), dtype=torch.long,
                          device="meta")
        with set_forward_context(None, cfg, num_tokens=tokens), mode:
            out = model(input_ids=ids, positions=pos, intermediate_tensors=it)
            if rank < pp - 1:
                return out, None
            hidden = out[0] if isinstance(out, tuple) else out
            rows = min(cfg.scheduler_config.max_num_seqs, tokens)
            last = hidden[torch.empty(rows, dtype=torch.long, device="meta")]
        return hidden, last

    probe.run_forward = run_forward
    extra = ["--engine-arg", f"pipeline_parallel_size={pp}"]
    if rank < pp - 1:
        extra.append("--no-sampler")
    if rank > 0:
        extra.append("--no-encoder")
    return extra


def _install_v2_sampler(probe) -> None:  # type: ignore[no-untyped-def]
    """Model Runner V2's sampler in place of the probe's V1 one (the probe is not changed): the runner's request
    state, input buffers and Sampler are built outside the counter, as GPUModelRunner.__init__ /
    load_model build them before the profile (v1/worker/gpu/model_runner.py, vLLM 0.33), then
    GPUModelRunner._dummy_sampler_run runs itself under it: the default pass, then the
    SamplingParams.for_sampler_warmup pass (penalties, logit bias, bad words, top-k/top-p, min-p, logprobs).
    UVA buffers (pinned host memory mapped to the device) become a host array plus a meta tensor; pinned
    staging copies are plain host copies."""
    import torch  # noqa: PLC0415

    meta = torch.device("meta")

    def run_sampler_v2(cfg, model, mode, last):  # type: ignore[no-untyped-def]
        import vllm.utils.torch_utils as tu  # noqa: PLC0415
        from vllm.v1.worker.gpu import buffer_utils as bu  # noqa: PLC0415
        from vllm.v1.worker.gpu.input_batch import InputBuffers  # noqa: PLC0415
        from vllm.v1.worker.gpu.model_runner import GPUModelRunner as Runner  # noqa: PLC0415
        from vllm.v1.worker.gpu.sample.sampler import Sampler  # noqa: PLC0415
        from vllm.v1.worker.gpu.states import RequestState  # noqa: PLC0415

        class MetaBuffer(bu.NonUvaBuffer):  # type: ignore[misc]
            def __init__(self, size, dtype):  # type: ignore[no-untyped-def]
                self.cpu = torch.zeros(size, dtype=dtype, device="cpu")
                self.np = self.cpu.numpy()
                self._uva = torch.zeros(size, dtype=dtype, device=meta)

        bu.NonUvaBuffer = bu.UvaBuffer = MetaBuffer
        bu.is_uva_available = lambda: False
        tu.PIN_MEMORY = False
        sc, mc = cfg.scheduler_config, cfg.model_config
        n, vocab = sc.max_num_seqs, mc.get_vocab_size()
        states = RequestState(max_num_reqs=n, max_model_len=mc.max_model_len,
                              max_num_batched_tokens=sc.max_num_batched_tokens, num_speculative_steps=0,
                              vocab_size=vocab, device=meta,
                              num_prefill_lookahead=max(1, cfg.num_prefill_lookahead_tokens),
                              use_dense_all_token_ids=False)
        runner = type("Runner", (), {})()
        runner.model = model
        runner.device = meta
        runner.input_buffers = InputBuffers(max_num_reqs=n, max_num_tokens=sc.max_num_batched_tokens, device=meta)
        runner.sampler = Sampler(vllm_config=cfg, max_num_reqs=n, vocab_size=vocab, device=meta, req_states=states,
                                 logprobs_mode=mc.logprobs_mode)
        with mode:
            Runner._dummy_sampler_run(runner, last)

    probe.run_sampler = run_sampler_v2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle-dir", default=os.environ.get("VLLM_CUDA_ORACLE_DIR",
                                                           "/work/shared/tools/vllm-cuda-oracle"))
    ap.add_argument("--raw-dir", default="/tmp/profile_goldens_raw")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--force", action="store_true", help="rerun cases whose raw output exists")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve, [json.loads(x) for x in open(a.jobs) if x.strip()], a.oracle_dir, a.timeout)
        return 0
    cases = [c for c in CASES if not a.only or any(s in c.id for s in a.only)]
    if a.list:
        for c in cases:
            print(c.id)
        return 0
    raw = Path(a.raw_dir)
    raw.mkdir(parents=True, exist_ok=True)
    by_gpu: dict[str, list[dict]] = {}
    for c in cases:
        out = raw / f"{c.id}.json"
        if out.exists() and out.stat().st_size and not a.force:
            continue
        by_gpu.setdefault(c.gpu, []).append({"id": c.id, "out": str(out), "log": str(raw / f"{c.id}.log"),
                                             "argv": [str(_probe_dir(c, raw)), "--tp", str(c.tp), *c.args],
                                             "pp": c.pp, "pp_rank": c.pp_rank, "runner": c.runner})
    import subprocess  # noqa: PLC0415
    for gpu, jobs in by_gpu.items():  # one oracle process at a time
        jf = raw / f"jobs-{gpu}.jsonl"
        jf.write_text("".join(json.dumps(j) + "\n" for j in jobs))
        subprocess.run([sys.executable, __file__, "--serve", gpu, "--jobs", str(jf), "--oracle-dir", a.oracle_dir,
                        "--timeout", str(a.timeout)], check=False)
    write_goldens(CASES, raw, a.oracle_dir)
    return 0


def write_goldens(cases: list[Case], raw: Path, oracle_dir: str) -> None:
    """cases/<id>.json (trimmed) for every case with raw output, and index.json over every case with a golden (one
    from an earlier run is kept when its raw output is not in `raw`)."""
    (OUT / "cases").mkdir(parents=True, exist_ok=True)
    probe = Path(oracle_dir) / "profile_probe.py"
    index = []
    for c in cases:
        f = raw / f"{c.id}.json"
        kept = OUT / "cases" / f"{c.id}.json"
        if (not f.exists() or not f.stat().st_size) and kept.exists():
            rec = json.loads(kept.read_text())
            index.append({"id": c.id, "family": c.family, "error": rec.get("error"),
                          "peaks": {k: v.get("peak_bytes") for k, v in (rec.get("phases") or {}).items()}})
            continue
        if not f.exists() or not f.stat().st_size:
            continue
        try:
            rec = _trim(json.loads(f.read_text()), c)
        except json.JSONDecodeError:
            log = (raw / f"{c.id}.log").read_text(errors="replace")[-1500:] if (raw / f"{c.id}.log").exists() else ""
            rec = {"format": FORMAT, "id": c.id, "config": c.config, "family": c.family, "gpu": c.gpu, "tp": c.tp,
                   "args": list(c.args), "why": c.why, "error": "probe crashed", "log_tail": log}
        (OUT / "cases" / f"{c.id}.json").write_text(json.dumps(rec, indent=1) + "\n")
        index.append({"id": c.id, "family": c.family, "error": rec.get("error"),
                      "peaks": {k: v.get("peak_bytes") for k, v in (rec.get("phases") or {}).items()}})
    from importlib.metadata import version  # noqa: PLC0415
    header = {"format": FORMAT, "vllm": version("vllm"),
              "probe": {"path": "vllm-cuda-oracle/profile_probe.py",
                        "sha256": hashlib.sha256(probe.read_bytes()).hexdigest()},
              "command": "python tools/cuda_oracle/profile_goldens.py --oracle-dir /work/shared/tools/vllm-cuda-oracle",
              "cases": index}
    (OUT / "index.json").write_text(json.dumps(header, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
