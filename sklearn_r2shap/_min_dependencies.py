"""The oldest versions of the dependencies that the package supports, in one place.

``pyproject.toml`` states the same floors (``tests/test_packaging.py`` fails
if the two differ), and CI installs exactly these versions and runs the fast
tests against them::

    python sklearn_r2shap/_min_dependencies.py install test

prints the pins of the run-time dependencies and of the test tag, e.g.
``numpy==1.25.0 scipy==1.10.0 ...``; it runs without importing the package.

Layer: ground floor. Imports nothing of the package.
"""
import sys

#: the oldest CPython the package supports (3.9 and 3.10 are end-of-life)
PYTHON_MIN_VERSION = "3.11"

#: package -> (oldest supported version, comma-separated tags: "install" for a
#: run-time dependency, else the extras that ask for it; "test" marks the
#: optional libraries whose floors CI installs and tests)
DEPENDENT_PACKAGES = {
    "numpy": ("1.25.0", "install"),
    "scipy": ("1.10.0", "install"),
    "scikit-learn": ("1.6.0", "install"),
    "pandas": ("2.0.0", "test, doc"),
    "xgboost-cpu": ("2.1.1", "test, doc, benchmark"),
    "lightgbm": ("4.0.0", "test, doc, benchmark, lightgbm"),
    "catboost": ("1.2", "test"),
    "dask[array,dataframe]": ("2024.12.0", "test, doc, benchmark, dask"),
    "distributed": ("2024.12.0", "test, doc, benchmark, dask"),
    "matplotlib": ("3.7.0", "test, doc, plot"),
    "tqdm": ("4.60.0", "test, progress"),
}


def floors(tag):
    """``{package: version}`` of the packages whose tags include ``tag``."""
    return {name: version for name, (version, tags) in DEPENDENT_PACKAGES.items()
            if tag in [t.strip() for t in tags.split(",")]}


if __name__ == "__main__":
    tags = sys.argv[1:] or ["install"]
    pins = {}
    for tag in tags:
        pins.update(floors(tag))
    print(" ".join(f"{name}=={version}" for name, version in pins.items()))
