"""The integration hook judges the change (`omnitts-lint --changed`), and one baseline serves both hooks
(write, adopt, shrink), on the stock vLLM-Omni 0.30.0 release and its own pre-existing findings."""

from __future__ import annotations

import json

import pytest

from omnitts.validators.static import changes
from omnitts.validators.static.cli import main
from omnitts.validators.static.treefacts import TreeContext, facts_for

V = "0.30.0"


@pytest.fixture(scope="module")
def ctx(pristine):
    root = pristine(V)
    return TreeContext(root, facts_for(root))


@pytest.mark.parametrize(
    ("rels", "models"),
    [
        (["vllm_omni/deploy/glm_tts.yaml"], {"glm_tts"}),
        (["vllm_omni/deploy/breeze_tts.yaml"], {"breeze_tts_2"}),  # by the pipeline it configures, not its stem
        (["vllm_omni/model_executor/models/glm_tts/glm_tts_dit_wrapper.py"], {"glm_tts"}),
        (["vllm_omni/model_executor/stage_input_processors/qwen3_tts.py"], {"qwen3_tts"}),
        (["examples/offline_inference/text_to_speech/voxcpm2/end2end.py"], {"voxcpm2"}),
        (["vllm_omni/entrypoints/openai/serving_speech.py"], set()),  # a shared file whose diff names nothing
        (["README.md", "docs/x.md"], set()),
    ],
)
def test_changed_files_map_to_their_models(ctx, rels, models):
    assert changes.touched_models(ctx, rels, diff=lambda root, rel: "") == models


def test_a_shared_file_names_the_models_its_changed_lines_mention(ctx):
    diff = '    "GlmTtsForConditionalGeneration": ("glm_tts", "glm_tts", "GlmTts"),\n'
    rels = ["vllm_omni/model_executor/models/registry.py"]
    assert changes.touched_models(ctx, rels, diff=lambda root, rel: diff) == {"glm_tts"}


def test_changed_reports_only_the_touched_models_findings(pristine, capsys):
    root = pristine(V)
    base = ["--changed", "--no-cache", "--no-baseline", "--root", str(root)]
    # The stock tree has 12 OMNI-INT-001 findings; glm_tts's deploy file holds one of them.
    assert main([*base, str(root / "vllm_omni/deploy/glm_tts.yaml")]) == 1
    out = capsys.readouterr().out
    assert out.count("OMNI-INT-001") == 1 and "vllm_omni/deploy/glm_tts.yaml" in out
    # A clean model's change passes although the tree has other models' findings.
    assert main([*base, str(root / "vllm_omni/deploy/qwen3_tts.yaml")]) == 0
    assert "model(s) qwen3_tts" in capsys.readouterr().err


def test_one_baseline_serves_both_hooks_write_adopt_shrink(work_tree, capsys):
    root = work_tree(V)
    bl = root / ".omnitts-lint-baseline.json"
    model = root / "vllm_omni/model_executor/models/glm_tts"
    deploy = root / "vllm_omni/deploy/glm_tts.yaml"
    common = ["--no-cache", "--root", str(root)]
    # write: the per-file findings of one model and the whole tree's integration findings, one file
    assert main([str(model), "--integration", *common, "--write-baseline", str(bl), "--reason", "stock 0.30.0"]) == 0
    entries = json.loads(bl.read_text())["entries"]
    rules = {e["rule"] for e in entries}
    assert "OMNI-INT-001" in rules and rules - {"OMNI-INT-001"}, rules  # both kinds of entry
    n_int = sum(e["rule"] == "OMNI-INT-001" for e in entries)
    assert n_int == 12
    capsys.readouterr()
    # adopt: each hook accepts its entries and does not call the other hook's entries stale
    with_bl = [*common, "--baseline", str(bl)]
    assert main(["--integration", "--full-scan", *with_bl]) == 0
    assert main(["--changed", *with_bl, str(deploy)]) == 0
    assert main([str(model), *with_bl]) == 0
    assert "stale" not in capsys.readouterr().err
    # shrink: the contributor fixes glm_tts's deploy file; the hook says so and --shrink-baseline drops it
    deploy.write_text(deploy.read_text().replace("max_num_seqs: 1", "max_num_seqs: 4", 1))
    assert main(["--changed", *with_bl, str(deploy)]) == 0
    assert "lower its count" in capsys.readouterr().err
    assert main(["--changed", *with_bl, "--shrink-baseline", str(deploy)]) == 0
    after = json.loads(bl.read_text())["entries"]
    assert sum(e["rule"] == "OMNI-INT-001" for e in after) == n_int - 1
    assert len(after) == len(entries) - 1  # the other hook's entries are kept as they are
    assert main(["--integration", "--full-scan", *with_bl]) == 0
    # a full scan still rejects an entry nothing reports any more
    bl.write_text(bl.read_text().replace('"vllm_omni/deploy/qwen2_5_omni.yaml"', '"vllm_omni/deploy/glm_tts.yaml"'))
    capsys.readouterr()
    assert main(["--integration", "--full-scan", *with_bl]) == 1
    assert "stale baseline entry" in capsys.readouterr().err


def test_a_limit_enforced_in_code_is_accepted_and_its_removal_reported(work_tree, capsys):
    """moss_tts_nano deploys `max_num_seqs: 1` and raises on any other value: deliberate, not an audio-gap
    error. Drop the raise and the same deploy file is reported (the cached tree result is invalidated)."""
    root = work_tree(V)
    deploy = root / "vllm_omni/deploy/moss_tts_nano.yaml"
    args = ["--changed", "--no-baseline", "--root", str(root), str(deploy)]
    assert main(args) == 0  # with the cache: a second identical run reads it
    assert main(args) == 0
    modeling = root / "vllm_omni/model_executor/models/moss_tts_nano/modeling_moss_tts_nano.py"
    text = modeling.read_text()
    assert "    if max_num_seqs != 1:\n        raise" in text
    modeling.write_text(
        text.replace("    if max_num_seqs != 1:\n        raise", "    if max_num_seqs != 1:\n        print", 1)
    )
    capsys.readouterr()
    assert main(args) == 1
    assert "vllm_omni/deploy/moss_tts_nano.yaml" in capsys.readouterr().out
