"""What each vLLM-Omni release's model runner really does at the forward contract.

The harness steps a model the way the *target* release's runner would. Each fact below was read off the
released wheels (paths relative to the release tree; see docs/validators.md for the table):

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
* consolidation: see :mod:`omnitts.validators.runtime.consolidation` (one era per behaviour change).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

KNOWN_RELEASES = ("0.14.0", "0.16.0", "0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0")
DEFAULT_RELEASE = "0.20.0"


def _key(version: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a vLLM-Omni version: {version!r}")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class ReleaseProfile:
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

    @property
    def id_keys(self) -> tuple[str, ...]:
        """Keys under which a model can find *the id that the finish hook will receive*."""
        return (self.preprocess_id_key,) if self.preprocess_id_key else ()

    def describe(self) -> str:
        ids = self.preprocess_id_key or "none (only global_request_id)"
        return (
            f"vLLM-Omni {self.version} ({self.model_runner}): preprocess id key {ids}; forward kwargs "
            f"{', '.join(self.buffer_kwargs)}; finish hook AR={self.ar_notifies_finish} "
            f"generation={self.generation_notifies_finish}; consolidation era {self.consolidation_era}"
        )


def consolidation_era(version: str) -> str:
    minor = _key(version)[1]
    if minor < 18:
        return "0.14"
    if minor < 20:
        return "0.18"
    if minor < 24:
        return "0.20"
    if minor < 26:
        return "0.24"
    if minor < 30:
        return "0.26"
    return "0.30"


def profile_for(version: str | None, model_runner: str | None = None) -> ReleaseProfile:
    version = version or DEFAULT_RELEASE
    major, minor = _key(version)
    if major != 0 or minor < 14:
        raise ValueError(f"vLLM-Omni {version} is older than the oldest supported release 0.14")
    runner = model_runner or "v1"
    if runner == "v2" and minor < 30:
        raise ValueError(f"Model Runner V2 exists from vLLM-Omni 0.30, not {version}")
    if runner == "v2":
        id_key = "req_id"
    elif minor >= 20:
        id_key = "request_id"
    else:
        id_key = None
    return ReleaseProfile(
        version=version,
        preprocess_id_key=id_key,
        buffer_kwargs=("model_intermediate_buffer", "runtime_additional_information")
        if minor >= 18
        else ("runtime_additional_information",),
        ar_notifies_finish=minor >= 20,
        generation_notifies_finish=minor >= 24,
        writes_omni_progress_keys=minor >= 22 and runner == "v1",
        writes_omni_sampling_keys=minor >= 28 and runner == "v1",
        consolidation_era=consolidation_era(version),
        model_runner=runner,
    )


def tree_version(root: Path) -> str | None:
    """Version of a vLLM-Omni tree (source checkout, sdist or unpacked wheel), or None."""
    root = Path(root)
    candidates = [
        root / "vllm_omni" / "_version.py",
        root / "PKG-INFO",
        *sorted(root.glob("vllm_omni-*.dist-info/METADATA")),
    ]
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        m = re.search(r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)['\"]", text) or re.search(
            r"^Version:\s*(\S+)", text, re.M
        )
        if m:
            return m.group(1)
    return None
