"""Device placement of a two-stage model: each stage on its own device, stage boundaries crossed via the host.

On a CUDA run the harness runs stage ``k`` on its device (the deploy config's per-stage ``devices``; with two or more
GPUs and ``--stage-devices split``, the default, stage 0 and stage 1 on two different GPUs) with that device current
during the stage's calls, as the release's per-stage process has it. The check reads what the harness saw in the
runs the other checks share (solo and staggered): a stage's outputs on another CUDA device than its own, and tensors
a stage input processor hands the next stage while they still lie on a device (the release's connector serialises
every tensor of a chunk to the host, ``omni_connectors/utils/serialization.py``; a device tensor there costs a copy
back per chunk, and in an in-process pipeline would reach the decoder on the producer's device). A model that mixes
the two stages' devices inside a call raises, and the check shows that error.
"""

from __future__ import annotations

import pytest

from omnitts.validators import checkids

pytestmark = pytest.mark.usefixtures("omnitts_model")


@pytest.mark.omnitts_check(checkids.DEVICE_PLACEMENT)
def test_device_placement(ctx, record):
    if not ctx.options.device.startswith("cuda"):
        pytest.skip("device placement needs --device cuda (on the CPU every tensor is on the host)")
    sub = ctx.subject
    if not sub.two_stage:
        pytest.skip("single-stage model: no stage boundary to cross")
    devices = ctx.stage_devices() or [ctx.options.device] * len(sub.stages)
    runs = dict(ctx.solo_runs())
    runs["staggered"] = ctx.composition("staggered")
    findings: list[str] = []
    for name, run in runs.items():
        findings.extend(f"{name}: {line}" for line in run.placement_findings if f"{name}: {line}" not in findings)
    split = len(set(devices)) > 1
    record(stage_devices=devices, split=split, findings=len(findings))
    if findings:
        pytest.fail(
            f"device placement: {len(findings)} tensors off their stage's device (stages on {', '.join(devices)}):\n  "
            + "\n  ".join(findings[:12])
            + "\nFix: a stage input processor returns codes as lists or host tensors (the decoder moves them to its "
            "own device: `codes.to(self.decoder_device)`); a stage builds its tensors on its own weights' device, "
            "never on a fixed `cuda:N`.",
            pytrace=False,
        )
