"""``pytest validators ...`` loads the runtime validators' plugin here, and only here (no pytest11 entry point).

A conftest in the folder pytest is pointed at is read before the command line is parsed, so ``--model`` and the
other options exist for ``pytest validators --model NAME`` from the repo root, and for nothing else.
"""

PLUGIN = "omnitts.validators.plugin"


def pytest_addoption(parser, pluginmanager):
    # import_plugin registers once (omnitts-validate already passed it with -p); its own pytest_addoption runs then
    pluginmanager.import_plugin(PLUGIN)
