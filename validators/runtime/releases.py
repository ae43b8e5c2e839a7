"""Import alias: the runner contract per release lives in `omnitts.knowledge.runner`
(`contract_for(version_or_tree)`). Kept so that branches written against the old module still import;
new code imports the knowledge layer."""

from omnitts.knowledge.layout import tree_version  # noqa: F401
from omnitts.knowledge.runner import DEFAULT_RELEASE, KNOWN_RELEASES, RunnerContract, consolidation_era  # noqa: F401
from omnitts.knowledge.runner import contract_for as profile_for  # noqa: F401

ReleaseProfile = RunnerContract
