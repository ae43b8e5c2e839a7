"""Names derived from the user's model name, and the template context built from them."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from omnitts.scaffold.errors import ScaffoldError

_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_ARCH = re.compile(r"^[A-Z][A-Za-z0-9]*$")

PATTERNS = ("two-stage", "single-stage", "native-ar")

# The generated tiny model's defaults, shared with the pattern templates' config classes.
TINY_MODEL_SAMPLE_RATE = 16000
TINY_MODEL_EOS_TOKEN_ID = 1

# vLLM-Omni's own license header convention (every .py of the 0.14-0.30 releases starts with it).
DEFAULT_LICENSE_HEADER = (
    "# SPDX-License-Identifier: Apache-2.0\n# SPDX-FileCopyrightText: Copyright contributors to the vLLM project"
)


# The longest file name derived from a model name is the temp file of its streaming-contract test,
# `.test_<name>_streaming_contract.py.omnitts-tmp` (name + 47 bytes); 64 keeps every derived name far below
# the 255-byte limit of common file systems, and below what a reviewer reads as a name.
MAX_NAME_LENGTH = 64


def check_identifier(value: str, what: str) -> str:
    if len(value) > MAX_NAME_LENGTH:
        raise ScaffoldError(
            f"{what} of {len(value)} characters is too long: at most {MAX_NAME_LENGTH}, so that every file name"
            " derived from it fits the file system"
        )
    if keyword.iskeyword(value) or keyword.issoftkeyword(value):
        raise ScaffoldError(f"{what} {value!r} is a Python keyword; pick another name")
    if not _IDENT.fullmatch(value):  # fullmatch: `$` would let a trailing newline through
        raise ScaffoldError(
            f"{what} {value!r} is not a valid lower_snake_case Python identifier (letters, digits, underscores)"
        )
    return value


def check_name_in_tree(root: Path, name: str) -> None:
    """Refuse a model name that is already a module or package in a folder the scaffold writes into.

    `new registry` would put `models/registry/` next to `models/registry.py`; the package wins the import
    and `from .registry import ...` breaks for the whole tree. The model's own earlier run (its folder with
    `pipeline.py`) is not a conflict: `new` is idempotent."""
    from omnitts.knowledge import layout

    if (root / layout.MODELS / name / "pipeline.py").is_file():
        return
    folders = (
        layout.MODELS,
        layout.PROCESSORS,
        layout.ADAPTERS,
        "vllm_omni/transformers_utils/configs",
        "examples/offline_inference/text_to_speech",
        "examples/online_serving/text_to_speech",
        "tests/model_executor/models",
    )
    for folder in folders:
        base = root / folder
        for candidate in (base / name, base / f"{name}.py", base / f"{name}.so"):
            if candidate.exists():
                kind = "package" if candidate.is_dir() else "module"
                raise ScaffoldError(
                    f"{candidate.relative_to(root).as_posix()} already exists: the model name {name!r} would"
                    f" shadow or join that {kind} of the tree; pick another name"
                )


def camel_case(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


@dataclass(frozen=True)
class ModelNames:
    """Every name the integration uses, derived once so that all files agree."""

    name: str
    pattern: str
    model_type: str
    stage_key: str
    arch: str
    priority: str = "medium"

    @property
    def camel(self) -> str:
        return camel_case(self.name)

    @property
    def upper(self) -> str:
        return self.name.upper()

    @property
    def decoder_arch(self) -> str | None:
        return f"{self.camel}Code2Wav" if self.pattern == "two-stage" else None

    @property
    def decoder_stage_key(self) -> str | None:
        return f"{self.name}_code2wav" if self.pattern == "two-stage" else None

    @property
    def stage_keys(self) -> tuple[str, ...]:
        return tuple(k for k in (self.stage_key, self.decoder_stage_key) if k)

    @property
    def archs(self) -> tuple[str, ...]:
        return tuple(a for a in (self.arch, self.decoder_arch) if a)

    @property
    def pipeline_var(self) -> str:
        return f"{self.model_type.upper()}_PIPELINE"

    @property
    def config_class(self) -> str:
        return f"{self.camel}Config"

    def registry_entries(self) -> list[tuple[str, str, str, str]]:
        """(arch, package dir, module stem, class) for each class the registry must resolve."""
        n, c = self.name, self.camel
        if self.pattern == "two-stage":
            return [
                (self.arch, n, f"{n}_talker", f"{c}TalkerForConditionalGeneration"),
                (self.decoder_arch, n, f"{n}_code2wav", f"{c}Code2Wav"),
            ]
        if self.pattern == "single-stage":
            return [(self.arch, n, f"modeling_{n}", f"{c}ForGeneration")]
        return [(self.arch, n, f"modeling_{n}", f"{c}ForConditionalGeneration")]


def make_names(
    name: str,
    pattern: str,
    *,
    model_type: str | None = None,
    stage_key: str | None = None,
    arch: str | None = None,
    priority: str = "medium",
) -> ModelNames:
    check_identifier(name, "model name")
    if pattern not in PATTERNS:
        raise ScaffoldError(f"unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
    # None means the default; an empty string is a value (and refused), never the default in disguise.
    model_type = check_identifier(name if model_type is None else model_type, "model type")
    stage_key = check_identifier(name if stage_key is None else stage_key, "stage key")
    arch = f"{camel_case(name)}ForConditionalGeneration" if arch is None else arch
    if len(arch) > 2 * MAX_NAME_LENGTH or not _ARCH.fullmatch(arch) or keyword.iskeyword(arch):
        raise ScaffoldError(f"architecture {arch!r} is not a CamelCase Python class name")
    if priority not in ("high", "medium", "low"):
        raise ScaffoldError(f"unknown priority {priority!r}; choose high, medium or low")
    names = ModelNames(name, pattern, model_type, stage_key, arch, priority)
    if names.decoder_arch == arch:
        raise ScaffoldError(f"architecture {arch!r} collides with the decoder class name")
    return names


def template_context(
    names: ModelNames,
    *,
    target: str = "vllm_omni",
    request_id_keys: tuple[str, ...] = ("request_id",),
    license_header: str = DEFAULT_LICENSE_HEADER,
    flat_request_output: bool = True,
    chunk_payload_kwarg: str = "pooling_output",
    chunk_payload_struct: bool = False,
) -> dict[str, str]:
    """The cookiecutter context every template receives (docs/architecture.md lists the keys)."""
    standalone = target == "standalone"
    return {
        "name": names.name,
        "camel": names.camel,
        "upper": names.upper,
        "model_type": names.model_type,
        "arch": names.arch,
        "decoder_arch": names.decoder_arch or "",
        "stage_key": names.stage_key,
        "decoder_stage_key": names.decoder_stage_key or "",
        "pattern": names.pattern,
        "priority": names.priority,
        "target": target,
        "module_prefix": "omnitts.reference_models" if standalone else "vllm_omni.model_executor",
        "omni_output_import": (
            "from omnitts.reference_models.contract import OmniOutput"
            if standalone
            else "from vllm_omni.model_executor.models.output_templates import OmniOutput"
        ),
        "logger_import": "import logging" if standalone else "from vllm.logger import init_logger",
        "logger_init": "logger = logging.getLogger(__name__)" if standalone else "logger = init_logger(__name__)",
        "request_id_keys": ",".join(request_id_keys),
        # "1" where Omni.generate() yields RequestOutputs (0.28+), "" where they sit in `.request_output`.
        "flat_request_output": "1" if flat_request_output else "",
        # The async-chunk processor's payload parameter: the keyword the release's chunk transfer adapter passes
        # (`pooling_output` to 0.22, the reference models' 0.20 runner; `multimodal_output` from 0.24).
        "chunk_payload_kwarg": chunk_payload_kwarg,
        # "1" where the async-chunk processor returns vllm_omni.data_entry_keys.OmniPayloadStruct (0.22+), "" where
        # it returns a dict (to 0.20, the reference models' runner).
        "chunk_payload_struct": "1" if chunk_payload_struct else "",
        "license_header": license_header,
        # Defaults of the generated tiny model (its config class); the contributor replaces them.
        "sample_rate": str(TINY_MODEL_SAMPLE_RATE),
        "eos_token_id": str(TINY_MODEL_EOS_TOKEN_ID),
        "hf_repo": f"your-org/{names.name.replace('_', '-')}",
    }
