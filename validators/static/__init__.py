"""Static validators for vLLM-Omni TTS integrations (invariants I1-I5 and integration consistency).

Entry points: ``omnitts-lint`` (``cli.main``) and the API in ``api`` (``lint_paths``,
``lint_model_package``). Imports here stay lazy so that a warm, cached ``omnitts-lint`` run does not
pay for modules it does not use.
"""

from omnitts.validators.static.finding import Finding

__all__ = ["Finding", "lint_paths", "lint_model_package"]


def __getattr__(name: str):
    if name in ("lint_paths", "lint_model_package"):
        from omnitts.validators.static import api

        return getattr(api, name)
    raise AttributeError(name)
