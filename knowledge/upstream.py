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


#: Qwen3-TTS's codec ids (talker vocabulary: codes 0..2047, control ids above); EOS 2150 is what vLLM-Omni 0.30.0's
#: deploy config stops on (``stop_token_ids: [2150]``).
QWEN3_TTS_CODEC_IDS: dict[str, int] = {
    "codec_pad_id": 2148,
    "codec_bos_id": 2149,
    "codec_eos_token_id": 2150,
    "codec_think_id": 2154,
    "codec_nothink_id": 2155,
    "codec_think_bos_id": 2156,
    "codec_think_eos_id": 2157,
}


def qwen3_tts_tiny(
    *,
    talker_vocab: int,
    talker_layers: int,
    speakers: dict[str, int],
    languages: dict[str, int],
    specials: dict[str, int],
    groups: int = 4,
) -> dict:
    """Keyword arguments of a tiny CustomVoice ``Qwen3TTSConfig``, for the authors' class (``qwen_tts``) and for
    vLLM-Omni's own alike: one shape for the parity checkpoint and the engine test's model. ``groups`` codebooks
    (the talker's code groups == the codec decoder's quantizers); head_dim 64, because vLLM's CPU attention backend
    refuses smaller heads; ``specials`` names the text tokenizer's ids of the six prompt tokens."""
    attn = {"num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 64}
    talker = {
        **attn,
        **QWEN3_TTS_CODEC_IDS,
        "vocab_size": talker_vocab,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": talker_layers,
        "num_code_groups": groups,
        "text_vocab_size": 512,
        "text_hidden_size": 64,
        "spk_id": dict(speakers),
        "spk_is_dialect": {name: False for name in speakers},
        "codec_language_id": dict(languages),
        "position_id_per_seconds": 12.5,
        "rope_scaling": {"rope_type": "default", "mrope_section": [8, 12, 12], "interleaved": True},
        "code_predictor_config": {
            **attn,
            "vocab_size": 2048,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 1,
            "num_code_groups": groups,
        },
    }
    return {
        "talker_config": talker,
        "speaker_encoder_config": {
            "enc_dim": 128,
            "enc_channels": [32, 32, 32, 32, 96],
            "enc_attention_channels": 16,
            "enc_se_channels": 16,
        },
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": "tiny",
        "tts_model_type": "custom_voice",
        "im_start_token_id": specials["<|im_start|>"],
        "im_end_token_id": specials["<|im_end|>"],
        "tts_pad_token_id": specials["<|tts_pad|>"],
        "tts_bos_token_id": specials["<|tts_bos|>"],
        "tts_eos_token_id": specials["<|tts_eos|>"],
        "architectures": ["Qwen3TTSForConditionalGeneration"],
    }


def qwen3_tts_tiny_codec(groups: int = 4) -> dict:
    """Keyword arguments of the matching tiny ``Qwen3TTSTokenizerV2Config`` (the 12 Hz speech tokenizer)."""
    return {
        "encoder_config": {
            "hidden_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 1,
            "head_dim": 64,
            "num_key_value_heads": 1,
            "intermediate_size": 128,
            "codebook_size": 2048,
            "num_quantizers": groups,
            "num_semantic_quantizers": 1,
            "codebook_dim": 32,
            "upsample_groups": 64,  # must divide hidden_size (MimiConfig)
            "num_filters": 8,
            "vector_quantization_hidden_dimension": 32,
        },
        "decoder_config": {
            "codebook_size": 2048,
            "hidden_size": 64,
            "latent_dim": 64,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
            "head_dim": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_quantizers": groups,
            "decoder_dim": 64,
            "codebook_dim": 64,  # no default in the decoder config; vLLM-Omni's decoder reads it
        },
        "encoder_valid_num_quantizers": groups,
    }


def byte_level_alphabet() -> dict[int, str]:
    """GPT-2's printable byte table: the alphabet of Qwen's byte-level BPE tokenizers (and of the ``tokenizers``
    ByteLevel normalizer), byte -> character, for tokenizers written by code."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table
