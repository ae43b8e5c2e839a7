"""What omnitts knows about vLLM-Omni releases: the one layer that scaffold, validators and reference
models import (and that imports none of them)."""
