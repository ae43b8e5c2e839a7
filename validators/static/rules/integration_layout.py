"""Integration — examples layout of the guide: one hub README per direction, per-model folders
holding scripts only, and no top-level example folder for a TTS model. Tree scope (sdist/checkout)."""

from __future__ import annotations

from omnitts.knowledge.treefacts import EXAMPLES_OFFLINE as OFFLINE
from omnitts.knowledge.treefacts import EXAMPLES_ONLINE as ONLINE
from omnitts.knowledge.treefacts import TREE_MODELS as MODELS
from omnitts.knowledge.treefacts import TTS_ADAPTERS as ADAPTERS
from omnitts.knowledge.treefacts import TTS_HUB as HUB
from omnitts.validators.static.rule import Invalid, Report, Rule, Valid, register


def tts_names(ctx) -> set[str]:
    """Model names known to be TTS: hub sub-folders, TTS adapters, model dirs named *tts*."""

    def build():
        names: set[str] = set()
        for base in (OFFLINE, ONLINE):
            hub = ctx.root / base / HUB
            if hub.is_dir():
                names |= {p.name for p in hub.iterdir() if p.is_dir()}
        adapters = ctx.root / ADAPTERS
        if adapters.is_dir():
            names |= {p.stem for p in adapters.glob("*.py") if p.stem not in ("__init__", "base", "capabilities")}
        models = ctx.root / MODELS
        if models.is_dir():
            names |= {p.name for p in models.iterdir() if p.is_dir() and "tts" in p.name}
        return names

    return ctx.memo("tts_names", build)


_REG = {"vllm_omni/__init__.py": "", "vllm_omni/model_executor/models/registry.py": "_OMNI_MODELS = {}\n"}
_HUB = {f"{OFFLINE}/{HUB}/README.md": "# Text to speech\n", f"{OFFLINE}/{HUB}/demo_tts/end2end.py": "print('hi')\n"}


@register
class NoTopLevelExampleDir(Rule):
    """A TTS model with its own top-level example folder: `examples/offline_inference/<model>/` or
    `examples/online_serving/<model>/` instead of `.../text_to_speech/<model>/`.

    TTS models are the hub's sub-folders, the TTS adapters (`tts_adapters/<model>.py`) and model
    folders named `*tts*`.

    Why: the text-to-speech hub README is the documented surface, and the mkdocs
    `generate_examples` hook only descends one level into `examples/<category>/`: a top-level
    folder is undocumented and splits the TTS examples.

    Fix: move the scripts to `examples/<direction>/text_to_speech/<model>/` and add a section to
    the hub README.
    """

    id = "OMNI-INT-007"
    name = "no-top-level-example-dir"
    invariant = "INT"
    severity = "error"
    scope = "tree"
    VALID = [Valid(files={**_REG, **_HUB})]
    INVALID = [
        Invalid(
            files={**_REG, **_HUB, f"{OFFLINE}/demo_tts/end2end.py": "print('hi')\n"},
            path=f"{OFFLINE}/demo_tts",
            line=1,
            message="top-level example folder",
        )
    ]

    def check_tree(self, ctx):
        names = tts_names(ctx)
        for base in (OFFLINE, ONLINE):
            d = ctx.root / base
            if not d.is_dir():
                continue
            for sub in sorted(p for p in d.iterdir() if p.is_dir()):
                if sub.name != HUB and sub.name in names:
                    yield Report(
                        1,
                        1,
                        f"TTS model `{sub.name}` has a top-level example folder `{base}/{sub.name}/`; "
                        f"put it under `{base}/{HUB}/{sub.name}/`",
                        path=f"{base}/{sub.name}",
                        symbol=f"{base}/{sub.name}",
                    )


@register
class NoPerModelReadme(Rule):
    """A README inside a per-model folder of the text-to-speech hub
    (`examples/*/text_to_speech/<model>/README.md`).

    Why: the hub README (table row + per-model section) is the documented surface; the mkdocs hook
    ignores deeper READMEs, so the model's documentation never reaches the site.

    Fix: move the content into a `## <Model>` section of `examples/<direction>/text_to_speech/README.md`.
    """

    id = "OMNI-INT-008"
    name = "no-per-model-readme"
    invariant = "INT"
    severity = "error"
    scope = "tree"
    VALID = [Valid(files={**_REG, **_HUB})]
    INVALID = [
        Invalid(
            files={**_REG, **_HUB, f"{OFFLINE}/{HUB}/demo_tts/README.md": "# Demo\n"},
            path=f"{OFFLINE}/{HUB}/demo_tts/README.md",
            line=1,
            message="hub README",
        )
    ]

    def check_tree(self, ctx):
        for base in (OFFLINE, ONLINE):
            hub = ctx.root / base / HUB
            if not hub.is_dir():
                continue
            for readme in sorted(hub.glob("*/README*.md")) + sorted(hub.glob("*/readme*.md")):
                rel = ctx.rel(readme)
                yield Report(
                    1,
                    1,
                    f"per-model README `{rel}`: document the model in the hub README `{base}/{HUB}/README.md` instead",
                    path=rel,
                    symbol=rel,
                )
