"""Import alias: config readers live in `omnitts.knowledge.configs`. Kept so that branches written against the
old module still import; new code imports the knowledge layer."""

from omnitts.knowledge.configs import *  # noqa: F403
from omnitts.knowledge.configs import (  # noqa: F401
    Config,
    Located,
    Pipeline,
    Stage,
    all_pipelines,
    config_files,
    load_config,
    parse_pipelines,
    pipeline_for,
    processor_exists,
)
