"""Era detection from the tree's files, on real releases from PyPI."""

import pytest

from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold.errors import ScaffoldError


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
def test_five_point_era_detected(pristine, version):
    profile = detect_profile(pristine(version))
    assert profile.era.name == "five-point"
    assert profile.version == version
    assert profile.request_id_keys == ("request_id",)


def test_sdist_has_sources_wheel_does_not(pristine):
    assert detect_profile(pristine("0.20.0")).has_sources
    assert not detect_profile(pristine("0.22.0")).has_sources


@pytest.mark.parametrize(
    ("version", "era"),
    [
        ("0.14.0", "single-model serving"),
        ("0.16.0", "single-model serving"),
        ("0.18.0", "legacy stage_configs"),
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
