"""`omnitts-scaffold new` on real releases: 0.18.0 (sdist, legacy stage_configs era), 0.20.0 (sdist from PyPI) and
0.22.0 (wheel from PyPI)."""

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


@pytest.mark.parametrize("version", ["0.18.0", "0.20.0", "0.22.0"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_new_integrates_cleanly(work_tree, version, pattern, ruff_config_root, capsys):
    root = work_tree(version)
    _git_snapshot(root)
    serving_before = (root / SERVING).read_text()
    name = f"demo_{pattern.replace('-', '_')}"

    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    changed = _changed(root)
    legacy = version == "0.18.0"  # no pipeline registry, no hub READMEs; topology is a stage_args yaml
    expected_shared = (SHARED - {"vllm_omni/config/pipeline_registry.py"} if legacy else SHARED) | (
        HUBS if version == "0.20.0" else set()
    )
    assert {f for f, s in changed.items() if s == "M"} == expected_shared
    created = [f for f, s in changed.items() if s == "??"]
    topology = f"vllm_omni/model_executor/stage_configs/{name}.yaml" if legacy else f"vllm_omni/deploy/{name}.yaml"
    assert topology in created
    assert (f"vllm_omni/model_executor/models/{name}/pipeline.py" in created) is not legacy
    assert not [f for f in created if f.startswith("vllm_omni/deploy/")] or not legacy
    assert f"tests/model_executor/models/{name}/test_{name}_streaming_contract.py" in created
    assert f"tests/model_executor/models/{name}/reference_adapter.py" in created  # the parity adapter's skeleton
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
    removed = [line for line in body if line.startswith("-")]
    if legacy:  # 0.18's union is one line: growing it rewrites that line, every operand stays
        union = [line for line in removed if line.startswith("-_TTS_MODEL_STAGES: set[str] = ")]
        removed = [line for line in removed if line not in union]
        operands = union[0].split(" = ", 1)[1].split(" | ") if union else []
        assert len(union) == 1 and all(any(op in line for line in body if line[0] == "+") for op in operands)
    assert body and not removed, removed[:5]

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
    deploy = yaml.safe_load((root / topology).read_text())
    if legacy:  # stage_args schema: the entry stage is the one serving detects
        stage0 = deploy["stage_args"][0]
        assert stage0["engine_args"]["max_num_seqs"] >= 4
        assert stage0["engine_args"]["model_stage"] == name
        assert deploy["stage_args"][-1]["final_output_type"] == "audio"
    else:
        assert deploy["stages"][0]["max_num_seqs"] >= 4
    assert deploy["async_chunk"] is (pattern == "two-stage")

    # Per-request state keys on the id this release's runner really provides (0.18: global_request_id only).
    model_files = "\n".join(
        (root / f).read_text() for f in created if f.startswith(f"vllm_omni/model_executor/models/{name}/")
    )
    if "_REQUEST_ID_KEYS" in model_files:
        expected = '("global_request_id",)' if legacy else '("request_id",)'
        assert f"_REQUEST_ID_KEYS: tuple[str, ...] = {expected}" in model_files

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


@pytest.mark.parametrize("version", ["0.18.0", "0.20.0"])
def test_three_models_coexist_in_one_tree(work_tree, version, ruff_config_root):
    root = work_tree(version)
    for pattern in PATTERNS:
        assert main(["new", f"co_{pattern.replace('-', '_')}", "--pattern", pattern, "--target", str(root)]) == 0
    detect = compile_detector((root / SERVING).read_text())
    assert [detect(f"co_{p.replace('-', '_')}") for p in PATTERNS] == [f"co_{p.replace('-', '_')}" for p in PATTERNS]
    # 0.18's one-line `_TTS_MODEL_STAGES` union grows past 120 columns: it is re-shaped as ruff format would.
    code, output = run_tree_ruff(root, [SERVING], config_root=ruff_config_root)
    assert code == 0, output


def test_commit_signs_off(work_tree):
    root = work_tree("0.20.0")
    _git_snapshot(root)
    subprocess.run(["git", "config", "user.name", "Ada Lovelace"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "ada@example.com"], cwd=root, check=True)
    assert main(["new", "signed_tts", "--pattern", "single-stage", "--target", str(root), "--commit"]) == 0
    message = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=root, capture_output=True, text=True).stdout
    assert "Signed-off-by: Ada Lovelace <ada@example.com>" in message
    assert _changed(root) == {}


def _release_structs(root):
    """A stand-in ``vllm_omni.data_entry_keys`` module whose payload structs have exactly the fields the release's
    msgspec structs declare (read from the tree's file with ast): keyword-only, unknown fields refused, unset ones
    None. msgspec and vLLM are not installed in this tier; the engine tier runs the real ones."""
    import types

    source = (root / "vllm_omni/data_entry_keys.py").read_text()
    module = types.ModuleType("vllm_omni.data_entry_keys")
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Struct"):
            fields = tuple(t.target.id for t in node.body if isinstance(t, ast.AnnAssign))

            def init(self, _fields=fields, _name=node.name, **kw):
                unknown = set(kw) - set(_fields)
                if unknown:
                    raise TypeError(f"{_name} has no fields {sorted(unknown)}")
                for field in _fields:
                    setattr(self, field, kw.get(field))

            setattr(module, node.name, type(node.name, (), {"__struct_fields__": fields, "__init__": init}))
    return module


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0", "0.30.0"])
def test_two_stage_processor_accepts_the_keywords_of_the_trees_chunk_adapter(work_tree, version, monkeypatch):
    """chunk_transfer_adapter calls the async-chunk processor with keyword arguments only, the payload under
    `pooling_output` (to 0.22) or `multimodal_output` (0.24+): the generated processor must take exactly those.
    It must return what the adapter reads: a dict (0.20: `payload_data.get`) or, from 0.22, an OmniPayloadStruct
    (the adapter sets `payload_data.meta`; a dict failed there and the 0.30 engine gave no audio)."""
    import importlib.util
    import inspect
    import sys
    from types import SimpleNamespace

    import torch

    from omnitts.knowledge.runner import CHUNK_ADAPTER, chunk_payload_struct, chunk_processor_kwargs, contract_for

    root = work_tree(version)
    kwargs = chunk_processor_kwargs(root)  # read from the tree's adapter source
    assert kwargs and "transfer_manager" in kwargs, f"no processor call found in {CHUNK_ADAPTER}"
    wants_struct = chunk_payload_struct(root)  # read from the tree's adapter source
    assert wants_struct == contract_for(version).chunk_payload_struct == (version != "0.20.0")
    if wants_struct:
        monkeypatch.setitem(sys.modules, "vllm_omni.data_entry_keys", _release_structs(root))
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
    call = {"transfer_manager": tm, payload: {"codes": {"audio": torch.tensor([[3, 4], [5, 6]])}}, "request": request}
    chunk = fn(**call, is_finished=True)
    if not wants_struct:
        assert isinstance(chunk, dict) and chunk["codes"]["audio"] == [3, 5, 4, 6]
        return
    assert type(chunk).__name__ == "OmniPayloadStruct", f"{version}: the processor returned {type(chunk).__name__}"
    audio = chunk.codes.audio
    assert isinstance(audio, torch.Tensor) and audio.dtype == torch.long and audio.tolist() == [3, 5, 4, 6]
    assert chunk.meta.left_context_size == 0 and bool(chunk.meta.finished)
