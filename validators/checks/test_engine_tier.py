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


# ------------------------------------------------------------------------- offline, inside the workers
# omnitts's worker extension (validators/engine/worker_ext.py) is mixed into the engine's workers by vLLM's
# ``worker_extension_cls``; offline.py calls it through the engine's ``collective_rpc`` after the scenarios.


def _worker(engine) -> dict:
    result = _offline(engine)
    found = result.get("worker")
    if found is None:
        pytest.fail("the offline run did not reach the in-worker checks (no 'worker' in result.json)", pytrace=False)
    if "error" in found:
        pytest.fail(
            f"in-worker checks failed to run: {found['error']}\n{found.get('traceback', '')[-1500:]}", pytrace=False
        )
    return found


def _containers(worker: dict) -> list:
    from omnitts.validators.runtime.state import Container

    return [Container(**c) for c in worker["containers"]]


def _held(snapshot: dict, when: str, since: dict | None = None) -> list[str]:
    """Per-request entries the model still holds in ``snapshot`` (every worker), keyed by an id the worker saw
    (after the ``since`` snapshot, when given)."""
    from omnitts.validators.runtime.state import holders_in

    problems = []
    if not snapshot["settled"]:
        problems.append(f"after {when}: the engine did not report every request finished to the worker in time")
    earlier = {rid for w in since["workers"] for rid in w["seen"]} if since else set()
    for worker in snapshot["workers"]:
        ids = {
            rid: f"scheduler id of a request the worker ran ({when})" for rid in worker["seen"] if rid not in earlier
        }
        problems += [f"after {when}: {line}" for line in holders_in(_containers(worker), ids)]
    return problems


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I5_STATE_FREED)
def test_engine_offline_state_freed_in_worker(engine, record):
    """I5 in the engine's worker: no container of the model keeps a request's id once it finished or was aborted."""
    found = _worker(engine)
    seen = sum(len(w["seen"]) for w in found["after_abort"]["workers"])
    aborted = seen - sum(len(w["seen"]) for w in found["after_finish"]["workers"])
    record(
        requests_seen=seen,
        aborted_seen=aborted,
        aborted_mid_request=found["abort"]["mid_request"],
        worker_wall_s=found["wall_s"],
    )
    assert seen, "I5 (worker): the worker saw no request; nothing was checked"
    assert found["abort"]["mid_request"] and aborted, (
        "I5 (worker): the abort scenario's request ended before it was aborted, or never reached the worker"
    )
    finish = _held(found["after_finish"], "finish")
    abort = _held(found["after_abort"], "abort", found["after_finish"])
    problems = finish[:10] + abort[:10]  # both kinds shown, however many finished requests leaked
    assert not problems, "I5 (worker): per-request entries survive the request:\n  " + "\n  ".join(problems)


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I5_NO_GROWTH)
def test_engine_offline_no_growth_in_worker(engine, record):
    """I5 in the engine's worker: the model's containers hold no more after 100 sequential requests than after 1."""
    from omnitts.validators.runtime.state import footprint_of, growth

    found = _worker(engine)["growth"]
    grew = []
    seen = 0
    for base, after in zip(found["base"]["workers"], found["after"]["workers"], strict=True):
        grew += growth(footprint_of(_containers(base)), footprint_of(_containers(after)))
        seen += len(after["seen"]) - len(base["seen"])
    record(requests=found["requests"], seen_between=seen, containers=len(found["after"]["workers"][0]["containers"]))
    assert seen >= found["requests"] - 1, f"I5 (worker): {seen} requests reached the worker between the snapshots"
    assert not grew, (
        f"I5 (worker): model state grows over {found['requests']} sequential requests (after request 1 -> after "
        f"request {found['requests']}):\n  " + "\n  ".join(grew[:10])
    )


@pytest.mark.omnitts_engine("offline")
@pytest.mark.omnitts_check(checkids.I3_HOST_SYNCS)
def test_engine_offline_host_syncs_in_worker(engine, record):
    """I3 in the engine's worker: no host sync in the model's calls during steady-state steps (every scheduled
    request decoding), the harness's budget; the spy (dispatch spy + tensor method wrappers on CPU,
    ``torch.cuda.set_sync_debug_mode`` on CUDA) is armed after warm-up."""
    _judge_syncs(_worker(engine)["syncs"], record, "worker")


def _judge_syncs(reports: list[dict], record, who: str) -> None:
    """I3 from the workers' sync reports (``omnitts_sync_report``): over the harness's budget in a steady-state step
    (every scheduled request decoding) fails, naming the model's lines that synced."""
    from omnitts.validators.runtime.subject import SYNC_BUDGET_PER_REQUEST_STEP as budget

    problems, sites, steady_steps, suppressed = [], {}, 0, set()
    for rep in reports:
        if "error" in rep:
            pytest.fail(f"I3 ({who}): {rep['error']}", pytrace=False)
        steady = rep["steady"]
        steady_steps += len(steady)
        for kind, steps, events in (
            ("dispatch spy", rep["steps"], rep["events"]),
            ("set_sync_debug_mode", rep["debug_steps"], rep["debug_events"]),
        ):
            over = {lab: n for lab, n in steps.items() if lab in steady and n > budget * steady[lab]}
            for e in events:
                if e["suppressed"]:
                    suppressed.add(f"{e['op']} at {e['where']} — {e['suppressed']}")
                elif e["label"] in over:
                    key = f"{e['op']} at {e['where']}"
                    sites[key] = sites.get(key, 0) + 1
            if over:
                problems.append(f"{kind}: {sum(over.values())} host syncs in {len(over)} of {len(steady)} steady steps")
    worst = sorted(sites.items(), key=lambda kv: -kv[1])[:6]
    record(
        steady_steps=steady_steps,
        budget_per_request_step=budget,
        device=reports[0].get("device") if reports else None,
        sites=[site for site, _ in worst],
        suppressed_sites=sorted(suppressed)[:10],
    )
    assert steady_steps, f"I3 ({who}): no steady-state (all-decode) step ran with the spy armed"
    assert not problems, (
        f"I3 ({who}): {'; '.join(problems)} (budget {budget} per request and step). Lines that synced:\n  "
        + "\n  ".join(f"{n}x {site}" for site, n in worst)
    )


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


def _stream_and_leave(server, text: str) -> tuple[int, bool]:
    """Stream ``text`` and disconnect after the first audio delta: (HTTP status, whether a delta came first)."""
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        body = json.dumps({"input": text, "response_format": "pcm", "stream": True})
        conn.request("POST", SPEECH, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        got = b""
        while resp.status == 200 and b"speech.audio.delta" not in got and b"speech.audio.done" not in got:
            line = resp.fp.readline()
            if not line:
                break
            got += line
        return resp.status, b"speech.audio.delta" in got and b"speech.audio.done" not in got
    finally:
        conn.close()  # the client goes away mid-stream


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.I5_STATE_FREED)
def test_engine_server_disconnect_frees_state(engine, record):
    """I5 on the server: a client that disconnects mid-stream leaves no per-request entry in the model. The worker
    is inspected through vLLM's ``POST /collective_rpc`` (dev mode) and omnitts's worker extension."""
    import time

    from omnitts.validators.engine.pytest_options import LONG_TEXT
    from omnitts.validators.runtime.state import holders_in

    server = _server(engine)
    before = {rid for w in server.rpc("omnitts_state") for rid in w["seen"]}
    status, mid_stream = _stream_and_leave(server, LONG_TEXT)
    assert status == 200, f"stream: HTTP {status}"
    assert mid_stream, "I5 (server): no audio delta before the stream ended; the client could not leave mid-stream"
    deadline, settled = time.monotonic() + 30, False
    while True:
        workers = server.rpc("omnitts_state")
        new = {rid for w in workers for rid in w["seen"]} - before
        settled = bool(new) and all(set(w["seen"]) <= set(w["finished"]) for w in workers)
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    held = []
    for worker in workers:
        ids = {rid: "scheduler id of the request whose client left" for rid in new}
        held += holders_in(_containers(worker), ids)
    record(requests_seen=len(new), settled=settled)
    assert new, "I5 (server): the request never reached the worker"
    assert settled, "I5 (server): the engine did not report the left request finished to the worker within 30 s"
    assert not held, "I5 (server): per-request entries survive the client's disconnect:\n  " + "\n  ".join(held)


def _server_state(server, wait: float = 30.0) -> dict:
    """The workers' state once every request they were given has been reported finished to them (offline's
    ``_settled_state``, through the server's ``/collective_rpc``)."""
    import time

    deadline = time.monotonic() + wait
    while True:
        workers = server.rpc("omnitts_state")
        settled = all(set(w["seen"]) <= set(w["finished"]) for w in workers)
        if settled or time.monotonic() > deadline:
            return {"workers": workers, "settled": settled}
        time.sleep(0.25)


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.I3_HOST_SYNCS)
def test_engine_server_host_syncs_in_worker(engine, record):
    """I3 in the served engine's worker: the spy armed after a warm-up request (``/collective_rpc``), then 4
    requests at once through ``/v1/audio/speech``; the offline check's budget and report."""
    from omnitts.validators.engine.pytest_options import TEXTS

    server = _server(engine)
    status, _, body = _speech(server, {"input": TEXTS[0], "response_format": "pcm"})
    assert status == 200, f"warm-up: HTTP {status}: {body[:300]!r}"
    server.rpc("omnitts_sync_arm")
    got: dict[int, int] = {}

    def ask(i: int, text: str) -> None:
        got[i] = _speech(server, {"input": text, "response_format": "pcm"})[0]

    threads = [threading.Thread(target=ask, args=(i, t)) for i, t in enumerate(TEXTS[:4])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    reports = server.rpc("omnitts_sync_report")
    assert all(got.get(i) == 200 for i in range(len(threads))), f"I3 (server): statuses {got}"
    _judge_syncs(reports, record, "server worker")


@pytest.mark.omnitts_engine("server")
@pytest.mark.omnitts_check(checkids.I5_NO_GROWTH)
def test_engine_server_no_growth_in_worker(engine, record):
    """I5 in the served engine's worker: the model's containers hold no more after 100 sequential requests (3 new
    tokens each) than after 1."""
    from omnitts.validators.engine.pytest_options import TEXTS
    from omnitts.validators.runtime.state import footprint_of, growth

    server, n = _server(engine), 100
    statuses = []
    statuses.append(_speech(server, {"input": TEXTS[0], "response_format": "pcm", "max_new_tokens": 3})[0])
    base = _server_state(server)
    for i in range(1, n):
        body = {"input": TEXTS[i % len(TEXTS)], "response_format": "pcm", "max_new_tokens": 3}
        statuses.append(_speech(server, body)[0])
    after = _server_state(server)
    assert statuses.count(200) == n, f"I5 (server): {n - statuses.count(200)} of {n} requests failed: {statuses[:10]}"
    grew, seen = [], 0
    for b, a in zip(base["workers"], after["workers"], strict=True):
        grew += growth(footprint_of(_containers(b)), footprint_of(_containers(a)))
        seen += len(a["seen"]) - len(b["seen"])
    record(requests=n, seen_between=seen, settled=after["settled"])
    assert seen >= n - 1, f"I5 (server worker): {seen} requests reached the worker between the snapshots"
    assert not grew, (
        f"I5 (server worker): model state grows over {n} sequential requests (after request 1 -> after request {n}):"
        "\n  " + "\n  ".join(grew[:10])
    )


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
