"""Import alias: the tree's own detection, compiled without importing it, lives in
`omnitts.knowledge.detection`. Kept so that branches written against the old module still import."""

from omnitts.knowledge.detection import *  # noqa: F403
from omnitts.knowledge.detection import (  # noqa: F401
    AdapterRegistry,
    arch_literals,
    compile_adapter_registry,
    compile_detector,
    known_detections,
    read_adapter_sources,
    stage_keys,
)
