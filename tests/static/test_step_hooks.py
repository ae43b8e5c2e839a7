"""knowledge/runner.py's per-step hook table: the one source of the methods each release's runner calls every
step, and (slow) every row checked against the runners of the released wheels."""

from __future__ import annotations

import re

import pytest

from omnitts.knowledge.runner import HOOK_REGISTRARS, STEP_HOOKS, contract_for, per_step_hooks

from .releases import RELEASES, release_tree


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


def test_every_release_has_the_core_hooks():
    for version in RELEASES:
        hooks = per_step_hooks(version)
        assert {"forward", "compute_logits", "make_omni_output", "preprocess", "postprocess"} <= set(hooks)
        sizes = ("seq_token_counts",) if _v(version) >= (0, 16) else ()
        assert hooks["forward"].request_lists == contract_for(version).buffer_kwargs + sizes
        assert hooks["preprocess"].per == hooks["postprocess"].per == "request"
        assert hooks["preprocess"].prefill_work and not hooks["postprocess"].prefill_work


def test_hooks_appear_with_the_release_that_calls_them():
    assert "sample" not in per_step_hooks("0.18.0") and "sample" in per_step_hooks("0.20.0")
    assert "preprocess_decode_batch" not in per_step_hooks("0.20.0")
    assert per_step_hooks("0.22.0")["preprocess_decode_batch"].request_lists == ("req_infos",)
    assert per_step_hooks("0.23.1") == per_step_hooks("0.22.0")  # between rows: the row below


def test_no_release_known_means_every_hook():
    union = per_step_hooks(None)
    assert set(union) == {h.name for h in STEP_HOOKS}
    assert set(union["forward"].request_lists) == {
        "runtime_additional_information",
        "model_intermediate_buffer",
        "seq_token_counts",
    }


def test_the_static_index_reads_the_table():
    import ast

    from omnitts.validators.static.index import ModuleIndex

    code = "class M:\n    def sample(self, logits, sampling_metadata):\n        return logits\n"
    assert ModuleIndex(ast.parse(code), code.splitlines(), release="0.18.0").per_step == set()
    assert ModuleIndex(ast.parse(code), code.splitlines(), release="0.20.0").per_step == {"M.sample"}
    registered = (
        "class M:\n    def __init__(self):\n        self.set_custom_postprocess(self.talker_post)\n"
        "    def talker_post(self, hidden, **info):\n        return {}\n"
    )
    index = ModuleIndex(ast.parse(registered), registered.splitlines(), release="0.16.0")
    assert index.hook(index.functions["M.talker_post"]).name == "postprocess"


def _runner_text(tree) -> str:
    return "\n".join(p.read_text() for p in sorted(tree.glob("vllm_omni/worker*/**/*.py")))


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_each_hook_is_called_by_that_releases_runner(version):
    """Every hook the table gives a release is called by its runner code (directly, through getattr/hasattr,
    or as `self.model(...)` for forward), and the registrars exist in its mixin."""
    tree = release_tree(version)
    text = _runner_text(tree)
    for name in per_step_hooks(version):
        if name == "forward":
            assert re.search(r"self\.model\(", text), version
            continue
        called = re.search(rf"model\.{name}\(|[\"']{name}[\"']|self\.{name}\(", text)
        assert called, f"{version}: the runner never calls {name}"
    mixin = (tree / "vllm_omni/model_executor/custom_process_mixin.py").read_text()
    for registrar in HOOK_REGISTRARS:
        assert f"def {registrar}(" in mixin, version


@pytest.mark.slow
def test_a_later_hook_is_not_called_before_its_row():
    for name, first in (("sample", "0.20.0"), ("preprocess_decode_batch", "0.22.0")):
        before = RELEASES[RELEASES.index(first) - 1]
        assert f'"{name}"' not in _runner_text(release_tree(before)), (name, before)
        assert _v(first) >= _v(next(h.since for h in STEP_HOOKS if h.name == name) + ".0")
