"""The one vocabulary of check ids: runtime checks, what they tick besides themselves, and static rule ids.

Every producer and consumer of a check id imports it from here: the runtime checks (``validators/checks``,
``@pytest.mark.omnitts_check(ID)``), the ticks a check reports next to its own outcome (``record(extra_checks=...)``),
the Integration Checklist (``validators/runtime/checklist.py``), the mutants' targets
(``reference_models/mutants.py``) and the mutant matrix (``benchmarks/mutant_matrix.py``).

Two spellings, one per kind of check:

* a runtime check or tick is ``<family>.<name>`` (``i1.stream_equals_offline``, ``static.I5``): lower-case family
  (the invariant ``i1``..``i5`` or a topic), then what is checked;
* a static rule is its rule id ``OMNI-<family>-<nnn>`` (``OMNI-I5-001``), as ``omnitts-lint`` prints it; in a
  ``pytest validators`` run the static rules run inside the ``static.lint`` check.

``tests/runtime/test_checkids.py`` proves that every id here is produced by a check, that every checklist item names
produced ids, and that every mutant names existing checks; the plugin refuses an unknown id at run time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# -- runtime checks (one pytest check each, in validators/checks) --------------------------------------------------

I1_STREAM_EQUALS_OFFLINE = "i1.stream_equals_offline"
I1_DECLARED_SEMANTICS = "i1.declared_semantics"
I1_MATCHES_REFERENCE = "i1.matches_reference"
I1_DURATION_AND_SR = "i1.duration_and_sr"
I1_MODEL_OUTPUTS_EVERY_STEP = "i1.model_outputs_every_step"
I1_NO_REPLAY = "i1.no_replay"
I1_SEAMS = "i1.seams"
I2_CONSUMER_FORMS = "i2.consumer_forms"
I3_HOST_SYNCS = "i3.host_syncs"
I3_GRAPH_BREAKS = "i3.graph_breaks"
I4_CONCURRENCY = "i4.concurrency"
I4_SEED_DETERMINISM = "i4.seed_determinism"
I5_STATE_FREED = "i5.state_freed"
I5_NO_GROWTH = "i5.no_growth"
I5_OUTPUTS_NOT_ALIASED = "i5.outputs_not_aliased"
I5_ABORT_RECOVERY = "i5.abort_recovery"
AUDIO_FINITE = "audio.finite"
AUDIO_GATES = "audio.gates"
CHUNK_BOUNDARIES = "chunk.boundaries"
CUDA_GRAPH_REPLAY = "cuda_graph.replay"
IMPORT_OPTIONAL_DEPS = "import.optional_deps"
PERF_RTF_TTFA = "perf.rtf_ttfa"
STATIC_LINT = "static.lint"
INTEGRATION_POINTS = "integration.points"
DEVICE_PLACEMENT = "device.placement"
# engine tier only (validators/checks/test_engine_tier.py, the tree's own server)
SERVER_RESPONSE_FORMATS = "server.response_formats"
SERVER_BAD_REQUESTS = "server.bad_requests"
# reference parity (--reference CAPTURE): the integration against the model's own implementation (docs/parity.md)
PARITY_CODES = "parity.codes"
PARITY_DECODER_ALONE = "parity.decoder_alone"
PARITY_END_TO_END = "parity.end_to_end"
PARITY_BATCHED = "parity.batched"

# -- ticks: reported by a runtime check next to its own outcome -------------------------------------------------------

ARTIFACTS_WAV = "artifacts.wav"
DEVICE_CUDA = "device.cuda"
STATIC_I1 = "static.I1"
STATIC_I2 = "static.I2"
STATIC_I3 = "static.I3"
STATIC_I5 = "static.I5"
INTEGRATION_REGISTRY = "integration.registry"
INTEGRATION_DEPLOY = "integration.deploy"
INTEGRATION_SERVING = "integration.serving"


@dataclass(frozen=True)
class Check:
    id: str
    summary: str
    produced_by: str | None = None  # for a tick: the runtime check that reports it

    @property
    def is_tick(self) -> bool:
        return self.produced_by is not None


_CHECKS = (
    Check(AUDIO_FINITE, "no NaN or Inf in any request's audio (reported once, before the checks that compare audio)"),
    Check(
        AUDIO_GATES,
        "weight-free audio gates: not silent, not clipped or constant, DC offset and duration per character in band",
    ),
    Check(I1_STREAM_EQUALS_OFFLINE, "streamed deltas concatenate to the offline output"),
    Check(I1_DECLARED_SEMANTICS, "forward() docstring's delta/cumulative claim matches what it emits"),
    Check(I1_MATCHES_REFERENCE, "served audio equals the HF-style reference within tolerance"),
    Check(I1_DURATION_AND_SR, "audio length = frames x hop length, at the declared sample rate"),
    Check(I1_MODEL_OUTPUTS_EVERY_STEP, "every final-stage step carries model_outputs"),
    Check(I1_NO_REPLAY, "no streamed piece repeats audio already streamed (found by cross-correlation)"),
    Check(I1_SEAMS, "no discontinuity at the seams between streamed pieces, against the pieces' interiors"),
    Check(I2_CONSUMER_FORMS, "the example's consumer handles tensor and list outputs"),
    Check(I3_HOST_SYNCS, "no host syncs in model calls beyond the model's budget"),
    Check(I3_GRAPH_BREAKS, "the hot loop compiles without graph breaks"),
    Check(I4_CONCURRENCY, "each request sounds the same alone and in a staggered batch"),
    Check(I4_SEED_DETERMINISM, "a request with a seed gives the same audio alone and in every batch composition"),
    Check(I5_STATE_FREED, "no per-request state left after finish and abort"),
    Check(I5_NO_GROWTH, "held state does not grow over repeated scenarios"),
    Check(I5_OUTPUTS_NOT_ALIASED, "outputs of a step do not change during later steps"),
    Check(
        I5_ABORT_RECOVERY,
        "aborts and disconnects at several offsets, repeated, leave no per-request state; memory back to baseline",
    ),
    Check(CHUNK_BOUNDARIES, "async-chunk windows decode without seams"),
    Check(CUDA_GRAPH_REPLAY, "the model's CUDA graph replays correctly and pays off"),
    Check(IMPORT_OPTIONAL_DEPS, "the model package imports without its optional dependencies"),
    Check(PERF_RTF_TTFA, "real-time factor and time to first audio are measured"),
    Check(STATIC_LINT, "the static rules (OMNI-*) on the model's files"),
    Check(INTEGRATION_POINTS, "the model's integration points in its vLLM-Omni tree (omnitts-scaffold check)"),
    Check(
        DEVICE_PLACEMENT,
        "each stage's outputs stay on its device, what crosses to the next stage is on the host (CUDA; two GPUs: "
        "the stages on two devices)",
    ),
    Check(SERVER_RESPONSE_FORMATS, "the tree's server answers /v1/audio/speech in every response format"),
    Check(SERVER_BAD_REQUESTS, "the tree's server refuses bad speech requests with a clear error"),
    Check(PARITY_CODES, "the codes reaching the decoder equal the reference's frame by frame (bf16: within its top-k)"),
    Check(PARITY_DECODER_ALONE, "the integration's decoder on the reference's codes gives the reference's waveform"),
    Check(PARITY_END_TO_END, "each request's waveform equals the reference's (length, max |diff|, SNR)"),
    Check(PARITY_BATCHED, "each request batched with the others still equals the reference's waveform"),
    Check(ARTIFACTS_WAV, "reference and served WAVs written for listening", I1_MATCHES_REFERENCE),
    Check(
        DEVICE_CUDA,
        "every step's outputs came back on CUDA (codec on the decoder's device)",
        I1_MODEL_OUTPUTS_EVERY_STEP,
    ),
    Check(STATIC_I1, "no OMNI-I1 error finding", STATIC_LINT),
    Check(STATIC_I2, "no OMNI-I2 error finding", STATIC_LINT),
    Check(STATIC_I3, "no OMNI-I3 error finding", STATIC_LINT),
    Check(STATIC_I5, "no OMNI-I5 error finding", STATIC_LINT),
    Check(INTEGRATION_REGISTRY, "the model registry entry is present and points at a class", INTEGRATION_POINTS),
    Check(INTEGRATION_DEPLOY, "the stage config / deploy YAML is present and fits the pipeline", INTEGRATION_POINTS),
    Check(INTEGRATION_SERVING, "every serving_speech.py integration point is present", INTEGRATION_POINTS),
)

CHECKS: dict[str, Check] = {c.id: c for c in _CHECKS}
RUNTIME_CHECKS: tuple[str, ...] = tuple(c.id for c in _CHECKS if not c.is_tick)
TICKS: tuple[str, ...] = tuple(c.id for c in _CHECKS if c.is_tick)

# the static invariant ticks static.lint reports (a clean invariant is "passed")
STATIC_INVARIANT_TICKS: dict[str, str] = {"I1": STATIC_I1, "I2": STATIC_I2, "I3": STATIC_I3, "I5": STATIC_I5}
# the static rules that judge a deploy/stage config (validators/static/rules/integration_config.py): static.lint
# reports each one's outcome by its rule id when the model has a deploy config, so checklist items can name them
DEPLOY_RULES: tuple[str, ...] = ("OMNI-INT-001", "OMNI-INT-002", "OMNI-INT-003")

# -- groups a mutant names: the checks that see one kind of bug -------------------------------------------------------

# streamed audio that is not the offline audio: every check that compares the two, their lengths or their seams
I1_STREAMING: tuple[str, ...] = (
    I1_STREAM_EQUALS_OFFLINE,
    I1_DECLARED_SEMANTICS,
    I1_DURATION_AND_SR,
    CHUNK_BOUNDARIES,
    I1_NO_REPLAY,
    I1_SEAMS,
)
I5_STATE: tuple[str, ...] = (I5_STATE_FREED, I5_NO_GROWTH, I5_ABORT_RECOVERY)
# the audio diagnostics (docs/diagnostics.md): where a replay, a seam, a peer's voice, a seed or an abort went wrong
DIAGNOSTICS: tuple[str, ...] = (
    AUDIO_FINITE,
    AUDIO_GATES,
    I1_STREAM_EQUALS_OFFLINE,
    I1_NO_REPLAY,
    I1_SEAMS,
    I4_CONCURRENCY,
    I4_SEED_DETERMINISM,
    I5_ABORT_RECOVERY,
)
# the checks --reference CAPTURE selects (they need a capture to compare with)
PARITY: tuple[str, ...] = (PARITY_CODES, PARITY_DECODER_ALONE, PARITY_END_TO_END, PARITY_BATCHED)

# -- static rule ids ------------------------------------------------------------------------------------------------

RULE_ID = re.compile(r"^OMNI-[A-Z0-9]+-\d{3}$")


def is_rule_id(check: str) -> bool:
    return bool(RULE_ID.match(check))


def rule_ids(checks: Iterable[str]) -> list[str]:
    """The static rule ids among ``checks``."""
    return [c for c in checks if is_rule_id(c)]


def known(check: str) -> bool:
    """A runtime check, a tick, or a static rule id that the static registry defines (imports the rules lazily)."""
    if check in CHECKS:
        return True
    if is_rule_id(check):
        from omnitts.validators.static.linter import all_rules

        return check in all_rules()
    return False


def producer(check: str) -> str | None:
    """The runtime check whose run reports ``check``: itself, the check a tick comes from, ``static.lint`` for the
    rule ids it reports one by one (DEPLOY_RULES); None when no check reports it."""
    if check in CHECKS:
        return CHECKS[check].produced_by or check
    if check in DEPLOY_RULES:
        return STATIC_LINT
    return None


def require(check: str) -> str:
    """``check`` when a check reports it (see :func:`producer`), else a one-line ValueError naming this module."""
    if producer(check) is None:
        raise ValueError(f"unknown check id {check!r}: check ids live in omnitts.validators.checkids")
    return check


def targets(checks: Iterable[str]) -> list[str]:
    """The runtime checks and ticks a run reports for ``checks`` (a mutant's declaration): static rule ids are seen
    through the ``static.lint`` check that runs them."""
    checks = list(checks)
    out = sorted({c for c in checks if c in CHECKS})
    if rule_ids(checks) and STATIC_LINT not in out:
        out.append(STATIC_LINT)
    return out
