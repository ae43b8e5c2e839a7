"""The runner harness: steps a model through the forward contract of its target vLLM-Omni release.

It reproduces, at the model boundary, what the release's GPU runners do (0.20.0 file references):

* AR stage (``worker/gpu_ar_model_runner.py`` + ``worker/gpu_model_runner.py``): a persistent batch whose
  order changes as requests finish (holes are filled from the end, like vLLM's ``InputBatch.condense``);
  at the start of a step the finished/aborted ids of the previous step are dropped from the runner's
  ``model_intermediate_buffer`` and passed to ``model.on_requests_finished`` (0.20+); for
  ``has_preprocess`` models each request's dict gets the scheduler id under the release's key
  (``request_id``; ``req_id`` for MRv2) before ``preprocess(input_ids=..., input_embeds=..., **info)``;
  ``forward()`` receives the per-request dict list under ``runtime_additional_information`` (and
  ``model_intermediate_buffer`` from 0.18), plus ``sampling_metadata``/``logits_index``/``sampler``;
  a non-``OmniOutput`` result goes through ``make_omni_output``; an ``OmniOutput`` only counts as
  multimodal when the model sets ``have_multimodal_outputs``; ``compute_logits`` is sampled greedily and
  the EOS id (or ``max_tokens``) finishes a request; ``postprocess`` runs per request when
  ``has_postprocess``; each request's payload is cut out of the batch output the way
  ``utils/mm_outputs.to_payload_element`` does (token-aligned tensors sliced, lists indexed, other
  tensors shared).
* stage input processor (``distributed/.../chunk_transfer_adapter.py``): the talker's per-request payload
  (unflattened) goes to ``talker2code2wav_async_chunk(transfer_manager=, <payload>=, request=,
  is_finished=)``, keywords only, the payload under the release's keyword (``pooling_output`` to 0.22,
  ``multimodal_output`` from 0.24: ``RunnerContract.chunk_payload_kwarg``); a returned chunk must be what the
  release's adapter reads (a dict to 0.20, an ``OmniPayloadStruct`` from 0.22: ``chunk_payload_struct``), else a
  ``ContractError``; it becomes the decoder request's new ``prompt_token_ids`` and its other keys (``meta``
  without ``finished``) its ``additional_information``.
* generation stage (``worker/gpu_generation_model_runner.py``): requests with a ready chunk are batched,
  ``forward`` gets ``seq_token_counts``; chunk infos after the first reach the model only if it has a
  ``has_preprocess`` or ``enable_update_additional_information`` attribute; output lists must hold one
  entry per request; ``on_requests_finished`` is called from 0.24.
* output processor: every final-stage payload crosses a process boundary (cloned to CPU), is streamed
  as a delta and accumulated, and the request's offline output is the release's consolidation
  (:mod:`omnitts.validators.runtime.consolidation`).
* without async chunk, stage 0's consolidated outputs go through ``talker2code2wav`` once the request finished.

The parts, one job each: :mod:`.scheduling` (ids, persistent batch order), :mod:`.payloads` (flattening, per-request
split, ``OmniOutput`` extraction), :mod:`.hostcopy` (what crosses to the engine process, one sync per step on CUDA),
:mod:`.stages` (the AR and generation stages, ``ARStage.step`` as named steps), :mod:`.loop` (the loop, the stage
input processor, the output path), :mod:`.results` and :mod:`.errors`. This is the only runner: the validators, the
reference-model tests and the benchmarks all step models through it.
"""

from omnitts.validators.runtime.harness.errors import PASS, ContractError, ModelError, StopRun
from omnitts.validators.runtime.harness.loop import Harness, TransferManager, run_scenario
from omnitts.validators.runtime.harness.payloads import count_frames, flatten_payload, unflatten_payload
from omnitts.validators.runtime.harness.results import RequestResult, RunResult, StepRecord
from omnitts.validators.runtime.harness.stages import ARStage, GenerationStage

__all__ = [
    "PASS",
    "ARStage",
    "ContractError",
    "Harness",
    "GenerationStage",
    "ModelError",
    "RequestResult",
    "RunResult",
    "StepRecord",
    "StopRun",
    "TransferManager",
    "count_frames",
    "flatten_payload",
    "run_scenario",
    "unflatten_payload",
]
