"""The oldest versions of the dependencies that the package supports, in one place.

``pyproject.toml`` states the same floors (``tests/test_packaging.py`` fails
if the two differ), CI installs exactly these versions and runs the fast
tests against them, and a model of a library older than its floor is refused
(:func:`check_library_version`) rather than read the way a newer one writes
it::

    python sklearn_r2shap/_min_dependencies.py install test

prints the pins of the run-time dependencies and of the test tag, e.g.
``numpy==1.25.0 scipy==1.10.0 ...``; it runs without importing the package.

Layer: ground floor. Imports nothing of the package.
"""
import re
import sys

#: the oldest CPython the package supports (3.9 and 3.10 are end-of-life)
PYTHON_MIN_VERSION = "3.11"

#: requirement name -> (oldest supported version, comma-separated tags:
#: "install" for a run-time dependency, else the extras that ask for it,
#: "test" marking those whose floors CI installs and tests; the module it
#: imports as). Each floor is the oldest release with which the tests pass.
DEPENDENT_PACKAGES = {
    "numpy": ("1.25.0", "install", "numpy"),
    "scipy": ("1.10.0", "install", "scipy"),
    # 1.8: d2_brier_score, the D^2 of probability-averaging classifiers
    "scikit-learn": ("1.8.0", "install", "sklearn"),
    "pandas": ("2.0.0", "test, doc", "pandas"),
    "polars": ("0.20.0", "test", "polars"),
    "pyarrow": ("14.0.1", "test, spark, doc", "pyarrow"),
    # 3.1.0 writes another intercept for multiclass models; 3.0 codes
    # integer categories otherwise
    "xgboost-cpu": ("3.1.1", "test, doc, benchmark", "xgboost"),
    # 4.5 and older: no feature names in the scikit-learn API, no leaf count
    # of single-leaf trees in the model string
    "lightgbm": ("4.6.0", "test, doc, benchmark, lightgbm", "lightgbm"),
    "catboost": ("1.2", "test", "catboost"),
    # 2025.3 and older: the model is copied into every task of the graph
    "dask[array,dataframe]": ("2025.4.0", "test, doc, benchmark, dask", "dask"),
    "distributed": ("2025.4.0", "test, doc, benchmark, dask", "distributed"),
    # 4.0: mapInArrow of record batches with the Arrow types the engine writes
    # (the tests ran on 4.3.0; Spark itself needs Java 17 or 21)
    "pyspark": ("4.0.0", "spark, doc", "pyspark"),
    "matplotlib": ("3.7.0", "test, doc, plot", "matplotlib"),
    "tqdm": ("4.60.0", "test, progress", "tqdm"),
}

#: what a user installs for each model library (the name pip knows it by)
_INSTALL_NAMES = {"xgboost": "xgboost", "lightgbm": "lightgbm", "catboost": "catboost",
                  "sklearn": "scikit-learn"}


def floors(tag):
    """``{requirement: version}`` of the packages whose tags include ``tag``."""
    return {name: version for name, (version, tags, _) in DEPENDENT_PACKAGES.items()
            if tag in [t.strip() for t in tags.split(",")]}


def _release(version):
    """The leading numbers of a version string, e.g. ``(3, 1, 3)`` of ``"3.1.3rc1"``."""
    match = re.match(r"\d+(\.\d+)*", str(version))
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def oldest_version(module):
    """The oldest supported version of the package imported as ``module``."""
    for version, _, name in DEPENDENT_PACKAGES.values():
        if name == module:
            return version
    raise KeyError(module)


def check_library_version(module, version, error=ValueError):
    """Raise ``error`` if ``version`` of ``module`` is older than its floor.

    A model library's file formats and defaults change between releases
    (intercepts, category codes, leaf counts), so a model of an older release
    than the tests ran on is refused, not read as the newer one writes it.
    """
    floor = oldest_version(module)
    if _release(version) < _release(floor):
        install = _INSTALL_NAMES.get(module, module)
        raise error(
            f"{install} {version} is older than {floor}, the oldest version whose models "
            f"sklearn-r2shap is tested to read exactly; upgrade it "
            f"(pip install --upgrade \"{install}>={floor}\") and refit or reload the model.")


if __name__ == "__main__":
    pins = {}
    for tag in sys.argv[1:] or ["install"]:
        pins.update(floors(tag))
    print(" ".join(f"{name}=={version}" for name, version in pins.items()))
