"""Every runtime check, one test per check id: the tier's backend (``--engine``) observes what the check's verdict
needs, and the verdict (``validators/verdicts``) judges; a tier whose backend cannot observe that does not run it."""

from __future__ import annotations

import pytest


@pytest.mark.usefixtures("omnitts_model")
def test_check(check, judged):
    """``check``: every check id of ``validators/verdicts``, parametrised by the conftest (check by check)."""
    judged(check)
