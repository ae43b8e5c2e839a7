"""Optional dependencies (torchaudio, torchcodec, soundfile, librosa) must not be needed to import the model."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

from omnitts.validators import checkids

pytestmark = pytest.mark.usefixtures("omnitts_model")

OPTIONAL = ("soundfile", "torchaudio", "torchcodec", "librosa")


@pytest.mark.omnitts_check(checkids.IMPORT_OPTIONAL_DEPS)
def test_model_imports_without_optional_deps(ctx, record):
    sub = ctx.subject
    modules = sorted({st.cls.__module__ for st in sub.stages if st.cls is not None})
    if not modules:
        pytest.skip("no stage classes to import")
    saved = {name: sys.modules.pop(name) for name in modules if name in sys.modules}
    blocked = {dep: sys.modules.get(dep) for dep in OPTIONAL}
    problems = []
    try:
        for dep in OPTIONAL:
            sys.modules[dep] = None  # makes `import dep` raise ImportError
        for name in modules:
            try:
                spec = getattr(saved.get(name), "__spec__", None)
                if spec is not None and spec.loader is not None:
                    fresh = importlib.util.module_from_spec(spec)  # works for modules loaded from a file path too
                    sys.modules[name] = fresh
                    spec.loader.exec_module(fresh)
                else:
                    importlib.import_module(name)
            except ImportError as exc:
                problems.append(f"{name}: {exc} (import it lazily, at the top of load_weights(), with a fallback)")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{name}: {type(exc).__name__}: {exc}")
    finally:
        for name in modules:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
        for dep, mod in blocked.items():
            if mod is None:
                sys.modules.pop(dep, None)
            else:
                sys.modules[dep] = mod
    record(modules=modules, blocked=list(OPTIONAL))
    if problems:
        pytest.fail("optional dependency imported at module import time:\n  " + "\n  ".join(problems), pytrace=False)
