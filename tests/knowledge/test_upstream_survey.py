"""The upstream-model survey lives in the knowledge layer; the engine tier's builders read it from there."""

from __future__ import annotations

import re

from omnitts.knowledge import upstream
from omnitts.validators.engine.upstream import BUILDERS


def test_every_builder_is_a_model_the_survey_calls_buildable():
    for model in BUILDERS:
        assert upstream.feasibility("0.30.0", model).startswith("buildable"), model


def test_extra_dependencies_are_exact_pins():
    for release, models in upstream.EXTRA_DEPS.items():
        for model, pins in models.items():
            exact = [re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", pin) for pin in pins]
            assert pins and all(exact), (release, model)


def test_unknown_release_or_model_is_said_not_guessed():
    assert upstream.feasibility("0.28.0", "qwen3_tts") == "not surveyed for vLLM-Omni 0.28.0"
    assert upstream.extra_deps("0.28.0", "ming_tts") == ()
    assert upstream.extra_deps("0.30.0", "qwen3_tts") == ()
    assert upstream.extra_deps("0.30.0", "ming_tts")[0].startswith("x-transformers==")
