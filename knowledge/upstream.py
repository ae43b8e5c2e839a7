"""What vLLM-Omni's own TTS models need to run through the engine tier without a download, per release.

Read from each release's code (``vllm_omni/model_executor/models/<model>/``; docs/upstream_models.md): for every
single- and two-stage TTS model looked at, whether a tiny model directory can be written by code (config classes
in the tree, no hub files at construction) and, if not, why; and the packages a buildable model imports that the
engine environment (built from vLLM-Omni's offline and serving imports) lacks.
"""

from __future__ import annotations

# vLLM-Omni 0.30.0, surveyed from its tree.
_SURVEY_0_30_0: dict[str, str] = {
    "qwen3_tts": "buildable: config classes in the tree (Qwen3TTSConfig, Qwen3TTSTokenizerV2Config/MimiConfig); "
    "speech_tokenizer/ config + Encodec feature extractor written by code; two stages (talker + code2wav)",
    "moss_tts_nano": "needs a download: __init__ calls AutoModelForCausalLM.from_pretrained(trust_remote_code=True) "
    "and AutoModel.from_pretrained for the MOSS audio tokenizer, i.e. the hub repo's own modeling code",
    "voxcpm2": "needs a download: __init__ calls VoxCPM.from_pretrained from the `voxcpm` PyPI package "
    "unconditionally (its comment: load_format=dummy still pays for it)",
    "gepard": "needs a download at the first decode: NeMo (`nemo_toolkit`) and its NanoCodec checkpoint "
    "(NanoCodec.load -> from_pretrained(codec_id))",
    "fish_speech": "needs the hub tokenizer: AutoTokenizer.from_pretrained(trust_remote_code=True) with the "
    "model's semantic-token vocabulary; two stages",
    "omnivoice": "diffusion stage; loads the Higgs audio tokenizer with from_pretrained",
    "glm_tts": "needs a Whisper speech-tokenizer checkpoint (voice_clone.py: WhisperConfig.from_pretrained)",
    "breeze_tts_2": "not on this CPU engine: __init__ raises unless async_chunk=True (the hand-over that stalls on "
    "CPU) and the text encoder captures a torch.cuda.CUDAGraph with no eager fallback",
    "audio8_tts": "async-chunk hand-over only (no sync_process_input_func: the CPU stall) and the codec decoder "
    "torch.loads a codec checkpoint from the model directory (hub download when absent)",
    "ming_tts": "buildable: MingDenseConfig in the tree (dense Qwen2 llm_config, DiT/aggregator, nested "
    "AudioVAEConfig); widths pinned by validate_ming_tts_config (hidden 896, vocab 151936, DiT 1024) so only depths "
    "shrink; tokenizer with constants.py's Qwen2 ids; x-transformers (a declared dependency the engine venv lacks) "
    "from EXTRA_DEPS; two stages (LLM+flow, audio VAE) with the sync hand-over llm2audio_vae",
    "higgs_audio_v3": "next most feasible, not attempted: the code2wav stage is written for load_format=dummy "
    "(_ensure_codec_loaded reads tied.embedding.modality_embeddings.0.model.* tensors from the model dir's "
    "*.safetensors), so a codec safetensors (RVQ 1024x64 codebooks, fc2, a DAC decoder with hard-coded 1024 hidden) "
    "would have to be written by code; HiggsAudioV3Config is in the tree; the MLP CUDA graph is gated on is_cuda",
    "cosyvoice3": "not on this engine env: cosyvoice3.py imports onnxruntime (absent from the engine venv) and its "
    "construction opens a campplus.onnx speaker model from the model dir (an ONNX file, unconditionally without "
    "TensorRT); its llm.pt/flow.pt/hift.pt torch.loads sit in load_weights, which load_format=dummy skips",
    "indextts2": "needs a download: the s2mel decoder calls BigVGAN.from_pretrained(vocoder_name) (a hub id) and "
    "torch.loads s2mel/stat checkpoints; BigVGAN and DiT CUDA-graph wrappers",
    "moss_tts": "needs a download: the codec stage builds MOSS-Audio-Tokenizer from codec_model_name_or_path "
    "(default the hub id OpenMOSS-Team/MOSS-Audio-Tokenizer) and loads its weights with a second DefaultModelLoader "
    "(no dummy path); streaming CUDA-graph decoder only with async_chunk",
    "step_audio2": "needs files a download brings: token2wav's first use (_ensure_models_loaded) loads the "
    "speech_tokenizer_v2_25hz.onnx (s3tokenizer), campplus.onnx (onnxruntime), flow.yaml (hyperpyyaml) and "
    "torch.loads flow.pt/hift.pt from <model>/token2wav (snapshot_download when not local)",
    "auk": "needs checkpoint files at construction: the encoder stage reads auk.safetensors (layer-fusion tensors) "
    "with safe_open, is a Qwen2.5-Omni thinker with its multimodal processor, and stage 1 is an inline diffusion "
    "pipeline (AuKPipeline) with its own weights",
    "audex": "needs a download: checkpoint.py resolves with hf_hub_download/snapshot_download, the X-codec with "
    "AutoConfig(trust_remote_code=True)",
    "higgs_audio_v2": "needs a download: code2wav resolves the audio tokenizer with snapshot_download/from_pretrained",
    "covo_audio": "needs a download: code2wav resolves its audio tokenizer with snapshot_download/from_pretrained",
    "mimo_audio": "needs a download: code2wav resolves its audio tokenizer with snapshot_download/from_pretrained",
    "voxtral_tts": "needs a download: voice embeddings fetched with hf_hub_download",
}

#: release -> model -> why it can (or cannot) be built here without a download.
FEASIBILITY: dict[str, dict[str, str]] = {"0.30.0": _SURVEY_0_30_0}

#: release -> model -> pinned packages, installed without their dependencies next to the engine environment.
#: Ming-TTS: vllm_omni-0.30.0's METADATA requires x-transformers>=2.12.2 (common/ming/{aggregator,cfm_dit,
#: dit_blocks}.py import it); the other three are what pip resolves for it next to the engine venv.
EXTRA_DEPS: dict[str, dict[str, tuple[str, ...]]] = {
    "0.30.0": {
        "ming_tts": ("x-transformers==2.31.10", "einx==0.4.3", "torch-einops-utils==0.2.0", "frozendict==2.5.1"),
    },
}


def feasibility(release: str | None, model: str) -> str:
    """Why ``model`` of ``release`` can or cannot be built without a download ("not surveyed" when unknown)."""
    return FEASIBILITY.get(release or "", {}).get(model, f"not surveyed for vLLM-Omni {release}")


def extra_deps(release: str | None, model: str) -> tuple[str, ...]:
    """The packages ``model`` of ``release`` imports that the engine environment lacks (none when unknown)."""
    return EXTRA_DEPS.get(release or "", {}).get(model, ())


#: release -> model -> the function its serving adapter sizes the stage-0 prompt placeholder with
#: (``prompt_token_ids = [1] * n``, the text itself in ``additional_information``), as ``module:Class.method``.
#: 0.30.0: ``entrypoints/openai/tts_adapters/qwen3_tts.py`` (``_estimate_prompt_len``, then ``build``).
PROMPT_LENGTH: dict[str, dict[str, str]] = {
    "0.30.0": {
        "qwen3_tts": "vllm_omni.model_executor.models.qwen3_tts.prompt_embeds_builder:"
        "Qwen3TTSPromptEmbedsBuilder.estimate_prompt_len_from_additional_information",
    },
}


def prompt_length(release: str | None, model: str) -> str | None:
    """Where the release's serving adapter computes ``model``'s prompt placeholder length (None: the model's prompt
    is its tokenized text, or not surveyed)."""
    return PROMPT_LENGTH.get(release or "", {}).get(model)
