"""Import alias: layout eras live in the knowledge layer (`omnitts.knowledge.eras`, paths in
`omnitts.knowledge.layout`). Kept so that branches written against the old module still import;
`FIVE_POINT` / `HYBRID` / `ADAPTER` are the era objects themselves. New code imports the knowledge layer."""

from omnitts.knowledge.eras import ADAPTER, ERAS, FIVE_POINT, HYBRID, LayoutProfile, Point, detect_profile  # noqa: F401
from omnitts.knowledge.layout import *  # noqa: F403
from omnitts.knowledge.layout import tree_version  # noqa: F401

ERA_TITLES = {era: era.title for era in ERAS}
