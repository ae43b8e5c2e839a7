"""The authors' own implementations that vLLM-Omni's models port, and how to run them next to a release.

Per reference: the PyPI packages its environment needs (``omnitts-capture`` builds that environment, cached,
separately from the engine's, because the pins conflict: ``qwen-tts`` 0.1.1 pins transformers 4.57.3, vLLM-Omni
0.30.0 needs transformers >= 5.13, < 5.15), the CUDA-only builds to neutralise, and omnitts's adapter for it.
Per release and model: the differences between the release and the reference that are there by design, which a
parity check names instead of failing on blindly. Measured facts: ../shared/research/reference_parity_facts.md,
docs/parity.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReferenceRecipe:
    """How to build the environment a reference runs in, and what runs there."""

    name: str  # the key omnitts-capture takes (--reference-env NAME)
    model: str  # the vLLM-Omni model (folder under model_executor/models/) it is the reference of
    adapter: str  # module:Class of omnitts's adapter for it
    torch: str  # installed first, from the same source as the engine's (the CPU build), then held by a constraint
    package: str  # the reference's own distribution, installed without its dependency list (see `omitted`)
    # what the reference imports, as its METADATA declares it (pinned where it pins), installed with dependencies
    # while torch stays the CPU build above
    requirements: tuple[str, ...]
    omitted: dict[str, str] = field(default_factory=dict)  # declared dependency -> why it is not installed
    hide_c_extensions: tuple[str, ...] = ()  # CUDA-only wheels whose .so files break a CPU torch
    smoke: str = ""  # what must import in a ready environment
    disk_gib: float = 2.5

    @property
    def fingerprint(self) -> str:
        return repr((self.name, self.torch, self.package, self.requirements, self.hide_c_extensions, _BUILDER_VERSION))


_BUILDER_VERSION = 1

_QWEN_TTS = ReferenceRecipe(
    name="qwen-tts",
    model="qwen3_tts",
    adapter="omnitts.reference_models.adapters.qwen3_tts:Qwen3TTSReference",
    torch="torch==2.13.0",
    package="qwen-tts==0.1.1",
    # qwen-tts 0.1.1's METADATA: transformers==4.57.3, accelerate==1.12.0, gradio, librosa, torchaudio, soundfile,
    # sox, onnxruntime, einops; the unpinned ones at the versions pip resolved for them next to torch 2.13.0 on
    # 2026-12-04
    requirements=(
        "transformers==4.57.3",
        "accelerate==1.12.0",
        "librosa==0.11.0",
        "torchaudio==2.11.1",
        "soundfile==0.14.0",
        "sox==1.5.0",
        "onnxruntime==1.32.0",
        "einops==0.8.2",
    ),
    omitted={"gradio": "imported only by qwen_tts.cli.demo (the web demo), never by the model or inference code"},
    hide_c_extensions=("torchaudio",),
    smoke="import qwen_tts, torch, transformers; assert transformers.__version__ == '4.57.3'",
)

_RECIPES: dict[str, ReferenceRecipe] = {r.name: r for r in (_QWEN_TTS,)}


class UnknownReference(LookupError):
    """No recipe under that name."""


def reference(name: str) -> ReferenceRecipe:
    try:
        return _RECIPES[name]
    except KeyError:
        raise UnknownReference(f"no reference environment {name!r} (known: {', '.join(sorted(_RECIPES))})") from None


def references() -> tuple[str, ...]:
    return tuple(sorted(_RECIPES))


def reference_for_model(model: str) -> ReferenceRecipe | None:
    """The recipe of the reference ``model`` (a vLLM-Omni model folder name) ports, if omnitts has one."""
    return next((r for r in _RECIPES.values() if r.model == model), None)


@dataclass(frozen=True)
class KnownDifference:
    """A difference between a release's model and its reference that is there by design, named so a parity check
    reports it instead of failing blindly or tolerating it silently. ``codebook``/``codes``: the release never emits
    these codes in that codebook, so a frame where the reference does is explained by this difference."""

    id: str
    description: str
    codebook: int | None = None
    codes: tuple[int, ...] = ()

    def explains(self, ref_codes, frame: int) -> bool:
        """Whether the reference's frame ``frame`` (of ``[frames, codebooks]`` codes) holds such a code."""
        if self.codebook is None or frame >= len(ref_codes):
            return False
        return int(ref_codes[frame][self.codebook]) in self.codes


# Read from vLLM-Omni 0.30.0's qwen3_tts (talker code-predictor path and the speech-tokenizer encoder).
_QWEN3_TTS_0_30_0 = (
    KnownDifference(
        "qwen3_tts.codebook0_code0",
        "vLLM-Omni's talker treats first-codebook code 0 as invalid (qwen3_tts_talker.py zeroes such frames, the "
        "code2wav hand-over drops all-zero rows); the reference may emit it",
        codebook=0,
        codes=(0,),
    ),
    KnownDifference(
        "qwen3_tts.encoder_bf16",
        "vLLM-Omni casts the speech-tokenizer encoder to bfloat16 (voice-clone reference codes may differ from an "
        "fp32 reference); does not touch CustomVoice requests",
    ),
)

KNOWN_DIFFERENCES: dict[str, dict[str, tuple[KnownDifference, ...]]] = {"0.30.0": {"qwen3_tts": _QWEN3_TTS_0_30_0}}


def known_differences(release: str | None, model: str) -> tuple[KnownDifference, ...]:
    return KNOWN_DIFFERENCES.get(release or "", {}).get(model, ())


@dataclass(frozen=True)
class EngineObservation:
    """Where a release's model shows, inside the engine's worker, what a parity check compares: the decoder method it
    calls on the codes it decodes (``model_class``'s attribute ``decoder``, method ``method``, called as
    ``method(codes [batch, codebooks, frames], lengths, **kwargs)``), and the attributes it hard-codes to a dtype that
    a float32 run must set to the model's own (an in-memory patch the run reports, never an edit of the release)."""

    model_class: str
    decoder: str
    method: str
    dtype_attributes: tuple[str, ...] = ()


# vLLM-Omni 0.30.0's qwen3_tts: Qwen3TTSCode2Wav.forward decodes every request's [Q, F] codes with
# decoder.batched_chunked_decode; the talker and its prompt-embeds builder set `_embedding_dtype = torch.bfloat16`
# (qwen3_tts_talker.py line 540, prompt_embeds_builder.py line 362), so a float32 run dies in index_copy_.
ENGINE_OBSERVATION: dict[str, dict[str, EngineObservation]] = {
    "0.30.0": {
        "qwen3_tts": EngineObservation(
            "Qwen3TTSCode2Wav", "decoder", "batched_chunked_decode", dtype_attributes=("_embedding_dtype",)
        )
    }
}


def engine_observation(release: str | None, model: str) -> EngineObservation | None:
    return ENGINE_OBSERVATION.get(release or "", {}).get(model)
