"""pytest plugin for the runtime validators (placeholder while the full plugin is written)."""


def pytest_addoption(parser):
    group = parser.getgroup("omnitts", "omnitts runtime validators")
    group.addoption("--model", action="store", default=None, help="model to validate")
