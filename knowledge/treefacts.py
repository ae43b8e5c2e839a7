"""What the target vLLM-Omni tree really does, read from its files (never from a version string), as
the static checks need it.

``TreeFacts`` is small and hashable: it travels to worker processes and into the cache key, because
per-file rules depend on it (which request-id keys the runner sets, which dependencies the release
declares). ``TreeContext`` adds the lazily parsed tree-wide inputs the tree-scope rules need.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from omnitts.knowledge.layout import ADAPTERS as TTS_ADAPTERS
from omnitts.knowledge.layout import (
    CONSOLIDATION_FILES,
    EXAMPLES_OFFLINE,
    EXAMPLES_ONLINE,
    PKG,
    TTS_HUB,
    find_model_root,
    find_root,
    tree_version,
)
from omnitts.knowledge.layout import MODELS as TREE_MODELS

# Layout names the tree-scope rules import from here (a warm, cached lint run imports no rule module).
__all__ = [
    "CONSOLIDATION_FILES",
    "EXAMPLES_OFFLINE",
    "EXAMPLES_ONLINE",
    "PKG",
    "TREE_MODELS",
    "TTS_ADAPTERS",
    "TTS_HUB",
    "TreeContext",
    "TreeFacts",
    "facts_for",
    "find_model_root",
    "find_root",
]
# Keys a model may read from its per-request dicts to identify a request.
ID_KEYS = ("request_id", "req_id", "global_request_id", "_omni_req_id")
# Used when no tree is found (standalone reference models, freshly rendered templates): every key a
# released runner sets somewhere in 0.14-0.30; `_omni_req_id` is never set by any release.
DEFAULT_ID_KEYS = ("request_id", "req_id", "global_request_id")

# Distributions a vLLM-Omni install always has although vllm-omni does not declare them: vLLM (a
# prerequisite) and its own requirements (requirements/common.txt + cuda.txt, 0.20 era), torch and
# transformers' requirements. Names are normalized (lower case, `-`/`.` -> `_`).
PLATFORM_PROVIDED = frozenset(
    """vllm torch torchaudio torchvision triton transformers tokenizers huggingface_hub safetensors numpy
    regex cachetools psutil sentencepiece requests tqdm blake3 py_cpuinfo protobuf fastapi aiohttp openai
    pydantic prometheus_client pillow prometheus_fastapi_instrumentator tiktoken lm_format_enforcer
    llguidance outlines_core diskcache lark xgrammar typing_extensions filelock partial_json_parser pyzmq
    msgspec gguf mistral_common opencv_python_headless pyyaml six setuptools einops compressed_tensors
    depyf cloudpickle watchfiles python_json_logger scipy ninja pybase64 cbor2 setproctitle numba ray
    xformers flashinfer_python sympy networkx jinja2 fsspec packaging uvicorn starlette anyio httpx
    importlib_metadata msgpack zmq""".split()
)
# Top-level module name -> distribution name, where they differ.
MODULE_TO_DIST = {
    "PIL": "pillow",
    "cv2": "opencv_python_headless",
    "yaml": "pyyaml",
    "sklearn": "scikit_learn",
    "skimage": "scikit_image",
    "zmq": "pyzmq",
    "whisper": "openai_whisper",
    "google": "protobuf",
    "attr": "attrs",
    "cpuinfo": "py_cpuinfo",
    "flashinfer": "flashinfer_python",
    "pythonjsonlogger": "python_json_logger",
    "dateutil": "python_dateutil",
    "Crypto": "pycryptodome",
    "jose": "python_jose",
    "magic": "python_magic",
    "pkg_resources": "setuptools",
}
DIST_ALIASES = {"opencv_python": "opencv_python_headless", "imageio_ffmpeg": "imageio"}


def normalize_dist(name: str) -> str:
    name = re.split(r"[\s\[<>=!~;(]", name.strip(), maxsplit=1)[0]
    norm = re.sub(r"[-_.]+", "_", name).lower()
    return DIST_ALIASES.get(norm, norm)


def module_dist(module: str) -> str:
    top = module.split(".")[0]
    return normalize_dist(MODULE_TO_DIST.get(top, top))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def readable_id_keys(root: Path) -> tuple[str, ...]:
    """Every id key the release's runners / orchestrator / stage processors write into per-request dicts
    (what a model may read to identify a request; `knowledge.runner` has the key the finish hook matches)."""
    pkg = root / PKG
    found: set[str] = set()
    for f in sorted(pkg.glob("worker/*.py")) + sorted(pkg.glob("platforms/*/worker/*.py")):
        text = _read(f)
        # req_infos["request_id"] = req_id  (0.20+, preprocess path of every has_preprocess model)
        has_key = 'request_id"]' in text or "request_id']" in text
        if has_key and re.search(r"""\w+\[["']request_id["']\]\s*=[^=]""", text):
            found.add("request_id")
    for f in sorted(pkg.glob("worker_v2/**/*.py")):
        # Model Runner V2 intermediate buffer: info["req_id"] = new_req_data.req_id (0.30+)
        text = _read(f)
        if ('req_id"]' in text or "req_id']" in text) and re.search(r"""\w+\[["']req_id["']\]\s*=[^=]""", text):
            found.add("req_id")
    for sub in ("engine", "entrypoints"):
        for f in sorted((pkg / sub).glob("**/*.py")):
            text = _read(f)
            if "global_request_id" in text and re.search(r"""["']global_request_id["']\]?\s*[:=][^=]""", text):
                found.add("global_request_id")
                break
    # Stage-input processors write ids into the payload of the next stage (cosyvoice3: "req_id").
    for f in sorted((pkg / "model_executor" / "stage_input_processors").glob("*.py")):
        text = _read(f)
        for key in ("request_id", "req_id"):
            if key in text and re.search(rf"""["']{key}["']\s*:|\[["']{key}["']\]\s*=[^=]""", text):
                found.add(key)
    return tuple(k for k in ID_KEYS if k in found)


def _declared_deps(root: Path) -> tuple[frozenset[str] | None, str]:
    """Required (non-extra) dependencies from wheel METADATA, or sdist requirements/pyproject."""
    metas = sorted(root.glob(f"{PKG}-*.dist-info/METADATA"))
    if metas:
        deps = set()
        for line in _read(metas[0]).splitlines():
            if line.startswith("Requires-Dist:") and "extra ==" not in line:
                deps.add(normalize_dist(line.split(":", 1)[1]))
        return frozenset(deps), metas[0].relative_to(root).as_posix()
    req_dir = root / "requirements"
    if req_dir.is_dir():
        deps = set()
        for f in ("common.txt", "cuda.txt"):
            for line in _read(req_dir / f).splitlines():
                line = line.split("#", 1)[0].strip()
                if line and not line.startswith("-"):
                    deps.add(normalize_dist(line))
        return frozenset(deps), "requirements/common.txt + cuda.txt"
    try:  # a TOML parser, not a regex: entries such as "imageio[ffmpeg]" hold brackets
        deps = tomllib.loads(_read(root / "pyproject.toml")).get("project", {}).get("dependencies")
    except tomllib.TOMLDecodeError:
        deps = None
    if isinstance(deps, list):
        return frozenset(normalize_dist(d) for d in deps if isinstance(d, str)), "pyproject.toml"
    return None, "none found"


@dataclass(frozen=True)
class TreeFacts:
    root: str | None = None
    version: str | None = None
    request_id_keys: tuple[str, ...] = DEFAULT_ID_KEYS
    declared_deps: frozenset[str] | None = None
    deps_source: str = "none found"

    @property
    def is_tree(self) -> bool:
        return self.root is not None

    def dep_available(self, module: str) -> bool:
        dist = module_dist(module)
        if dist in PLATFORM_PROVIDED or dist == "vllm_omni":
            return True
        return self.declared_deps is not None and dist in self.declared_deps

    def key(self) -> str:
        deps = ",".join(sorted(self.declared_deps)) if self.declared_deps is not None else "-"
        raw = f"{self.root}|{','.join(self.request_id_keys)}|{deps}"
        return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def facts_for(root: Path | None) -> TreeFacts:
    if root is None:
        return TreeFacts()
    root = Path(os.path.abspath(root))
    deps, source = _declared_deps(root)
    keys = readable_id_keys(root)
    return TreeFacts(str(root), tree_version(root), keys or DEFAULT_ID_KEYS, deps, source)


@dataclass
class TreeContext:
    """Tree-wide inputs for tree-scope rules; ``focus`` limits config rules to the named files."""

    root: Path
    facts: TreeFacts
    focus: frozenset[str] | None = None  # posix paths relative to root; None = whole tree
    models: frozenset[str] | None = None  # model dirs/names a model-package lint is about
    _cache: dict = field(default_factory=dict)

    @property
    def standalone(self) -> bool:
        """A model root outside vLLM-Omni (`models/`, `deploy/`, `stage_input_processors/`)."""
        return not (self.root / PKG).is_dir()

    def dir(self, name: str) -> str:
        """Where `deploy`, `models`, `stage_configs`, `stage_input_processors` live in this layout."""
        if self.standalone:
            return name
        return {"deploy": f"{PKG}/deploy"}.get(name, f"{PKG}/model_executor/{name}")

    def rel(self, path: Path) -> str:
        return Path(os.path.abspath(path)).relative_to(self.root).as_posix()

    def read(self, rel: str) -> str:
        return _read(self.root / rel)

    def in_focus(self, rel: str) -> bool:
        return self.focus is None or rel in self.focus

    def memo(self, key: str, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]
