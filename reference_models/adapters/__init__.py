"""Reference adapters (``omnitts.validators.parity.adapter.ReferenceAdapter``) around the authors' own implementations.

Each module runs inside its reference's environment (``omnitts-capture``), never in the tree's: ``qwen3_tts`` wraps
the ``qwen-tts`` package (the reference of vLLM-Omni's ``qwen3_tts``); ``hf_patterns`` wraps the HF-style references
of the scaffold's three patterns (``reference_models/hf_reference.py``), which run in omnitts's own environment.
"""
