"""The pre-commit snippet of README.md (also docs/tutorial.md, docs/lint.md, .pre-commit-hooks.yaml) works as
written: its `rev` is the release tag of this version (`v` + pyproject.toml's version); a repository with tags has that
tag, on a commit carrying this version and the hooks it names; a copy without tags gets it from README.md's own tag
command; and pre-commit installs and runs the hooks from a fresh clone at that rev, the snippet's `repo:` being the
only word a contributor replaces (the path of their clone)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
PLACEHOLDER = "/path/to/omnitts"
GIT = ["git", "-c", "user.name=omnitts-test", "-c", "user.email=test@omnitts.invalid", "-c", "commit.gpgsign=false"]
SNIPPET_FILES = ("README.md", "docs/tutorial.md", "docs/lint.md", ".pre-commit-hooks.yaml")


def version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def hook_ids(text: str) -> set[str]:
    return {hook["id"] for hook in yaml.safe_load(text)}


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "repos:" in b]
    return block


def test_every_snippet_names_this_versions_tag():  # VALID
    tag = f"v{version()}"
    for rel in SNIPPET_FILES:
        text = (REPO / rel).read_text(encoding="utf-8")
        revs = re.findall(r"^[\s#-]*rev:\s*(\S+)", text, flags=re.M)  # the YAML lines (and the comment's)
        assert revs and set(revs) == {tag}, f"{rel}: rev {revs}, want {tag}"
        assert PLACEHOLDER in text, f"{rel}: the repo line names the contributor's clone"
        assert "<org>" not in text and "<tag>" not in text
    snippet = yaml.safe_load(readme_snippet())
    (entry,) = snippet["repos"]
    assert {h["id"] for h in entry["hooks"]} == hook_ids((REPO / ".pre-commit-hooks.yaml").read_text())


def readme_tag_command() -> list[str]:
    """The command README.md gives (inline) for a copy without tags, as an argument list."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`(git tag -a [^`]+)`", text)
    return shlex.split(command)


def tags(repo: Path) -> list[str]:
    return subprocess.run(["git", "tag"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()


def ensure_tag(repo: Path) -> str:
    """The release tag of this version in `repo`: there already, or made by README.md's command when `repo` has no
    tags at all (a tag set without this version's tag is a release mistake, not a tagless copy)."""
    tag = f"v{version()}"
    present = tags(repo)
    if not present:
        made = subprocess.run([*GIT, *readme_tag_command()[1:]], cwd=repo, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        present = tags(repo)
    assert tag in present, f"release tag {tag} missing among {present}: tag the commit of main that carries {version()}"
    return tag


def test_readme_tag_command_makes_this_versions_tag():  # VALID
    command = readme_tag_command()
    assert command[:3] == ["git", "tag", "-a"] and command[3] == f"v{version()}", command


def test_the_tag_carries_this_version_and_the_hooks(tmp_path):  # VALID
    clone = tmp_path / "omnitts"
    subprocess.run(["git", "clone", "-q", "--no-local", str(REPO), str(clone)], check=True, capture_output=True)
    tag = ensure_tag(clone)
    at_tag = subprocess.run(["git", "show", f"{tag}:pyproject.toml"], cwd=clone, capture_output=True, text=True)
    assert tomllib.loads(at_tag.stdout)["project"]["version"] == version()
    hooks = subprocess.run(["git", "show", f"{tag}:.pre-commit-hooks.yaml"], cwd=clone, capture_output=True, text=True)
    assert hook_ids(hooks.stdout) >= {"omnitts-lint", "omnitts-integration"}


def test_a_tag_set_without_this_version_is_refused(tmp_path):  # INVALID
    clone = tmp_path / "omnitts"
    subprocess.run(["git", "clone", "-q", "--no-local", str(REPO), str(clone)], check=True, capture_output=True)
    for tag in tags(clone):
        subprocess.run(["git", "tag", "-d", tag], cwd=clone, check=True, capture_output=True)
    subprocess.run([*GIT, "tag", "-a", "v0.0.0-other", "-m", "another release"], cwd=clone, check=True)
    with pytest.raises(AssertionError, match="release tag .* missing"):
        ensure_tag(clone)


@pytest.mark.slow
def test_snippet_runs_through_pre_commit_from_a_clone(tmp_path):
    """pre-commit clones the contributor's omnitts clone at `rev`, installs it into its own environment (pip, minutes
    on a cold cache) and runs both hooks on a commit of a model file."""
    clone = tmp_path / "omnitts"
    subprocess.run(["git", "clone", "-q", "--no-local", str(REPO), str(clone)], check=True, capture_output=True)
    ensure_tag(clone)
    checkout = tmp_path / "vllm-omni"
    model = checkout / "vllm_omni" / "model_executor" / "models" / "my_tts"
    model.mkdir(parents=True)
    (checkout / "vllm_omni" / "__init__.py").write_text("")
    (model / "__init__.py").write_text("")
    (model / "my_tts.py").write_text('"""A model file the per-file rules read."""\n\nSAMPLE_RATE = 24000\n')
    (checkout / ".pre-commit-config.yaml").write_text(readme_snippet().replace(PLACEHOLDER, str(clone)))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    env.pop("PYTHONPATH", None)
    subprocess.run([*GIT, "init", "-q"], cwd=checkout, check=True)
    pre_commit = [sys.executable, "-m", "pre_commit"]
    install = subprocess.run([*pre_commit, "install"], cwd=checkout, env=env, capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    assert (checkout / ".git" / "hooks" / "pre-commit").is_file()
    subprocess.run([*GIT, "add", "-A"], cwd=checkout, check=True)
    proc = subprocess.run(
        [*GIT, "commit", "-q", "-m", "a model file"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert re.search(r"omnitts static rules \(I1-I5\)\.+Passed", out), out[-4000:]
    assert re.search(r"omnitts integration consistency\.+Passed", out), out[-4000:]
