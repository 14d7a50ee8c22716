"""Every public exception and warning class of the package, and the one import
of an optional dependency.

Ground floor: imports nothing of the package. The classes are re-exported
by the package root (``sklearn_r2shap.UnsupportedModelError``, ...).

Layer: ground floor.
"""
import importlib

__all__ = ["UnsupportedModelError", "UndefinedScoreError", "SampledAlgorithmWarning",
           "import_optional"]


class UnsupportedModelError(TypeError, ValueError):
    """A model, objective, split type or setting that cannot be explained exactly."""


class UndefinedScoreError(ValueError):
    """The target has no variation under the weights (a constant y, or a single
    class): R^2 and D^2, ratios over that variation, are not defined."""


class SampledAlgorithmWarning(UserWarning):
    """``algorithm="auto"`` ran the sampled R^2 decomposition instead of the exact one."""


#: How to install each optional dependency: the package's extra where it has one.
_INSTALL = {
    "matplotlib": "pip install 'sklearn-r2shap[plot]'",
    "tqdm": "pip install 'sklearn-r2shap[progress]'",
    "dask": "pip install 'sklearn-r2shap[dask]'",
    "pyspark": "pip install 'sklearn-r2shap[spark]'",
    "lightgbm": "pip install lightgbm (or pip install 'sklearn-r2shap[lightgbm]')",
    "pandas": "pip install pandas",
    "polars": "pip install polars",
    "pyarrow": "pip install pyarrow",
    "shap": "pip install shap",
    "xgboost": "pip install xgboost",
    "catboost": "pip install catboost",
}


def import_optional(name, needed_for):
    """The module ``name`` of an optional dependency, imported now.

    Parameters
    ----------
    name : str
        The module, e.g. ``"matplotlib.pyplot"`` or ``"pandas"``.
    needed_for : str
        What needs it, for the message (e.g. ``"Plotting"``).

    Raises
    ------
    ImportError
        Saying what needs the package and how to install it.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        package = name.partition(".")[0]
        install = _INSTALL.get(package, f"pip install {package}")
        raise ImportError(f"{needed_for} needs {package}, which is not installed: "
                          f"{install}.") from exc
