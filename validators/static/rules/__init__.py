"""Every rule module; importing this package registers all rules (one module per family)."""

from omnitts.validators.static.rules import (  # noqa: F401
    conformance,
    i1_output,
    i2_consumers,
    i3_hotloop,
    i4_batch,
    i5_state,
    integration_code,
    integration_config,
    integration_layout,
    meta,
)
