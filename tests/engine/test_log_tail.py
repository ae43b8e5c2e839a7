"""An engine failure's message carries the engine's own root-cause traceback, not only the log's last lines."""

from __future__ import annotations

from omnitts.validators.engine.runtime import _tail

ROOT = [
    "INFO 12-02 01:16:05 [core.py:90] starting",
    "(EngineCore pid=7) ERROR 12-02 01:16:10 [core.py:1] Traceback (most recent call last):",
    '(EngineCore pid=7) ERROR 12-02 01:16:10 [core.py:1]   File "/x/tiny_native_ar.py", line 3, in forward',
    "(EngineCore pid=7) ERROR 12-02 01:16:10 [core.py:1]     codes = state[rid]",
    "(EngineCore pid=7) ERROR 12-02 01:16:10 [core.py:1] KeyError: 'req-0'",
]
NOISE = [f"INFO 12-02 01:16:11 [utils.py:{i}] shutting down" for i in range(40)]
FRONT = [
    "ERROR 12-02 01:16:11 [omni.py:99] Traceback (most recent call last):",
    "ERROR 12-02 01:16:11 [omni.py:99] OmniEngineDeadError: EngineCore encountered an issue. See stack trace (above)",
]


def test_the_root_cause_above_the_tail_is_kept():
    message = _tail("\n".join(ROOT + NOISE + FRONT))
    assert "KeyError: 'req-0'" in message and "codes = state[rid]" in message
    assert message.index("KeyError") < message.index("OmniEngineDeadError")
    assert "[utils.py:5]" not in message  # the middle of the log stays out


def test_a_log_without_a_traceback_above_the_tail_is_only_its_tail():
    text = "\n".join(NOISE + FRONT)
    assert _tail(text) == "\n".join((NOISE + FRONT)[-25:])
    assert _tail("a\nb") == "a\nb"


def test_a_traceback_logged_across_a_second_boundary_keeps_its_exception_line():
    root = [line.replace("01:16:10", "01:16:11") if "line 3" in line or "KeyError" in line else line for line in ROOT]
    root = [line.replace("01:16:10", "01:16:09") if "Traceback" in line else line for line in root]
    message = _tail("\n".join(root + NOISE + FRONT))
    assert "KeyError: 'req-0'" in message and "codes = state[rid]" in message
    assert message.index("KeyError") < message.index("OmniEngineDeadError")
