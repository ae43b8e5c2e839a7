"""Turn ``--model NAME`` (and ``--omni-root DIR``) into a :class:`RuntimeSubject`.

Three sources:

* a model catalog handed in by the caller (the plugin hands the installed ones, ``runtime/catalogs.py``: omnitts's
  reference models and their mutants);
* a model inside a vLLM-Omni tree (``--omni-root DIR --model NAME``): pipeline.py, the deploy yaml and the
  registry are read with ``ast``/YAML, the classes are imported from ``DIR`` — this needs real vLLM;
* ``path/to/file.py:factory`` or ``package.module:factory`` returning a subject (used by our own tests).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from omnitts.knowledge import configs, layout
from omnitts.knowledge.runner import DEFAULT_RELEASE
from omnitts.validators.backends.texts import HARNESS_TEXTS
from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject, StageSpec


class LoadError(Exception):
    """The model could not be turned into a runnable subject; the message says why, in one line."""


# ------------------------------------------------------------------------------------------------
# catalogs
# ------------------------------------------------------------------------------------------------


def list_model_names(catalogs) -> list[str]:
    """Every model the catalogs name (``list_models()`` of each), in their order."""
    return [str(n) for cat in catalogs for n in cat.list_models()]


def tree_models(root: Path) -> list[str]:
    """The model packages of a vLLM-Omni tree: the folders of ``vllm_omni/model_executor/models``."""
    models = Path(root) / layout.MODELS
    return sorted(p.name for p in models.glob("*") if p.is_dir() and not p.name.startswith(("_", ".")))


def _nearest(name: str, known: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f"did you mean {close[0]}? " if close else ""


def _listing(known: list[str], limit: int = 40) -> str:
    shown = ", ".join(known[:limit])
    return shown + (f", ... ({len(known)} in all)" if len(known) > limit else "")


def model_problem(name: str, omni_root: str | Path | None, catalogs=()) -> str | None:
    """What is wrong with ``--model NAME`` (one line naming what exists and the nearest match), or None.

    Checked before any check runs, without importing the model: a tree model must have its package folder, a
    factory spec its file or module, any other name must be in one of the ``catalogs`` handed in."""
    if omni_root:
        root = Path(omni_root)
        if not (root / "vllm_omni").is_dir():
            return f"--omni-root {omni_root}: not a vLLM-Omni tree (no vllm_omni/ folder in it)"
        known = tree_models(root)
        if name in known:
            return None
        return (
            f"--model {name}: no model package vllm_omni/model_executor/models/{name} in the vLLM-Omni tree at "
            f"{root.resolve()}; {_nearest(name, known)}the tree's models: {_listing(known) or 'none'}"
        )
    if ":" in name and not name.startswith("ref_"):
        target = name.rpartition(":")[0]
        if target.endswith(".py"):
            return None if Path(target).is_file() else f"--model {name}: no such file {target}"
        try:
            found = importlib.util.find_spec(target) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"--model {name}: no module {target} to take the factory from"
    known = list_model_names(catalogs)
    if not known:
        return (
            f"--model {name}: no model catalog is installed (the omnitts.model_catalogs entry points; reinstall "
            "omnitts: pip install -e .); pass --omni-root DIR for a model in a vLLM-Omni tree"
        )
    if name in known:
        return None
    models = [n for n in known if "@" not in n]
    return (
        f"--model {name}: not a reference model or mutant of omnitts; {_nearest(name, known)}the reference models: "
        f"{', '.join(models)}, and {len(known) - len(models)} mutants (MODEL@BUG, --list-models names them); a model "
        "in a vLLM-Omni tree needs --omni-root DIR"
    )


def from_catalog_subject(subj: Any, device: str = "cpu") -> RuntimeSubject:
    """The catalog entry's RuntimeSubject (``Subject.runtime``); anything already a RuntimeSubject passes through."""
    if isinstance(subj, RuntimeSubject):
        return subj
    return subj.runtime(device)


def template_consumer():
    """``as_waveform`` of the scaffold's example ``end2end.py`` template: the consumer generated models ship."""
    try:
        from omnitts import templates
    except ImportError:
        return None, ""
    base = Path(next(iter(templates.__path__)))
    path = base / "shared" / "{{cookiecutter.name}}" / "examples" / "offline_inference" / "text_to_speech"
    path = path / "{{cookiecutter.name}}" / "end2end.py"
    if not path.is_file():
        return None, ""
    text = path.read_text(encoding="utf-8")
    start = text.find("\ndef as_waveform(")
    if start < 0:
        return None, ""
    end = text.find("\n\n\n", start + 1)
    snippet = text[start + 1 : end if end > 0 else None]
    try:
        tree = ast.parse(snippet)
    except SyntaxError:
        return None, ""
    import numpy as np
    import torch

    ns: dict[str, Any] = {"torch": torch, "np": np, "numpy": np}
    exec(compile(tree, str(path), "exec"), ns)
    line = text[:start].count("\n") + 2
    return ns["as_waveform"], f"{path.relative_to(base.parent)}:{line} as_waveform() (template)"


def default_prompts(config: Any, texts=HARNESS_TEXTS, max_tokens: int | None = None) -> list[RequestPlan]:
    enc = getattr(config, "encode_text", None)
    cap = max_tokens or int(getattr(config, "max_frames", 0) or 0) + 8 or 256
    plans = []
    for i, text in enumerate(texts):
        ids = list(enc(text)) if callable(enc) else [1] * (2 + len(text) % 5)
        plans.append(
            RequestPlan(
                ext_id=f"req-{i}", prompt_token_ids=ids, additional_information={"text": [text]}, max_tokens=cap
            )
        )
    return plans


# ------------------------------------------------------------------------------------------------
# factory specs: file.py:factory / package.module:factory
# ------------------------------------------------------------------------------------------------


def _from_spec(spec: str) -> RuntimeSubject:
    target, _, attr = spec.rpartition(":")
    attr, _, arg = attr.partition("@")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        mod_name = f"_omnitts_subject_{path.stem}"
        if mod_name in sys.modules:
            mod = sys.modules[mod_name]
        else:
            loader_spec = importlib.util.spec_from_file_location(mod_name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise LoadError(f"cannot import {path}")
            mod = importlib.util.module_from_spec(loader_spec)
            sys.modules[mod_name] = mod
            loader_spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(target)
    fn = getattr(mod, attr)
    out = fn(arg) if arg else fn()
    return from_catalog_subject(out)


# ------------------------------------------------------------------------------------------------
# a model inside a vLLM-Omni tree (real-vLLM tier)
# ------------------------------------------------------------------------------------------------


def read_pipeline(path: Path) -> dict[str, Any]:
    pipe = configs.read_pipeline(path)
    if pipe is None:
        raise LoadError(f"{path}: no PipelineConfig(...) found")
    return pipe


def read_registry(path: Path) -> dict[str, tuple[str, ...]]:
    registry = configs.read_registry(path)
    if registry is None:
        raise LoadError(f"{path}: no _OMNI_MODELS dict")
    return registry


def consumer_from_example(path: Path, names=("as_waveform", "to_waveform", "extract_audio")):
    """Compile the example's audio-consumer function out of ``end2end.py`` (it imports vLLM at the top)."""
    if not path.is_file():
        return None, ""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            import numpy as np
            import torch

            ns: dict[str, Any] = {"torch": torch, "np": np, "numpy": np}
            exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), ns)
            return ns[node.name], f"{path}:{node.lineno} {node.name}()"
    return None, ""


def load_tree_model(root: Path, name: str, release: str | None = None) -> RuntimeSubject:
    root = Path(root).resolve()
    pkg = layout.model_package(root, name)
    if not pkg.is_dir():
        raise LoadError(f"{pkg} does not exist: no model package {name!r} in the vLLM-Omni tree at {root}")
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        from omnitts.validators.requirements import vllm_hint

        raise LoadError(
            f"--omni-root models run in the real-vLLM tier: `import vllm` failed ({type(exc).__name__}: {exc}); "
            f"{vllm_hint(root)}"
        ) from None
    pipe = read_pipeline(pkg / "pipeline.py")
    registry = read_registry(root / layout.REGISTRY)
    model_type = pipe.get("model_type", name)
    import yaml

    deploy_path = layout.deploy_config(root, model_type)
    deploy = yaml.safe_load(deploy_path.read_text(encoding="utf-8")) if deploy_path.is_file() else {}
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    existing = sys.modules.get("vllm_omni")
    if existing is not None and not str(Path(existing.__file__).resolve()).startswith(str(root)):
        raise LoadError(f"vllm_omni is already imported from {existing.__file__}, not from --omni-root {root}")
    import vllm_omni

    if not str(Path(vllm_omni.__file__).resolve()).startswith(str(root)):
        raise LoadError(f"`import vllm_omni` resolves to {vllm_omni.__file__}, not to --omni-root {root}")
    classes = []
    for st in pipe["stages"]:
        arch = st.get("model_arch") or pipe.get("model_arch")
        if arch not in registry:
            raise LoadError(f"model_arch {arch!r} of stage {st.get('stage_id')} is not in _OMNI_MODELS")
        folder, module, cls_name = registry[arch]
        mod = importlib.import_module(f"vllm_omni.model_executor.models.{folder}.{module}")
        classes.append((st, getattr(mod, cls_name)))
    cfg_mod = importlib.import_module(f"vllm_omni.model_executor.models.{name}.configuration_{name}")
    cfg_cls = next(
        (c for c in vars(cfg_mod).values() if inspect.isclass(c) and getattr(c, "model_type", None) == model_type), None
    )
    if cfg_cls is None:
        raise LoadError(f"no config class with model_type {model_type!r} in configuration_{name}.py")
    config = cfg_cls()
    stages = []
    for st, cls in classes:
        execution = "ar" if "AR" in str(st.get("execution_type", "LLM_AR")) else "generation"
        stages.append(
            StageSpec(
                stage_id=int(st.get("stage_id", len(stages))),
                model_stage=str(st.get("model_stage", "")),
                execution=execution,
                factory=(lambda c=cls: c(config=config)),
                engine_output_type=str(st.get("engine_output_type", "audio")),
                final_output=bool(st.get("final_output", False)),
                cls=cls,
                config=config,
            )
        )
    async_fn = None
    for st in pipe["stages"]:
        target = st.get("async_chunk_process_next_stage_input_func") or st.get("custom_process_next_stage_input_func")
        if isinstance(target, str):
            mod_name, _, fn_name = target.rpartition(".")
            async_fn = getattr(importlib.import_module(mod_name), fn_name)
    extra: dict[str, Any] = {}
    for conn in (deploy.get("connectors") or {}).values():
        extra.update((conn or {}).get("extra") or {})
    consumer, origin = consumer_from_example(layout.offline_example(root, name))
    proc_file = layout.stage_input_processor(root, name)
    files = sorted(pkg.glob("*.py")) + ([proc_file] if proc_file.is_file() else [])
    pattern = "two-stage" if len(stages) > 1 else "single-stage"
    return RuntimeSubject(
        name=name,
        pattern=pattern,
        release=release or layout.tree_version(root) or DEFAULT_RELEASE,
        stages=stages,
        prompts=default_prompts(config),
        sample_rate=int(getattr(config, "sample_rate", 16000)),
        hop_length=getattr(config, "hop_length", None),
        eos_token_id=getattr(config, "eos_token_id", None),
        async_chunk_fn=async_fn,
        connector_extra=extra,
        consumer=consumer,
        consumer_origin=origin,
        source_files=files,
        model_files=files,
        kind="tree",
        eos_step_emits_audio=pattern != "two-stage",
        description=f"{name} from {root}",
        extra={"deploy": deploy, "pipeline": pipe, "root": str(root)},
    )


def load_subject(
    name: str, catalogs=(), omni_root: str | Path | None = None, release: str | None = None, device: str = "cpu"
) -> RuntimeSubject:
    """The subject ``name`` names: a model of ``omni_root``, a ``file.py:factory`` spec, or a model of one of the
    ``catalogs`` handed in (objects with ``list_models()`` and ``get_subject(name)``)."""
    if omni_root:
        subj = load_tree_model(Path(omni_root), name, release)
    elif ":" in name and not name.startswith("ref_"):
        subj = _from_spec(name)
    else:
        if not catalogs:
            raise LoadError(
                f"model {name!r}: no model catalog is installed (the omnitts.model_catalogs entry points; reinstall "
                "omnitts: pip install -e .); pass --omni-root DIR for a model in a vLLM-Omni tree"
            )
        cat = next((c for c in catalogs if name in c.list_models()), None)
        if cat is None:
            known = list_model_names(catalogs)
            raise LoadError(f"unknown model {name!r}; known: {', '.join(known)} (see --list-models)")
        subj = from_catalog_subject(cat.get_subject(name), device)
    if release:
        subj.release = release
    return subj
