"""The one audio comparator names replay, truncation and crosstalk."""

from __future__ import annotations

import numpy as np

from omnitts.validators.verdicts.compare import compare, crosstalk, detect_replay, same_audio

REF = np.sin(np.arange(400.0, dtype=np.float32) * 0.37).astype(np.float32)


def chunks(x, n=50):
    return [x[i : i + n] for i in range(0, len(x), n)]


def test_equal_and_exact():
    c = compare(REF.copy(), REF)
    assert c and c.exact


def test_replay_named():
    got = np.concatenate([REF[:200], REF[100:200], REF[200:]])
    c = compare(got, REF, deltas=chunks(got))
    assert not c and c.verdict.startswith("REPLAY") and "step 4" in c.verdict


def test_truncation_named():
    got = np.concatenate([REF[:100], REF[150:]])
    c = compare(got, REF, deltas=chunks(got))
    assert not c and c.verdict.startswith("TRUNCATION") and "100..150" in c.verdict


def test_truncation_at_end():
    c = compare(REF[:300], REF)
    assert c.verdict.startswith("TRUNCATION") and "100 missing" in c.verdict


def test_cumulative_deltas_detected():
    deltas = [REF[: 50 * (i + 1)] for i in range(6)]
    assert detect_replay(deltas)
    assert detect_replay(chunks(REF)) is None
    assert detect_replay([REF[:50]] * 6) is None  # equal-size identical chunks are not a replay


def test_crosstalk_names_the_source():
    other = np.cos(np.arange(400.0) * 0.11).astype(np.float32)
    got = np.concatenate([REF[:100], other[100:150], REF[150:]])
    msg = crosstalk(got, REF, {"a": REF, "b": other}, "a", chunks(got), 1e-5, 1e-6)
    assert "received b" in msg and "step 2" in msg


def test_same_audio_of_distinct_texts_is_named():
    other = np.cos(np.arange(400.0) * 0.11).astype(np.float32)
    assert same_audio({"'a'": REF, "'b'": REF + 1e-5, "'c'": other}) == [
        "'a' and 'b' give the same audio (400 samples)"
    ]
