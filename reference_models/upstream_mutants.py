"""Seeded port bugs in vLLM-Omni's OWN Qwen3-TTS (code nobody here wrote), for proving the parity checks.

Each bug is a text patch applied to a COPY of the release's tree at test time (:func:`apply`; the cached release
is never touched and nothing of it is committed here beyond the few lines each patch must find). Every patch must
match exactly once after its anchor, so a release that moved the code fails loudly instead of testing nothing.
``expect`` is where the parity comparison must place the divergence (``validators/parity/compare.locate``).
Results: docs/parity.md (``python benchmarks/parity_seeded_bugs.py``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

QWEN3 = "vllm_omni/model_executor/models/qwen3_tts"
PREDICTOR = "vllm_omni/model_executor/models/common/qwen3_code_predictor.py"


@dataclass(frozen=True)
class UpstreamBug:
    name: str
    what: str  # the port bug, as a reviewer would describe it
    file: str  # relative to the tree root
    anchor: str  # the patch applies to the first `old` after this text
    old: str
    new: str
    expect: str  # generator | decoder | hand-over


BUGS: tuple[UpstreamBug, ...] = (
    UpstreamBug(
        "dropped-pad-embedding",
        "the CustomVoice prompt no longer adds the codec pad embedding to the text embeddings",
        f"{QWEN3}/prompt_embeds_builder.py",
        'elif task_type == "CustomVoice":',
        "text_all + codec_embed(pad_ids),",
        "text_all,",
        "generator",
    ),
    UpstreamBug(
        "rope-theta",
        "the code predictor's RoPE uses a hard-coded theta 1e6 (Qwen2's) instead of the checkpoint's",
        PREDICTOR,
        "",
        "inv_freq = 1.0 / (rope_theta **",
        "inv_freq = 1.0 / (1000000.0 **",
        "generator",
    ),
    UpstreamBug(
        "rmsnorm-eps",
        "the code predictor's layer norms use eps 1e-5 (a common default) instead of the checkpoint's 1e-6",
        PREDICTOR,
        "",
        "self.input_layernorm = _RMSNorm(config.hidden_size, eps=config.rms_norm_eps)",
        "self.input_layernorm = _RMSNorm(config.hidden_size, eps=1e-5)",
        "generator",
    ),
    UpstreamBug(
        "qkv-order",
        "the code predictor packs q_proj and k_proj into qkv_proj in the wrong order (k, q, v)",
        PREDICTOR,
        "",
        '("q_proj", "qkv_proj", 0),\n        ("k_proj", "qkv_proj", 1),',
        '("q_proj", "qkv_proj", 1),\n        ("k_proj", "qkv_proj", 0),',
        "generator",
    ),
    UpstreamBug(
        "codebooks-swapped",
        "the talker-to-code2wav hand-over flattens codebooks 1 and 2 in swapped order",
        "vllm_omni/model_executor/stage_input_processors/qwen3_tts.py",
        "def talker2code2wav_full_payload(",
        "codec_codes = audio.transpose(0, 1)",
        "codec_codes = audio[:, [0, 2, 1, *range(3, audio.shape[1])]].transpose(0, 1)",
        "generator",
    ),
    UpstreamBug(
        "decoder-bf16",
        "the code2wav stage casts its codec decoder to bfloat16 whatever the model dtype",
        f"{QWEN3}/qwen3_tts_code2wav.py",
        "",
        "self.decoder.to(device=device, dtype=self.vllm_config.model_config.dtype)",
        "self.decoder.to(device=device, dtype=torch.bfloat16)",
        "decoder",
    ),
    UpstreamBug(
        "hardcoded-sampling",
        "the code predictor samples with a hard-coded temperature 0.9 whatever the request's sampling parameters",
        PREDICTOR,
        "",
        "use_sampling = do_sample and temperature > 0",
        "use_sampling, temperature = True, 0.9",
        "generator",
    ),
)


def bug(name: str) -> UpstreamBug:
    for found in BUGS:
        if found.name == name:
            return found
    raise KeyError(f"no upstream bug {name!r} (known: {', '.join(b.name for b in BUGS)})")


class PatchDoesNotApply(RuntimeError):
    """The release's code moved: the patch's text is not found exactly once after its anchor."""


def patched_text(text: str, found: UpstreamBug) -> str:
    start = text.find(found.anchor) if found.anchor else 0
    if start < 0:
        raise PatchDoesNotApply(f"{found.name}: anchor {found.anchor!r} not in {found.file}")
    at = text.find(found.old, start)
    if at < 0 or (not found.anchor and text.count(found.old) != 1):
        raise PatchDoesNotApply(f"{found.name}: {found.old!r} not found exactly once in {found.file}")
    return text[:at] + found.new + text[at + len(found.old) :]


def apply(pristine: Path, dest: Path, found: UpstreamBug) -> Path:
    """A copy of the release tree ``pristine`` at ``dest`` with ``found`` applied (``dest`` is a new folder)."""
    shutil.copytree(pristine, dest, ignore=shutil.ignore_patterns("__pycache__"))
    target = dest / found.file
    target.write_text(patched_text(target.read_text(), found))
    return dest
