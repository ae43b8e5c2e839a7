"""Era detection from the tree's files, on real releases from PyPI."""

import pytest

from omnitts.knowledge.eras import LEGACY, detect_profile
from omnitts.scaffold.errors import ScaffoldError


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
def test_five_point_era_detected(pristine, version):
    profile = detect_profile(pristine(version))
    assert profile.era.name == "five-point"
    assert profile.version == version
    assert profile.request_id_keys == ("request_id",)


def test_legacy_stage_configs_era_detected(pristine):
    """0.18: five-point serving, topology in stage_configs/, no pipeline registry, no deploy dir; its runner
    writes no request_id before preprocess(), so the only per-request id is the orchestrator's global_request_id."""
    profile = detect_profile(pristine("0.18.0"))
    assert (profile.era, profile.version) == (LEGACY, "0.18.0")
    assert profile.request_id_keys == ("global_request_id",)
    assert profile.era.stage_args_topology and not profile.pipeline_registry and not profile.has_adapters
    ids = [p.id for p in profile.points]
    assert "stage_config" in ids and not {"pipeline", "deploy", "pipeline_registry"} & set(ids)
    assert profile.serving_points == (
        "serving.constant",
        "serving.union",
        "serving.detect",
        "serving.validate",
        "serving.build",
    )


def test_sdist_has_sources_wheel_does_not(pristine):
    assert detect_profile(pristine("0.20.0")).has_sources
    assert not detect_profile(pristine("0.22.0")).has_sources


@pytest.mark.parametrize(
    ("version", "era"),
    [
        ("0.14.0", "single-model serving"),
        ("0.16.0", "single-model serving"),
    ],
)
def test_other_eras_refused_naming_what_was_found(pristine, version, era):
    with pytest.raises(ScaffoldError) as info:
        detect_profile(pristine(version))
    message = str(info.value)
    assert era in message and version in message
    assert "serving_speech.py" in message and "\n" not in message


def test_not_a_tree(tmp_path):
    with pytest.raises(ScaffoldError, match="is not a vLLM-Omni tree"):
        detect_profile(tmp_path)
