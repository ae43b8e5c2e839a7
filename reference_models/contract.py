"""The slice of vLLM-Omni's model contract that standalone renders import instead of ``vllm_omni``.

``OmniOutput`` mirrors ``vllm_omni/model_executor/models/output_templates.py`` (0.14.0-0.30.0): a NamedTuple with the
same four fields in the same order and with the same defaults, so code written against one runs against the other.
"""

from typing import Any, NamedTuple

import torch


class OmniOutput(NamedTuple):
    """Output of an Omni model step: hidden states plus the multimodal payload (``model_outputs``, ``sr``, ...)."""

    text_hidden_states: torch.Tensor | None
    multimodal_outputs: dict[str, Any] | None = None
    intermediate_tensors: Any = None
    next_token_id: torch.Tensor | None = None
