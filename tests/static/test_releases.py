"""Every .py file of every release 0.14.0-0.30.0 is linted without a crash (slow: PyPI downloads)."""

from __future__ import annotations

import pytest

from omnitts.validators.static import api

from .releases import RELEASES, release_tree


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_no_crash_on_release(version):
    tree = release_tree(version)
    res = api.run([tree], jobs=2, integration=True)
    assert res.files > 200
    assert not res.errors
    crashes = [f for f in res.findings if f.rule == "OMNI-META-004"]
    assert not crashes, crashes[:5]
