"""The model catalogs installed beside the validators: each package that brings models to validate (omnitts's
reference models and their mutants) registers its catalog in the ``omnitts.model_catalogs`` entry-point group
(pyproject.toml), and the plugin hands the catalogs to the loader. The validators import no catalog themselves."""

from __future__ import annotations

from importlib.metadata import entry_points

GROUP = "omnitts.model_catalogs"


def installed() -> tuple:
    """The registered catalogs (each a module or object with ``list_models()`` and ``get_subject(name)``)."""
    return tuple(ep.load() for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name))
