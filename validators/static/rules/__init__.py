"""Every rule module; importing this package registers all rules (one module per family)."""

from omnitts.validators.static.rules import i3_hotloop  # noqa: F401
