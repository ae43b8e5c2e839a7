"""Maps the repo's top-level folders onto the ``omnitts.*`` namespace (see pyproject.toml)."""

from setuptools import find_namespace_packages, setup

ROOTS = ("knowledge", "scaffold", "validators", "reference_models")
DATA = ["*.j2", "*.jinja", "*.json", "*.yaml", "*.yml", "*.md", "*.txt", "*.sh", "*.pt", "*.npz", "*.toml"]

packages: list[str] = []
package_dir: dict[str, str] = {}
for root in ROOTS:
    package_dir[f"omnitts.{root}"] = root
    packages.append(f"omnitts.{root}")
    packages += [f"omnitts.{root}.{sub}" for sub in find_namespace_packages(root, exclude=["*__pycache__*"])]
package_data = {pkg: DATA for pkg in packages}

# templates/ is data, not code: its folders are named like `{{cookiecutter.name}}`, which no package finder
# accepts, so the whole folder ships as data of one package.
package_dir["omnitts.templates"] = "templates"
packages.append("omnitts.templates")
package_data["omnitts.templates"] = ["**/*"]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    exclude_package_data={"": ["__pycache__/*", "*.pyc"]},
)
