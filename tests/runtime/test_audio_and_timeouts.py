"""WAV output with soundfile and with the stdlib fallback; deadlines interrupt hangs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import traceback

import numpy as np
import pytest
import torch

from omnitts.validators.runtime import audio
from omnitts.validators.runtime.timeouts import CheckTimeout, deadline


@pytest.mark.parametrize("backend", ["soundfile", "wave"])
def test_wav_roundtrip(tmp_path, monkeypatch, backend):
    if backend == "wave":
        monkeypatch.setattr(audio, "_sf", None)
    elif audio._sf is None:
        pytest.skip("soundfile not installed")
    wave = torch.sin(torch.arange(1600.0) * 0.05) * 0.5
    path = audio.write_wav(audio.wav_path(tmp_path, "m@bug", "i4 x", "req-0"), wave, 16000)
    assert path.is_file() and path.name == "req-0.wav" and "m@bug" in str(path)
    data, sr = audio.read_wav(path)
    assert sr == 16000 and data.shape == (1600,)
    assert np.allclose(data, wave.numpy(), atol=1e-4 if backend == "wave" else 1e-7)


def test_wav_empty_and_nan(tmp_path):
    audio.write_wav(tmp_path / "e.wav", torch.zeros(0), 16000)
    audio.write_wav(tmp_path / "n.wav", torch.tensor([float("nan"), 2.0]), 0)
    assert (tmp_path / "e.wav").is_file() and (tmp_path / "n.wav").is_file()


def test_deadline_interrupts_a_spin():
    t = time.time()
    with pytest.raises(CheckTimeout):
        with deadline(0.3, "spin"):
            while True:
                pass
    assert time.time() - t < 3


def test_deadline_not_swallowed_by_except_exception():
    with pytest.raises(CheckTimeout):
        with deadline(0.3, "spin"):
            while True:
                try:
                    time.sleep(0.01)
                except Exception:  # noqa: BLE001 - a model's broad except must not eat the timeout
                    pass


def test_deadline_quiet_when_fast():
    with deadline(1.0, "fast"):
        time.sleep(0.01)
    time.sleep(1.2)  # nothing fires afterwards


def test_deadline_interrupts_a_blocking_sleep_with_its_stack():
    t = time.time()
    with pytest.raises(CheckTimeout) as info:
        with deadline(0.3, "sleep", grace=0.5):
            time.sleep(1e6)
    assert time.time() - t < 3
    assert "time.sleep(1e6)" in info.value.stack  # the stuck call, taken while it was stuck
    assert "time.sleep(1e6)" in "".join(traceback.format_tb(info.value.__traceback__))


def test_deadline_hands_foreign_alarms_to_the_previous_handler():
    seen = []
    previous = signal.signal(signal.SIGALRM, lambda *_: seen.append("alarm"))
    try:
        with deadline(5.0, "quiet"):
            signal.setitimer(signal.ITIMER_REAL, 0.05)  # e.g. pytest-timeout's own alarm
            time.sleep(0.3)
        assert seen == ["alarm"]
        assert signal.getsignal(signal.SIGALRM) is not None and signal.getsignal(signal.SIGALRM) != signal.SIG_DFL
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_last_resort_ends_a_process_that_cannot_be_interrupted():
    """Off the main thread a blocking call gets no signal: faulthandler prints the stacks and ends the process."""
    code = (
        "import threading, time\n"
        "from omnitts.validators.runtime.timeouts import deadline\n"
        "def stuck_in_c():\n"
        "    with deadline(0.3, 'thread', grace=0.2, kill_after=0.5):\n"
        "        time.sleep(1e6)\n"
        "t = threading.Thread(target=stuck_in_c); t.start(); t.join()\n"
    )
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert time.time() - t0 < 30
    assert proc.returncode != 0 and "stuck_in_c" in proc.stderr and "Timeout" in proc.stderr, proc.stderr


def test_the_last_resort_writes_the_stacks_where_the_results_can_read_them(tmp_path):
    """pytest captures stderr and loses it with the process: the stacks go to the process's file instead."""
    stacks = tmp_path / "stacks" / "main.txt"
    code = (
        "import threading, time\n"
        "from omnitts.validators.runtime.timeouts import deadline, dump_stacks_to\n"
        f"dump_stacks_to({str(stacks)!r})\n"
        "def stuck_in_c():\n"
        "    with deadline(0.3, 'thread', grace=0.2, kill_after=0.5):\n"
        "        time.sleep(1e6)\n"
        "t = threading.Thread(target=stuck_in_c); t.start(); t.join()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "stuck_in_c" not in proc.stderr
    text = stacks.read_text()
    assert text.startswith("Timeout (") and "in stuck_in_c" in text
