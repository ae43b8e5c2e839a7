"""Backends observe, checks judge: every check id has exactly one verdict, each tier runs exactly the checks its
backend can observe for, and every tier reaches a check through that one verdict."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.validators import checkids
from omnitts.validators.backends.base import Backend, judge
from omnitts.validators.backends.harness import HarnessBackend
from omnitts.validators.backends.offline import OfflineBackend
from omnitts.validators.backends.server import ServerBackend
from omnitts.validators.backends.url import UrlBackend
from omnitts.validators.engine.probe import STEPS
from omnitts.validators.verdicts import VERDICTS
from omnitts.validators.verdicts.base import Judge

REPO = Path(__file__).resolve().parents[2]
VALIDATORS = REPO / "validators"
TIERS = {"harness": HarnessBackend, "offline": OfflineBackend, "server": ServerBackend}


def _decorated() -> list[tuple[Path, str, str]]:
    """(file, function, check id) of every ``@verdict(checkids.X)`` under validators/."""
    found = []
    for path in sorted(VALIDATORS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "verdict":
                    arg = dec.args[0]
                    assert isinstance(arg, ast.Attribute), f"{path}: {node.name} names its check by a literal"
                    found.append((path, node.name, getattr(checkids, arg.attr)))
    return found


def test_every_check_id_has_exactly_one_verdict():
    found = _decorated()
    ids = [check for _, _, check in found]
    assert sorted(ids) == sorted(checkids.RUNTIME_CHECKS), "one @verdict per runtime check id, no more"
    assert {path.parent for path, _, _ in found} == {VALIDATORS / "verdicts"}
    assert {check: fn for _, fn, check in found} == {check: j.fn.__name__ for check, j in VERDICTS.items()}


def test_a_second_verdict_for_a_check_is_refused():
    from omnitts.validators.verdicts.base import verdict

    with pytest.raises(TypeError, match="i4.concurrency has two verdicts"):
        verdict(checkids.I4_CONCURRENCY)(lambda obs: None)


def test_a_verdict_declares_typed_observations():
    for check, j in VERDICTS.items():
        assert j.needs, check
        assert all(getattr(kind, "__dataclass_fields__", None) for kind in j.needs), check


def test_nothing_outside_the_verdicts_judges():
    """The comparator, the tolerance table and the verdicts are imported by the verdicts alone (the probe reads the
    determinism of a server for its report header); no check module, backend or driver compares audio itself."""
    allowed = {VALIDATORS / "engine" / "probe.py"}
    for path in sorted(VALIDATORS.rglob("*.py")):
        if path.parent == VALIDATORS / "verdicts" or path in allowed:
            continue
        source = path.read_text(encoding="utf-8")
        for module in ("verdicts.compare", "verdicts.tolerances", "verdicts.i1", "verdicts.i4", "verdicts.i5"):
            assert f"omnitts.validators.{module} import" not in source, f"{path} imports {module}"
        assert "np.allclose" not in source and "torch.allclose" not in source, f"{path} compares values itself"


class _Seen(Backend):
    """A backend that observes everything a verdict may need with a marker."""

    def observe(self, kind):
        return ("observed", kind)


def test_judge_hands_the_backends_observations_to_the_one_verdict(monkeypatch):
    calls = []
    for check, j in list(VERDICTS.items()):

        def spy(*obs, check=check):
            calls.append((check, obs))
            return "verdict"

        monkeypatch.setitem(VERDICTS, check, Judge(check, spy, j.needs))
        assert judge(_Seen(), check) == "verdict"
        assert calls[-1] == (check, tuple(("observed", kind) for kind in j.needs))


@pytest.mark.parametrize("tier", sorted(TIERS))
def test_each_tier_runs_the_checks_its_backend_can_observe_for(tier, tmp_path):
    """What ``pytest validators --engine TIER`` selects is what the tier's backend can observe for: the collection
    hook and the backend read the same table."""
    model = ["--model", "ref_single_stage"]
    if tier != "harness":  # an engine tier needs a tree (collection starts no engine)
        (tmp_path / "tree" / "vllm_omni" / "model_executor" / "models" / "tiny").mkdir(parents=True)
        model = ["--model", "tiny", "--omni-root", str(tmp_path / "tree")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(VALIDATORS), "--collect-only", "-q", "-p", "no:cacheprovider"]
        + [*model, "--engine", tier, "--omnitts-out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    selected = {
        line.split("test_check[", 1)[1].split("-", 1)[0] for line in proc.stdout.splitlines() if "test_check[" in line
    }
    # the parity checks compare with a capture: only --reference CAPTURE selects them
    runs = {check for check in VERDICTS if TIERS[tier].runs(check) and check not in checkids.PARITY}
    assert selected == runs, proc.stdout[-2000:]
    assert selected, proc.stdout[-2000:] + proc.stderr[-2000:]


# What each engine tier ran before its checks became verdicts over backends' observations (and runs still).
ENGINE_TIERS = {
    "offline": {
        checkids.I1_DURATION_AND_SR,
        checkids.I4_CONCURRENCY,
        checkids.I2_CONSUMER_FORMS,
        checkids.I5_STATE_FREED,
        checkids.I5_NO_GROWTH,
        checkids.I3_HOST_SYNCS,
        *checkids.PARITY,  # with --reference CAPTURE
    },
    "server": {
        checkids.SERVER_RESPONSE_FORMATS,
        checkids.I1_STREAM_EQUALS_OFFLINE,
        checkids.I4_CONCURRENCY,
        checkids.SERVER_BAD_REQUESTS,
        checkids.I5_STATE_FREED,
        checkids.I5_NO_GROWTH,
        checkids.I3_HOST_SYNCS,
    },
}


# The audio diagnostics every tier runs besides (replays, seams, seeds, aborts, gates; docs/diagnostics.md), and the
# stream checks the offline engine runs since it streams each text.
DIAGNOSTICS = {
    checkids.AUDIO_FINITE,
    checkids.AUDIO_GATES,
    checkids.I1_NO_REPLAY,
    checkids.I1_SEAMS,
    checkids.I4_SEED_DETERMINISM,
    checkids.I5_ABORT_RECOVERY,
}
NOW_STREAMED = {"offline": {checkids.I1_STREAM_EQUALS_OFFLINE}, "server": set()}


def test_the_engine_tiers_run_what_they_ran_before():
    for tier, checks in ENGINE_TIERS.items():
        ran = {check for check in VERDICTS if TIERS[tier].runs(check)}
        assert ran == checks | DIAGNOSTICS | NOW_STREAMED[tier], tier
    harness = {check for check in VERDICTS if HarnessBackend.runs(check)}
    assert harness == set(VERDICTS) - {checkids.SERVER_RESPONSE_FORMATS, checkids.SERVER_BAD_REQUESTS}


def test_the_probe_runs_the_url_backends_checks():
    assert [check for check, _ in STEPS] == [
        checkids.AUDIO_FINITE,  # first: the checks that compare audio say "not judged" on NaN
        checkids.SERVER_RESPONSE_FORMATS,
        checkids.I1_STREAM_EQUALS_OFFLINE,
        checkids.I1_NO_REPLAY,
        checkids.I1_SEAMS,
        checkids.I4_CONCURRENCY,
        checkids.I4_SEED_DETERMINISM,
        checkids.SERVER_BAD_REQUESTS,
        checkids.I5_ABORT_RECOVERY,
        checkids.AUDIO_GATES,
        checkids.PERF_RTF_TTFA,
    ]
    assert all(UrlBackend.runs(check) for check, _ in STEPS)
    assert {check for check in VERDICTS if UrlBackend.runs(check)} == {check for check, _ in STEPS}
