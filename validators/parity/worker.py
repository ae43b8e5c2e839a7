"""The parity worker extension: what the integration computes, observed inside the engine's own workers.

Mixed into every worker of the tree's engine by ``worker_extension_cls`` (as ``validators/engine/worker_ext.py`` is)
and reached with ``collective_rpc``; runs in the engine environment, imports torch only.

* ``omnitts_parity_install(spec)`` (once, before any request): wraps the decoder method the release's model calls
  on the codes it decodes (``spec["decode"]``: attribute path and method, from ``omnitts.knowledge.references``), so
  every call's per-request codes and waveforms are recorded; with ``spec["follow_dtype"]`` it sets the named
  attributes (e.g. Qwen3-TTS's hard-coded ``_embedding_dtype = torch.bfloat16``) to the model's dtype, the
  documented in-memory patch a float32 parity run needs (the cached release is never edited);
* ``omnitts_parity_take()``: ``{"calls": [...]}``, the codes (``[frames, codebooks]`` lists) and waveforms
  recorded since the last take;
* ``omnitts_parity_decode(codes)``: the integration's decoder alone on given codes (the reference's), with the
  arguments of the model's own last call.
"""

from __future__ import annotations

import functools


def _resolve(root, path: str):
    obj = root
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part)
    return obj


class _Recorder:
    def __init__(self, decoder, method: str) -> None:
        self.decoder, self.method = decoder, method
        self.original = getattr(decoder, method)
        self.calls: list[dict] = []
        self.last_kwargs: dict = {}
        self.with_lengths = True

    def wrapped(self, codes, lengths=None, *args, **kwargs):
        # two calling conventions: ``method(codes [B, Q, F], lengths, **kw)`` (Qwen3-TTS's batched_chunked_decode)
        # and ``decoder(codes [B, Q, F])`` (the scaffold's codec decoder: every row is whole)
        self.with_lengths = lengths is not None
        wavs = self.original(codes, lengths, *args, **kwargs) if self.with_lengths else self.original(codes)
        self.last_kwargs = {k: v for k, v in kwargs.items() if k != "caches"}
        if lengths is None:
            lengths = [codes.shape[-1]] * codes.shape[0]
        for row, length in enumerate(lengths):
            qf = codes[row, :, : int(length)]
            wav = wavs[row].reshape(-1)
            self.calls.append({"codes": qf.T.cpu().tolist(), "waveform": wav.float().cpu().tolist()})
        return wavs


class ParityWorkerExtension:
    """``collective_rpc`` targets of the parity checks (JSON-able arguments and results)."""

    def _parity_model(self):
        return self.model_runner.model

    def omnitts_parity_install(self, spec: dict) -> dict:
        import torch

        model = self._parity_model()
        found: dict = {"model": type(model).__name__, "followed": [], "recording": None}
        dtype = next((p.dtype for p in model.parameters()), torch.float32)
        if spec.get("follow_dtype"):
            for name in spec.get("dtype_attributes", ()):
                for owner in [*model.modules(), *(v for m in model.modules() for v in vars(m).values())]:
                    if hasattr(owner, name) and isinstance(getattr(owner, name), torch.dtype):
                        if getattr(owner, name) != dtype:
                            found["followed"].append(
                                f"{type(owner).__name__}.{name}: {getattr(owner, name)} -> {dtype}"
                            )
                        setattr(owner, name, dtype)
        decode = spec.get("decode")
        if decode and type(model).__name__ == decode["model_class"]:
            decoder = _resolve(model, decode["path"])
            recorder = _Recorder(decoder, decode["method"])
            setattr(decoder, decode["method"], functools.partial(_Recorder.wrapped, recorder))
            self._omnitts_parity = recorder
            found["recording"] = f"{decode['path']}.{decode['method']}"
        found["dtype"] = str(dtype)
        return found

    def omnitts_parity_take(self) -> dict:
        recorder = getattr(self, "_omnitts_parity", None)
        if recorder is None:
            return {"calls": []}
        calls, recorder.calls = recorder.calls, []
        return {"calls": calls}

    def omnitts_parity_decode(self, codes: list) -> dict:
        """The recorded decoder method on ``codes`` (``[frames, codebooks]``), alone: one request, no state."""
        import torch

        recorder = getattr(self, "_omnitts_parity", None)
        if recorder is None:
            return {"waveform": None}
        param = next(recorder.decoder.parameters())
        qf = torch.as_tensor(codes, dtype=torch.long, device=param.device).T.contiguous()
        with torch.inference_mode():
            if recorder.with_lengths:
                wavs = recorder.original(qf[None], [qf.shape[1]], caches=None, **recorder.last_kwargs)
            else:
                wavs = recorder.original(qf[None])
        return {"waveform": wavs[0].reshape(-1).float().cpu().tolist()}
