"""The engine tier's ``--checkpoint PATH`` and ``--dummy-weights`` (issue 10 item 3), without an engine: the
command line's errors (one line, exit 4, no traceback), the model directory the engine tier then uses, and the
engine arguments produced (the offline ``Omni(...)`` keywords and the ``vllm-omni serve`` command line). The real
engine on such a directory: tests/engine/test_checkpoint_engine.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.validators.engine import offline, pytest_options, runtime, session

REPO = Path(__file__).resolve().parents[2]


def _checkpoint(tmp_path: Path, *, config=True, weights=True) -> Path:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    if config:
        (ckpt / "config.json").write_text(json.dumps({"architectures": ["X"], "sample_rate": 16000}))
    (ckpt / "tokenizer.json").write_text("{}")
    if weights:
        (ckpt / "model.safetensors").write_bytes(b"\0" * 8)
    return ckpt


# -- the command line's errors -------------------------------------------------------------------------------------


def test_checkpoint_problem_cases(tmp_path):
    full = _checkpoint(tmp_path)
    (tmp_path / "nocfg").mkdir()
    no_weights = tmp_path / "noweights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    problem = pytest_options.checkpoint_problem
    assert problem("offline", None, False, ["m"]) is None
    assert problem("offline", str(full), False, ["m"]) is None
    assert problem("server", str(full), True, ["m"]) is None
    assert problem("offline", None, True, ["m"]) is None  # the built tiny directory with dummy weights
    assert problem("offline", str(no_weights), True, ["m"]) is None
    missing = tmp_path / "nope"
    assert problem("offline", str(missing), False, ["m"]) == f"--checkpoint {missing}: no such directory"
    assert "no config.json" in problem("offline", str(tmp_path / "nocfg"), True, ["m"])
    msg = problem("offline", str(no_weights), False, ["m"])
    assert "no *.safetensors" in msg and "pass --dummy-weights" in msg
    assert "exactly one --model" in problem("offline", str(full), False, ["a,b"])
    assert "exactly one --model" in problem("offline", str(full), False, ["all"])
    assert "exactly one --model" in problem("offline", str(full), False, [])
    assert problem("harness", str(full), False, ["m"]).startswith("--checkpoint applies to the engine tier")
    assert problem("harness", None, True, ["m"]).startswith("--dummy-weights applies to the engine tier")


def _session(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "validators"), "-p", "no:cacheprovider", "-q", *args]
    cmd += ["--omnitts-out", str(tmp_path / "out"), "-o", "addopts=--import-mode=importlib"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize(
    "case, flags, expected",
    [
        ("missing dir", ["--checkpoint", "{tmp}/nope"], "--checkpoint {tmp}/nope: no such directory"),
        ("no config.json", ["--omnitts-checkpoint", "{tmp}/nocfg"], "no config.json in it"),
        ("no weights", ["--checkpoint", "{tmp}/noweights"], "pass --dummy-weights"),
    ],
)
def test_a_bad_checkpoint_is_a_one_line_usage_error(tmp_path, case, flags, expected):
    (tmp_path / "nocfg").mkdir()
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "config.json").write_text("{}")
    flags = [f.format(tmp=tmp_path) for f in flags]
    proc = _session(tmp_path, "--omni-root", str(tmp_path), "--model", "m", "--engine", "offline", *flags)
    assert proc.returncode == 4, (case, proc.stdout[-1500:], proc.stderr[-1500:])
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and expected.format(tmp=tmp_path) in errors[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


# -- the model directory and the engine arguments ------------------------------------------------------------------


@pytest.fixture
def no_engine_env(monkeypatch, tmp_path):
    """EngineEnv.prepare without the engine environment; building a model directory is an error here."""

    def prepare(tree, release, work, placement=None, *, python=None):
        placement = placement or runtime.StagePlacement()
        return runtime.EngineEnv(release, Path("/bin/true"), Path(tree), tmp_path, placement)

    def no_build(self, model, out, **kw):
        raise AssertionError("the model directory was built although --checkpoint was given")

    monkeypatch.setattr(runtime.EngineEnv, "prepare", classmethod(lambda cls, *a, **k: prepare(*a, **k)))
    monkeypatch.setattr(runtime.EngineEnv, "model_dir", no_build)


def test_the_engine_uses_the_checkpoint_and_dummy_weights(tmp_path, monkeypatch, no_engine_env):
    ckpt = _checkpoint(tmp_path, weights=False)
    model = session.EngineSession(tmp_path, "m", "0.30.0", tmp_path / "work", 60, checkpoint=ckpt, dummy_weights=True)
    assert model.model_dir == ckpt.resolve() and model.sample_rate == 16000
    plans = []
    monkeypatch.setattr(model.env, "offline", lambda model_dir, plan, out, timeout: plans.append((model_dir, plan)))
    model.offline()
    model_dir, plan = plans[0]
    assert model_dir == ckpt.resolve() and plan["load_format"] == "dummy" and "deploy_config" not in plan
    assert offline.omni_kwargs(plan) == {
        "worker_extension_cls": session.WORKER_EXTENSION,
        "load_format": "dummy",
    }
    # without --dummy-weights: vLLM's default loader (no load_format keyword at all)
    plain = session.EngineSession(tmp_path, "m", "0.30.0", tmp_path / "work2", 60, checkpoint=ckpt)
    assert plain.load_format is None and session.engine_kwargs(plain.load_format, plain.model_dir) == {}


def test_the_offline_engine_run_leaves_wavs_in_the_run_folder(tmp_path, monkeypatch, no_engine_env):
    """Issue 20: a passing engine run wrote no WAVs. The offline run's observed audio becomes wav/<model>/... WAVs."""
    import numpy as np

    from omnitts.validators.observations.audio import RequestAudio
    from omnitts.validators.observations.engine import OfflineRun, Scenario
    from omnitts.validators.runtime.audio import read_wav

    run = tmp_path / "harness-20260101-000000"
    model = session.EngineSession(tmp_path, "m", "0.30.0", run / "engine" / "m", 60, checkpoint=_checkpoint(tmp_path),
                                  wav_root=run)  # fmt: skip

    def fake_offline(model_dir, plan, out, timeout):
        said = RequestAudio("'a'", np.full(800, 0.25, np.float32), 16000, text="a")
        return OfflineRun(scenarios=(Scenario("solo", (said,)),))

    monkeypatch.setattr(model.env, "offline", fake_offline)
    model.offline()
    wavs = sorted((run / "wav").rglob("*.wav"))
    assert [p.relative_to(run).as_posix() for p in wavs] == ["wav/m/engine_offline_solo/0.wav"]
    data, sr = read_wav(wavs[0])
    assert sr == 16000 and data.shape == (800,) and abs(float(data[0]) - 0.25) < 1e-3


def test_a_directorys_own_deploy_config_goes_to_the_engine(tmp_path):
    ckpt = _checkpoint(tmp_path)
    (ckpt / session.DEPLOY_FILE).write_text("{}")
    found = session.engine_kwargs("dummy", ckpt)
    assert found == {"load_format": "dummy", "deploy_config": str(ckpt / session.DEPLOY_FILE)}
    assert offline.omni_kwargs({"texts": ["a"], **found}) == found
    assert runtime.serve_args(found) == ["--load-format", "dummy", "--deploy-config", str(ckpt / session.DEPLOY_FILE)]
    with pytest.raises(ValueError, match="no serve flag"):
        runtime.serve_args({"dtype": "float32"})


def test_the_serve_command_carries_load_format(tmp_path):
    env = runtime.EngineEnv("0.30.0", Path("/bin/true"), tmp_path, tmp_path)
    ckpt = _checkpoint(tmp_path, weights=False)
    server = runtime.Server(
        env, ckpt, tmp_path / "server.log", worker_extension="a.B", engine_kwargs=session.engine_kwargs("dummy", ckpt)
    )
    cmd = server.command()
    assert cmd[cmd.index("serve") + 1] == str(ckpt)
    assert cmd[cmd.index("--load-format") + 1] == "dummy"
    assert cmd[-2:] == ["--worker-extension-cls", "a.B"]
    bare = runtime.Server(env, ckpt, tmp_path / "server.log").command()
    assert "--load-format" not in bare and "--deploy-config" not in bare


def test_request_info_goes_into_every_offline_request():
    assert pytest_options.request_info_problem(None) is None
    assert pytest_options.request_info_problem('{"speaker": "tiny"}') is None
    assert pytest_options.request_info_problem("[1]") == "--omnitts-request-info: must be a JSON object"
    assert pytest_options.request_info_problem("{speaker").startswith("--omnitts-request-info: not JSON (")
    plain = offline._request("Hi.")
    assert plain == {"prompt": "Hi.", "additional_information": {"text": ["Hi."]}}
    got = offline._with_info(plain, {"speaker": "tiny", "max_new_tokens": 24, "task_type": ["CustomVoice"]})
    assert got == {
        "prompt": "Hi.",
        "additional_information": {
            "text": ["Hi."],
            "speaker": ["tiny"],
            "max_new_tokens": [24],
            "task_type": ["CustomVoice"],
        },
    }
    assert plain == {"prompt": "Hi.", "additional_information": {"text": ["Hi."]}}  # not changed in place


def test_request_info_reaches_the_offline_plan(tmp_path, monkeypatch, no_engine_env):
    ckpt = _checkpoint(tmp_path)
    model = session.EngineSession(
        tmp_path, "m", "0.30.0", tmp_path / "w", 60, checkpoint=ckpt, request_info={"speaker": "x"}
    )
    plans = []
    monkeypatch.setattr(model.env, "offline", lambda model_dir, plan, out, timeout: plans.append(plan))
    model.offline()
    assert plans[0]["request_info"] == {"speaker": "x"} and "load_format" not in plans[0]
