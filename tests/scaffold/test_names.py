"""Names: `new` refuses a name whose footprint the tree holds, and for every name it accepts, `remove`
is its exact inverse.

The property test draws names from a seeded generator built for the bug class, not for instances:
words of the tree's own code (string literals and module names: `"json"`, `"wav"`), CamelCase twins of
the tree's models (`qwen3_t_t_s` spells `Qwen3TTS`), their prefixes, extensions and underscore
variants, and random snake_case. Each name either is refused in one line with nothing written, or
`new` then `remove` gives back every byte (the whole tree is compared at the end).
`OMNITTS_NAME_CASES=N` draws N names per release (default 24).
"""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path

import pytest

from omnitts.knowledge import layout
from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold.cli import main
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import MAX_NAME_LENGTH, PATTERNS, make_names
from omnitts.scaffold.new import plan_new
from omnitts.scaffold.remove import plan_remove

SEED = 22
IDENT = re.compile(r"[a-z][a-z0-9_]*")


def _refused(capsys, root, hash_tree, argv, match):
    before = hash_tree(root)
    code = main(["new", *argv, "--target", str(root)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("omnitts-scaffold: error: "), err
    assert match in err, err
    assert hash_tree(root) == before


@pytest.mark.parametrize("word", ["torch", "json", "test", "type", "wav", "speech"])
def test_a_name_remove_could_not_tell_from_the_trees_code_is_refused(work_tree, hash_tree, capsys, word):
    """`new torch` succeeded, then `remove torch` refused forever: the tree says "torch" elsewhere."""
    _refused(capsys, work_tree("0.30.0"), hash_tree, [word, "--pattern", "single-stage"], f'already names "{word}"')


def test_a_camel_case_twin_of_an_upstream_model_is_refused(work_tree, hash_tree, capsys):
    """`qwen3_t_t_s` spells its classes `Qwen3TTS...`: its config class would be upstream qwen3_tts's
    `Qwen3TTSConfig` (a second import of the name in arg_utils.py, `check` complete, `remove` refusing)."""
    root = work_tree("0.30.0")
    argv = ["qwen3_t_t_s", "--pattern", "single-stage", "--arch", "TwinForConditionalGeneration"]
    _refused(capsys, root, hash_tree, argv, "Qwen3TTSConfig")
    # Its default architecture is upstream's too: refused by the registry first.
    _refused(capsys, root, hash_tree, ["qwen3_t_t_s", "--pattern", "two-stage"], "Qwen3TTSForConditionalGeneration")


def test_a_name_under_which_remove_would_delete_upstream_files_is_refused(work_tree, hash_tree, capsys):
    """`remove` deletes the tests named after the model (`test_<name>_*.py`): `new serving_video` then `remove
    serving_video` deleted upstream's tests/entrypoints/openai_api/test_serving_video_stream.py (found by the
    property test below)."""
    root = work_tree("0.20.0")
    message = "test_serving_video_stream.py already exists, and remove would delete it as serving_video's own"
    _refused(capsys, root, hash_tree, ["serving_video", "--pattern", "single-stage"], message)


def test_two_names_of_one_camel_case_cannot_both_be_added(work_tree, hash_tree, capsys):
    root = work_tree("0.30.0")
    assert main(["new", "twin_tts", "--pattern", "native-ar", "--target", str(root)]) == 0
    capsys.readouterr()
    argv = ["twin__tts", "--pattern", "single-stage", "--arch", "OtherForConditionalGeneration"]
    # Whichever of twin_tts's CamelCase names the refusal meets first (its config, its reference adapter, ...).
    _refused(capsys, root, hash_tree, argv, "already names TwinTts")


# -- the property ------------------------------------------------------------------------------------


def _vocabulary(root: Path) -> dict[str, list[str]]:
    """Words of the tree, by kind, sorted (the generator draws from them with a seeded RNG)."""
    literals, modules = set(), set()
    for path in sorted((root / "vllm_omni").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        modules.add(path.stem)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and IDENT.fullmatch(node.value):
                literals.add(node.value)
    models = sorted(p.name for p in (root / layout.MODELS).iterdir() if p.is_dir() and IDENT.fullmatch(p.name))
    return {"literal": sorted(literals), "module": sorted(modules), "model": models}


def _twin(rng: random.Random, model: str) -> str:
    """Another spelling of a model's name: letters split apart, parts merged, underscores doubled."""
    parts = model.split("_")
    i = rng.randrange(len(parts))
    how = rng.choice(["split", "merge", "double", "trail"])
    if how == "split" and len(parts[i]) > 1:
        parts[i] = "_".join(parts[i])
    elif how == "merge" and len(parts) > 1:
        return "".join(parts)
    elif how == "double" and len(parts) > 1:
        return "__".join(parts)
    elif how == "trail":
        return f"{model}_"
    return "_".join(parts)


def _generated_names(root: Path, n: int) -> list[tuple[str, str]]:
    rng = random.Random(SEED)
    words = _vocabulary(root)
    out: list[tuple[str, str]] = []
    while len(out) < n:
        kind = rng.choice(["literal", "module", "twin", "prefix", "extend", "random"])
        if kind in ("literal", "module"):
            name = rng.choice(words[kind])
        elif kind == "twin":
            name = _twin(rng, rng.choice(words["model"]))
        elif kind == "prefix":
            model = rng.choice(words["model"])
            name = model[: rng.randint(1, len(model))].rstrip("_") or model
        elif kind == "extend":
            name = f"{rng.choice(words['model'])}_{rng.choice(['2', 'v2', 'tts', 'x', 'lite'])}"
        else:
            letters = "abcdefghijklmnopqrstuvwxyz"
            parts = ["".join(rng.choice(letters + "0123456789") for _ in range(rng.randint(1, 8))) for _ in range(3)]
            name = rng.choice(letters) + "_".join(parts[: rng.randint(1, 3)])
        name = name[:MAX_NAME_LENGTH]
        if IDENT.fullmatch(name) and name not in {drawn for drawn, _ in out}:
            out.append((name, rng.choice(PATTERNS)))
    return out


@pytest.mark.parametrize("version", ["0.30.0", "0.20.0"])  # adapter-only (wheel) and five-point (sdist, hubs)
def test_new_and_remove_are_exact_inverses_for_every_name_new_accepts(work_tree, hash_tree, version):
    root = work_tree(version)
    before = hash_tree(root)
    names = _generated_names(root, int(os.environ.get("OMNITTS_NAME_CASES", "24")))
    accepted, refused = [], []
    for name, pattern in names:
        profile = detect_profile(root)
        try:
            plan = plan_new(profile, make_names(name, pattern), parallel=False)
        except ScaffoldError as exc:
            assert "\n" not in str(exc), (name, str(exc))
            refused.append(name)
            continue
        originals = {op.rel: (root / op.rel).read_bytes() for op in plan.changes if op.old is not None}
        created = [op.rel for op in plan.changes if op.old is None]
        plan.apply()
        try:
            undo = plan_remove(detect_profile(root), name, parallel=False)
        except ScaffoldError as exc:
            pytest.fail(f"new accepted {name!r} ({pattern}), remove refuses it: {exc}")
        assert {op.rel for op in undo.changes} == {op.rel for op in plan.changes}, name  # no file but new's
        undo.apply()
        for rel, data in originals.items():
            assert (root / rel).read_bytes() == data, (name, rel)
        assert not [rel for rel in created if (root / rel).exists()], name
        accepted.append(name)
    print(f"\n{version}: {len(names)} names, {len(accepted)} accepted and removed exactly, {len(refused)} refused")
    assert accepted and refused  # the generator reaches both sides of the property
    assert hash_tree(root) == before
