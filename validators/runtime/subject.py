"""What the harness needs to know about a model under test (reference model, mutant or tree model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnitts.knowledge.layout import tree_version
from omnitts.knowledge.runner import RunnerContract, contract_for

#: Host syncs a model may do per request and steady-state step, the default I3 budget of both tiers (the harness's
#: subject and the engine tier's in-worker check): none. A sync the model must keep carries the static rules'
#: suppression ``# omnitts: ignore[OMNI-I3-...] reason`` (reported, not counted).
SYNC_BUDGET_PER_REQUEST_STEP = 0


@dataclass
class StageSpec:
    stage_id: int
    model_stage: str
    execution: str  # "ar" (LLM_AR) or "generation" (LLM_GENERATION)
    factory: Callable[[], Any]  # builds one model instance: Cls(config=cfg)
    engine_output_type: str = "audio"  # "latent" for a talker feeding a decoder
    final_output: bool = True
    cls: type | None = None
    config: Any = None


@dataclass
class RequestPlan:
    """One request of a scenario: what it asks for and when it arrives (or is aborted)."""

    ext_id: str
    prompt_token_ids: list[int]
    additional_information: dict = field(default_factory=dict)
    max_tokens: int = 64
    arrive_step: int = 0
    abort_step: int | None = None
    seed: int | None = None  # the request's sampling seed (the runner hands it to the model as ``_omni_seed``)


@dataclass
class RuntimeSubject:
    name: str
    pattern: str  # "two-stage" | "single-stage" | "native-ar"
    release: str  # target vLLM-Omni version, e.g. "0.20.0"
    stages: list[StageSpec]
    prompts: list[RequestPlan]  # at least 4, of different lengths
    sample_rate: int
    hop_length: int | None = None
    eos_token_id: int | None = None
    async_chunk_fn: Callable | None = None  # talker2code2wav_async_chunk
    sync_fn: Callable | None = None  # talker2code2wav
    connector_extra: dict = field(default_factory=dict)  # codec_chunk_frames, codec_left_context_frames, ...
    reference: Callable[[RequestPlan], Any] | None = None  # HF-style reference generate -> waveform
    consumer: Callable[[Any], Any] | None = None  # the example's as_waveform(audio)
    consumer_origin: str = ""
    source_files: list[Path] = field(default_factory=list)
    model_files: list[Path] = field(default_factory=list)  # sync attribution roots (model package)
    kind: str = "reference"  # reference | mutant | tree | custom
    expected_failure: tuple[str, str] | None = None  # (bug, check) for a mutant
    model_runner: str = "v1"
    tolerance: dict = field(default_factory=lambda: {"rtol": 1e-4, "atol": 1e-5})
    chunk_tolerance: dict = field(default_factory=lambda: {"rtol": 1e-3, "atol": 1e-4})
    # single-stage generators emit their last chunk in the step that samples EOS; a two-stage talker's
    # EOS step carries no codec frame
    eos_step_emits_audio: bool = False
    # deploy-config admission limits per stage (None = unlimited); stage 1 of the templates is 1 on purpose
    max_num_seqs: tuple[int | None, ...] = (None, None)
    # host syncs a correct model may do per request and steady-state step (e.g. a generator reading its stop
    # flags back once per chunk); the I3 budget is this times the batch size
    sync_budget_per_request_step: int = SYNC_BUDGET_PER_REQUEST_STEP
    # a harness variation: run the output consolidation of another era (e.g. "0.14", audio kept as a list)
    consolidation_era: str | None = None
    graph_step: Callable | None = None  # optional: builds (fn, args) for the CUDA-graph check
    description: str = ""
    extra: dict = field(default_factory=dict)

    def build(self, device: str = "cpu", stage_devices: list[str] | None = None) -> list[Any]:
        """One model instance per stage (``Cls(config=cfg)``), on ``device`` (or stage ``k`` on ``stage_devices[k]``),
        in eval mode, as the runner loads them."""
        models = []
        for k, st in enumerate(self.stages):
            m = st.factory()
            if hasattr(m, "to"):
                m = m.to(stage_devices[k] if stage_devices else device)
            if hasattr(m, "eval"):
                m.eval()
            models.append(m)
        return models

    def contract(self) -> RunnerContract:
        """The runner contract the harness reproduces: a tree model's, read from its tree (the files over the release
        table, as the scaffold and the static rules read it) when it runs at the tree's own release; else the
        release's."""
        root = self.extra.get("root") if self.kind == "tree" else None
        if root and tree_version(Path(root)) == self.release:
            return contract_for(Path(root), self.model_runner)
        return contract_for(self.release, self.model_runner)

    @property
    def ar_stage(self) -> StageSpec:
        return self.stages[0]

    @property
    def final_stage(self) -> StageSpec:
        return next(s for s in self.stages if s.final_output)

    @property
    def two_stage(self) -> bool:
        return len(self.stages) > 1
