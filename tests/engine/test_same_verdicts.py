"""``omnitts-probe`` and the server tier give the same verdicts on the same server: the server tier's HTTP checks are
the URL backend's observations handed to the same verdicts. Run here against the loopback speech server of
``test_probe.py``, correct and with each seeded bug; ``test_probe.py`` runs the probe against the tree's own server."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from omnitts.validators import checkids
from omnitts.validators.backends.base import judge
from omnitts.validators.backends.server import ServerBackend
from omnitts.validators.engine.probe import Probe
from omnitts.validators.verdicts import VERDICTS

from .test_probe import MODEL, SR, FakeSpeechServer

HTTP_CHECKS = [  # the server tier's checks made over HTTP alone (the others look inside the workers)
    checkids.SERVER_RESPONSE_FORMATS,
    checkids.I1_STREAM_EQUALS_OFFLINE,
    checkids.I4_CONCURRENCY,
    checkids.SERVER_BAD_REQUESTS,
    checkids.AUDIO_FINITE,
    checkids.AUDIO_GATES,
    checkids.I1_NO_REPLAY,
    checkids.I1_SEAMS,
    checkids.I4_SEED_DETERMINISM,
]


def _server_tier(url: str) -> ServerBackend:
    """The server tier's backend on a server that is already running (what the tier's engine session started)."""
    server = SimpleNamespace(url=url, rpc=lambda method: [])
    session = SimpleNamespace(
        start_server=lambda: server, model_dir=MODEL, sample_rate=SR, env=SimpleNamespace(python=sys.executable)
    )
    ctx = SimpleNamespace(options=SimpleNamespace(device="cpu"), engine_session=lambda: session)
    backend = ServerBackend(ctx)
    backend.url().bad_timeout = 2.0
    return backend


def _said(verdict) -> tuple:
    return verdict.outcome, verdict.headline, tuple(f.text for f in verdict.findings)


@pytest.mark.parametrize(
    "bugs",
    [(), ("crosstalk",), ("stream_drops_last",), ("voice_ignored", "no_message"), ("flac_sr",), ("same_audio",)],
    ids=lambda bugs: "+".join(bugs) or "correct",
)
def test_probe_and_server_tier_judge_a_server_alike(tmp_path, bugs):
    seen = {}
    with FakeSpeechServer(set(bugs)) as server:
        probe = Probe(server.url, MODEL, tmp_path / "probe", bad_timeout=2.0, concurrency=(1,))
        probe.backend.discover()
        for check in HTTP_CHECKS:
            seen[check] = [_said(judge(probe.backend, check))]
        tier = _server_tier(server.url)
        for check in HTTP_CHECKS:
            seen[check].append(_said(judge(tier, check)))
    for check, (by_probe, by_tier) in seen.items():
        if "crosstalk" in bugs:  # which requests overlap, so which of them get the bug, changes from run to run
            by_probe, by_tier = by_probe[:2], by_tier[:2]
        assert by_probe == by_tier, check
    if bugs:
        assert any(outcome == "failed" for (outcome, *_), _ in seen.values()), bugs
    else:
        assert all(outcome == "passed" for (outcome, *_), _ in seen.values()), seen


def test_the_probe_reports_each_check_through_its_verdict(tmp_path, monkeypatch):
    from omnitts.validators.engine.probe import STEPS
    from omnitts.validators.verdicts.base import Judge

    calls = []
    for check, _ in STEPS:
        j = VERDICTS[check]

        def spy(*obs, fn=j.fn, check=check):
            calls.append(check)
            return fn(*obs)

        monkeypatch.setitem(VERDICTS, check, Judge(check, spy, j.needs))
    with FakeSpeechServer() as server:
        report = Probe(server.url, MODEL, tmp_path, bad_timeout=2.0, concurrency=(1,)).run()
    assert calls == [check for check, _ in STEPS] and report["passed"]
