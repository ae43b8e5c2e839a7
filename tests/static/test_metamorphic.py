"""benchmarks/metamorphic.py's rewrites preserve what the code computes: each rewrite of a small program
around a marked span runs and returns what the original returns, and the span is found again."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from metamorphic import ALL, Variant, variant, variants  # noqa: E402

PROGRAM = textwrap.dedent(
    """
    class Model:
        def __init__(self):
            self._state = {}
            self._scale = 3

        def forward(self, infos, **kwargs):
            outs = []
            total = 0
            for i, info in enumerate(infos):
                codes = info["codes"]
                key = info.get("request_id", "x")
                self._state[key] = {"n": len(codes)}
                value = sum(codes) * self._scale + self._state[key]["n"]
                total += value
                outs.append(value)
            if not outs:
                return None
            return outs, total, dict(self._state)


    def main():
        m = Model()
        return m.forward([{"codes": [1, 2], "request_id": "a"}, {"codes": [5], "request_id": "b"}], extra=1)
    """
)
SPANS = [(13, 13), (14, 14), (15, 16), (19, 19)]

CONSUMER = textwrap.dedent(
    """
    import math


    def summarize(outputs, scale=2):
        results = []
        for out in outputs:
            mm = out["multimodal_output"]
            audio = mm.get("audio") if mm.get("audio") is not None else mm.get("model_outputs")
            if isinstance(audio, list):
                audio = [x for chunk in audio for x in chunk]
            peak = max(abs(x) for x in audio) if audio else 0
            n = 0
            while n < len(audio):
                n += 1
            results.append((round(math.sqrt(peak) * scale, 3), n, len(mm)))
        best = max(r[0] for r in results) if results else None
        return results, best


    def main():
        outs = [{"multimodal_output": {"audio": [[1, -4], [9]]}}, {"multimodal_output": {"model_outputs": [[2, 3]]}}]
        return summarize(outs)
    """
)
CONSUMER_SPANS = [(9, 9), (10, 11), (12, 12), (15, 15), (16, 16), (17, 17)]


def _run(text: str):
    ns: dict = {}
    exec(compile(text, "<rewritten>", "exec"), ns)  # noqa: S102 - our own test program
    return ns["main"]()


@pytest.mark.parametrize("span", SPANS, ids=[f"{a}-{b}" for a, b in SPANS])
def test_every_rewrite_computes_the_same(span):
    expected = _run(PROGRAM)
    vs = variants(PROGRAM, "vllm_omni/model_executor/models/demo/m.py", span, consumer=False)
    assert len(vs) >= 5, [v.transform for v in vs]
    for v in vs:
        assert isinstance(v, Variant) and v.text != PROGRAM or v.transform == "move"
        assert _run(v.text) == expected, v.transform
        lines = v.text.split("\n")
        assert v.lines and all(1 <= a <= b <= len(lines) for a, b in v.lines), v.transform


@pytest.mark.parametrize("span", CONSUMER_SPANS, ids=[f"{a}-{b}" for a, b in CONSUMER_SPANS])
def test_every_rewrite_of_a_consumer_computes_the_same(span):
    expected = _run(CONSUMER)
    vs = variants(CONSUMER, "examples/offline_inference/text_to_speech/demo/end2end.py", span, consumer=True)
    assert len(vs) >= 5, [v.transform for v in vs]
    for v in vs:
        assert _run(v.text) == expected, v.transform


def test_a_rewrite_that_does_not_apply_is_none():
    assert variant(PROGRAM, "x.py", (1, 1), "loop-index", consumer=False) is None
    assert variant(PROGRAM, "vllm_omni/m.py", (13, 13), "move", consumer=False) is None
    moved = variant(PROGRAM, "examples/offline_inference/text_to_speech/demo/end2end.py", (13, 13), "move", True)
    assert moved is not None and moved.path.startswith("tests/")


def test_the_rewrites_named_in_the_benchmark():
    assert {"rename", "extract", "dict-param", "closure", "function", "alias", "temp", "loop-index",
            "loop-while", "move", "import-form"} == set(ALL)  # fmt: skip


def test_rename_leaves_no_old_local_name():
    v = variant(PROGRAM, "m.py", (13, 13), "rename", consumer=False)
    body = v.text.split("def main")[0]
    assert "codes" not in body.replace('"codes"', "") and "self._state" not in body
    assert _run(v.text) == _run(PROGRAM)
