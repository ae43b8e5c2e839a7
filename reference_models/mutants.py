"""Mutants: one small, declared variation of a correct reference model per bug class.

A mutant is named ``<model>@<bug>`` and is declared here, never copy-pasted: a list of ``Patch(file, old, new)``
applied to the committed render of its base model (``old`` must occur exactly once), a variation of the harness
(the output consolidation) or of the deploy config. The first docstring line of each declaring function is the
one-line description, the rest names the real bug it reproduces. ``tests/reference_models/test_mutants.py`` proves
that each mutant's sources differ from its base only inside the declared snippets, and shows each symptom.

``checks`` are what a validator is expected to flag, in the one vocabulary of :mod:`omnitts.validators.checkids`:
runtime checks and ticks (``i1.matches_reference``, the ``I1_STREAMING`` group, ``device.cuda`` needs CUDA, ...) and
static rule ids (``OMNI-I3-002``), which the ``static.lint`` check runs (docs/reference_models.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from omnitts.validators import checkids

TALKER = "models/ref_two_stage/ref_two_stage_talker.py"
CODE2WAV = "models/ref_two_stage/ref_two_stage_code2wav.py"
PROCESSOR = "stage_input_processors/ref_two_stage.py"
TWO_STAGE_DEPLOY = "deploy/ref_two_stage.yaml"
GENERATOR = "models/ref_single_stage/modeling_ref_single_stage.py"
NATIVE = "models/ref_native_ar/modeling_ref_native_ar.py"
NATIVE_FLOW = "models/ref_native_ar/ref_native_ar_flow.py"


@dataclass(frozen=True)
class Patch:
    """Replace the one occurrence of ``old`` in ``file`` (relative to the model's render root) by ``new``."""

    file: str
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    model: str
    bug: str
    description: str
    reproduces: str
    patches: tuple[Patch, ...]
    consolidation: str
    checks: tuple[str, ...]
    static_rule_family: str | None
    release: str | None = None  # the runner contract it needs (a seed reaches the model from 0.28)

    @property
    def name(self) -> str:
        return f"{self.model}@{self.bug}"


MUTANTS: dict[str, Mutant] = {}


def mutant(
    model: str,
    bug: str,
    *,
    checks: tuple[str, ...],
    consolidation: str = "v0.20",
    static_rule_family: str | None = None,
    release: str | None = None,
) -> Callable[[Callable[[], list[Patch]]], Callable[[], list[Patch]]]:
    """Register the mutant a function declares: its docstring describes it, its return value is its patches."""

    def register(declare: Callable[[], list[Patch]]) -> Callable[[], list[Patch]]:
        doc = inspect.getdoc(declare) or ""
        description, _, reproduces = doc.partition("\n")
        entry = Mutant(
            model=model,
            bug=bug,
            description=description.strip(),
            reproduces=" ".join(reproduces.split()),
            patches=tuple(declare()),
            consolidation=consolidation,
            checks=checks,
            static_rule_family=static_rule_family,
            release=release,
        )
        if entry.name in MUTANTS:
            raise ValueError(f"mutant {entry.name} declared twice")
        MUTANTS[entry.name] = entry
        return declare

    return register


# ---------------------------------------------------------------------------------------------------------- two-stage


@mutant("ref_two_stage", "truncation", checks=checkids.I1_STREAMING)
def _truncation() -> list[Patch]:
    """The async-chunk processor resets the request's codes every step instead of accumulating them.

    Fish Speech `fix: accumulate audio_codes across steps`: each step overwrote the code buffer, so windows never
    filled up and only the frames of the final step reached the decoder; streamed audio is truncated.
    """
    return [
        Patch(
            PROCESSOR,
            '        frames.extend(_valid_frames((pooling_output.get("codes") or {}).get("audio")))\n',
            '        frames[:] = _valid_frames((pooling_output.get("codes") or {}).get("audio"))  # only this step\n',
        )
    ]


@mutant("ref_two_stage", "replay", checks=(*checkids.I1_STREAMING, checkids.I1_MATCHES_REFERENCE))
def _two_stage_replay() -> list[Patch]:
    """The async-chunk processor sends the request's whole frame history as every window.

    Guide invariant I1, "cumulative: re-decode from step 0 every call" under a delta contract: each window restarts
    at frame 0 while the decoder trims only the declared left context, so streaming clients hear earlier audio again
    in every chunk.
    """
    return [
        Patch(
            PROCESSOR,
            "    window = frames[start - context : start + count]\n",
            "    window = frames[: start + count]  # the whole history, re-decoded from frame 0\n",
        )
    ]


@mutant("ref_two_stage", "early-return", checks=(checkids.I1_MODEL_OUTPUTS_EVERY_STEP, "OMNI-I1-002"))
def _early_return() -> list[Patch]:
    """The decoder's nothing-to-decode early return emits ``sr`` but no ``model_outputs``.

    Fish Speech `fix: ensure ALL return paths emit model_outputs`: a branch that returned before building the
    audio list left the step without ``model_outputs``, and the serving layer silently dropped that step.
    """
    return [
        Patch(
            CODE2WAV,
            '                multimodal_outputs={"model_outputs": [empty] * num_req, "sr": [sr] * num_req},\n',
            '                multimodal_outputs={"sr": [sr] * num_req},\n',
        )
    ]


@mutant("ref_two_stage", "host-sync-cpu", checks=(checkids.I3_HOST_SYNCS, "OMNI-I3-002"))
def _host_sync_cpu() -> list[Patch]:
    """A debug log inside the talker's per-request step loop calls ``.cpu()`` on the step's codes.

    Invariant I3 (`.cpu()` in a hot loop): log arguments are evaluated even when DEBUG is off, so every step and
    request pays a GPU->CPU copy and a stream sync.
    """
    return [
        Patch(
            TALKER,
            "            state.frame_idx = state.frame_idx + 1\n",
            "            state.frame_idx = state.frame_idx + 1\n"
            '            logger.debug("request %d codes %s", i, codes[i].cpu())\n',
        )
    ]


@mutant("ref_two_stage", "host-sync-tolist", checks=(checkids.I3_HOST_SYNCS, "OMNI-I3-002"))
def _host_sync_tolist() -> list[Patch]:
    """The decoder checks each request's window for stop codes with ``.tolist()`` inside its per-request loop.

    Invariant I3 (`.tolist()` in a hot loop): the defensive check copies every window to the host and syncs the
    stream once per request and step, serialising the decoder with the talker.
    """
    return [
        Patch(
            CODE2WAV,
            "            frames = segment.numel() // self._num_quantizers\n",
            "            if min(segment.tolist()) < 0:  # skip windows that still hold stop frames\n"
            "                continue\n"
            "            frames = segment.numel() // self._num_quantizers\n",
        )
    ]


@mutant("ref_two_stage", "buffer-view", checks=(checkids.I5_OUTPUTS_NOT_ALIASED, checkids.I1_MATCHES_REFERENCE))
def _buffer_view() -> list[Patch]:
    """The code predictor returns its static (CUDA-graph) output buffers instead of copies.

    CUDA-graph example in the guide (`return self.output_buf.clone()`): a view of a persistent buffer is
    overwritten by the next step, so every frame the engine kept by reference turns into the last frame.
    """
    return [
        Patch(
            TALKER,
            "        return loop.codes.clone(), loop.stop.clone()\n",
            "        return loop.codes, loop.stop  # the static buffers themselves, no copy\n",
        )
    ]


@mutant(
    "ref_two_stage",
    "wrong-device",
    checks=(checkids.DEVICE_CUDA, "OMNI-INT-006"),
    static_rule_family="OMNI-INT",
)
def _wrong_device() -> list[Patch]:
    """The decoder moves the codes to a hard-coded CPU device instead of the decoder's device.

    Fish Speech `fix: use model device for CUDA stream`: codec tensors on the wrong device crash on CUDA (or fall
    back to a silent CPU decode); on a CPU-only machine nothing shows, so only static rules see it there.
    """
    return [
        Patch(
            CODE2WAV,
            "            codes = codes.to(device=device, dtype=torch.long)\n",
            '            codes = codes.to(device="cpu", dtype=torch.long)\n',
        )
    ]


@mutant("ref_two_stage", "codes-on-device", checks=(checkids.DEVICE_PLACEMENT,))
def _codes_on_device() -> list[Patch]:
    """The stage input processor hands the decoder its window as a tensor on the producer's CUDA device.

    Guide Phase 2 "codec tensors moved to codec decoder device before decode", done in the wrong place: the
    processor runs in stage 0's process, so ``device="cuda"`` is the talker's GPU, not the decoder's; the release's
    connector copies the tensor back to the host for every chunk (a device sync in the sender), and with the stages on
    two GPUs the codes never were on the decoder's device. On a CPU-only machine ``cuda`` is absent and nothing shows.
    """
    return [
        Patch(
            PROCESSOR,
            '        "codes": {"audio": _codebook_major(window)},\n',
            '        "codes": {"audio": torch.tensor(_codebook_major(window), device=_DEVICE)},\n',
        ),
        Patch(
            PROCESSOR,
            "import torch\n",
            'import torch\n\n_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # codes go to the GPU early\n',
        ),
    ]


@mutant("ref_two_stage", "wrong-hop", checks=(*checkids.I1_STREAMING, checkids.I1_MATCHES_REFERENCE))
def _wrong_hop() -> list[Patch]:
    """The decoder trims left context with a hard-coded hop length (256) instead of the product of its strides.

    Guide Phase 2 "Hop length: audio duration wrong, streaming noise" and Phase 4 "context_audio_samples =
    context_frames * hop_length": each chunk keeps a sliver of already-emitted context, so the stream repeats audio.
    """
    return [
        Patch(
            CODE2WAV,
            "        self._hop_length = self.config.hop_length\n",
            "        self._hop_length = 256  # hop length of the codec this model started from\n",
        )
    ]


@mutant("ref_two_stage", "break-first", checks=(checkids.I4_CONCURRENCY,))
def _break_first() -> list[Patch]:
    """The decoder leaves its per-request loop after the first request of the batch.

    Batch collapse (I4, per-request state isolation): with more than one window per decoder step, every request
    but the first gets an empty chunk; a single-request smoke test never sees it.
    """
    return [
        Patch(
            CODE2WAV,
            "            audios[i] = wav[left_context * self._hop_length :].to(torch.float32)\n",
            "            audios[i] = wav[left_context * self._hop_length :].to(torch.float32)\n"
            "            break  # stage 1 is configured for one request per step\n",
        )
    ]


@mutant("ref_two_stage", "max-num-seqs-1", checks=("OMNI-INT-001", checkids.I4_CONCURRENCY))
def _max_num_seqs_1() -> list[Patch]:
    """The AR stage (stage 0) of the deploy config allows one sequence at a time.

    Guide Phase 2 "AR stage max_num_seqs" / RFC #2568: with max_num_seqs 1 on the talker, concurrent requests are
    served one after another; the second request's first audio waits for the first request to finish.
    """
    return [
        Patch(
            TWO_STAGE_DEPLOY,
            "  - stage_id: 0\n    max_num_seqs: 4\n",
            "  - stage_id: 0\n    max_num_seqs: 1\n",
        )
    ]


# ------------------------------------------------------------------------------------------------------- single-stage


@mutant("ref_single_stage", "replay", checks=(*checkids.I1_STREAMING, checkids.I1_MATCHES_REFERENCE))
def _replay() -> list[Patch]:
    """The generator re-decodes the utterance from frame 0 each step and yields all of it.

    Fish Speech `fix: emit delta audio not full waveform`: cumulative output under a delta contract; streaming
    clients hear the audio replayed on every chunk and the offline audio grows as O(N^2).
    """
    return [
        Patch(
            GENERATOR,
            "        start = max(0, emitted_frames - self._left_context_frames)\n"
            "        waveform = self.codec(codes[None, :, start:])[0]\n"
            "        return waveform[(emitted_frames - start) * self._hop_length :].to(torch.float32)\n",
            "        waveform = self.codec(codes[None])[0]  # re-decode the utterance from frame 0\n"
            "        return waveform.to(torch.float32)\n",
        )
    ]


@mutant(
    "ref_single_stage",
    "const-request-key",
    checks=(checkids.I4_CONCURRENCY, *checkids.I5_STATE, "OMNI-I5-001", "OMNI-I5-002"),
)
def _const_request_key() -> list[Patch]:
    """The request key is read from ``_omni_req_id`` with a constant fallback ``"0"``.

    The guide's I5 snippet and single-stage skeleton (`str(info.get("_omni_req_id", "0"))`): no released engine
    sets that key, so all requests share one generator (crosstalk under concurrency) and the finish hook, which
    receives the scheduler ids, never frees it.
    """
    return [
        Patch(
            GENERATOR,
            "    for key in _REQUEST_ID_KEYS:\n"
            "        value = info.get(key)\n"
            "        if isinstance(value, list):\n"
            "            value = value[0] if value else None\n"
            "        if value is not None:\n"
            "            return str(value)\n"
            '    raise KeyError(f"request info has none of the request id keys {_REQUEST_ID_KEYS}; keys present: '
            '{sorted(info)}")\n',
            '    return str(info.get("_omni_req_id", "0"))\n',
        )
    ]


@mutant("ref_single_stage", "tensor-branch", checks=(checkids.I3_HOST_SYNCS, "OMNI-I3-005"))
def _tensor_branch() -> list[Patch]:
    """The generator's frame loop leaves early with ``if done: break`` on a device tensor.

    Invariant I3 (no Python control flow on tensor values): the "optimisation" reads the stop flag back to the
    host on every frame, a sync per frame instead of one per chunk, and breaks CUDA-graph capture.
    """
    return [
        Patch(
            GENERATOR,
            "            stopped[f] = done\n",
            "            stopped[f] = done\n"
            "            if done:  # nothing left to generate in this chunk\n"
            "                break\n",
        )
    ]


@mutant("ref_single_stage", "batch-first", checks=(checkids.I4_CONCURRENCY,))
def _batch_first() -> list[Patch]:
    """A new request's generator is built from the first request's prompt slice of the batch.

    Batch collapse, "taking the first request's data" (the 0.14 Qwen3-TTS wrapper read
    `runtime_additional_information[0]` only): concurrent requests all speak the first request's text.
    """
    return [
        Patch(
            GENERATOR,
            "            prompt = input_ids[offset : offset + span]\n",
            "            prompt = input_ids[:span]\n",
        )
    ]


@mutant("ref_single_stage", "batch-flag", checks=(checkids.I4_CONCURRENCY,))
def _batch_flag() -> list[Patch]:
    """One end-of-stream flag for the whole batch: EOS only when every request yielded its last chunk.

    The guide's single-stage skeleton (`self._ar_emit_stop_token = all(last_flags)`): a request that finishes
    early is kept alive, its dropped generator is recreated and replays the utterance until the slowest finishes.
    """
    return [
        Patch(
            GENERATOR,
            "        self._last_chunk_flags = flags\n",
            "        self._last_chunk_flags = [all(flags)] * len(flags)\n",
        )
    ]


@mutant("ref_single_stage", "abort-leak", checks=checkids.I5_STATE)
def _abort_leak() -> list[Patch]:
    """The finish hook does nothing: generators are dropped only after their last chunk, never on abort.

    MOSS-TTS-Nano's `on_requests_finished` docstring: cancel, timeout or preemption otherwise leak the generator
    (and skip its cleanup); per-request state must be freed on finish and abort (I5).
    """
    return [
        Patch(
            GENERATOR,
            "        for req_id in finished_req_ids:\n"
            "            stream = self._stream_gens.pop(str(req_id), None)\n"
            "            if stream is not None:\n"
            "                stream[1].close()\n",
            "        del finished_req_ids  # forward() drops a generator after its last chunk\n",
        )
    ]


@mutant(
    "ref_single_stage",
    "optional-import",
    checks=(checkids.IMPORT_OPTIONAL_DEPS, "OMNI-INT-004"),
)
def _optional_import() -> list[Patch]:
    """The optional ``soundfile`` is imported at module top instead of lazily.

    Guide "Optional Dependency Handling" (references/optional-deps.md): the model module no longer imports where
    the optional package is missing, a failure that only shows after deployment.
    """
    return [
        Patch(
            GENERATOR,
            "\nimport torch\nimport torch.nn.functional as F\n",
            "\nimport soundfile as sf\nimport torch\nimport torch.nn.functional as F\n",
        ),
        Patch(GENERATOR, "        import soundfile as sf\n\n        sf.write(", "        sf.write("),
    ]


@mutant("ref_single_stage", "consolidation-skips-audio", checks=checkids.I1_STREAMING, consolidation="skip-audio")
def _consolidation_skips_audio() -> list[Patch]:
    """The engine's output consolidation skips the ``audio`` key (a harness variation; the model is unchanged).

    vLLM-Omni 0.14/0.16 `_consolidate_multimodal_tensors` (`if k == "audio": continue`, invariant I1 step 2):
    offline consumers get the per-step chunk list instead of one waveform, and code that takes the final value
    gets only the last chunk.
    """
    return []


@mutant("ref_single_stage", "chunk-replay", checks=(checkids.I1_NO_REPLAY, checkids.I1_MATCHES_REFERENCE))
def _chunk_replay() -> list[Patch]:
    """The last chunk is decoded from the previous chunk's start: the stream replays one chunk before it ends.

    A replay of already-streamed audio (VO#3032, "replay from the start"), here one chunk deep: the final flush
    re-decodes from an emitted-frames counter one chunk behind, so listeners hear the chunk before the last twice.
    """
    return [
        Patch(
            GENERATOR,
            "                delta = self.decode_delta(state.codes, state.emitted_frames)\n",
            "                start = state.emitted_frames\n"
            "                if finished and start >= self.config.stream_chunk_frames:\n"
            "                    start -= self.config.stream_chunk_frames  # the flush re-decodes the previous chunk\n"
            "                delta = self.decode_delta(state.codes, start)\n",
        )
    ]


@mutant("ref_single_stage", "stream-doubled", checks=(checkids.I1_NO_REPLAY, checkids.I1_DURATION_AND_SR))
def _stream_doubled() -> list[Patch]:
    """The last chunk also carries the whole utterance, for consumers that read only the final output.

    VO#3326 / VO#2907 (``stream=true`` gives about twice the duration): every delta is streamed, then the whole
    waveform again, so a streaming client hears the utterance twice.
    """
    return [
        Patch(
            GENERATOR,
            "            if is_last:\n                self._stream_gens.pop(key, None)\n",
            "            if is_last:\n                self._stream_gens.pop(key, None)\n"
            "                chunk = torch.cat([chunk, self.decode_delta(state.codes, 0)])  # the whole, for the end\n",
        )
    ]


@mutant("ref_single_stage", "seam-fade", checks=(checkids.I1_SEAMS, checkids.I1_MATCHES_REFERENCE))
def _seam_fade() -> list[Patch]:
    """Each chunk is faded in and out (a cross-fade window meant for overlap-add, applied with no overlap).

    VO#5916 (glitches at every chunk boundary): the audio dips to silence at every seam, an audible click train at
    the chunk rate; one-piece decoding has no seams, so only streaming clients hear it.
    """
    return [
        Patch(
            GENERATOR,
            "        return waveform[(emitted_frames - start) * self._hop_length :].to(torch.float32)\n",
            "        delta = waveform[(emitted_frames - start) * self._hop_length :].to(torch.float32)\n"
            "        fade = torch.linspace(0.0, 1.0, min(64, delta.numel() // 2), device=delta.device)\n"
            "        delta[: fade.numel()] *= fade  # cross-fade in, without the previous chunk's tail to add\n"
            "        delta[delta.numel() - fade.numel() :] *= fade.flip(0)\n"
            "        return delta\n",
        )
    ]


@mutant("ref_single_stage", "voice-broadcast", checks=(checkids.I4_CONCURRENCY,))
def _voice_broadcast() -> list[Patch]:
    """New requests of one step all start from the first new request's prompt (its conditioning is built once).

    VO#4370 / VO#4373 (``codes.ref`` broadcast to the whole batch, so the onset is in the wrong voice): alone each
    request is right; arriving together, the later ones speak the first one's utterance.
    """
    return [
        Patch(
            GENERATOR,
            "        offset = 0\n        for key, span in pending:\n",
            "        offset, broadcast = 0, None\n        for key, span in pending:\n",
        ),
        Patch(
            GENERATOR,
            "            if stream is None:\n                state = self.start_stream(prompt)\n",
            "            if stream is None:\n"
            "                broadcast = prompt if broadcast is None else broadcast  # built once for the step\n"
            "                state = self.start_stream(broadcast)\n",
        ),
    ]


@mutant("ref_single_stage", "seed-batch", checks=(checkids.I4_SEED_DETERMINISM,), release="0.30.0")
def _seed_batch() -> list[Patch]:
    """Seeded requests sample from one generator per step, seeded with the step's first request's seed.

    VO#6361 (fixed-seed output changes when co-batched) and VO#5386 (a custom multinomial draw that ignores the
    per-request generators): alone a seeded request is reproducible; in a batch it draws after its peers.
    """
    return [
        Patch(
            GENERATOR,
            "        self._pending: list[tuple[str, int]] = []\n",
            "        self._pending: list[tuple[str, int]] = []\n"
            "        self._seeds: list[int | None] = []\n"
            "        self._sampler: torch.Generator | None = None\n",
        ),
        Patch(
            GENERATOR,
            "        self._pending.append((request_key(info), input_ids.shape[0]))\n",
            "        self._pending.append((request_key(info), input_ids.shape[0]))\n"
            '        self._seeds.append(info.get("_omni_seed"))\n',
        ),
        Patch(
            GENERATOR,
            "        pending, self._pending = self._pending, []\n",
            "        pending, self._pending = self._pending, []\n"
            "        seeds, self._seeds = self._seeds, []\n"
            "        first = next((s for s in seeds if s is not None), None)\n"
            "        # one generator for the step, seeded by its first request's seed\n"
            "        self._sampler = None if first is None else torch.Generator().manual_seed(int(first))\n",
        ),
        Patch(
            GENERATOR,
            "        codes = logits.argmax(dim=-1)\n",
            "        if self._sampler is not None:  # seeded requests sample (Gumbel-max, temperature 1)\n"
            "            noise = torch.rand(logits.shape, generator=self._sampler).clamp_min(1e-9).to(logits.device)\n"
            "            logits = logits - torch.log(-torch.log(noise))\n"
            "        codes = logits.argmax(dim=-1)\n",
        ),
    ]


@mutant("ref_single_stage", "nan-decoder", checks=(checkids.AUDIO_FINITE, checkids.AUDIO_GATES))
def _nan_decoder() -> list[Patch]:
    """The codec's activation is a SnakeBeta whose scale underflowed to zero: ``1 / alpha`` makes every sample NaN.

    VO#1664 (a bf16 codec decoder hit NaN in SnakeBeta) and VO#3253 (fp16 NaN in the code predictor): the model's
    audio is NaN from the first sample, and every check that compares audio would blame something else. A server
    answers 16-bit PCM, where the NaN arrives as a number (0): there the audio gates see it.
    """
    return [
        Patch(
            GENERATOR,
            "        x = F.silu(self.pre(x))\n",
            "        alpha = torch.zeros((), device=x.device)  # exp(log_alpha) underflowed in bf16\n"
            "        x = self.pre(x)\n"
            "        x = x + (1.0 / alpha) * torch.sin(alpha * x) ** 2  # SnakeBeta: inf * 0\n",
        )
    ]


@mutant("ref_single_stage", "silent-decoder", checks=(checkids.AUDIO_GATES,))
def _silent_decoder() -> list[Patch]:
    """The NaN decoder "fixed" with ``nan_to_num``: every output is silence.

    VO#1664 as users met it (every output was silence): the NaN is cleaned into zeros, so nothing crashes and
    nothing compares differently; only a gate that listens for silence notices.
    """
    return [
        Patch(
            GENERATOR,
            "        x = F.silu(self.pre(x))\n",
            "        alpha = torch.zeros((), device=x.device)  # exp(log_alpha) underflowed in bf16\n"
            "        x = self.pre(x)\n"
            "        x = x + (1.0 / alpha) * torch.sin(alpha * x) ** 2  # SnakeBeta: inf * 0\n",
        ),
        Patch(
            GENERATOR,
            "        return torch.tanh(0.5 * self.post(x)).squeeze(1)\n",
            "        # no NaN reaches the users\n"
            "        return torch.nan_to_num(torch.tanh(0.5 * self.post(x)), nan=0.0).squeeze(1)\n",
        ),
    ]


# ---------------------------------------------------------------------------------------------------------- native-ar


@mutant("ref_native_ar", "host-sync-item", checks=(checkids.I3_HOST_SYNCS, "OMNI-I3-001"))
def _host_sync_item() -> list[Patch]:
    """The flow head's Euler loop converts the step size with ``.item()``.

    VoxCPM2's CFM solver comment ("`.fill_(t.item())` would sync") and invariant I3: one GPU->CPU sync per solver
    step, ``flow_steps`` per frame per request.
    """
    return [
        Patch(
            NATIVE_FLOW,
            "            dt = self.t_span[i + 1] - self.t_span[i]\n",
            "            dt = (self.t_span[i + 1] - self.t_span[i]).item()\n",
        )
    ]


@mutant("ref_native_ar", "last-wins", checks=(checkids.I4_CONCURRENCY,))
def _last_wins() -> list[Patch]:
    """``make_omni_output`` emits the last request's delta for every request of the batch.

    Batch collapse, "a last-wins variable emitted for all": the loop variable outlives the loop; alone each
    request sounds right, under concurrency every request hears the last one's audio.
    """
    return [
        Patch(
            NATIVE,
            "            outputs.append(audio)\n            latents.append(latent)\n        if not infos:",
            "        outputs = [audio for _ in infos]  # the loop's last delta\n"
            "        latents = [latent for _ in infos]\n        if not infos:",
        )
    ]


@mutant("ref_native_ar", "state-leak", checks=checkids.I5_STATE)
def _state_leak() -> list[Patch]:
    """The finish hook never frees per-request state (KV caches, decode pads, pending audio).

    VoxCPM2's `_active_states` leak warning ("possible cleanup path leak") and invariant I5: state must be freed
    when the scheduler reports a request finished or aborted, or memory grows with every request served.
    """
    return [
        Patch(
            NATIVE,
            "        for req_id in finished_req_ids:\n            self._states.pop(str(req_id), None)\n",
            "        del finished_req_ids  # states are replaced when a request id comes back\n",
        )
    ]
