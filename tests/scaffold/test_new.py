"""`omnitts-scaffold new` on real releases: 0.20.0 (sdist from PyPI) and 0.22.0 (wheel from PyPI)."""

from __future__ import annotations

import ast
import subprocess

import pytest
import yaml

from omnitts.knowledge.detection import compile_detector, known_detections
from omnitts.scaffold.cli import main
from omnitts.scaffold.naming import PATTERNS
from omnitts.scaffold.tree_ruff import run_tree_ruff

SERVING = "vllm_omni/entrypoints/openai/serving_speech.py"
SHARED = {
    "vllm_omni/model_executor/models/registry.py",
    "vllm_omni/config/pipeline_registry.py",
    "vllm_omni/engine/arg_utils.py",
    SERVING,
}
HUBS = {"examples/offline_inference/text_to_speech/README.md", "examples/online_serving/text_to_speech/README.md"}


def _git_snapshot(root):
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _changed(root):
    out = subprocess.run(
        ["git", "status", "--porcelain", "-uall"], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    return {line[3:]: line[:2].strip() for line in out.splitlines()}


@pytest.fixture(scope="module")
def ruff_config_root(pristine):
    # Wheels carry no pyproject / pre-commit config: lint every tree with 0.20.0's (the nearest sdist).
    return pristine("0.20.0")


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_new_integrates_cleanly(work_tree, version, pattern, ruff_config_root, capsys):
    root = work_tree(version)
    _git_snapshot(root)
    serving_before = (root / SERVING).read_text()
    name = f"demo_{pattern.replace('-', '_')}"

    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    changed = _changed(root)
    expected_shared = SHARED | (HUBS if version == "0.20.0" else set())
    assert {f for f, s in changed.items() if s == "M"} == expected_shared
    created = [f for f, s in changed.items() if s == "??"]
    assert f"vllm_omni/model_executor/models/{name}/pipeline.py" in created
    assert f"vllm_omni/deploy/{name}.yaml" in created
    assert f"tests/model_executor/models/{name}/test_{name}_streaming_contract.py" in created
    assert (f"vllm_omni/model_executor/stage_input_processors/{name}.py" in created) == (pattern == "two-stage")
    for rel in created + sorted(expected_shared):
        text = (root / rel).read_text()
        if rel.endswith(".py"):
            ast.parse(text, rel)
        elif rel.endswith(".yaml"):
            assert isinstance(yaml.safe_load(text), dict)

    # Shared files: only additions.
    diff = subprocess.run(
        ["git", "diff", "-U0", "--", *sorted(expected_shared)], cwd=root, capture_output=True, text=True
    ).stdout
    body = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert body and all(line.startswith("+") for line in body), [line for line in body if line.startswith("-")][:5]

    # The tree's own ruff (the version its pre-commit pins) with its own config.
    py_files = [f for f in created + sorted(expected_shared) if f.endswith(".py")]
    code, output = run_tree_ruff(root, py_files, config_root=ruff_config_root)
    assert code == 0, output

    # The patched detection returns the new type for the new key and every old type for old keys.
    detect = compile_detector((root / SERVING).read_text())
    assert detect(name) == name
    for (key, arch), model_type in known_detections(serving_before).items():
        assert detect(key, arch) == model_type

    # Deploy yaml: the AR stage pipelines concurrent requests; single stage never async-chunks.
    deploy = yaml.safe_load((root / f"vllm_omni/deploy/{name}.yaml").read_text())
    assert deploy["stages"][0]["max_num_seqs"] >= 4
    assert deploy["async_chunk"] is (pattern == "two-stage")

    # A second identical run changes nothing.
    snapshot = {f: (root / f).read_bytes() for f in changed}
    capsys.readouterr()
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    assert "nothing to do" in capsys.readouterr().err
    assert {f: (root / f).read_bytes() for f in _changed(root)} == snapshot


def test_dry_run_writes_nothing_and_its_diff_applies(work_tree, hash_tree, capsys):
    root = work_tree("0.20.0")
    _git_snapshot(root)
    before = hash_tree(root)
    assert main(["new", "dry_tts", "--pattern", "two-stage", "--target", str(root), "--dry-run"]) == 0
    diff = capsys.readouterr().out
    assert hash_tree(root) == before
    assert "+++ b/vllm_omni/entrypoints/openai/serving_speech.py" in diff
    subprocess.run(["git", "apply", "--check", "-"], cwd=root, input=diff, text=True, check=True)
    subprocess.run(["git", "apply", "-"], cwd=root, input=diff, text=True, check=True)
    applied = hash_tree(root)
    root2 = work_tree("0.20.0") if False else None  # noqa: F841 - the applied diff equals a real run:
    assert main(["new", "dry_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    assert hash_tree(root) == applied


def test_three_models_coexist_in_one_tree(work_tree):
    root = work_tree("0.20.0")
    for pattern in PATTERNS:
        assert main(["new", f"co_{pattern.replace('-', '_')}", "--pattern", pattern, "--target", str(root)]) == 0
    detect = compile_detector((root / SERVING).read_text())
    assert [detect(f"co_{p.replace('-', '_')}") for p in PATTERNS] == [f"co_{p.replace('-', '_')}" for p in PATTERNS]


def test_commit_signs_off(work_tree):
    root = work_tree("0.20.0")
    _git_snapshot(root)
    subprocess.run(["git", "config", "user.name", "Ada Lovelace"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "ada@example.com"], cwd=root, check=True)
    assert main(["new", "signed_tts", "--pattern", "single-stage", "--target", str(root), "--commit"]) == 0
    message = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=root, capture_output=True, text=True).stdout
    assert "Signed-off-by: Ada Lovelace <ada@example.com>" in message
    assert _changed(root) == {}


@pytest.mark.parametrize("version", ["0.22.0", "0.30.0"])
def test_two_stage_processor_accepts_the_keywords_of_the_trees_chunk_adapter(work_tree, version):
    """chunk_transfer_adapter calls the async-chunk processor with keyword arguments only, the payload under
    `pooling_output` (to 0.22) or `multimodal_output` (0.24+): the generated processor must take exactly those."""
    import importlib.util
    import inspect
    from types import SimpleNamespace

    import torch

    from omnitts.knowledge.runner import CHUNK_ADAPTER, chunk_processor_kwargs

    root = work_tree(version)
    kwargs = chunk_processor_kwargs(root)  # read from the tree's adapter source
    assert kwargs and "transfer_manager" in kwargs, f"no processor call found in {CHUNK_ADAPTER}"
    assert main(["new", "kw_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    path = root / "vllm_omni/model_executor/stage_input_processors/kw_tts.py"
    spec = importlib.util.spec_from_file_location("kw_tts_processor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module.talker2code2wav_async_chunk
    payload = next(k for k in kwargs if k not in ("transfer_manager", "request", "is_finished", "new_token_ids"))
    inspect.signature(fn).bind(**dict.fromkeys(kwargs))  # raises TypeError on a wrong parameter name

    tm = SimpleNamespace(code_prompt_token_ids={"r": []}, connector=SimpleNamespace(config={"extra": {}}))
    request = SimpleNamespace(external_req_id="r", is_finished=lambda: True)
    call = {"transfer_manager": tm, payload: {"codes": {"audio": torch.tensor([[3, 4]])}}, "request": request}
    chunk = fn(**call, is_finished=True)
    assert chunk["codes"]["audio"] == [3, 4]
