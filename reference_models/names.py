"""The reference models and their mutants as the validators are handed them (the ``omnitts.model_catalogs`` entry
point): their names without importing torch or a model, and each one's subject from the catalog on first use."""

from __future__ import annotations

from omnitts.reference_models.mutants import MUTANTS

# the correct models, in the catalog's order (tests/runtime/test_loaders.py keeps them equal to its own)
MODELS = ("ref_two_stage", "ref_single_stage", "ref_native_ar")


def list_models() -> list[str]:
    """The correct models, then the mutants (``catalog.list_models()``)."""
    return [*MODELS, *MUTANTS]


def get_subject(name: str):
    from omnitts.reference_models import catalog

    return catalog.get_subject(name)
