{{ cookiecutter.license_header }}
"""Stage input processors of {{ cookiecutter.camel }}: talker (stage 0) -> code2wav (stage 1).

The talker emits one frame ``[1, K]`` per step under ``codes.audio`` (``-1`` everywhere for the stop frame).
Stage 1 receives codebook-major flat codes (``[K * F]``) as its prompt token ids, plus
``meta.left_context_size``: the number of leading frames that are context for the causal decoder.
"""

from typing import Any

import torch
{%- if cookiecutter.chunk_payload_struct %}

from vllm_omni.data_entry_keys import CodesStruct, MetaStruct, OmniPayloadStruct
{%- endif %}


def _valid_frames(codes: Any) -> list[list[int]]:
    """Frames (lists of K codes) from a ``[F, K]`` tensor, a list of ``[1, K]`` tensors or nested lists; drops stop
    frames (negative codes)."""
    if isinstance(codes, list) and codes and isinstance(codes[0], torch.Tensor):
        codes = torch.cat([c.reshape(-1, c.shape[-1]) for c in codes], dim=0)
    if isinstance(codes, torch.Tensor):
        codes = codes.reshape(-1, codes.shape[-1]).tolist() if codes.numel() else []
    return [list(frame) for frame in codes or [] if len(frame) and min(frame) >= 0]


def _codebook_major(frames: list[list[int]]) -> list[int]:
    return [frame[q] for q in range(len(frames[0])) for frame in frames] if frames else []


def talker2code2wav(
    source_outputs: list[Any],
    prompt: Any = None,
    _requires_multimodal_data: bool = False,
) -> list[dict[str, Any]]:
    """Without async chunk: once a talker request finished, pass all of its frames to code2wav at once."""
    code2wav_inputs: list[dict[str, Any]] = []
    for talker_output in source_outputs:
        if not talker_output.finished:
            continue
        multimodal_output = talker_output.outputs[0].multimodal_output
        frames = _valid_frames((multimodal_output.get("codes") or {}).get("audio"))
        code2wav_inputs.append(
            {
                "prompt_token_ids": _codebook_major(frames),
                "additional_information": {"meta": {"left_context_size": 0}},
            }
        )
    return code2wav_inputs


def talker2code2wav_async_chunk(
    transfer_manager: Any,
    {{ cookiecutter.chunk_payload_kwarg }}: dict[str, Any] | None,
    request: Any,
    is_finished: bool = False,
{%- if cookiecutter.chunk_payload_struct %}
) -> OmniPayloadStruct | None:
{%- else %}
) -> dict[str, Any] | None:
{%- endif %}
    """With async chunk: accumulate the request's frames and emit a window every ``codec_chunk_frames`` new frames.

    A window holds the new frames preceded by up to ``codec_left_context_frames`` already-emitted frames of context
    (both read from the connector's ``extra`` config); whatever is left goes out when the request finishes, with
    ``meta.finished`` set. Returns ``None`` while no window is due. The release's chunk transfer adapter calls this
    with keyword arguments, the payload under ``{{ cookiecutter.chunk_payload_kwarg }}``.
{%- if cookiecutter.chunk_payload_struct %} A window is an ``OmniPayloadStruct``
    (codes as a 1-D long tensor), not a dict: the adapter sets its ``.meta`` as an attribute.
{%- endif %}
    """
    request_id = request.external_req_id
    finished = bool(is_finished or request.is_finished())
    frames = transfer_manager.code_prompt_token_ids[request_id]
    if isinstance({{ cookiecutter.chunk_payload_kwarg }}, dict):
        frames.extend(_valid_frames(({{ cookiecutter.chunk_payload_kwarg }}.get("codes") or {}).get("audio")))
    elif not finished:
        return None

    connector = getattr(transfer_manager, "connector", None)
    raw_cfg = getattr(connector, "config", None) or {}
    cfg = raw_cfg.get("extra", raw_cfg) if isinstance(raw_cfg, dict) else {}
    chunk_frames = int(cfg.get("codec_chunk_frames", 8))
    left_context_frames = int(cfg.get("codec_left_context_frames", 8))
    if chunk_frames <= 0 or left_context_frames < 0:
        raise ValueError(f"invalid codec chunk config: chunk={chunk_frames} left_context={left_context_frames}")

    emitted = getattr(transfer_manager, "emitted_frames", None)
    if emitted is None:
        emitted = transfer_manager.emitted_frames = {}
    start = emitted.get(request_id, 0)
    if finished:
        count = len(frames) - start
        emitted.pop(request_id, None)
    elif len(frames) - start >= chunk_frames:
        count = chunk_frames
        emitted[request_id] = start + count
    else:
        return None
    context = min(left_context_frames, start) if count else 0
    window = frames[start - context : start + count]
{%- if cookiecutter.chunk_payload_struct %}
    return OmniPayloadStruct(
        codes=CodesStruct(audio=torch.tensor(_codebook_major(window), dtype=torch.long)),
        meta=MetaStruct(left_context_size=context, finished=torch.tensor(finished, dtype=torch.bool)),
    )
{%- else %}
    return {
        "codes": {"audio": _codebook_major(window)},
        "meta": {"left_context_size": context, "finished": torch.tensor(finished, dtype=torch.bool)},
    }
{%- endif %}
