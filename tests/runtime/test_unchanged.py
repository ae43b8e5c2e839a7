"""The aliasing check's equality: NaN where NaN was is unchanged (a NaN output is audio.finite's finding, not an
overwrite); any value that moved, a NaN included, is a change."""

import torch

from omnitts.validators.runtime.harness.stages import _unchanged


def test_equal_tensors_and_nan_in_place_are_unchanged():  # VALID
    kept = torch.tensor([1.0, float("nan"), 3.0])
    assert _unchanged(kept.clone(), kept)
    assert _unchanged(torch.tensor([1, 2]), torch.tensor([1, 2]))


def test_a_value_that_moved_is_a_change():  # INVALID
    kept = torch.tensor([1.0, float("nan"), 3.0])
    assert not _unchanged(torch.tensor([1.0, float("nan"), 4.0]), kept)
    assert not _unchanged(torch.tensor([1.0, 2.0, 3.0]), kept)  # a NaN overwritten in place
    assert not _unchanged(torch.tensor([float("nan"), float("nan"), 3.0]), kept)
    assert not _unchanged(torch.tensor([1, 3]), torch.tensor([1, 2]))
