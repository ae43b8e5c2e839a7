# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""RefTwoStage: two-stage TTS, AR talker -> codec decoder (omnitts pattern two-stage)."""

from .configuration_ref_two_stage import RefTwoStageConfig
from .ref_two_stage_code2wav import RefTwoStageCode2Wav
from .ref_two_stage_talker import RefTwoStageTalkerForConditionalGeneration

__all__ = [
    "RefTwoStageConfig",
    "RefTwoStageTalkerForConditionalGeneration",
    "RefTwoStageCode2Wav",
]
