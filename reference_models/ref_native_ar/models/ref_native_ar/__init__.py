# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""RefNativeAr: base LM + side computation (omnitts pattern native-ar)."""

from .configuration_ref_native_ar import RefNativeArConfig
from .modeling_ref_native_ar import RefNativeArForConditionalGeneration

__all__ = [
    "RefNativeArConfig",
    "RefNativeArForConditionalGeneration",
]
