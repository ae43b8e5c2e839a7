# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""RefSingleStage: LM + codec in one AR worker (omnitts pattern single-stage)."""

from .configuration_ref_single_stage import RefSingleStageConfig
from .modeling_ref_single_stage import RefSingleStageForGeneration

__all__ = [
    "RefSingleStageConfig",
    "RefSingleStageForGeneration",
]
