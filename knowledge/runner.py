"""What each vLLM-Omni release's model runner really does at the forward contract: the runner contract.

The harness steps a model the way the *target* release's runner would, the reference models and the
templates key their caches the way it does. Each fact below was read off the released wheels (paths
relative to the release tree; docs/validators.md has the table):

* ids: ``global_request_id`` (a one-element list, the orchestrator's external id) sits in the stage-0
  request's ``additional_information`` in every release. From 0.20 the GPU runner writes the scheduler id
  as ``req_infos["request_id"] = req_id`` right before ``preprocess()`` (``worker/gpu_model_runner.py``);
  0.30's Model Runner V2 writes ``req_id`` instead (``worker_v2/model_states/intermediate_buffer.py``).
  0.22+ also writes ``_omni_prompt_len`` / ``_omni_num_computed_tokens`` / ``_omni_is_prefill``, 0.28+
  ``_omni_max_tokens`` / ``_omni_seed``.
* per-request dicts reach ``forward()`` as ``runtime_additional_information`` (all releases) and, from
  0.18, also as ``model_intermediate_buffer`` (the same list object).
* finish notification: the AR runner calls ``model.on_requests_finished(finished_req_ids)`` from 0.20
  (``worker/gpu_ar_model_runner.py``), the generation runner from 0.24; before that nothing tells the
  model that a request finished or was aborted.
* async-chunk stage input processor: ``chunk_transfer_adapter.py`` (``distributed/omni_connectors/
  transfer_adapter/``) calls it with keyword arguments only; the step's payload goes under ``pooling_output``
  up to 0.22 and ``multimodal_output`` from 0.24 (``chunk_processor_kwargs(tree)`` reads the call from a tree).
  What it must return: a plain dict (``payload_data.get("meta")``) up to 0.20; from 0.22 an ``OmniPayloadStruct``
  (``vllm_omni/data_entry_keys.py``, msgspec structs: ``codes=CodesStruct(audio=<1-D long tensor>)``,
  ``meta=MetaStruct(...)``), whose ``.meta`` the adapter sets as an attribute, so a dict fails there
  (``chunk_payload_struct(tree)`` reads the adapter's annotation of the processor).
* consolidation: which era of ``OmniRequestState._consolidate_multimodal_tensors`` the release runs
  (``omnitts.validators.runtime.consolidation`` re-implements each era).

* per-step hooks: every model method the runner calls on every engine step, with how it calls it
  (``per_step_hooks(version)``, the ``STEP_HOOKS`` table; the one source of hook names for the rest
  of omnitts).

API: ``contract_for(version_or_tree, model_runner=None)`` -> :class:`RunnerContract`;
``consolidation_era(version)``; ``per_step_hooks(version)``; ``preprocess_id_keys(tree)``,
``chunk_processor_kwargs(tree)`` and
``chunk_payload_kwarg(tree)``, ``chunk_payload_struct(tree)`` (read from the tree's files).
This module is the one place that compares release numbers (``_row``).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, replace
from pathlib import Path

from omnitts.knowledge import layout

KNOWN_RELEASES = ("0.14.0", "0.16.0", "0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0")
# The release assumed where none is named or readable: the newest supported.
DEFAULT_RELEASE = KNOWN_RELEASES[-1]
# The runner contract the standalone reference models are rendered for (reference_models/, the templates'
# `standalone` target): the guide's release, whose async-chunk processor returns a dict under `pooling_output`.
REFERENCE_RELEASE = "0.20.0"
CONSOLIDATION_ERAS = ("0.14", "0.18", "0.20", "0.24", "0.26", "0.30")

_MIB, _RAI = "model_intermediate_buffer", "runtime_additional_information"
_PO, _MMO = "pooling_output", "multimodal_output"
CHUNK_ADAPTER = "vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py"


@dataclass(frozen=True)
class _Row:
    """The v1 runner of one release (model runner v2, where it exists, differs only where noted)."""

    v1_id_key: str | None
    buffer_kwargs: tuple[str, ...]
    ar_notifies_finish: bool
    generation_notifies_finish: bool
    omni_progress_keys: bool
    omni_sampling_keys: bool
    consolidation_era: str
    has_model_runner_v2: bool = False
    # keyword under which chunk_transfer_adapter passes the step's payload to the async-chunk processor
    chunk_payload_kwarg: str = _PO
    # the async-chunk processor returns an OmniPayloadStruct (0.22+), not a dict
    chunk_payload_struct: bool = False


# One row per release; a version between two rows behaves as the row below it (0.23.1 -> 0.22).
_TABLE: dict[tuple[int, int], _Row] = {
    (0, 14): _Row(None, (_RAI,), False, False, False, False, "0.14"),
    (0, 16): _Row(None, (_RAI,), False, False, False, False, "0.14"),
    (0, 18): _Row(None, (_MIB, _RAI), False, False, False, False, "0.18"),
    (0, 20): _Row("request_id", (_MIB, _RAI), True, False, False, False, "0.20"),
    (0, 22): _Row("request_id", (_MIB, _RAI), True, False, True, False, "0.20", chunk_payload_struct=True),
    (0, 24): _Row(
        "request_id", (_MIB, _RAI), True, True, True, False, "0.24", chunk_payload_kwarg=_MMO, chunk_payload_struct=True
    ),
    (0, 26): _Row(
        "request_id", (_MIB, _RAI), True, True, True, False, "0.26", chunk_payload_kwarg=_MMO, chunk_payload_struct=True
    ),
    (0, 28): _Row(
        "request_id", (_MIB, _RAI), True, True, True, True, "0.26", chunk_payload_kwarg=_MMO, chunk_payload_struct=True
    ),
    (0, 30): _Row(
        "request_id",
        (_MIB, _RAI),
        True,
        True,
        True,
        True,
        "0.30",
        has_model_runner_v2=True,
        chunk_payload_kwarg=_MMO,
        chunk_payload_struct=True,
    ),
}


def _key(version: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a vLLM-Omni version: {version!r}")
    return int(m.group(1)), int(m.group(2))


def _row(version: str) -> _Row:
    key = _key(version)
    below = [k for k in _TABLE if k <= key]
    if key[0] != 0 or not below:
        raise ValueError(f"vLLM-Omni {version} is older than the oldest supported release 0.14")
    return _TABLE[max(below)]


@dataclass(frozen=True)
class RunnerContract:
    version: str
    # key the runner writes into a request's dict before preprocess(); None = no id written
    preprocess_id_key: str | None
    # kwarg names under which forward() receives the per-request dict list (same list object)
    buffer_kwargs: tuple[str, ...]
    ar_notifies_finish: bool
    generation_notifies_finish: bool
    writes_omni_progress_keys: bool  # _omni_prompt_len, _omni_num_computed_tokens, _omni_is_prefill
    writes_omni_sampling_keys: bool  # _omni_max_tokens, _omni_seed
    consolidation_era: str
    model_runner: str = "v1"
    # the async-chunk processor is called as f(transfer_manager=, <chunk_payload_kwarg>=, request=, is_finished=)
    chunk_payload_kwarg: str = _PO
    # ... and returns an OmniPayloadStruct (vllm_omni.data_entry_keys; 0.22+) or None; before 0.22 a dict or None
    chunk_payload_struct: bool = False


def consolidation_era(version: str) -> str:
    return _row(version).consolidation_era


@dataclass(frozen=True)
class StepHook:
    """A model method the runner calls on every engine step, and how it calls it (read off each release's
    ``worker/gpu_model_runner.py``, ``gpu_ar_model_runner.py``, ``gpu_generation_model_runner.py`` and, on
    0.30, ``worker_v2/model_states/omni_model_state.py``)."""

    name: str
    # "batch": once per step for the whole scheduled batch; "request": once per scheduled request per step
    per: str
    since: str
    # the same call also does prefill-only work (``preprocess``): checks for work wasted once per step skip it
    prefill_work: bool = False
    # keyword parameters that carry one entry per scheduled request, in batch order: "buffer" stands for the
    # release's ``buffer_kwargs`` (the per-request dicts: ``runtime_additional_information``, and from 0.18
    # ``model_intermediate_buffer``), "sizes" for the per-request token counts (``seq_token_counts``, 0.16+)
    request_lists: tuple[str, ...] = ()
    # the call's keywords are one request's own dict (``preprocess(input_ids=..., **req_infos)``)
    request_dict: bool = False
    # positional parameters (after self) that hold device tensors
    device_args: tuple[int, ...] = ()
    # where vLLM's SamplingMetadata (per-request parameters as device tensors) arrives: a position or a keyword
    sampling: tuple[int | str, ...] = ()


_BUFFER = "buffer"
# per-request sizes the generation runner adds to forward's keywords: one token count per scheduled request
# (worker/gpu_generation_model_runner.py: model_kwargs["seq_token_counts"] = tokens, from 0.16)
_SIZES = "sizes"
_REQUEST_SIZES: tuple[tuple[str, str], ...] = (("seq_token_counts", "0.16"),)
STEP_HOOKS: tuple[StepHook, ...] = (
    # gpu_model_runner: self.model(input_ids=, positions=, inputs_embeds=, **model_kwargs, **extra)
    StepHook("forward", "batch", "0.14", request_lists=(_BUFFER, _SIZES), device_args=(0, 1)),
    # gpu_model_runner._model_forward: self.model.make_omni_output(model_output, **model_kwargs, **extra)
    StepHook("make_omni_output", "batch", "0.14", request_lists=(_BUFFER,), device_args=(0,)),
    # gpu_ar_model_runner.execute_model: compute_logits(sample_hidden_states, sampling_metadata=...)
    StepHook("compute_logits", "batch", "0.14", device_args=(0,), sampling=("sampling_metadata",)),
    # gpu_model_runner._preprocess, every step for models with multimodal inputs
    StepHook("embed_input_ids", "batch", "0.14", device_args=(0,)),
    # gpu_model_runner: self.talker_mtp(input_ids, inputs_embeds, ...) for every decode step (CUDA-graph wrapped)
    StepHook("talker_mtp", "batch", "0.14", device_args=(0, 1)),
    # gpu_model_runner._preprocess: for each scheduled request, preprocess(input_ids=, input_embeds=, **req_infos)
    StepHook("preprocess", "request", "0.14", prefill_work=True, request_dict=True),
    # gpu_model_runner._process_additional_information_updates: for each request,
    # postprocess(hidden_states_slice, multimodal_outputs=..., **req_infos)
    StepHook("postprocess", "request", "0.14", request_dict=True, device_args=(0,)),
    # gpu_ar_model_runner.execute_model: flush_pending_metadata(req_ids)
    StepHook("flush_pending_metadata", "batch", "0.18"),
    # gpu_ar_model_runner.sample_tokens: model.sample(logits, sampling_metadata) (prefer_model_sampler)
    StepHook("sample", "batch", "0.20", device_args=(0,), sampling=(1,)),
    # gpu_ar_model_runner.execute_model: prepare_runner_inputs(input_ids, positions, ...)
    StepHook("prepare_runner_inputs", "batch", "0.20", device_args=(0, 1)),
    # gpu_model_runner._maybe_run_batch_preprocess: preprocess_batch(req_ids=, model_intermediate_buffer=, device=)
    StepHook("preprocess_batch", "batch", "0.22"),
    # gpu_model_runner._preprocess: preprocess_decode_batch(input_ids=, req_infos=[one dict per request])
    StepHook("preprocess_decode_batch", "batch", "0.22", request_lists=("req_infos",)),
)


# vllm_omni/model_executor/custom_process_mixin.py (0.14-0.30): `set_custom_preprocess(fn)` makes `fn` the
# model's `preprocess` (`self.preprocess = fn`), `set_custom_postprocess(fn)` its `postprocess`.
HOOK_REGISTRARS: dict[str, str] = {"set_custom_preprocess": "preprocess", "set_custom_postprocess": "postprocess"}


@functools.lru_cache(maxsize=32)
def per_step_hooks(version: str | None = None) -> dict[str, StepHook]:
    """The model methods the runner of ``version`` calls on every step, by name; ``None`` (no target known): every
    method some release calls. ``request_lists`` names the release's own buffer keywords."""
    if version is None:
        buffers = tuple(dict.fromkeys(k for row in _TABLE.values() for k in row.buffer_kwargs))
        sizes = tuple(k for k, _since in _REQUEST_SIZES)
        chosen = STEP_HOOKS
    else:
        key = _key(version)
        buffers = _row(version).buffer_kwargs
        sizes = tuple(k for k, since in _REQUEST_SIZES if _key(since) <= key)
        chosen = tuple(h for h in STEP_HOOKS if _key(h.since) <= key)
    expand = {_BUFFER: buffers, _SIZES: sizes}
    out = {}
    for h in chosen:
        lists = tuple(k for name in h.request_lists for k in expand.get(name, (name,)))
        out[h.name] = StepHook(**{**h.__dict__, "request_lists": lists})
    return out


def contract_for(version_or_tree: str | Path | None, model_runner: str | None = None) -> RunnerContract:
    """The runner contract of a release (``"0.30.0"``) or of a tree (a ``Path``: its version is read from its files,
    and so are the facts its files state, the async-chunk processor's payload keyword and return type, over the
    release table's); None means the default release. ``model_runner`` "v2" selects 0.30's Model Runner V2."""
    tree = Path(version_or_tree) if isinstance(version_or_tree, Path) else None
    if tree is not None:
        version = layout.tree_version(tree) or DEFAULT_RELEASE
    else:
        version = version_or_tree or DEFAULT_RELEASE
    row = _row(version)
    if tree is not None:
        struct = chunk_payload_struct(tree)
        row = replace(
            row,
            chunk_payload_kwarg=chunk_payload_kwarg(tree) or row.chunk_payload_kwarg,
            chunk_payload_struct=row.chunk_payload_struct if struct is None else struct,
        )
    runner = model_runner or "v1"
    if runner == "v2" and not row.has_model_runner_v2:
        raise ValueError(f"Model Runner V2 exists from vLLM-Omni 0.30, not {version}")
    v1 = runner == "v1"
    return RunnerContract(
        version=version,
        preprocess_id_key=row.v1_id_key if v1 else "req_id",
        buffer_kwargs=row.buffer_kwargs,
        ar_notifies_finish=row.ar_notifies_finish,
        generation_notifies_finish=row.generation_notifies_finish,
        writes_omni_progress_keys=row.omni_progress_keys and v1,
        writes_omni_sampling_keys=row.omni_sampling_keys and v1,
        consolidation_era=row.consolidation_era,
        model_runner=runner,
        chunk_payload_kwarg=row.chunk_payload_kwarg,
        chunk_payload_struct=row.chunk_payload_struct,
    )


def preprocess_id_keys(root: Path) -> tuple[str, ...]:
    """Id keys a tree's runners give a model for its request, in lookup order, read from its files: 0.30's
    Model Runner V2 (``vllm_omni/worker_v2/``) writes ``req_id``, and V1 (``request_id``) is still selectable;
    a V1 runner that writes no ``request_id`` before preprocess() (0.14-0.18) leaves the orchestrator's
    ``global_request_id`` (a one-element list in the entry stage's additional_information) as the only id."""
    root = Path(root)
    v1 = "request_id" if _RUNNER_WRITES_REQUEST_ID.search(layout.read_text(root / _GPU_RUNNER)) else "global_request_id"
    return ("req_id", v1) if (root / layout.WORKER_V2).is_dir() else (v1,)


_GPU_RUNNER = f"{layout.PKG}/worker/gpu_model_runner.py"
_RUNNER_WRITES_REQUEST_ID = re.compile(r"""\[["']request_id["']\]\s*=\s*req_id\b""")


def chunk_processor_kwargs(root: Path) -> tuple[str, ...] | None:
    """The keywords a tree's chunk transfer adapter passes to the async-chunk stage input processor, read from
    its source: a call with a ``transfer_manager=`` keyword, or a dict literal with a ``"transfer_manager"`` key
    (0.30 builds the kwargs as a dict). None where the tree has no chunk transfer adapter."""
    source = layout.read_text(Path(root) / CHUNK_ADAPTER)
    if not source:
        return None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            names = tuple(k.arg for k in node.keywords if k.arg)
        elif isinstance(node, ast.Dict):
            names = tuple(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        else:
            continue
        if "transfer_manager" in names and "request" in names:
            return names
    return None


def chunk_payload_kwarg(root: Path) -> str | None:
    """The keyword carrying the step's payload in the tree's async-chunk processor call (the one that is not the
    transfer manager, the request or a flag); None where the tree has no chunk transfer adapter."""
    names = chunk_processor_kwargs(root) or ()
    payload = [n for n in names if n.endswith("_output")]
    return payload[0] if len(payload) == 1 else None


PAYLOAD_STRUCT = "OmniPayloadStruct"  # vllm_omni/data_entry_keys.py, 0.22+


def chunk_payload_struct(root: Path) -> bool | None:
    """True where the tree's chunk transfer adapter declares the async-chunk processor as returning an
    ``OmniPayloadStruct`` (``self.custom_process_next_stage_input_func: Callable[..., OmniPayloadStruct | None]``,
    0.22+: it then sets ``payload_data.meta`` as an attribute, which a dict does not have); False where it declares
    no such return (0.20 reads the result with ``payload_data.get``); None where the tree has no chunk transfer
    adapter."""
    source = layout.read_text(Path(root) / CHUNK_ADAPTER)
    if not source:
        return None
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Attribute)
            and node.target.attr == "custom_process_next_stage_input_func"
        ):
            return PAYLOAD_STRUCT in ast.unparse(node.annotation)
    return False


@dataclass(frozen=True)
class Consolidation:
    """How one consolidation era accumulates a request's per-step multimodal payloads and consolidates them at
    finish (``OmniRequestState.add_multimodal_tensor`` / ``_consolidate_multimodal_tensors``); read off the
    releases, checked against their own code by tests/runtime/test_consolidation_vs_release.py."""

    era: str
    split_store: bool  # 0.24+: tensors / metadata kept apart (a MultimodalPayload); before: one flat dict
    mm_type_each_step: bool  # 0.20: each step's mm_type names its target; else the first mm_type sticks
    copies_nested_dicts: bool  # 0.14-0.18: nested dict payloads copied key by key
    audio_stays_chunks: bool  # 0.14-0.18: `audio` is not concatenated (stays a list of chunks)
    sr_keeps_last: bool  # 0.18+: a list of `sr` tensors keeps the last one
    delta_skips_drainable: bool  # 0.20: DELTA requests leave image / audio to the drain
    unflattens_dotted_keys: bool  # 0.20: "a.b" keys become nested dicts
    tensors_only_accumulate: bool  # 0.24: only tensors list-accumulate; metadata is merged
    chunk_meta_replaced: bool  # 0.26+: per-chunk metadata keys are replaced, not accumulated
    sample_rate_to_metadata: bool  # 0.26+: sr / sample_rate / audio_sample_rate move to metadata first
    sample_rate_snapshots: bool  # 0.30: the latest sr-like value is kept as metadata on every step
    strict_strategy: bool  # 0.30: only CONCAT_LAST failures fall back; others raise (and stop consolidation)
    accumulator_starts_empty: bool  # 0.14-0.18: mm_accumulated starts as None
    state_module: str  # where OmniRequestState lives
    payload_module: str | None  # where MultimodalPayload lives (split store only)


def _consolidation(era, split, each_step, nested, chunks, sr_last, delta, dotted, tensors_only, chunk_meta, sr_meta,
                   snapshots, strict, empty, outputs):  # fmt: skip
    pkg = "vllm_omni.outputs" if outputs else "vllm_omni.engine"
    return Consolidation(
        era, split, each_step, nested, chunks, sr_last, delta, dotted, tensors_only, chunk_meta, sr_meta, snapshots,
        strict, empty, f"{pkg}.output_processor", f"{pkg}.mm_outputs" if split else None,
    )  # fmt: skip


T, F = True, False
CONSOLIDATIONS: dict[str, Consolidation] = {
    c.era: c
    for c in (
        #              era     split each nest chunk srlast delta dot tens chunkm srmeta snap strict empty outputs
        _consolidation("0.14", F,    F,   T,   T,    F,     F,    F,  F,   F,     F,     F,   F,     T,    F),
        _consolidation("0.18", F,    F,   T,   T,    T,     F,    F,  F,   F,     F,     F,   F,     T,    F),
        _consolidation("0.20", F,    T,   F,   F,    T,     T,    T,  F,   F,     F,     F,   F,     F,    F),
        _consolidation("0.24", T,    F,   F,   F,    T,     F,    F,  T,   F,     F,     F,   F,     F,    F),
        _consolidation("0.26", T,    F,   F,   F,    T,     F,    F,  F,   T,     T,     F,   F,     F,    T),
        _consolidation("0.30", T,    F,   F,   F,    T,     F,    F,  F,   T,     T,     T,   T,     F,    T),
    )
}  # fmt: skip
assert tuple(CONSOLIDATIONS) == CONSOLIDATION_ERAS


def consolidation_for(era_or_version: str) -> Consolidation:
    """The consolidation behaviour of an era ("0.24") or of a release ("0.24.0")."""
    if era_or_version in CONSOLIDATIONS:
        return CONSOLIDATIONS[era_or_version]
    return CONSOLIDATIONS[consolidation_era(era_or_version)]
