"""The engine tier: the same checks, through the tree's own vLLM-Omni engine and server.

``install`` builds the engine's virtual environment (cached), ``cpu_platform`` is the OmniPlatform plugin
that lets vLLM-Omni run on a CPU-only machine, ``modeldir`` writes a loadable model directory for a tiny
scaffolded model, and ``offline``/``server`` drive the tree's ``Omni`` and ``vllm-omni serve``.
"""
