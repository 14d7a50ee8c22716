"""One representation of a trained tree ensemble, one adapter per library.

:func:`to_ensemble` dispatches on the module the model's class comes from, so
that XGBoost, LightGBM and CatBoost are imported only when such a model is
given.
"""
from ._ensemble import TreeArrays, TreeEnsemble

__all__ = ["TreeArrays", "TreeEnsemble", "to_ensemble", "UnsupportedModelError"]


class UnsupportedModelError(TypeError, ValueError):
    """A model, objective, split type or setting that cannot be explained exactly."""


def is_tree_model(model):
    """Whether ``model`` is of a type :func:`to_ensemble` reads: a scikit-learn
    tree model, or any XGBoost, LightGBM or CatBoost model (which
    ``to_ensemble`` may still refuse for its configuration, e.g. an objective
    or split type it cannot explain exactly)."""
    module = type(model).__module__.split(".")[0]
    if module in ("xgboost", "lightgbm", "catboost"):
        return True
    if module == "sklearn":
        from ._sklearn import is_tree_model as is_sklearn_tree_model

        return is_sklearn_tree_model(model)
    return False


def to_ensemble(model):
    """Translate a fitted tree model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : estimator or Booster
        A fitted scikit-learn tree model, XGBoost, LightGBM or CatBoost model,
        or a :class:`TreeEnsemble` (returned as is).

    Returns
    -------
    TreeEnsemble
    """
    if isinstance(model, TreeEnsemble):
        return model
    module = type(model).__module__.split(".")[0]
    if module == "sklearn":
        from . import _sklearn as adapter
    elif module == "xgboost":
        from . import _xgboost as adapter
    elif module == "lightgbm":
        from . import _lightgbm as adapter
    elif module == "catboost":
        from . import _catboost as adapter
    else:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not a supported tree model: expected a fitted "
            "scikit-learn tree, forest or gradient boosting model, or an XGBoost, "
            "LightGBM or CatBoost model."
        )
    return adapter.convert(model)
