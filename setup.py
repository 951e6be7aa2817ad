"""Which packages the distribution holds; everything else about it is in pyproject.toml.

The code is every package under plugins/. The shipped data stays where the checkout keeps it
(inventories/profiles, suites, inventories/sim) and goes into the wheel as data-only
subpackages of nodegate._bundled: one copy in the repository, none generated.
"""

from setuptools import find_namespace_packages, setup

BUNDLED = {
    "nodegate._bundled.profiles": "inventories/profiles",
    "nodegate._bundled.suites": "suites",
    "nodegate._bundled.sim": "inventories/sim",
}

# Namespace discovery: data-only folders (schemas, sim/data) are packages too, as Python sees them.
CODE = find_namespace_packages(
    "plugins", include=["nodegate", "nodegate.*"], exclude=["*__pycache__"]
)

setup(
    packages=[*CODE, *BUNDLED],
    package_dir={"": "plugins", **BUNDLED},
)
