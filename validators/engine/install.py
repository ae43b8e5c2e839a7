"""Build (once, cached) the virtual environment in which the engine tier runs vLLM-Omni on a CPU.

``omnitts-engine-env --release 0.30.0`` (or :func:`ensure_engine_env`) creates
``$OMNITTS_CACHE/engine-venv-<release>`` from the release's recipe in ``omnitts.knowledge.engine``: the CPU
vLLM build with its torch, vllm-omni without its dependency list, the pins vllm-omni needs, the few of its
dependencies that its offline and serving paths import, and the neutralised CUDA-only PyPI builds. The build
runs under a cache lock, is checked by importing what the engine imports, and is marked ready only then, so
an interrupted build is redone rather than trusted. omnitts itself is not installed there: the engine tier
puts an overlay on ``PYTHONPATH`` (:func:`overlay`) so that every checkout runs its own code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from omnitts.knowledge.engine import OMNI_PLATFORM_PLUGINS_GROUP, EngineRecipe, NoCpuEngine, recipe
from omnitts.knowledge.releases import CacheSpaceError, cache_lock, cache_root, require_free_space

READY = ".omnitts-engine-ready.json"
REPO = Path(__file__).resolve().parents[2]

# What must import in a ready environment: the offline entry point, the server, the audio stack.
SMOKE = (
    "import torch, torchvision, torchaudio, soundfile, av, transformers, vllm\n"
    "from vllm.platforms import current_platform\n"
    "assert current_platform.is_cpu(), current_platform\n"
    "import vllm_omni.entrypoints.omni, vllm_omni.entrypoints.openai.api_server\n"
    "import importlib.util as u; assert u.find_spec('torchcodec') is None, 'torchcodec still installed'\n"
)


# The python of a ready engine environment made elsewhere (e.g. CUDA vLLM on a GPU machine); nothing is built.
ENGINE_PYTHON_VAR = "OMNITTS_ENGINE_PYTHON"


class EngineEnvError(RuntimeError):
    """The engine environment could not be built; the message says which step failed."""


def venv_dir(release: str) -> Path:
    return cache_root() / f"engine-venv-{release}"


def venv_python(release: str) -> Path:
    return venv_dir(release) / "bin" / "python"


def _run(step: str, cmd: list[str], log) -> None:
    log(f"[omnitts-engine-env] {step}: {' '.join(cmd)}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise EngineEnvError(f"engine env: {step} failed (exit {proc.returncode}):\n{tail}")


def _site_packages(py: Path) -> Path:
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def _guard_fake_ops(site: Path, package: str) -> list[str]:
    """torchvision's CUDA wheel registers fake kernels for its C++ ops at import; with a CPU torch the ops do
    not exist and ``import torchvision`` fails. Register them only when the ops loaded (``_has_ops()``)."""
    meta = site / package / "_meta_registrations.py"
    if not meta.is_file():
        return []
    text = meta.read_text()
    marker = "# omnitts: fake-op registrations guarded"
    if marker in text:
        return [str(meta)]
    lines = text.splitlines(keepends=True)
    out, guarded = [], 0
    for line in lines:
        # `@torch.library.register_fake("torchvision::nms")` and `@register_meta(...)` decorators raise when the
        # operator is missing: make each one a no-op decorator then.
        stripped = line.lstrip()
        if stripped.startswith("@") and ("register_fake" in stripped or "register_meta" in stripped):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}@(lambda f: f) if not _omnitts_has_ops() else {stripped.lstrip('@')}")
            guarded += 1
        else:
            out.append(line)
    header = (
        f"{marker}\ndef _omnitts_has_ops():\n    from torchvision.extension import _has_ops\n    return _has_ops()\n\n"
    )
    # after the module's __future__ import / docstring there are only imports; prepend after them is not
    # needed because the guard imports lazily.
    body = "".join(out)
    if body.startswith("from __future__"):
        first, rest = body.split("\n", 1)
        body = first + "\n" + header + rest
    else:
        body = header + body
    if guarded == 0:
        raise EngineEnvError(f"engine env: found no fake-op registration to guard in {meta}")
    meta.write_text(body)
    return [str(meta)]


def _hide_c_extensions(site: Path, package: str) -> list[str]:
    """torchaudio's CUDA wheel ships C extensions linked against libc10_cuda; without them it runs as pure
    Python (what vLLM-Omni uses of it). Rename them out of the import system's reach."""
    hidden = []
    for so in (site / package).rglob("*.so"):
        target = so.with_name(so.name + ".omnitts-hidden")
        so.rename(target)
        hidden.append(str(target))
    hidden += [str(p) for p in (site / package).rglob("*.so.omnitts-hidden")]
    return sorted(set(hidden))


def _build(rec: EngineRecipe, venv: Path, log) -> dict:
    started = time.monotonic()
    # An unfinished earlier build is resumed (every step below is idempotent), a stale one is rebuilt.
    if venv.exists() and not (venv / "bin" / "python").exists():
        shutil.rmtree(venv)
    if not venv.exists():
        try:
            require_free_space(venv, rec.disk_gib, f"the engine environment of vLLM-Omni {rec.release}")
        except CacheSpaceError as exc:
            raise EngineEnvError(f"engine env: {exc}") from None
        _run("venv", [sys.executable, "-m", "venv", str(venv)], log)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run("vllm (CPU build) and torch", pip + [rec.torch, rec.vllm], log)
    _run("vllm-omni", pip + ["--no-deps", f"vllm-omni=={rec.release}"], log)
    _run("pins vllm-omni needs", pip + list(rec.repins), log)
    _run("vllm-omni's imported dependencies", pip + ["--no-deps", *rec.omni_deps], log)
    site = _site_packages(py)
    neutralised: dict[str, list[str]] = {}
    for name in rec.uninstall:
        _run(f"uninstall {name}", [str(py), "-m", "pip", "uninstall", "--quiet", "-y", name], log)
        neutralised[name] = ["uninstalled"]
    for name in rec.hide_c_extensions:
        neutralised[name] = _hide_c_extensions(site, name)
    for name in rec.guard_fake_ops:
        neutralised[name] = _guard_fake_ops(site, name)
    _run("import check", [str(py), "-c", SMOKE], log)
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout.split()
    return {
        "fingerprint": rec.fingerprint,
        "release": rec.release,
        "seconds": round(time.monotonic() - started),
        "neutralised": neutralised,
        "freeze": frozen,
    }


def _ready(venv: Path, rec: EngineRecipe) -> dict | None:
    marker = venv / READY
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return info if info.get("fingerprint") == rec.fingerprint and (venv / "bin" / "python").exists() else None


def ensure_engine_env(release: str, *, log=None) -> Path:
    """The python of the ready engine environment for ``release``, building it first if needed.

    Idempotent and safe to call from parallel processes (one builds, the others wait on the lock)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    given = os.environ.get(ENGINE_PYTHON_VAR)
    if given:  # an environment made elsewhere (a GPU machine with vLLM carried in): used as it is
        if not Path(given).exists():
            raise EngineEnvError(f"{ENGINE_PYTHON_VAR}={given}: no such python")
        return Path(given)
    try:
        rec = recipe(release)
    except NoCpuEngine as exc:
        raise EngineEnvError(str(exc)) from None
    venv = venv_dir(release)
    if _ready(venv, rec):
        return venv / "bin" / "python"
    with cache_lock(f"engine-venv-{release}"):
        if not _ready(venv, rec):
            if (venv / READY).exists():  # built from an older recipe: start over
                shutil.rmtree(venv)
            info = _build(rec, venv, log)
            (venv / READY).write_text(json.dumps(info, indent=1))
            log(f"[omnitts-engine-env] ready in {info['seconds']} s: {venv}")
    return venv / "bin" / "python"


def entry_points_txt(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The ``entry_points.txt`` of omnitts's vLLM-Omni plugins, read from pyproject.toml (one source)."""
    table = tomllib.loads(pyproject.read_text())["project"]["entry-points"][OMNI_PLATFORM_PLUGINS_GROUP]
    body = "".join(f"{name} = {target}\n" for name, target in table.items())
    return f"[{OMNI_PLATFORM_PLUGINS_GROUP}]\n{body}"


def overlay(dest: Path | None = None) -> Path:
    """A folder to put on the engine's ``PYTHONPATH``: this checkout's ``omnitts`` packages (links to the
    repo's folders, as setup.py maps them) and a dist-info that declares omnitts's platform plugin entry
    point, so vLLM-Omni in the engine environment finds the plugin of the code under test."""
    dest = Path(dest or tempfile.mkdtemp(prefix="omnitts-engine-overlay-"))
    pkg = dest / "omnitts"
    pkg.mkdir(parents=True, exist_ok=True)
    for root in ("knowledge", "scaffold", "validators", "reference_models", "templates"):
        link = pkg / root
        if not link.exists():
            link.symlink_to(REPO / root, target_is_directory=True)
    dist = dest / "omnitts_engine_plugins-0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: omnitts-engine-plugins\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(entry_points_txt())
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-engine-env", description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="0.30.0", help="vLLM-Omni release (x.y.z); default 0.30.0")
    args = parser.parse_args(argv)
    try:
        py = ensure_engine_env(args.release)
    except EngineEnvError as exc:
        print(f"omnitts-engine-env: {exc}", file=sys.stderr)
        return 1
    print(py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
