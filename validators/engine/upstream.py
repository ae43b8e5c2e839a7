"""Tiny model directories for vLLM-Omni's OWN TTS models (issue 10 item 7: proof on code nobody here wrote).

Runs inside the engine environment (``python -m omnitts.validators.engine.upstream --tree T --model NAME --out
DIR``), with the tree first on ``sys.path``. For each supported upstream model it writes, by code and without any
download: ``config.json`` from the tree's own config class with tiny dimensions (``save_pretrained``), the
sub-folders the model reads at construction (e.g. Qwen3-TTS's ``speech_tokenizer/``), and a byte-level WordLevel
text tokenizer whose special tokens sit at the ids the tiny config names. No weights: the engine runs with vLLM's
``load_format="dummy"``.

Only the model's config classes are imported from the tree; nothing of vLLM-Omni is copied here.
``omnitts.knowledge.upstream`` records, per release, why each upstream TTS model can or cannot run without a
download, and what a buildable one imports beyond the engine environment (docs/upstream_models.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from omnitts.knowledge import upstream
from omnitts.knowledge.layout import tree_version
from omnitts.knowledge.releases import cache_lock, cache_root

# Text-side special tokens of the tiny Qwen3-TTS: ids right after the 256 byte tokens.
_QWEN3_SPECIALS = {
    "<|im_start|>": 256,
    "<|im_end|>": 257,
    "<|tts_pad|>": 258,
    "<|tts_bos|>": 259,
    "<|tts_eos|>": 260,
    "<|endoftext|>": 261,
}


def _byte_wordlevel(specials: dict[str, int], vocab_size: int = 0):
    """A tokenizer with one token per UTF-8 byte (id = byte) and the given special tokens, so any text encodes
    without an unknown token and distinct texts give distinct ids. ``vocab_size``: the ids between are filled with
    unused ``<|r{id}|>`` tokens (a WordLevel vocabulary with holes is saved with a "could be corrupted" warning
    listing every hole)."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    chars = upstream.byte_level_alphabet()
    vocab = {chars[b]: b for b in range(256)}
    vocab.update(specials)
    taken = set(vocab.values())
    vocab.update({f"<|r{i}|>": i for i in range(256, vocab_size) if i not in taken})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    tok.normalizer = normalizers.ByteLevel()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.add_special_tokens(list(specials))
    return tok


# Text-side special tokens of Qwen3-TTS at their real ids (the config classes' defaults: im_start 151644 ...,
# tts_pad/bos/eos 151671-151673; endoftext as in the Qwen tokenizer), for the real-size directory.
_QWEN3_REAL_SPECIALS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|tts_pad|>": 151671,
    "<|tts_bos|>": 151672,
    "<|tts_eos|>": 151673,
}
# Real-size greedy decode length (frames at 12.5 Hz: 6.4 s of audio at most); dummy weights rarely pick EOS.
_QWEN3_REAL_MAX_TOKENS = 80


def _qwen3_tts_real(out: Path) -> dict:
    """Qwen3-TTS at its real shapes: every width and depth the config classes' defaults (identical in qwen-tts,
    the authors' package, and in the release), except the talker's and code predictor's ``num_code_groups`` (32 by
    default), set to the 12 Hz codec's 16 quantizers (its default) so the two stages agree, the talker's
    ``head_dim`` (128, not hidden / heads) and the codec decoder's ``codebook_dim`` (no default); the real text
    vocabulary (151,936) and special-token ids; the release's own deploy config (bf16, CUDA graphs, async chunks)
    with greedy sampling only. For the GPU (benchmarks/results/gpu-real-size-0.30.0); no weights
    (``load_format=dummy``)."""
    from transformers import EncodecFeatureExtractor, PreTrainedTokenizerFast
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSConfig
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )

    # The decoder config class has no codebook_dim default, yet the decoder (release and qwen-tts alike) reads
    # config.codebook_dim: a codec config written from the defaults does not build; 512 is chosen here.
    codec = Qwen3TTSTokenizerV2Config(decoder_config={"codebook_dim": 512})
    groups = codec.decoder_config.num_quantizers
    talker = {
        "num_code_groups": groups,
        "text_vocab_size": 151936,
        # the codec ids of the tiny directory (the release's deploy config stops on 2150); the classes' defaults
        # (4196-4205) lie beyond the default codec vocabulary of 3072
        **upstream.QWEN3_TTS_CODEC_IDS,
        "spk_id": {"real": 2160},
        "spk_is_dialect": {"real": False},
        "codec_language_id": {"english": 2161, "auto": 2162},
        "position_id_per_seconds": 12.5,
        # head_dim 128 as in every Qwen3 (the class leaves it None: hidden / heads = 64); the three M-RoPE
        # sections sum to head_dim / 2
        "head_dim": 128,
        "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "interleaved": True},
        "code_predictor_config": {"num_code_groups": groups},
    }
    config = Qwen3TTSConfig(
        talker_config=talker,
        tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size="real",
        tts_model_type="custom_voice",
        architectures=["Qwen3TTSForConditionalGeneration"],
        torch_dtype="bfloat16",
    )
    config.save_pretrained(out)
    _drop_unaccepted_keys(out / "config.json", "speaker_encoder_config", config.speaker_encoder_config)
    codec.save_pretrained(out / "speech_tokenizer")
    EncodecFeatureExtractor(sampling_rate=24000).save_pretrained(out / "speech_tokenizer")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=_byte_wordlevel(_QWEN3_REAL_SPECIALS, 151936),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    fast.save_pretrained(out)
    _deploy_overlay(
        out,
        "qwen3_tts.yaml",
        {
            "stages": [
                {
                    "stage_id": 0,
                    "default_sampling_params": {
                        "temperature": 0.0,
                        "top_k": -1,
                        "top_p": 1.0,
                        "max_tokens": _QWEN3_REAL_MAX_TOKENS,
                        "min_tokens": 2,
                        "repetition_penalty": 1.0,
                    },
                    "subtalker_sampling_params": {"do_sample": False, "temperature": 1.0, "top_k": -1, "top_p": 1.0},
                },
            ],
        },
    )
    return {"speaker": "real", "language": "english", "groups": groups, "max_new_tokens": _QWEN3_REAL_MAX_TOKENS}


def _qwen3_tts(out: Path) -> dict:
    from transformers import EncodecFeatureExtractor, PreTrainedTokenizerFast
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSConfig
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )

    groups = 4
    # Codec ids as the release's deploy config expects them (stop_token_ids [2150]); codes 0..2047, control ids to 2175.
    config = Qwen3TTSConfig(
        **upstream.qwen3_tts_tiny(
            talker_vocab=2176,
            talker_layers=1,
            speakers={"tiny": 2160},
            languages={"english": 2161, "auto": 2162},
            specials=_QWEN3_SPECIALS,
            groups=groups,
        )
    )
    config.save_pretrained(out)
    _drop_unaccepted_keys(out / "config.json", "speaker_encoder_config", config.speaker_encoder_config)
    codec = Qwen3TTSTokenizerV2Config(**upstream.qwen3_tts_tiny_codec(groups))
    codec.save_pretrained(out / "speech_tokenizer")
    EncodecFeatureExtractor(sampling_rate=24000).save_pretrained(out / "speech_tokenizer")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=_byte_wordlevel(_QWEN3_SPECIALS), eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.save_pretrained(out)
    _deploy_overlay(
        out,
        "qwen3_tts.yaml",
        {
            # Whole-payload hand-over between the stages: with async chunks the code2wav stage waited forever
            # for its first chunk on CPU (docs/upstream_models.md).
            "async_chunk": False,
            "stages": [
                # Greedy and short: batch == solo needs deterministic sampling, and dummy weights rarely pick EOS.
                {
                    "stage_id": 0,
                    "default_sampling_params": {
                        "temperature": 0.0,
                        "top_k": -1,
                        "top_p": 1.0,
                        "max_tokens": 24,
                        "min_tokens": 2,
                        "repetition_penalty": 1.0,
                    },
                    "subtalker_sampling_params": {"do_sample": False, "temperature": 1.0, "top_k": -1, "top_p": 1.0},
                },
            ],
        },
    )
    return {"speaker": "tiny", "language": "english", "groups": groups}


# Text-side special tokens of the tiny Ming-TTS (dense): the ids are those of the real Qwen2 tokenizer, since
# validate_ming_tts_config pins the Ming ones (constants.py) and the vocabulary to 151,936.
_MING_SPECIALS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<text_eos>": 151669,
    "<end_of_audio>": 151704,
    "<audioPatch>": 151705,
    "<audio>": 151706,
    "</audio>": 151707,
}


# Latent patches per request (each 4 x 4 x 882 = 14,112 samples at 44,100 Hz): short runs on 2 CPU cores.
_MING_MAX_DECODE_STEPS = 6


def _ming_tts(out: Path) -> dict:
    from transformers import PreTrainedTokenizerFast
    from vllm_omni.model_executor.models.ming_tts.config_ming_tts import MingDenseConfig

    # The widths are pinned by validate_ming_tts_config (LLM hidden 896, vocab 151,936, aggregator/DiT 1024,
    # latent 64, patch 4, history 32, 44,100 Hz, hop 882); only depths (and the VAE backbones) can shrink.
    # head_dim 64: the CPU attention backend refuses 16 (real_engine_facts.md).
    llm = {
        "model_type": "qwen2",
        "vocab_size": 151936,
        "hidden_size": 896,
        "intermediate_size": 1024,
        "num_hidden_layers": 1,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,
    }
    dit = {"hidden_size": 1024, "depth": 1, "num_heads": 16, "mlp_ratio": 1.0}
    backbone = {
        "model_type": "qwen2",
        "vocab_size": 16,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "max_position_embeddings": 4096,
    }
    config = MingDenseConfig(
        llm_config=llm,
        ditar_config={**dit, "patch_size": 4, "history_patch_size": 32},
        aggregator_config=dict(dit),
        audio_tokenizer_config={
            "sample_rate": 44100,
            "patch_size": 4,
            # 4 encoder layers: AudioVAE's Encoder sets its aggregator's num_hidden_layers to 4 on a copy of this
            # config after transformers derived layer_types from it, so fewer layers -> IndexError in Qwen2Attention.
            "enc_kwargs": {
                "backbone": {**backbone, "num_hidden_layers": 4},
                "input_dim": 882,
                "hop_size": 882,
                "latent_dim": 64,
            },
            "dec_kwargs": {"backbone": backbone, "output_dim": 882, "latent_dim": 64},
        },
        architectures=["MingTTSForConditionalGeneration"],
    )
    config.save_pretrained(out)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=_byte_wordlevel(_MING_SPECIALS, 151936), eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.save_pretrained(out)
    _deploy_overlay(
        out,
        "ming_tts.yaml",
        {
            # Whole-payload hand-over (the release's sync llm2audio_vae): the async-chunk one stalls on CPU.
            "async_chunk": False,
            "dtype": "float32",
            # What the release's serving adapter (tts_adapters/ming_tts.apply_sampling_overrides) sets on stage 0:
            # stop on <text_eos>, which the model emits once the decode window ends; one token beyond the window.
            # Without it the first run decoded the deploy's 512 steps (7,225,344 samples, 164 s of audio).
            "stages": [
                {
                    "stage_id": 0,
                    "default_sampling_params": {
                        "temperature": 0.0,
                        "top_p": 1.0,
                        "top_k": -1,
                        "max_tokens": _MING_MAX_DECODE_STEPS + 1,
                        "stop_token_ids": [_MING_SPECIALS["<text_eos>"]],
                        "detokenize": True,
                    },
                }
            ],
        },
    )
    return {"min_decode_steps": 2, "max_decode_steps": _MING_MAX_DECODE_STEPS}


def _deploy_overlay(out: Path, release_yaml: str, overlay: dict) -> None:
    """``omnitts_deploy.yaml``: the release's own deploy config (``base_config``, read where it lies in the tree,
    not copied) with the overlay's stage fields on top."""
    import vllm_omni

    base = Path(vllm_omni.__file__).parent / "deploy" / release_yaml
    if not base.is_file():
        raise SystemExit(f"upstream: the tree has no deploy config {base}")
    (out / "omnitts_deploy.yaml").write_text(json.dumps({"base_config": str(base), **overlay}, indent=1) + "\n")


def _drop_unaccepted_keys(path: Path, key: str, sub_config) -> None:
    """Keep only the arguments ``type(sub_config).__init__`` accepts in ``config.json[key]``.

    Found here: 0.30.0's ``Qwen3TTSSpeakerEncoderConfig.__init__`` takes no ``**kwargs``, yet ``save_pretrained``
    writes PretrainedConfig's common keys (``model_type``, ...) into the sub-config, so the tree's own config does
    not round-trip: ``from_pretrained`` fails with "unexpected keyword argument 'model_type'". Real checkpoints
    carry only the encoder's own fields; so does the tiny one."""
    import inspect

    accepted = set(inspect.signature(type(sub_config).__init__).parameters) - {"self"}
    data = json.loads(path.read_text())
    data[key] = {k: v for k, v in data[key].items() if k in accepted}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


BUILDERS = {"qwen3_tts": _qwen3_tts, "ming_tts": _ming_tts}
# --size real: the model at its real shapes (GPU runs)
REAL_BUILDERS = {"qwen3_tts": _qwen3_tts_real}


def _extra_deps(release: str | None, model: str) -> dict:
    """Install (once, cached) what the model imports and the engine environment lacks; its folder goes first on
    the engine's path."""
    pins = upstream.extra_deps(release, model)
    if not pins:
        return {}
    import subprocess

    target = cache_root() / "upstream-deps" / f"{model}-{release}"
    with cache_lock(f"upstream-deps-{model}-{release}"):
        if not (target / ".complete").is_file():
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
            proc = subprocess.run([*pip, "--target", str(target), *pins], capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"upstream: installing {model}'s extra dependencies failed: {proc.stderr[-2000:]}")
            (target / ".complete").write_text("\n".join(pins) + "\n")
    return {"extra_path": str(target)}


def build(tree: Path, model: str, out: Path, size: str = "tiny") -> dict:
    release = tree_version(tree)
    builders = REAL_BUILDERS if size == "real" else BUILDERS
    if model not in builders:
        raise SystemExit(f"upstream: no {size} builder for {model!r} ({upstream.feasibility(release, model)})")
    sys.path.insert(0, str(tree))
    out.mkdir(parents=True, exist_ok=True)
    info = {"dir": str(out), "model": model, "tree": str(tree), "load_format": "dummy", **_extra_deps(release, model)}
    info.update(builders[model](out))
    (out / "omnitts_upstream.json").write_text(json.dumps(info, indent=1))
    return info


def _requests(info: dict):
    """The request builder for the model's offline ``Omni``: the text in ``additional_information`` the way the
    release's serving code sends it for this model (Qwen3-TTS: task type, speaker, language, and a prompt of
    placeholder ids as long as the release's own estimate of its prompt embeddings)."""

    def qwen3_tts(text: str) -> dict:
        # The release's serving adapter sizes the placeholder with its estimator (serving_requests.py); a fixed
        # [0] * 8 left the text out of the talker's prompt (every text gave the same codes).
        if "builder" not in info:
            from omnitts.knowledge.layout import tree_version
            from omnitts.validators.engine.serving_requests import builder

            info["builder"] = builder(tree_version(Path(info["tree"])), "qwen3_tts", Path(info["dir"]))
        params = {"task_type": "CustomVoice", "speaker": info["speaker"], "language": info["language"]}
        params["max_new_tokens"] = info.get("max_new_tokens", 24)
        return info["builder"](text, params)

    def ming_tts(text: str) -> dict:
        # The release's own request builder (prompt_assembly.build_ming_dense_prompt, what its serving adapter
        # calls): the prompt ids from the tokenizer, the decode-step window as runtime controls.
        from transformers import AutoTokenizer
        from vllm_omni.model_executor.models.ming_tts import prompt_assembly as ming

        if "tokenizer" not in info:
            info["tokenizer"] = AutoTokenizer.from_pretrained(info["dir"])
        controls = {
            "ming_min_decode_steps": info["min_decode_steps"],
            "ming_max_decode_steps": info["max_decode_steps"],
        }
        req = ming.build_ming_dense_prompt(
            info["tokenizer"], prompt=ming.DEFAULT_PROMPT, text=text, runtime_controls=controls
        )
        return {"prompt_token_ids": req["prompt_token_ids"], "additional_information": req["additional_information"]}

    return {"qwen3_tts": qwen3_tts, "ming_tts": ming_tts}[info["model"]]


def run_offline(model_dir: Path, plan: dict, out: Path):
    """The engine tier's offline driver (``offline.run``: solo then batched scenarios, audio to .npy) on an
    upstream model: ``Omni`` with ``load_format="dummy"`` and the model's own request shape."""
    import vllm_omni

    from omnitts.validators.engine import offline

    info = json.loads((model_dir / "omnitts_upstream.json").read_text())
    if info.get("extra_path"):
        import os

        # First on the path of this process and of the stage processes it spawns.
        sys.path.insert(0, info["extra_path"])
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [info["extra_path"], os.environ.get("PYTHONPATH")]))
    omni_cls = vllm_omni.Omni
    deploy = model_dir / "omnitts_deploy.yaml"
    extra = {"deploy_config": str(deploy)} if deploy.is_file() else {}
    vllm_omni.Omni = lambda *a, **k: omni_cls(*a, load_format="dummy", **extra, **k)
    offline._request = _requests(info)
    return offline.run(str(model_dir), plan, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-engine-upstream")
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("build", help="write the tiny model directory")
    make.add_argument("--tree", required=True, type=Path)
    make.add_argument("--model", required=True, choices=sorted(BUILDERS))
    make.add_argument("--out", required=True, type=Path)
    make.add_argument("--size", choices=("tiny", "real"), default="tiny", help="real: the model's real shapes (GPU)")
    drive = sub.add_parser("offline", help="run the offline Omni on the plan (dummy weights)")
    drive.add_argument("--model-dir", required=True, type=Path)
    drive.add_argument("--plan", required=True, type=Path)
    drive.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "build":
        print(json.dumps(build(args.tree.resolve(), args.model, args.out, args.size)))
        return 0
    import traceback

    from omnitts.validators.engine import offline
    from omnitts.validators.observations.engine import OfflineRun

    args.out.mkdir(parents=True, exist_ok=True)
    try:
        found = run_offline(args.model_dir, json.loads(args.plan.read_text()), args.out)
    except Exception as exc:  # recorded for the test, which fails with it
        found = OfflineRun(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    offline.write(found, args.out)
    return 0 if found.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
