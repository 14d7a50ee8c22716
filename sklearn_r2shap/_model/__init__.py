"""One representation of a trained tree ensemble, one adapter per library.

:func:`to_ensemble` dispatches on the module the model's class comes from;
the adapters import XGBoost, LightGBM and CatBoost only when such a model is
given.

Layer: models. Imports only the ground floor (``_errors``, ``_validation``,
``_numerics``) and ``_kernels``.
"""
import sys

from .._errors import UnsupportedModelError
from .._min_dependencies import check_library_version
from ._ensemble import TreeArrays, TreeEnsemble
from . import _catboost, _lightgbm, _sklearn, _xgboost

__all__ = ["TreeArrays", "TreeEnsemble", "to_ensemble", "UnsupportedModelError",
           "prepare_ensemble", "is_prepared"]

#: The adapter of each library, by the top-level module of the model's class.
_ADAPTERS = {"sklearn": _sklearn, "xgboost": _xgboost, "lightgbm": _lightgbm,
             "catboost": _catboost}


def is_tree_model(model):
    """Whether ``model`` is of a type :func:`to_ensemble` reads: a scikit-learn
    tree model, or any XGBoost, LightGBM or CatBoost model (which
    ``to_ensemble`` may still refuse for its configuration, e.g. an objective
    or split type it cannot explain exactly)."""
    module = type(model).__module__.split(".")[0]
    if module in ("xgboost", "lightgbm", "catboost"):
        return True
    if module == "sklearn":
        return _sklearn.is_tree_model(model)
    return False


def to_ensemble(model, *, missing=None):
    """Translate a fitted tree model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : estimator or Booster
        A fitted scikit-learn tree model, XGBoost, LightGBM or CatBoost model,
        or a :class:`TreeEnsemble` (returned as is).
    missing : float, optional
        XGBoost ``Booster`` only: the value its ``DMatrix`` reads as missing
        (``DMatrix(X, missing=...)``; default NaN). A ``Booster`` does not
        store it; the XGBoost estimators (``XGBRegressor``, ...) do, and
        their own ``missing`` is used. Entries equal to it (compared as
        float32, as XGBoost does) are treated as NaN by every function that
        is given the returned ensemble.

    Returns
    -------
    TreeEnsemble

    Examples
    --------
    >>> import numpy as np
    >>> import xgboost
    >>> from sklearn_r2shap import shap_values, to_ensemble
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 3, size=(200, 3)).astype(float)
    >>> y = X[:, 0] + 2 * (X[:, 1] == 0)
    >>> booster = xgboost.train({"max_depth": 2}, xgboost.DMatrix(X, y, missing=0.0),
    ...                         num_boost_round=5)
    >>> ensemble = to_ensemble(booster, missing=0.0)
    >>> phi = shap_values(ensemble, X[:3])
    >>> own = booster.predict(xgboost.DMatrix(X[:3], missing=0.0), output_margin=True)
    >>> bool(np.allclose(phi.sum(axis=1), own, atol=1e-5))
    True
    """
    if isinstance(model, TreeEnsemble):
        if missing is not None:
            raise ValueError("missing= is read when a model is translated; pass the "
                             "XGBoost model itself, not a TreeEnsemble.")
        return model
    module = type(model).__module__.split(".")[0]
    adapter = _ADAPTERS.get(module)
    if adapter is None:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not a supported tree model: expected a fitted "
            "scikit-learn tree, forest or gradient boosting model, or an XGBoost, "
            "LightGBM or CatBoost model."
        )
    if module != "sklearn":  # scikit-learn's floor is the package's own
        check_library_version(module, sys.modules[module].__version__, UnsupportedModelError)
    if missing is not None:
        if module != "xgboost":
            raise ValueError(
                f"missing= applies to XGBoost models only; {type(model).__name__} reads NaN "
                "as missing (LightGBM's zero_as_missing is read from the model itself)."
            )
        return adapter.convert(model, missing=missing)
    return adapter.convert(model)


def prepare_ensemble(ensemble):
    """Mark ``ensemble`` as a prepared explainer's (in place; returned): the
    games played on it fix their routes for many rows and keep their tables
    across calls (``_games.semivalues.SemivalueGame.for_rows``)."""
    ensemble.cached("prepared", lambda: True)
    return ensemble


def is_prepared(ensemble):
    """Whether :func:`prepare_ensemble` marked ``ensemble``."""
    return ensemble.__dict__.get("_cache", {}).get("prepared", False)


def explainable_ensemble(model):
    """The model's ensemble for the path-dependent and interventional games,
    refusing linear leaves (``PiecewiseLinearExplainer`` explains those)."""
    ensemble = to_ensemble(model)
    if ensemble.has_linear_leaves:
        raise UnsupportedModelError(
            f"{ensemble.model_type} has linear leaves (linear_tree=True); use "
            "PiecewiseLinearExplainer to explain it."
        )
    return ensemble
