"""The engine tier: the harness's checks (same check ids) through the tree's own engine and server.

Selected by ``--engine offline`` or ``--engine server`` (``validators/engine/pytest_options.py``); each check
names the tiers it runs in. The engine runs once per model per session; these functions only compare what it
returned. Tolerances: the engine may run the model in bfloat16 (vLLM downcasts float32 checkpoints on CPU), so
batched vs solo is compared with the harness's float tolerance scaled to that precision.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

from omnitts.validators import checkids
from omnitts.validators.engine import audio
from omnitts.validators.engine.probe import UNKNOWN_VOICE

pytestmark = pytest.mark.usefixtures("omnitts_model")

RTOL, ATOL = 1e-3, 1e-4
DISTINCT_ATOL = 1e-3
FORMATS = ("wav", "pcm", "flac", "mp3", "opus")
SPEECH = "/v1/audio/speech"


def _offline(engine) -> dict:
    result = engine.offline()
    if "error" in result:
        pytest.fail(f"offline Omni failed: {result['error']}\n{result.get('log', '')}", pytrace=False)
    return result


def _load(engine, scenario: str, index: int) -> np.ndarray:
    return np.load(engine.work / "offline" / scenario / f"{index}.npy")


def _same(a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
    if a.shape != b.shape:
        return False, f"{a.size} vs {b.size} samples"
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    return bool(np.allclose(a, b, rtol=RTOL, atol=ATOL)), f"max |diff| {diff:.2e}"


def _distinct(named: dict[str, np.ndarray]) -> list[str]:
    same = []
    for (ta, a), (tb, b) in itertools.combinations(named.items(), 2):
        if a.shape == b.shape and np.allclose(a, b, atol=DISTINCT_ATOL):
            same.append(f"{ta!r} and {tb!r} give the same audio ({a.size} samples)")
    return same


# ---------------------------------------------------------------------------------------------- offline


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I1_DURATION_AND_SR)
def test_engine_offline_duration_and_sr(engine, record):
    result = _offline(engine)
    problems = []
    for row in result["scenarios"]["solo"]["rows"]:
        if row["sr"] != engine.sample_rate:
            problems.append(f"{row['text']!r}: sample rate {row['sr']}, the config says {engine.sample_rate}")
        if not row["seconds"] or not 0 < row["seconds"] < 60:
            problems.append(f"{row['text']!r}: {row['seconds']} s of audio")
    record(startup_s=result["startup_s"], seconds=[r["seconds"] for r in result["scenarios"]["solo"]["rows"]])
    assert not problems, "I1 (offline Omni): " + "; ".join(problems)


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I4_CONCURRENCY)
def test_engine_offline_concurrent_equals_solo(engine, record):
    result = _offline(engine)
    solo_rows = result["scenarios"]["solo"]["rows"]
    solo = {row["text"]: _load(engine, "solo", i) for i, row in enumerate(solo_rows)}
    problems, checked = [], 0
    for name, scenario in result["scenarios"].items():
        if name == "solo":
            continue
        for i, row in enumerate(scenario["rows"]):
            ok, how = _same(_load(engine, name, i), solo[row["text"]])
            checked += 1
            if not ok:
                problems.append(f"[{name}] {row['text']!r} differs from its solo run: {how}")
    record(compared=checked, compositions=len(result["scenarios"]) - 1)
    assert checked >= 4 and not problems, "I4 (offline Omni): " + "\n  ".join(problems or ["nothing compared"])


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I4_CONCURRENCY)
def test_engine_offline_text_reaches_the_model(engine):
    """Distinct texts must give distinct audio: the request's text really drives the model."""
    result = _offline(engine)
    solo = {row["text"]: _load(engine, "solo", i) for i, row in enumerate(result["scenarios"]["solo"]["rows"])}
    same = _distinct(solo)
    assert not same, "I4 (offline Omni): the text does not reach the model: " + "; ".join(same)


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I2_CONSUMER_FORMS)
def test_engine_offline_example_runs(engine, record):
    """The model's offline example, run on the real engine, reads the release's real output types and writes
    one WAV of the right sample rate."""
    import soundfile as sf

    result = _offline(engine)
    example = result.get("example")
    if example is None:
        pytest.fail(
            f"no offline example in the tree for {engine.model} (examples/offline_inference/...)", pytrace=False
        )
    assert "error" not in example, (
        f"the offline example fails on the real engine: {example['error']}\n" + (example.get("traceback", "")[-1500:])
    )
    assert len(example["wavs"]) == 1, f"the example wrote {example['wavs']}"
    info = sf.info(example["wavs"][0])
    record(example_seconds=round(info.duration, 3))
    assert info.samplerate == engine.sample_rate and info.frames > 0, f"example WAV: {info}"


# ---------------------------------------------------------------------------------------------- server


def _speech(server, body: dict, timeout: float = 120):
    from omnitts.validators.engine.runtime import http

    return http("POST", server.url + SPEECH, body, timeout=timeout)


def _server(engine):
    try:
        return engine.start_server()
    except Exception as exc:
        pytest.fail(f"vllm-omni serve: {exc}", pytrace=False)


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.SERVER_RESPONSE_FORMATS)
def test_engine_server_response_formats(engine, record):
    server = _server(engine)
    text = "Hello there."
    status, _, reference = _speech(server, {"input": text, "response_format": "pcm"})
    assert status == 200, f"pcm: HTTP {status}: {reference[:300]!r}"
    want = audio.pcm(reference).size / engine.sample_rate
    problems, got = [], {}
    for fmt in FORMATS:
        status, headers, body = _speech(server, {"input": text, "response_format": fmt})
        if status != 200:
            problems.append(f"{fmt}: HTTP {status} {body[:200]!r}")
            continue
        try:
            samples, sr = audio.decode(fmt, body, engine.sample_rate, engine_python=str(engine.env.python))
        except (ValueError, RuntimeError) as exc:
            problems.append(str(exc))
            continue
        seconds = samples.size / sr
        got[fmt] = round(seconds, 3)
        # Lossy codecs pad with encoder delay / frame rounding: allow 0.1 s.
        if abs(seconds - want) > (0.1 if fmt in ("mp3", "opus") else 1e-3):
            problems.append(f"{fmt}: {seconds:.3f} s, pcm has {want:.3f} s")
    record(durations=got, pcm_seconds=round(want, 3), startup_s=server.startup_s)
    assert not problems, "server formats: " + "; ".join(problems)


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.I1_STREAM_EQUALS_OFFLINE)
def test_engine_server_stream_equals_whole(engine, record):
    server = _server(engine)
    text = "A second, longer sentence for the engine tier."
    status, _, whole = _speech(server, {"input": text, "response_format": "pcm"})
    assert status == 200, f"pcm: HTTP {status}: {whole[:300]!r}"
    status, headers, body = _speech(server, {"input": text, "response_format": "pcm", "stream": True})
    assert status == 200, f"stream: HTTP {status}: {body[:300]!r}"
    deltas, events = audio.sse_deltas(body)
    record(deltas=len(deltas), events=sorted(set(events)))
    assert events and events[-1] == "speech.audio.done", f"I1 (server): stream did not end with done: {events[-3:]}"
    assert len(deltas) >= 2, f"I1 (server): {len(deltas)} audio delta(s); a stream of this length has several"
    streamed = audio.pcm(b"".join(deltas))
    ok, how = _same(streamed, audio.pcm(whole))
    assert ok, f"I1 (server): the stream's deltas, concatenated, differ from the whole response: {how}"


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.I4_CONCURRENCY)
def test_engine_server_concurrent_equals_solo(engine, record):
    from omnitts.validators.engine.pytest_options import TEXTS

    server = _server(engine)
    texts = list(TEXTS[:4])
    solo = {}
    for text in texts:
        status, _, body = _speech(server, {"input": text, "response_format": "pcm"})
        assert status == 200, f"solo {text!r}: HTTP {status}: {body[:300]!r}"
        solo[text] = audio.pcm(body)
    same = _distinct(solo)
    assert not same, "I4 (server): the text does not reach the model: " + "; ".join(same)
    got: dict[int, tuple[int, bytes]] = {}

    def ask(i: int, text: str) -> None:
        status, _, body = _speech(server, {"input": text, "response_format": "pcm"})
        got[i] = (status, body)

    requests = texts + texts[:2]  # 6 at once, two texts twice
    threads = [threading.Thread(target=ask, args=(i, t)) for i, t in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    problems = []
    for i, text in enumerate(requests):
        status, body = got.get(i, (None, b""))
        if status != 200:
            problems.append(f"{text!r}: HTTP {status}")
            continue
        ok, how = _same(audio.pcm(body), solo[text])
        if not ok:
            problems.append(f"{text!r} concurrent differs from solo: {how}")
    record(concurrent=len(requests))
    assert not problems, "I4 (server): " + "; ".join(problems)


BAD_REQUESTS = {
    "empty input": {"input": ""},
    "missing input": {},
    "unknown voice": {"input": "Hello.", "voice": UNKNOWN_VOICE},
    "unsupported format": {"input": "Hello.", "response_format": "xyz"},
    "streaming a compressed format": {"input": "Hello.", "response_format": "mp3", "stream": True},
    "negative max_new_tokens": {"input": "Hello.", "max_new_tokens": -1},
    "oversized input": {"input": "x" * 100_000},
}


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.SERVER_BAD_REQUESTS)
def test_engine_server_bad_requests_get_4xx(engine, record):
    server = _server(engine)
    problems, statuses = [], {}
    for what, body in BAD_REQUESTS.items():
        status, _, answer = _speech(server, body, timeout=60)
        statuses[what] = status
        if not (400 <= status < 500):
            problems.append(f"{what}: HTTP {status} {answer[:200]!r}")
        elif not answer.strip():
            problems.append(f"{what}: HTTP {status} without a message")
    status, _, body = _speech(server, {"input": "Still serving after bad requests.", "response_format": "pcm"})
    record(statuses=statuses)
    assert status == 200, f"the server stopped serving after bad requests: HTTP {status}"
    assert not problems, "bad requests must get a 4xx with a message: " + "; ".join(problems)
