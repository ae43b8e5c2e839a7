"""End to end: `pytest validators --model ...` in subprocesses (xdist, mutants, hangs, fail-closed static)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOYS = str(Path(__file__).with_name("toys.py"))


def _pytest(*args, cwd=REPO, pre: str = "pass", env: dict | None = None) -> subprocess.CompletedProcess:
    code = f"import sys, pytest; {pre}; sys.exit(pytest.main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=None if env is None else {**os.environ, **env},
    )


def _run(out: Path, tier: str = "harness") -> Path:
    """The newest run folder of ``tier`` under the results folder ``out``."""
    from omnitts.validators.runtime.results import latest_run

    run = latest_run(out, tier)
    assert run is not None, sorted(p.name for p in out.iterdir()) if out.is_dir() else f"{out} missing"
    return run


def _results(out: Path, tier: str = "harness") -> dict:
    return json.loads((_run(out, tier) / "results.json").read_text())["models"]


def test_list_models_exits_zero():
    from omnitts.validators.runtime.catalogs import installed
    from omnitts.validators.runtime.loaders import list_model_names

    names = list_model_names(installed())
    proc = _pytest("validators", "--list-models")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == names


def test_checks_need_a_model():
    proc = _pytest("validators", "-q")
    assert proc.returncode != 0 and "--model" in (proc.stdout + proc.stderr)


def test_toys_pass_mutants_fail_under_xdist(tmp_path):
    models = [
        f"{TOYS}:two_stage",
        f"{TOYS}:single_stage",
        f"{TOYS}:two_stage@no_context",
        f"{TOYS}:single_stage@shared",
        f"{TOYS}:two_stage@leak",
        f"{TOYS}:two_stage@sync",
        f"{TOYS}:single_stage@replay",
        f"{TOYS}:single_stage@raise",
        f"{TOYS}:single_stage@hang",
        f"{TOYS}:single_stage@sleep",
    ]
    proc = _pytest(
        "validators",
        "--model",
        ",".join(models),
        "-n",
        "2",
        "-q",
        "--omnitts-out",
        str(tmp_path),
        "--check-timeout",
        "6",
        "-k",
        # audio.gates judges speech-likeness (duration per character, silence): the toys' clips are not speech
        "not static and not graph_breaks and not gates",
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    res = _results(tmp_path)
    failed = {m.split(":", 1)[1]: {c for c, s in r["results"].items() if s == "failed"} for m, r in res.items()}
    assert failed["two_stage"] == set() and failed["single_stage"] == set()
    assert "chunk.boundaries" in failed["two_stage@no_context"]
    assert "i4.concurrency" in failed["single_stage@shared"]
    assert "i5.state_freed" in failed["two_stage@leak"]
    assert failed["two_stage@sync"] == {"i3.host_syncs"}
    assert "i1.declared_semantics" in failed["single_stage@replay"]
    raised = res[f"{TOYS}:single_stage@raise"]["failures"]
    assert any("toy bug: forward exploded" in m and "model traceback" in m for m in raised.values())
    hung = res[f"{TOYS}:single_stage@hang"]["failures"]
    assert any("deadline" in m and "while True" in m for m in hung.values())
    slept = res[f"{TOYS}:single_stage@sleep"]["failures"]  # blocked in one call, in an xdist worker
    assert any("HANG" in m and "time.sleep(1e6)" in m for m in slept.values())
    # what a person sees: WAVs named in the messages, the checklist as Markdown and JSON
    assert list((_run(tmp_path) / "wav").rglob("*.wav"))
    md = (_run(tmp_path) / "checklist.md").read_text()
    assert "[x] I1:" in md and "Phase 4: Async Chunk" in md
    assert "omnitts integration checklist" in proc.stdout  # compact form: one line per model when > 3 models
    sync_msg = res[f"{TOYS}:two_stage@sync"]["failures"]["i3.host_syncs"]
    assert "toys.py" in sync_msg and ".item()" in sync_msg


def test_static_check_fails_closed_without_the_static_module(tmp_path):
    proc = _pytest(
        "validators",
        "--model",
        f"{TOYS}:single_stage",
        "-q",
        "-k",
        "static",
        "--omnitts-out",
        str(tmp_path),
        pre="sys.modules['omnitts.validators.static.api'] = None",
    )
    assert proc.returncode == 1
    assert "fail closed" in proc.stdout


def test_omnitts_validate_from_another_directory(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.validate", "--model", f"{TOYS}:single_stage", "-v", "-k", "i2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "omnitts-out"
    assert (_run(out) / "checklist.md").is_file() and (out / "checklist.md").is_file()
    # readable test ids: relative to the checks folder, not ../../site-packages/... paths
    assert f"test_checks.py::test_check[i2.consumer_forms-{TOYS}:single_stage] PASSED" in proc.stdout
    assert "../" not in proc.stdout.split("test_check[")[0].splitlines()[-1]


def test_omnitts_validate_has_its_own_short_help():
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.validate", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("usage: omnitts-validate") and len(lines) < 50
    assert "--omni-root" in proc.stdout and "--collect-only" not in proc.stdout  # not pytest's help


def _fake_tree(root: Path, release: str = "0.30.0") -> Path:
    """The files omnitts-validate and the requirement check read: the package, its version, one model folder."""
    pkg = root / "vllm_omni"
    (pkg / "model_executor" / "models" / "my_tts").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text(f"__version__ = version = '{release}'\n")
    return root


def test_omnitts_validate_in_a_tree_defaults_to_it_and_writes_outside(tmp_path, monkeypatch):
    from omnitts.validators import validate

    tree = _fake_tree(tmp_path / "vllm-omni")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ns, rest = validate._parser().parse_known_args(["--model", "my_tts", "-x"])
    args = validate.pytest_args(ns, rest, tree / "vllm_omni")
    assert args[args.index("--omnitts-omni-root") + 1] == str(tree.resolve())
    out = Path(args[args.index("--omnitts-out") + 1])
    assert not out.is_relative_to(tree) and out.is_relative_to(tmp_path / "cache")
    assert args[-1] == "-x"  # pytest options pass through
    # a reference model, run from inside the tree: no --omni-root, results still outside the tree
    ns, rest = validate._parser().parse_known_args(["--model", "ref_two_stage"])
    args = validate.pytest_args(ns, rest, tree / "vllm_omni")
    assert "--omnitts-omni-root" not in args and not Path(args[args.index("--omnitts-out") + 1]).is_relative_to(tree)
    # outside any tree: ./omnitts-out, and no tree
    ns, rest = validate._parser().parse_known_args(["--model", "ref_two_stage"])
    args = validate.pytest_args(ns, rest, tmp_path)
    assert "--omnitts-omni-root" not in args and args[args.index("--omnitts-out") + 1] == str(tmp_path / "omnitts-out")


def test_missing_vllm_is_one_line_naming_the_trees_vllm(tmp_path):
    from omnitts.knowledge.pairing import vllm_requirement
    from omnitts.validators.requirements import installed

    if installed("vllm"):
        pytest.skip("vllm is installed here")
    tree = _fake_tree(tmp_path / "vllm-omni", "0.28.0")
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.validate", "--model", "my_tts"],
        cwd=tree / "vllm_omni",
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode != 0 and len(text.splitlines()) == 1, text
    assert vllm_requirement("0.28.0") in text and "0.28.0" in text
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before  # nothing written into the tree


def test_missing_torch_is_one_line_once_per_run():
    proc = _pytest("validators", "--model", f"{TOYS}:single_stage", "-q", pre="sys.modules['torch'] = None")
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode != 0 and len(text.splitlines()) == 1, text
    assert "torch" in text and "omnitts[runtime]" in text


def test_a_blocked_model_fails_its_check_within_the_deadline_and_the_suite_goes_on(tmp_path):
    """time.sleep(1e6) in forward (one blocking call, single process): a HANG with the stuck line, in time."""
    timeout = 3
    junit = tmp_path / "junit.xml"
    t0 = time.monotonic()
    proc = _pytest(
        "validators", "--model", f"{TOYS}:single_stage@sleep,{TOYS}:single_stage", "-q", "-p", "no:xdist",
        "--check-timeout", str(timeout), "-k", "i1.stream_equals_offline or i4.concurrency",
        "--omnitts-out", str(tmp_path), f"--junitxml={junit}",
    )  # fmt: skip
    assert time.monotonic() - t0 < 240
    assert proc.returncode == 1, proc.stdout[-3000:]
    res = _results(tmp_path)
    assert set(res[f"{TOYS}:single_stage"]["results"].values()) == {"passed"}
    msg = res[f"{TOYS}:single_stage@sleep"]["failures"]["i1.stream_equals_offline"]
    assert "HANG" in msg and "time.sleep(1e6)" in msg and "toys.py" in msg
    cases = {c.get("name"): float(c.get("time")) for c in ET.parse(junit).getroot().iter("testcase")}
    stuck = cases[f"test_check[i1.stream_equals_offline-{TOYS}:single_stage@sleep]"]
    assert stuck < timeout + 10, cases  # deadline + 2 s grace + model set-up


def test_memory_growth_over_a_check_is_reported(tmp_path):
    proc = _pytest(
        "validators", "--model", f"{TOYS}:single_stage@hog,{TOYS}:single_stage", "-q", "-p", "no:xdist",
        "-k", "i1.stream_equals_offline", "--omnitts-out", str(tmp_path),
    )  # fmt: skip
    res = _results(tmp_path)
    grew = {m: r["metrics"]["i1.stream_equals_offline"]["memory"]["rss_growth_mb"] for m, r in res.items()}
    assert grew[f"{TOYS}:single_stage@hog"] > 128 > grew[f"{TOYS}:single_stage"], grew
    assert f"memory growth: {TOYS}:single_stage@hog i1.stream_equals_offline: rss +" in proc.stdout


FOREIGN_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu")
    parser.addoption("--model", default="theirs")
"""
FOREIGN_TEST = """
import pytest


@pytest.mark.parametrize("model_name", ["a", "b"])
def test_m(model_name, request):
    assert model_name in ("a", "b")
    assert request.config.getoption("device") == "cpu" and request.config.getoption("model") == "theirs"
"""


def test_a_foreign_suite_is_untouched_with_omnitts_installed(tmp_path):
    """Another project's suite (vLLM-Omni's own has both) sees no omnitts option, fixture or parametrisation."""
    from importlib.metadata import entry_points

    assert not [ep for ep in entry_points(group="pytest11") if ep.value.startswith("omnitts")]
    (tmp_path / "conftest.py").write_text(FOREIGN_CONFTEST)
    (tmp_path / "test_foreign.py").write_text(FOREIGN_TEST)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--model", "theirs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
    assert "omnitts" not in proc.stdout + proc.stderr


def test_options_have_collision_free_spellings(tmp_path):
    """A suite whose conftest took --device and --model loads the plugin below it: both keep working."""
    (tmp_path / "conftest.py").write_text(FOREIGN_CONFTEST)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "conftest.py").write_text(
        "def pytest_addoption(parser, pluginmanager):\n    pluginmanager.import_plugin('omnitts.validators.plugin')\n"
    )
    (tmp_path / "sub" / "test_both.py").write_text(
        "def test_both(pytestconfig):\n"
        "    assert pytestconfig.getoption('device') == 'gpu' and pytestconfig.getoption('model') == 'theirs'\n"
        "    assert pytestconfig.getoption('omnitts_device') == 'cuda'\n"
        "    assert pytestconfig.getoption('omnitts_omni_root') == 'DIR'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "sub", "--device", "gpu", "--model", "theirs",
         "--omnitts-device", "cuda", "--omni-root", "DIR"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_vllm_extras_follow_the_pairing_table():
    """Each release's extra installs the table's vLLM, and no extra installs a vLLM the table does not pair."""
    from importlib.metadata import metadata

    from omnitts.knowledge.pairing import PAIRINGS, vllm_requirement

    requires = metadata("omnitts").get_all("Requires-Dist") or []
    vllm_pins = {r.split(";")[0].strip(): r.split("extra ==")[-1].strip().strip("'\"") for r in requires if "vllm" in r}
    expected = {vllm_requirement(r): "vllm-" + r.replace(".", "-") for r in PAIRINGS}
    assert vllm_pins == expected


def test_one_models_checks_land_on_one_worker_under_three_workers(tmp_path):
    """Issue 13: with ``-n 3`` every check of one model runs on one xdist worker (``--dist loadgroup`` reaches the
    workers, so their node ids carry the model's group). Before the fix each model's checks spread over all three."""
    models = [f"{TOYS}:two_stage", f"{TOYS}:single_stage", f"{TOYS}:two_stage@leak"]
    proc = _pytest(
        "validators",
        "--model",
        ",".join(models),
        "-n",
        "3",
        "-q",
        "--omnitts-out",
        str(tmp_path),
        "--check-timeout",
        "6",
        "-k",
        "i1 or i2 or i5",
    )
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    res = _results(tmp_path)
    assert set(res) == set(models)
    workers = {m: {r["worker"] for r in r_["ran_on"]} for m, r_ in res.items()}
    assert all(len(w) == 1 for w in workers.values()), workers
    assert all(next(iter(w)).startswith("gw") for w in workers.values()), workers
    # the mutant's group is its whole name, not the part after "@" (xdist splits groups at the last "@")
    assert "@" not in "".join(next(iter(w)) for w in workers.values())


def _item_lines(md: str, model: str) -> dict[str, str]:
    """The checklist.md lines of one model's section, by item id prefix (``I1``, ``I4``...)."""
    section = md.split(f"## Integration Checklist — {model}\n", 1)[1].split("## Integration Checklist — ", 1)[0]
    found = (re.match(r"- \[.\] (\w+):", line) for line in section.splitlines())
    return {m.group(1): m.string for m in found if m}


def test_a_check_that_kills_its_xdist_worker_is_failed_and_ticks_nothing(tmp_path):
    """Issue 22: under -n 2 a model whose check kills its worker (os._exit) had that check "passed" in results.json
    and I1, I4 ticked [x] in checklist.md, while pytest exited 1. Each crashed check is run once (xdist's loadgroup
    would requeue it with its group until the restart limit, and the model's other checks never ran)."""
    crash, good = f"{TOYS}:single_stage@exit", f"{TOYS}:single_stage"
    proc = _pytest(
        "validators", "--model", f"{crash},{good}", "-n", "2", "-q", "--omnitts-out", str(tmp_path),
        "-k", "i1.stream_equals_offline or i4.concurrency",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    res = _results(tmp_path)
    assert res[crash]["results"] == {"i1.stream_equals_offline": "failed", "i4.concurrency": "failed"}
    assert all("crashed while running" in m and "os._exit" in m for m in res[crash]["failures"].values())
    assert set(res[good]["results"].values()) == {"passed"}
    for md in ((_run(tmp_path) / "checklist.md").read_text(), (tmp_path / "checklist.md").read_text()):
        items = _item_lines(md, crash)
        assert items["I1"].startswith("- [ ]") and "FAILED" in items["I1"], items["I1"]
        assert items["I4"].startswith("- [ ]") and "FAILED" in items["I4"], items["I4"]
        assert _item_lines(md, good)["I4"].startswith("- [x]")
    # Once per check, not once per replacement worker (the short summary repeats each failure's message under CI=true).
    assert len(re.findall(r"^worker '\w+' crashed while running", proc.stdout, re.M)) == 2, proc.stdout[-3000:]


def test_a_gil_holding_hang_under_xdist_shows_the_stuck_stack(tmp_path):
    """A C call that holds the GIL cannot be interrupted: faulthandler ends the worker; its stack (written to the
    run folder, not to the captured stderr) is in the check's failure, in the terminal and in results.json."""
    hung = f"{TOYS}:single_stage@gil"
    proc = _pytest(
        "validators", "--model", f"{hung},{TOYS}:single_stage", "-n", "2", "-q", "--omnitts-out", str(tmp_path),
        "--check-timeout", "2", "-k", "i1.stream_equals_offline",
        env={"OMNITTS_KILL_AFTER": "2"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    msg = _results(tmp_path)[hung]["failures"]["i1.stream_equals_offline"]
    assert "crashed while running" in msg and "Timeout" in msg and "in forward" in msg and "toys.py" in msg, msg
    assert "in forward" in proc.stdout  # the failure the terminal shows carries the stack too


def test_a_gil_holding_hang_in_one_process_still_writes_results_with_the_stack(tmp_path):
    """Issue 22: without xdist the same hang printed `sss`, no stack and no results. faulthandler ends the process;
    the watcher rebuilds the outcomes from the journal, fails the running check with the stack, leaves the check
    that never ran unticked and says where the results are."""
    hung, good = f"{TOYS}:single_stage@gil", f"{TOYS}:single_stage"
    proc = _pytest(
        "validators", "--model", f"{good},{hung}", "-p", "no:xdist", "-q", "--omnitts-out", str(tmp_path),
        "--check-timeout", "2", "-k", "i1.stream_equals_offline or i4.concurrency",
        env={"OMNITTS_KILL_AFTER": "2"},
    )  # fmt: skip
    assert proc.returncode != 0
    res = _results(tmp_path)  # the watcher wrote it before the pipes closed (it holds them)
    msg = res[hung]["failures"]["i1.stream_equals_offline"]
    assert res[hung]["results"] == {"i1.stream_equals_offline": "failed", "i4.concurrency": "not-run"}
    assert "died while this check ran" in msg and "toys.py" in msg and "in forward" in msg, msg
    # the checks after the hang never ran (file order: both models' I1 check, then the I4 checks)
    assert res[good]["results"] == {"i1.stream_equals_offline": "passed", "i4.concurrency": "not-run"}
    assert "the pytest process died while running" in proc.stderr and "in forward" in proc.stderr
    assert not (_run(tmp_path) / ".journal.jsonl").exists()
    md = (tmp_path / "checklist.md").read_text()
    assert _item_lines(md, hung)["I1"].startswith("- [ ]") and "FAILED" in _item_lines(md, hung)["I1"]
    assert _item_lines(md, good)["I4"].startswith("- [ ]") and "NOT PROVEN" in _item_lines(md, good)["I4"]


def test_a_passing_run_writes_wavs_into_its_own_folder_and_keeps_earlier_runs(tmp_path):
    """Issue 20: one folder per run, WAVs of a passing run too, and a second run does not overwrite the first."""
    args = ["validators", "--model", f"{TOYS}:single_stage", "-p", "no:xdist", "-q", "--omnitts-out", str(tmp_path)]
    first = _pytest(*args, "-k", "i2")
    assert first.returncode == 0, first.stdout[-2000:]
    run1 = _run(tmp_path)
    served = sorted(p.name for p in (run1 / "wav").rglob("*.wav"))
    assert served == [f"req-{i}.wav" for i in range(4)], served  # the toy's four prompts, from a passing run
    assert f"this run: {run1}" in first.stdout
    second = _pytest(*args, "-k", "i4")
    assert second.returncode == 0
    run2 = _run(tmp_path)
    assert run2 != run1 and (run1 / "results.json").is_file() and run2.name.startswith("harness-")
    merged = json.loads((tmp_path / "checklist.json").read_text())["models"][f"{TOYS}:single_stage"]
    assert merged["runs"] == {"harness": run2.name}


def test_a_wrong_model_is_one_line_before_any_check_runs(tmp_path):
    """Issue 20: a misspelt --model gave 17 failures (~690 lines); now one line naming the nearest model."""
    proc = _pytest("validators", "--model", "ref_two_stag", "--omnitts-out", str(tmp_path / "out"))
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 4 and len(text.splitlines()) == 1, text
    assert "ref_two_stag" in text and "did you mean ref_two_stage?" in text and "--list-models" in text
    assert not (tmp_path / "out").exists()


def test_a_wrong_tree_model_at_the_engine_tier_is_one_line_and_leaves_nothing(tmp_path):
    """Issue 20: at --engine offline a wrong --model gave a FileNotFoundError traceback, 7 errors after 26 s, 7
    temporary folders and a cache log. Now: one line with the tree's models and the nearest one; nothing written."""
    tree = _fake_tree(tmp_path / "vllm-omni")
    (tree / "vllm_omni" / "model_executor" / "models" / "my_tts" / "__init__.py").write_text("")
    (tree / "vllm_omni" / "model_executor" / "models" / "qwen3_tts").mkdir()
    (tree / "vllm_omni" / "model_executor" / "models" / "qwen3_tts" / "__init__.py").write_text("")
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    cache.mkdir()
    for tier in ("offline", "server", "harness"):
        proc = _pytest(
            "validators", "--engine", tier, "--omni-root", str(tree), "--model", "my_ttz",
            "--omnitts-out", str(tmp_path / "out"),
            env={"TMPDIR": str(tmp), "OMNITTS_CACHE": str(cache)},
        )  # fmt: skip
        text = (proc.stdout + proc.stderr).strip()
        assert proc.returncode == 4 and len(text.splitlines()) == 1, text
        assert "--model my_ttz" in text and "did you mean my_tts?" in text and "my_tts, qwen3_tts" in text, text
    assert not (tmp_path / "out").exists() and not list(tmp.iterdir()) and not list(cache.iterdir())


def test_the_engine_tier_without_a_tree_is_one_line():
    proc = _pytest("validators", "--engine", "offline", "--model", "my_tts")
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 4 and len(text.splitlines()) == 1 and "--omni-root" in text, text


def test_no_unknown_mark_warnings_in_the_quick_tier():
    """Issue 20: 56 PytestUnknownMarkWarnings in `python -m pytest -m "not slow"` (tests that import the checks)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "not slow", "-q", "--collect-only",
         "-W", "error::pytest.PytestUnknownMarkWarning"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "PytestUnknownMarkWarning" not in proc.stdout + proc.stderr


def test_nan_audio_is_one_diagnosis_and_no_other_check_blames_something_else(tmp_path):
    """NaN in the model's output fails audio.finite, once, naming NaN; the checks that compare audio say 'not judged'
    instead of failing with a reason that is not the bug (replays, crosstalk, seams)."""
    proc = _pytest(
        "validators",
        "--model",
        f"{TOYS}:single_stage@nan",
        "-p",
        "no:xdist",
        "-q",
        "-rA",
        "--omnitts-out",
        str(tmp_path),
        "-k",
        "not static and not graph_breaks",
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    (result,) = _results(tmp_path).values()
    failed = {c for c, s in result["results"].items() if s == "failed"}
    assert failed == {"audio.finite"}, (failed, result["failures"])
    assert "NaN/Inf" in result["failures"]["audio.finite"]
    failed_lines = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert len(failed_lines) == 1 and "audio.finite" in failed_lines[0], proc.stdout[-3000:]
    assert "see audio.finite" in proc.stdout  # the comparing checks point to it instead of judging


def test_an_internal_error_leaves_nothing_ticked(tmp_path):
    """pytest's INTERNALERROR after a check passed: the run's results say so and tick nothing (fail closed)."""
    (tmp_path / "boom_plugin.py").write_text(
        "def pytest_runtest_logfinish(nodeid, location):\n    raise RuntimeError('boom: a plugin broke')\n"
    )
    proc = _pytest(
        "validators", "--model", f"{TOYS}:single_stage", "-p", "no:xdist", "-q", "-p", "boom_plugin",
        "--omnitts-out", str(tmp_path / "out"), "-k", "i2",
        env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((_run(tmp_path / "out") / "results.json").read_text())
    assert doc["complete"] is False and any("internal error" in e for e in doc["errors"]), doc["errors"]
    md = (tmp_path / "out" / "checklist.md").read_text()
    assert "- [x]" not in md and "NOT PROVEN" in md


def test_a_check_ended_by_pytest_timeout_is_failed_not_passed(tmp_path):
    """pytest-timeout's thread method ends the whole process (os._exit) when a check overruns: the watcher fails
    that check and leaves the rest not run; nothing of the model is ticked."""
    slow = f"{TOYS}:single_stage@sleep"
    proc = _pytest(
        "validators", "--model", slow, "-p", "no:xdist", "-q", "--omnitts-out", str(tmp_path),
        "--check-timeout", "60", "--timeout", "5", "--timeout-method", "thread",
        "-k", "i1.stream_equals_offline or i4.concurrency",
    )  # fmt: skip
    assert proc.returncode != 0
    res = _results(tmp_path)[slow]
    assert res["results"] == {"i1.stream_equals_offline": "failed", "i4.concurrency": "not-run"}, res
    assert "died while this check ran" in res["failures"]["i1.stream_equals_offline"]
    assert "- [x]" not in (_run(tmp_path) / "checklist.md").read_text()
