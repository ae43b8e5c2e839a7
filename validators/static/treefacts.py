"""Import alias: tree facts live in `omnitts.knowledge.treefacts`. Kept so that branches written against the
old module still import; new code imports the knowledge layer."""

from omnitts.knowledge.treefacts import *  # noqa: F403
from omnitts.knowledge.treefacts import DEFAULT_ID_KEYS, ID_KEYS, TreeContext, TreeFacts, facts_for  # noqa: F401
