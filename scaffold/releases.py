"""Import alias: release fetching and the cache live in `omnitts.knowledge.releases`. Kept so that branches
written against the old module still import; new code imports the knowledge layer."""

from omnitts.knowledge.releases import *  # noqa: F403
from omnitts.knowledge.releases import cache_lock, cache_root, parse_spec, pristine_tree, working_copy  # noqa: F401
