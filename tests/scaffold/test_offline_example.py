"""Scaffold bug (issue 10, found by the engine tier on the two-stage pattern): the generated offline example passed
one ``SamplingParams`` to ``Omni.generate``; every release (0.18-0.30, ``entrypoints/omni_base.py``
``resolve_sampling_params_list``) refuses a single object for a pipeline of more than one stage ("Expected 2
sampling params, got a single sampling params object"), so the two-stage example failed on the real engine.

The example's ``main()`` runs here against an ``Omni`` stand-in whose ``generate`` resolves its parameters with the
release's own ``resolve_sampling_params_list``, compiled out of the tree (vLLM is not installed in this tier; the
engine tier's ``i2.consumer_forms`` check runs the example on the real 0.30.0 engine).
"""

from __future__ import annotations

import argparse
import ast
import collections.abc
import importlib.util
import sys
import types

import pytest

from omnitts.scaffold.cli import main
from omnitts.scaffold.naming import PATTERNS
from omnitts.validators.runtime.loaders import read_pipeline


def _release_resolver(root):
    """``OmniBase.resolve_sampling_params_list`` of the tree, as a plain function of (self, params)."""
    path = root / "vllm_omni/entrypoints/omni_base.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OmniBase")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "resolve_sampling_params_list")
    future = ast.parse("from __future__ import annotations").body
    namespace = {"Sequence": collections.abc.Sequence, "Any": object}
    exec(compile(ast.Module(body=[*future, fn], type_ignores=[]), str(path), "exec"), namespace)
    return namespace["resolve_sampling_params_list"]


class SamplingParams:
    """Stand-in for vLLM's (one object, not a sequence)."""

    def __init__(self, **fields):
        self.fields = fields


def _stub_modules(monkeypatch, omni_cls) -> None:
    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = SamplingParams
    argparse_utils = types.ModuleType("vllm.utils.argparse_utils")
    argparse_utils.FlexibleArgumentParser = argparse.ArgumentParser
    vllm_omni = types.ModuleType("vllm_omni")
    vllm_omni.Omni = omni_cls
    for name, module in {
        "vllm": vllm,
        "vllm.utils": types.ModuleType("vllm.utils"),
        "vllm.utils.argparse_utils": argparse_utils,
        "vllm_omni": vllm_omni,
        "soundfile": types.ModuleType("soundfile"),
    }.items():
        monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize("version", ["0.20.0", "0.30.0"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_offline_example_passes_one_sampling_params_per_stage(work_tree, version, pattern, monkeypatch, tmp_path):
    root = work_tree(version)
    name = f"ex_{pattern.replace('-', '_')}"
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    num_stages = len(read_pipeline(root / f"vllm_omni/model_executor/models/{name}/pipeline.py")["stages"])
    resolve = _release_resolver(root)
    seen = []

    class Omni:
        def __init__(self, **_):
            self.num_stages = num_stages
            self.default_sampling_params_list = [("default", i) for i in range(num_stages)]
            self.sampling_constraints_list = [{} for _ in range(num_stages)]

        def _apply_sampling_constraints(self, params, constraints):
            return params

        def generate(self, inputs, sampling_params_list=None, **_):
            seen.append(resolve(self, sampling_params_list))
            return iter(())

    _stub_modules(monkeypatch, Omni)
    spec = importlib.util.spec_from_file_location(
        f"{name}_end2end", root / f"examples/offline_inference/text_to_speech/{name}/end2end.py"
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    args = argparse.Namespace(
        model="m", text="Hello.", max_new_tokens=None, seed=1, output_dir=str(tmp_path / "out"), deploy_config=None,
        stage_init_timeout=1,
    )  # fmt: skip
    example.main(args)  # raised "Expected 2 sampling params, got a single sampling params object" for two-stage
    (resolved,) = seen
    assert len(resolved) == num_stages
    assert isinstance(resolved[0], SamplingParams)  # the example's own parameters drive the first stage
    assert resolved[0].fields["temperature"] == 0.0 and resolved[0].fields["seed"] == 1
    assert list(resolved[1:]) == [("default", i) for i in range(1, num_stages)]  # later stages: deploy defaults
