"""Edits of a generated `pipeline.py` that depend on the era (the shared template is era-neutral).

0.26+ select a pipeline's deploy yaml through `PipelineConfig.default_deploy_config_name`
(`config_factory` loads `deploy/<that name>` when no --deploy-config is given); without it the
stages get `DeployConfig()` defaults. `add_deploy_config_name` adds the keyword right after
`model_type=`, as every pipeline of those releases has it.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from omnitts.scaffold.errors import ScaffoldError

KEYWORD = "default_deploy_config_name"


def add_deploy_config_name(source: str, yaml_name: str, rel: str) -> str:
    module = cst.parse_module(source)
    found = False

    class _Add(cst.CSTTransformer):
        def leave_Call(self, original_node, updated_node):
            nonlocal found
            if not m.matches(updated_node.func, m.Name("PipelineConfig")):
                return updated_node
            args = list(updated_node.args)
            if any(a.keyword is not None and a.keyword.value == KEYWORD for a in args):
                found = True
                return updated_node
            index = next(
                (i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "model_type"), None
            )
            if index is None:
                return updated_node
            found = True
            new = args[index].with_changes(keyword=cst.Name(KEYWORD), value=cst.SimpleString(f'"{yaml_name}"'))
            return updated_node.with_changes(args=[*args[: index + 1], new, *args[index + 1 :]])

    out = module.visit(_Add())
    if not found:
        raise ScaffoldError(f"internal error: {rel} has no PipelineConfig(model_type=...) call")
    return out.code
