"""Compatibility name: the serving codemods live in `serving.py` (five-point and hybrid eras, with inverses)."""

from omnitts.scaffold.codemods.serving import (  # noqa: F401
    CLASS,
    UNION,
    FivePointServing,
    HybridServing,
    RemoveFivePointServing,
    RemoveHybridServing,
    existing_stage_keys,
    stage_constant_name,
)
