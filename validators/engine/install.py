"""Which Python runs the tree's engine, and the CPU engine environment built (once, cached) where none exists.

:func:`engine_python` decides, for the engine tiers, ``omnitts-engine-env`` and ``omnitts-serve`` alike: a Python
named by ``--engine-python`` / ``$OMNITTS_ENGINE_PYTHON``, else the current one when it imports vLLM and the tree's
vLLM-Omni (the contributor's environment, e.g. CUDA vLLM with an editable checkout as ``--omni-root``), used as it
is; on a machine with an accelerator nothing is ever built (one line says what to do instead); elsewhere the CPU
engine environment below.

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
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from omnitts.knowledge.engine import OMNI_PLATFORM_PLUGINS_GROUP, EngineRecipe, NoCpuEngine, recipe
from omnitts.knowledge.pairing import pairing, vllm_requirement
from omnitts.knowledge.releases import cache_root
from omnitts.validators.engine.venvs import CachedVenv, hide_c_extensions, site_packages

READY = ".omnitts-engine-ready.json"
TOOLS_STEP = "tools (the tree's tests, the harness tier)"
REPO = Path(__file__).resolve().parents[2]

# What must import in a ready environment: the offline entry point, the server, the audio stack.
SMOKE = (
    "import torch, torchvision, torchaudio, soundfile, av, transformers, vllm\n"
    "from vllm.platforms import current_platform\n"
    "assert current_platform.is_cpu(), current_platform\n"
    "import vllm_omni.entrypoints.omni, vllm_omni.entrypoints.openai.api_server\n"
    "import importlib.util as u; assert u.find_spec('torchcodec') is None, 'torchcodec still installed'\n"
)


# The python of an engine environment made elsewhere (e.g. CUDA vLLM on a GPU machine), used as it is.
ENGINE_PYTHON_VAR = "OMNITTS_ENGINE_PYTHON"
ENGINE_PYTHON_OPTION = "--engine-python"

# What an environment must import to run a tree's engine: vLLM, and vLLM-Omni from the tree (PYTHONPATH=tree, as
# the engine runs). One JSON line, also when an import fails.
PROBE = (
    "import json, sys\n"
    "out = {'python': sys.executable}\n"
    "try:\n"
    "    import vllm\n"
    "    out['vllm'] = getattr(vllm, '__version__', '?')\n"
    "    import vllm_omni\n"
    "    out['vllm_omni'] = getattr(vllm_omni, '__version__', '?')\n"
    "    out['vllm_omni_file'] = vllm_omni.__file__\n"
    "except BaseException as exc:\n"
    "    out['error'] = f'{type(exc).__name__}: {exc}'.splitlines()[0]\n"
    "print('omnitts-probe ' + json.dumps(out))\n"
)


class EngineEnvError(RuntimeError):
    """No engine environment: the one-line message says which step failed or what to do instead."""


def venv_dir(release: str) -> Path:
    return cache_root() / f"engine-venv-{release}"


def venv_python(release: str) -> Path:
    return venv_dir(release) / "bin" / "python"


def _venv(release: str, rec: EngineRecipe) -> CachedVenv:
    return CachedVenv(
        venv_dir(release),
        READY,
        rec.fingerprint,
        tag="[omnitts-engine-env]",
        what="engine env",
        error=EngineEnvError,
    )


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


def _build(rec: EngineRecipe, cv: CachedVenv, log) -> dict:
    started = time.monotonic()
    cv.create(rec.disk_gib, f"the engine environment of vLLM-Omni {rec.release}", log)
    py, pip = cv.python, cv.pip
    cv.run("vllm (CPU build) and torch", pip + [rec.torch, rec.vllm], log)
    cv.run("vllm-omni", pip + ["--no-deps", f"vllm-omni=={rec.release}"], log)
    cv.run("pins vllm-omni needs", pip + list(rec.repins), log)
    cv.run("vllm-omni's imported dependencies", pip + ["--no-deps", *rec.omni_deps], log)
    site = site_packages(py)
    neutralised: dict[str, list[str]] = {}
    for name in rec.uninstall:
        cv.run(f"uninstall {name}", [str(py), "-m", "pip", "uninstall", "--quiet", "-y", name], log)
        neutralised[name] = ["uninstalled"]
    for name in rec.hide_c_extensions:
        neutralised[name] = hide_c_extensions(site, name)
    for name in rec.guard_fake_ops:
        neutralised[name] = _guard_fake_ops(site, name)
    cv.run("import check", [str(py), "-c", SMOKE], log)
    cv.run(TOOLS_STEP, pip + list(rec.tools), log)
    return {
        "fingerprint": rec.fingerprint,
        "tools": list(rec.tools),
        "release": rec.release,
        "seconds": round(time.monotonic() - started),
        "neutralised": neutralised,
        "freeze": cv.freeze(),
    }


def _ensure_tools(cv: CachedVenv, rec: EngineRecipe, info: dict, log) -> None:
    """Install the recipe's tools into a ready environment that lacks them (one built before they were part of
    it); the caller holds the cache lock."""
    if info.get("tools") == list(rec.tools):
        return
    cv.run(TOOLS_STEP, cv.pip + list(rec.tools), log)
    (cv.path / READY).write_text(json.dumps({**info, "tools": list(rec.tools)}, indent=1))


def ensure_engine_env(release: str, *, log=None) -> Path:
    """The python of the ready CPU engine environment for ``release``, building it first if needed.

    Idempotent and safe to call from parallel processes (one builds, the others wait on the lock). Only
    :func:`engine_python` decides whether this environment is the one to use."""
    log = log or _stderr
    try:
        rec = recipe(release)
    except NoCpuEngine as exc:
        raise EngineEnvError(str(exc)) from None
    cv = _venv(release, rec)
    info = cv.ready()
    if info is None or info.get("tools") != list(rec.tools):
        cv.ensure(
            lambda: _build(rec, cv, log),
            log,
            "ready",
            then=lambda info: _ensure_tools(cv, rec, info, log),
        )
    return cv.python


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def accelerator() -> str | None:
    """The accelerator this machine has (a GPU that vLLM would use), None on a CPU-only machine. Read without
    importing vLLM or initialising a device: ``nvidia-smi -L``, the device nodes of the drivers vLLM-Omni supports,
    and torch's view where the process has already imported torch."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            listed = ""
        gpus = [line.strip() for line in listed.splitlines() if line.startswith("GPU ")]
        if gpus:
            return gpus[0].split(" (UUID", 1)[0]
    for node, name in (
        ("/dev/nvidiactl", "an NVIDIA GPU"),
        ("/dev/kfd", "an AMD GPU (ROCm)"),
        ("/dev/davinci0", "an Ascend NPU"),
    ):
        if Path(node).exists():
            return f"{name} ({node})"
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return f"a CUDA device ({torch.cuda.get_device_name(0)})"
    except Exception:  # a broken driver is no accelerator to run on
        pass
    return None


@dataclass(frozen=True)
class Probe:
    """What one Python imports of the engine: vLLM's version and vLLM-Omni's, and where vLLM-Omni came from."""

    python: Path
    vllm: str | None = None
    vllm_omni: str | None = None
    vllm_omni_file: str | None = None
    error: str | None = None

    def problem(self, tree: Path | None) -> str | None:
        """Why this Python cannot run the tree's engine (one clause), or None."""
        if self.error:
            return self.error
        if tree is not None and self.vllm_omni_file:
            where = Path(self.vllm_omni_file).resolve()
            if not where.is_relative_to(Path(tree).resolve()):
                return f"its vllm_omni comes from {where.parent}, not from {tree}"
        return None


def probe(python: Path, tree: Path | None = None, *, timeout: float = 300) -> Probe:
    """Import vLLM and vLLM-Omni in ``python`` the way the engine will (the tree first on ``PYTHONPATH``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}
    if tree is not None:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    try:
        proc = subprocess.run(
            [str(python), "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=tempfile.gettempdir(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(Path(python), error=f"{type(exc).__name__}: {exc}")
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith("omnitts-probe ")), None)
    if line is None:
        tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Probe(Path(python), error=f"it did not run the import probe ({tail})")
    found = json.loads(line.split(" ", 1)[1])
    return Probe(
        Path(python),
        vllm=found.get("vllm"),
        vllm_omni=found.get("vllm_omni"),
        vllm_omni_file=found.get("vllm_omni_file"),
        error=found.get("error"),
    )


def _describe(found: Probe, release: str, tree: Path | None) -> str:
    where = f" from {tree}" if tree is not None else ""
    line = f"engine python: {found.python} (vllm {found.vllm}, vllm_omni {found.vllm_omni}{where}), used as it is"
    wanted = pairing(release).vllm
    if found.vllm and not found.vllm.startswith(wanted):
        line += f"; note: vLLM-Omni {release} is built against vllm {wanted}"
    return line


def _vllm_here() -> bool:
    """Whether this process could import vllm (asked without importing it: that takes seconds)."""
    return importlib.util.find_spec("vllm") is not None


def engine_python(release: str, tree: Path | None = None, *, given: str | Path | None = None, log=None) -> Path:
    """The Python that runs ``tree``'s engine of vLLM-Omni ``release``; the one place that decides it.

    1. ``given`` (``--engine-python``) or ``$OMNITTS_ENGINE_PYTHON``: used as it is once it imports vLLM and the
       tree's vLLM-Omni, else an error (it was asked for);
    2. the current Python, when it does (the contributor's environment: their vLLM, their editable vLLM-Omni);
    3. on a machine with an accelerator: an error that says what to do; the CPU environment is never built there;
    4. the cached CPU engine environment of ``release`` (:func:`ensure_engine_env`), built on first use.
    """
    log = log or _stderr
    tree = Path(tree).resolve() if tree is not None else None
    named = str(given) if given else os.environ.get(ENGINE_PYTHON_VAR)
    if named:
        source = f"{ENGINE_PYTHON_OPTION} {named}" if given else f"{ENGINE_PYTHON_VAR}={named}"
        python = Path(shutil.which(named) or named)
        if not python.exists():
            raise EngineEnvError(f"{source}: no such python")
        found = probe(python, tree)
        why = found.problem(tree)
        if why:
            raise EngineEnvError(f"{source} cannot run the engine of {tree or 'vLLM-Omni'}: {why}")
        log(f"[omnitts-engine-env] {_describe(found, release, tree)}")
        return python
    here = Path(sys.executable)
    why = "vllm is not installed in it"
    if _vllm_here():
        found = probe(here, tree)
        why = found.problem(tree)
        if why is None:
            log(f"[omnitts-engine-env] {_describe(found, release, tree)}")
            return here
    device = accelerator()
    if device is not None:
        raise EngineEnvError(
            f"this machine has {device}, so omnitts does not build its CPU engine environment; {here} cannot run the "
            f"engine ({why}): install {vllm_requirement(release)} and the tree "
            f"(pip install -e {tree or 'YOUR_VLLM_OMNI_CHECKOUT'}) into this Python, or name a Python that has "
            f"them with {ENGINE_PYTHON_OPTION} PATH / {ENGINE_PYTHON_VAR}"
        )
    if why != "vllm is not installed in it":  # it has a vLLM, but not one that runs this tree's engine: say so
        log(f"[omnitts-engine-env] {here} does not run the engine ({why}): the CPU engine environment runs it")
    return ensure_engine_env(release, log=log)


def entry_points_txt(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The ``entry_points.txt`` of omnitts's vLLM-Omni plugins, read from pyproject.toml (one source)."""
    try:  # imported here: the engine-python decision also runs in a contributor's Python without tomli
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

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
    for root in ("console", "knowledge", "scaffold", "validators", "reference_models", "templates"):
        link = pkg / root
        if not link.exists():
            link.symlink_to(REPO / root, target_is_directory=True)
    dist = dest / "omnitts_engine_plugins-0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: omnitts-engine-plugins\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(entry_points_txt())
    return dest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(
        prog="omnitts-engine-env",
        description="Print the Python that runs a tree's vLLM-Omni engine (building the cached CPU engine environment "
        "on a machine without an accelerator, once), or run COMMAND in that environment.",
        usage="omnitts-engine-env [--omni-root DIR | --release X.Y.Z] [--engine-python PY] [-- COMMAND ...]",
    )
    parser.add_argument("--omni-root", type=Path, help="the vLLM-Omni tree (its release is read from it)")
    parser.add_argument("--release", help="vLLM-Omni release (x.y.z); default: the tree's, else 0.30.0")
    parser.add_argument(
        ENGINE_PYTHON_OPTION, dest="engine_python", help=f"use this Python as it is (or ${ENGINE_PYTHON_VAR})"
    )
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    tree = args.omni_root.resolve() if args.omni_root else None
    if tree is not None and not (tree / "vllm_omni").is_dir():
        print(
            f"omnitts-engine-env: --omni-root {args.omni_root}: not a vLLM-Omni tree (no vllm_omni/)", file=sys.stderr
        )
        return 2
    release = args.release
    if release is None and tree is not None:
        from omnitts.knowledge.layout import tree_version

        release = tree_version(tree)
        if release is None:
            print(f"omnitts-engine-env: cannot read the release of {tree}: pass --release X.Y.Z", file=sys.stderr)
            return 2
    release = release or "0.30.0"
    if command and tree is None:
        print(
            "omnitts-engine-env: running a command needs --omni-root (the tree goes first on PYTHONPATH)",
            file=sys.stderr,
        )
        return 2
    try:
        if not command:
            print(engine_python(release, tree, given=args.engine_python))
            return 0
        return run_in_engine_env(tree, release, command, given=args.engine_python)
    except EngineEnvError as exc:
        print(f"omnitts-engine-env: {exc}", file=sys.stderr)
        return 1


def run_in_engine_env(tree: Path, release: str, command: list[str], *, given: str | None = None) -> int:
    """Run ``command`` as the engine runs: the engine's Python (``python``/``python3`` is that Python; its ``bin``
    first on ``PATH``), the tree and omnitts's overlay on ``PYTHONPATH``, the engine's environment variables.
    The exit status is the command's."""
    from omnitts.validators.engine.runtime import EngineEnv

    with tempfile.TemporaryDirectory(prefix="omnitts-engine-run-") as work:
        env = EngineEnv.prepare(tree, release, Path(work), python=given)
        variables = env.env()
        variables["PATH"] = os.pathsep.join([str(env.python.parent), variables.get("PATH", "")])
        if command[0] in ("python", "python3"):
            command = [str(env.python), *command[1:]]
        try:
            return subprocess.run(command, env=variables).returncode
        except FileNotFoundError:
            print(f"omnitts-engine-env: {command[0]}: command not found", file=sys.stderr)
            return 127


if __name__ == "__main__":
    sys.exit(main())
