"""`new` on today's vLLM-Omni: hybrid adapters (0.24, 0.26) and adapter-only (0.28, 0.30), wheels from PyPI.

The same properties as the five-point era (tests/scaffold/test_new.py): every created or patched file
parses, the tree's ruff configuration passes (0.20.0's, with the ruff version it pins: wheels carry
no config), a second run is a no-op, shared files only gain lines, refusals leave the tree unchanged,
and the tree's own detection, executed over the patched files, resolves the new stage key to the new
model type and every old key to its old type.
"""

from __future__ import annotations

import ast
import subprocess

import pytest
import yaml

from omnitts.knowledge import layout
from omnitts.knowledge.detection import (
    compile_adapter_registry,
    compile_detector,
    known_detections,
    read_adapter_sources,
)
from omnitts.knowledge.eras import ADAPTER, HYBRID, detect_profile
from omnitts.scaffold.cli import main
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import PATTERNS
from omnitts.scaffold.tree_ruff import run_tree_ruff

HYBRID_RELEASES = ["0.24.0", "0.26.0"]
ADAPTER_RELEASES = ["0.28.0", "0.30.0"]
SERVING = layout.SERVING
ADAPTERS_DIR = layout.ADAPTERS


def git_snapshot(root):
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def changed(root):
    out = subprocess.run(
        ["git", "status", "--porcelain", "-uall"], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    return {line[3:]: line[:2].strip() for line in out.splitlines()}


def removed_lines(root, files):
    diff = subprocess.run(["git", "diff", "-U0", "--", *sorted(files)], cwd=root, capture_output=True, text=True).stdout
    body = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert body, "no shared file changed"
    return [line for line in body if line.startswith("-")]


def adapter_registry(root):
    return compile_adapter_registry(read_adapter_sources(root / ADAPTERS_DIR))


@pytest.fixture(scope="module")
def ruff_config_root(pristine):
    return pristine("0.20.0")  # wheels carry no pyproject / pre-commit config


@pytest.mark.parametrize(
    ("version", "era", "keys", "deploy_name", "bounds", "detection"),
    [
        ("0.24.0", HYBRID, ("request_id",), False, False, False),
        ("0.26.0", HYBRID, ("request_id",), True, True, False),
        ("0.28.0", ADAPTER, ("request_id",), True, True, True),
        ("0.30.0", ADAPTER, ("req_id", "request_id"), True, True, True),
    ],
)
def test_eras_detected_from_files(pristine, version, era, keys, deploy_name, bounds, detection):
    profile = detect_profile(pristine(version))
    assert (profile.era, profile.version, profile.request_id_keys) == (era, version, keys)
    assert profile.pipeline_registry == "OMNI_PIPELINES"
    assert profile.deploy_name_field is deploy_name
    assert profile.adapter_token_bounds is bounds
    assert profile.adapter_detection is detection
    ids = [p.id for p in profile.points]
    assert "adapter" in ids and "adapter_import" in ids
    assert ("serving.detect" in ids) is (era == HYBRID)


@pytest.mark.parametrize(
    ("version", "era"),
    [("0.14.0", "single-model serving"), ("0.16.0", "single-model serving"), ("0.18.0", "legacy stage_configs")],
)
def test_older_eras_still_refused_with_the_reason(pristine, version, era):
    with pytest.raises(ScaffoldError) as info:
        detect_profile(pristine(version))
    message = str(info.value)
    assert era in message and version in message and "\n" not in message
    assert "supports the five-point (0.20-0.22), hybrid adapters (0.24-0.26) and adapter-only (0.28-0.30)" in message


@pytest.mark.parametrize("version", HYBRID_RELEASES + ADAPTER_RELEASES)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_new_integrates_cleanly(work_tree, version, pattern, ruff_config_root, capsys):
    root = work_tree(version)
    git_snapshot(root)
    profile = detect_profile(root)
    serving_before = (root / SERVING).read_text()
    registry_before = adapter_registry(root)
    name = f"demo_{pattern.replace('-', '_')}"

    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    state = changed(root)
    shared = {layout.REGISTRY, layout.PIPELINE_REGISTRY, layout.HF_CONFIGS, layout.ADAPTERS_INIT}
    if profile.era == HYBRID:
        shared.add(SERVING)
    assert {f for f, s in state.items() if s == "M"} == shared
    created = [f for f, s in state.items() if s == "??"]
    for rel in (f"{ADAPTERS_DIR}/{name}.py", f"{layout.MODELS}/{name}/pipeline.py", f"{layout.DEPLOY}/{name}.yaml"):
        assert rel in created
    for rel in created + sorted(shared):
        text = (root / rel).read_text()
        if rel.endswith(".py"):
            ast.parse(text, rel)
        elif rel.endswith(".yaml"):
            assert isinstance(yaml.safe_load(text), dict)
    assert removed_lines(root, shared) == []  # shared files: additions only

    code, output = run_tree_ruff(
        root, [f for f in created + sorted(shared) if f.endswith(".py")], config_root=ruff_config_root
    )
    assert code == 0, output

    # The generated model is the same in every era except the request-id keys the profile decides.
    package = "\n".join((root / f).read_text() for f in created if f.startswith(f"{layout.MODELS}/{name}/"))
    keys = '("req_id", "request_id")' if version == "0.30.0" else '("request_id",)'
    assert f"_REQUEST_ID_KEYS: tuple[str, ...] = {keys}" in package
    pipeline = (root / f"{layout.MODELS}/{name}/pipeline.py").read_text()
    assert (f'default_deploy_config_name="{name}.yaml"' in pipeline) is profile.deploy_name_field

    # Detection, executed over the patched files: the new key -> the new type, every old key -> its old type.
    registry = adapter_registry(root)
    assert registry.adapters[name].module == name and registry.adapters[name].stage_keys == {name}
    if profile.era == HYBRID:
        detect = compile_detector((root / SERVING).read_text())
        assert detect(name) == name
        for (key, arch), model_type in known_detections(serving_before).items():
            assert detect(key, arch) == model_type, (key, arch)
    else:
        assert registry.detect(name, f"{''.join(p.title() for p in name.split('_'))}ForConditionalGeneration") == name
        assert registry.detect(name, None) == name
        assert name in registry.all_stage_keys()
        for adapter in registry_before.adapters.values():
            for key in adapter.stage_keys:
                archs = [None, *adapter.model_archs]
                for arch in archs:
                    assert registry.detect(key, arch) == registry_before.detect(key, arch), (key, arch)
        assert registry.all_stage_keys() == registry_before.all_stage_keys() | {name}

    snapshot = {f: (root / f).read_bytes() for f in state}
    capsys.readouterr()
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    assert "nothing to do" in capsys.readouterr().err
    assert {f: (root / f).read_bytes() for f in changed(root)} == snapshot


def _refused(capsys, root, hash_tree, *argv, match):
    before = hash_tree(root)
    code = main(["new", *argv, "--target", str(root)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("omnitts-scaffold: error: "), err
    assert match in err, err
    assert hash_tree(root) == before


@pytest.mark.parametrize("version", ADAPTER_RELEASES)
def test_stage_key_owned_by_an_adapter_is_refused(work_tree, hash_tree, capsys, version):
    # In 0.28 dots_tts had no adapter and resolved to VoxCPM2 through their shared `latent_generator`.
    root = work_tree(version)
    _refused(
        capsys,
        root,
        hash_tree,
        "new_tts",
        "--pattern",
        "native-ar",
        "--stage-key",
        "latent_generator",
        match="already served by the adapter voxcpm2",
    )
    _refused(
        capsys,
        root,
        hash_tree,
        "new_tts",
        "--pattern",
        "native-ar",
        "--stage-key",
        "latent_generator",
        "--detect-priority",
        "10",
        match="does not run before voxcpm2",
    )


def test_shared_stage_key_with_detect_priority(work_tree, ruff_config_root):
    root = work_tree("0.30.0")
    before = adapter_registry(root)
    argv = ["new", "dots_like", "--pattern", "native-ar", "--stage-key", "latent_generator", "--detect-priority", "5"]
    assert main([*argv, "--arch", "DotsLikeForConditionalGeneration", "--target", str(root)]) == 0
    text = (root / f"{ADAPTERS_DIR}/dots_like.py").read_text()
    assert 'model_archs = frozenset({"DotsLikeForConditionalGeneration"})' in text and "detect_priority = 5" in text
    registry = adapter_registry(root)
    assert registry.detect("latent_generator", "DotsLikeForConditionalGeneration") == "dots_like"
    assert registry.detect("latent_generator", "VoxCPM2TalkerForConditionalGeneration") == "voxcpm2"
    assert registry.detect("latent_generator", None) == before.detect("latent_generator", None) == "voxcpm2"
    code, output = run_tree_ruff(root, [f"{ADAPTERS_DIR}/dots_like.py"], config_root=ruff_config_root)
    assert code == 0, output


def test_detect_priority_needs_the_adapter_era(work_tree, hash_tree, capsys):
    root = work_tree("0.24.0")
    _refused(
        capsys,
        root,
        hash_tree,
        "new_tts",
        "--pattern",
        "two-stage",
        "--detect-priority",
        "5",
        match="--detect-priority needs the adapter-only era",
    )


@pytest.mark.parametrize(
    ("version", "argv", "match"),
    [
        (
            "0.24.0",
            ["new_tts", "--pattern", "single-stage", "--stage-key", "qwen3_tts"],
            "stage key 'qwen3_tts' is already served by _QWEN3_TTS_MODEL_STAGES",
        ),
        (
            "0.26.0",
            ["new_tts", "--pattern", "single-stage", "--arch", "Qwen3TTSCode2Wav"],
            "architecture 'Qwen3TTSCode2Wav' already exists",
        ),
        ("0.28.0", ["qwen3_tts", "--pattern", "single-stage"], "already exists"),
        ("0.30.0", ["new_tts", "--pattern", "single-stage", "--model-type", "voxcpm2"], "voxcpm2"),
        (
            "0.30.0",
            ["new_tts", "--pattern", "single-stage", "--stage-key", "qwen3_tts"],
            "already served by the adapter qwen3_tts",
        ),
        ("0.30.0", ["Bad-Name", "--pattern", "single-stage"], "not a valid lower_snake_case Python identifier"),
    ],
)
def test_refusals_leave_the_tree_unchanged(work_tree, hash_tree, capsys, version, argv, match):
    _refused(capsys, work_tree(version), hash_tree, *argv, match=match)


@pytest.mark.parametrize("version", ["0.24.0", "0.28.0"])
def test_voice_cloning_adapter_forwards_reference_fields(work_tree, version, ruff_config_root):
    root = work_tree(version)
    assert main(["new", "clone_tts", "--pattern", "two-stage", "--voice-cloning", "--target", str(root)]) == 0
    text = (root / f"{ADAPTERS_DIR}/clone_tts.py").read_text()
    assert (
        'tts_params["ref_audio"] = [[wav_list, sr]]' in text and 'tts_params["ref_text"] = [request.ref_text]' in text
    )
    # 0.28+ resolve a cache key along with the audio; it salts the prefix cache but is not forwarded.
    assert ("wav_list, sr, cache_key = await" in text) is (version == "0.28.0")
    assert "does not support voice cloning" not in text
    code, output = run_tree_ruff(root, [f"{ADAPTERS_DIR}/clone_tts.py"], config_root=ruff_config_root)
    assert code == 0, output


def test_dry_run_diff_applies_and_equals_a_real_run(work_tree, hash_tree, capsys):
    root = work_tree("0.30.0")
    git_snapshot(root)
    before = hash_tree(root)
    assert main(["new", "dry_tts", "--pattern", "two-stage", "--target", str(root), "--dry-run"]) == 0
    diff = capsys.readouterr().out
    assert hash_tree(root) == before
    assert f"+++ b/{ADAPTERS_DIR}/dry_tts.py" in diff and f"+++ b/{layout.ADAPTERS_INIT}" in diff
    subprocess.run(["git", "apply", "-"], cwd=root, input=diff, text=True, check=True)
    applied = hash_tree(root)
    assert main(["new", "dry_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    assert hash_tree(root) == applied
