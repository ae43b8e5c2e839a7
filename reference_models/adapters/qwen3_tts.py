"""Reference adapter of Qwen3-TTS (CustomVoice): the authors' ``qwen-tts`` package, the reference of vLLM-Omni's
``qwen3_tts``. Runs in the ``qwen-tts`` reference environment (``omnitts-capture --reference qwen-tts``), never in
the tree's: qwen-tts 0.1.1 pins transformers 4.57.3.

* ``from_checkpoint``: ``qwen_tts.Qwen3TTSModel.from_pretrained`` (the package's own loader: model, speech tokenizer
  from ``speech_tokenizer/``, processor, ``generation_config.json``);
* ``generate``: what ``Qwen3TTSModel.generate_custom_voice`` does, keeping the codes it decodes: the assistant
  prompt through the processor, ``Qwen3TTSForConditionalGeneration.generate`` (greedy: ``do_sample`` and
  ``subtalker_dosample`` off, repetition penalty 1), then ``speech_tokenizer.decode``;
* ``decode``: ``speech_tokenizer.decode`` of given codes;
* ``write_random_checkpoint``: a tiny CustomVoice model built from qwen-tts's own classes with seeded random weights,
  saved in the real checkpoint's layout (``config.json``, ``model.safetensors``, ``generation_config.json``, Qwen2
  tokenizer files, ``speech_tokenizer/{config.json, model.safetensors, preprocessor_config.json}``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnitts.knowledge import upstream
from omnitts.validators.parity.adapter import Generation, ReferenceAdapter, Request

GROUPS = 4  # codebooks: the talker's code groups == the codec decoder's quantizers
SPEAKER, LANGUAGE = "tiny", "english"
# Text tokenizer: 256 byte-level tokens, the merges that make "assistant" one token (both the reference and vLLM-Omni
# slice the prompt as input_ids[:, :3] = "<|im_start|>", "assistant", "\n"), then the special tokens at these ids.
_SPECIALS = {
    "<|endoftext|>": 300,
    "<|im_start|>": 301,
    "<|im_end|>": 302,
    "<|tts_pad|>": 303,
    "<|tts_bos|>": 304,
    "<|tts_eos|>": 305,
}
_MERGED = "assistant"
MAX_NEW_TOKENS = 24


def _dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


class Qwen3TTSReference(ReferenceAdapter):
    package = "qwen-tts"
    output = "codes"

    def __init__(self, tts, dtype: str, device: str) -> None:
        self.tts = tts  # qwen_tts.Qwen3TTSModel
        self.dtype, self.device = dtype, device

    @classmethod
    def from_checkpoint(cls, path: Path, *, dtype: str = "float32", device: str = "cpu") -> Qwen3TTSReference:
        from qwen_tts import Qwen3TTSModel

        tts = Qwen3TTSModel.from_pretrained(str(path), dtype=_dtype(dtype), device_map=device)
        tts.model.eval()
        return cls(tts, dtype, device)

    def generate(self, request: Request, *, seed: int | None = None) -> Generation:
        import numpy as np
        import torch

        params = request.params
        tts = self.tts
        max_new = int(params.get("max_new_tokens", MAX_NEW_TOKENS))
        if seed is None:
            sampling: dict[str, Any] = dict(do_sample=False, subtalker_dosample=False, repetition_penalty=1.0)
        else:
            torch.manual_seed(seed)
            sampling = {}  # the checkpoint's generation_config.json, as generate_custom_voice would use it
        input_ids = tts._tokenize_texts([tts._build_assistant_text(request.text)])
        kwargs = tts._merge_generate_kwargs(max_new_tokens=max_new, **sampling)
        codes_list, _ = tts.model.generate(
            input_ids=input_ids,
            instruct_ids=[None],
            languages=[params.get("language", "Auto")],
            speakers=[params.get("speaker")],
            non_streaming_mode=bool(params.get("non_streaming_mode", True)),
            **kwargs,
        )
        codes = codes_list[0]
        wave = self.decode(codes)
        return Generation(
            waveform=wave,
            sample_rate=int(tts.model.speech_tokenizer.get_output_sample_rate()),
            codes=codes.detach().cpu().numpy().astype(np.int64),
            tensors={"prompt_ids": input_ids[0].detach().cpu().numpy().reshape(-1).astype(np.int64)},
        )

    def decode(self, codes: Any):
        import numpy as np
        import torch

        codes = torch.as_tensor(np.asarray(codes), dtype=torch.long, device=self.tts.device)
        wavs, _ = self.tts.model.speech_tokenizer.decode([{"audio_codes": codes}])
        return np.asarray(wavs[0], dtype=np.float32).reshape(-1)

    @classmethod
    def write_random_checkpoint(cls, out: Path, *, seed: int = 0) -> dict[str, Any]:
        import torch

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(seed)
        _write_talker(out)
        _write_speech_tokenizer(out / "speech_tokenizer")
        _write_text_tokenizer(out)
        # The reference opens generation_config.json unconditionally; greedy defaults, so that an engine which reads
        # it too samples the same way.
        generation = {
            "do_sample": False,
            "top_k": 50,
            "top_p": 1.0,
            "temperature": 1.0,
            "repetition_penalty": 1.0,
            "subtalker_dosample": False,
            "subtalker_top_k": 50,
            "subtalker_top_p": 1.0,
            "subtalker_temperature": 1.0,
            "max_new_tokens": MAX_NEW_TOKENS,
        }
        (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
        return {
            "params": {
                "task_type": "CustomVoice",
                "speaker": SPEAKER,
                "language": LANGUAGE,
                "max_new_tokens": MAX_NEW_TOKENS,
            },
            "codebooks": GROUPS,
        }


def _write_talker(out: Path) -> None:
    import torch
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration

    config = Qwen3TTSConfig(
        **upstream.qwen3_tts_tiny(
            talker_vocab=3072,  # codes 0..2047 and the control ids: the reference suppresses the top 1024 but EOS
            talker_layers=2,
            speakers={SPEAKER: 2160},
            languages={LANGUAGE: 2161},
            specials=_SPECIALS,
            groups=GROUPS,
        )
    )
    model = Qwen3TTSForConditionalGeneration(config).eval()
    with torch.no_grad():
        # HF's init (std 0.02 everywhere) makes the text's path (embedding -> two projections) ~40x weaker than the
        # codec embeddings, so the greedy codes do not depend on the text at all (measured: 5 texts, one sequence).
        # Draw at the scale a trained model keeps its activations: embeddings N(0, 1), linear layers N(0, 1/fan_in).
        for module in model.talker.modules():
            if isinstance(module, torch.nn.Embedding):
                module.weight.normal_(0.0, 1.0)
            elif isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, module.in_features**-0.5)
    model.save_pretrained(out, safe_serialization=True)
    # Qwen3TTSSpeakerEncoderConfig takes no **kwargs, yet save_pretrained writes PretrainedConfig's common keys into
    # it, so the saved config does not load back: keep the encoder's own arguments only, as real checkpoints do.
    import inspect

    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig

    accepted = set(inspect.signature(Qwen3TTSSpeakerEncoderConfig.__init__).parameters) - {"self"}
    data = json.loads((out / "config.json").read_text())
    data["speaker_encoder_config"] = {k: v for k, v in data["speaker_encoder_config"].items() if k in accepted}
    (out / "config.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _write_speech_tokenizer(out: Path) -> None:
    import torch
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Model
    from transformers import EncodecFeatureExtractor

    codec = Qwen3TTSTokenizerV2Config(**upstream.qwen3_tts_tiny_codec(GROUPS))
    model = Qwen3TTSTokenizerV2Model(codec).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            # The HF init leaves the codebooks at zero, so the audio would not depend on the codes: draw them.
            if name.endswith("embedding_sum"):
                param.normal_(0.0, 1.0)
        for module in model.decoder.modules():
            # and re-draw the decoder's convolutions at PyTorch's default scale
            if isinstance(module, torch.nn.Conv1d | torch.nn.ConvTranspose1d):
                module.reset_parameters()
    model.save_pretrained(out, safe_serialization=True)
    EncodecFeatureExtractor(sampling_rate=24000).save_pretrained(out)


def _write_text_tokenizer(out: Path) -> None:
    """A real Qwen2 byte-level BPE tokenizer (vocab.json + merges.txt), written by code: one token per byte plus the
    merges that make "assistant" one token; the special tokens at the config's ids."""
    import tempfile

    from transformers import AddedToken, Qwen2TokenizerFast

    chars = upstream.byte_level_alphabet()
    vocab = {chars[b]: b for b in range(256)}
    merges, word = [], _MERGED[0]
    for ch in _MERGED[1:]:
        merges.append(f"{word} {ch}")
        word += ch
        vocab[word] = 256 + len(merges) - 1
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab))
        (Path(tmp) / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
        tok = Qwen2TokenizerFast(
            vocab_file=str(Path(tmp) / "vocab.json"),
            merges_file=str(Path(tmp) / "merges.txt"),
            unk_token=None,
            bos_token=None,
            eos_token=None,
            pad_token=None,
        )
        # fill the ids between the merges and the specials, so every special lands on its id
        filler = [f"<|unused{i}|>" for i in range(len(tok), min(_SPECIALS.values()))]
        tok.add_tokens(filler)
        for name, token_id in sorted(_SPECIALS.items(), key=lambda kv: kv[1]):
            tok.add_special_tokens({"additional_special_tokens": [AddedToken(name, special=True)]}, False)
            got = tok.convert_tokens_to_ids(name)
            if got != token_id:
                raise RuntimeError(f"tokenizer: {name} at id {got}, the config names {token_id}")
        tok.eos_token, tok.pad_token = "<|im_end|>", "<|endoftext|>"
        tok.save_pretrained(out)
