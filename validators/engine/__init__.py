"""The real vLLM-Omni engine: the tree's own ``Omni`` and ``vllm-omni serve``, run for the engine tier and the probe.

``install`` builds the engine's virtual environment (cached), ``cpu_platform`` is the OmniPlatform plugin that lets
vLLM-Omni run on a CPU-only machine, ``modeldir`` writes a loadable model directory for a tiny scaffolded model,
``session`` is one model's engine session, ``runtime`` starts its processes, ``offline`` drives the offline ``Omni``
(inside the engine's environment), ``worker_ext`` observes inside its workers, ``probe`` is ``omnitts-probe``.
"""
