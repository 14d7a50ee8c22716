"""A fitted scikit-learn Pipeline as (last step, transformed rows, feature names).

Every public function and estimator that explains a tree model accepts a
fitted :class:`~sklearn.pipeline.Pipeline` whose last step is a model this
package reads. The steps before it transform the rows once, here, and the
explanation is that of the last step in its own input space: its features
are the columns the preceding steps output, named by their
``get_feature_names_out``. This module is the one place that unwraps a
Pipeline; the public boundaries call :func:`unwrap` (model and rows) or
:func:`final_step` (model only) in a line.

Layer: public functions (the boundary's Pipeline unwrapping). Imports ``_model``,
``_validation`` and ``_execution.dask``; never a public function module or an estimator.
"""
import copy

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from ._execution import dask as _dask
from ._model import TreeEnsemble, UnsupportedModelError, is_tree_model
from ._validation import column_names

__all__ = ["is_pipeline", "explained_model", "with_last_step", "final_step", "last_step", "unwrap", "transform",
           "transformed_names", "has_transformers", "ends_in_tree_model"]


def is_pipeline(model):
    """Whether ``model`` is a scikit-learn Pipeline."""
    return isinstance(model, Pipeline)


def _steps(pipeline):
    """(transformer steps, (name, last step)) of a Pipeline, nested ones flattened;
    'passthrough' / None steps are dropped (they do not transform)."""
    transformers = []
    for name, step in pipeline.steps[:-1]:
        if step is None or (isinstance(step, str) and step == "passthrough"):
            continue
        transformers.append((name, step))
    name, last = pipeline.steps[-1]
    if is_pipeline(last):
        inner, (name, last) = _steps(last)
        transformers.extend(inner)
    return transformers, (name, last)


def _check_transformer(name, step):
    if not hasattr(step, "transform"):
        raise TypeError(
            f"Pipeline step {name!r} ({type(step).__name__}) is not a transformer (it has "
            "no transform method): only the last step of the explained Pipeline may be a "
            "model; every step before it must be a fitted transformer."
        )
    try:
        check_is_fitted(step)
    except NotFittedError as error:
        raise NotFittedError(
            f"Pipeline step {name!r} ({type(step).__name__}) is not fitted: fit the Pipeline "
            "before explaining it."
        ) from error


def final_step(model):
    """The model to explain: the last step of a Pipeline (checked), else ``model``.

    Raises
    ------
    UnsupportedModelError
        If the last step is a 'passthrough' / None step or a model that
        :func:`~sklearn_r2shap.to_ensemble` cannot read; the message names the
        step.
    """
    model = explained_model(model)
    if not is_pipeline(model):
        return model

    transformers, (name, last) = _steps(model)
    for step_name, step in transformers:
        _check_transformer(step_name, step)
    if not (isinstance(last, TreeEnsemble) or is_tree_model(last)):
        raise UnsupportedModelError(
            f"The last step {name!r} of the Pipeline ({type(last).__name__}) is not a "
            "supported tree model: expected a fitted scikit-learn tree, forest or gradient "
            "boosting model, or an XGBoost, LightGBM or CatBoost model."
        )
    return last


def last_step(model):
    """The last step of a Pipeline (nested Pipelines flattened), else ``model``.

    Unlike :func:`final_step` the step may be any model (shapFlex explains
    linear regressors too) and is not checked.
    """
    return _steps(model)[1][1] if is_pipeline(model) else model


def ends_in_tree_model(model):
    """Whether ``model`` is a Pipeline whose last step is a tree model we read."""
    if not is_pipeline(model):
        return False

    last = _steps(model)[1][1]
    return isinstance(last, TreeEnsemble) or is_tree_model(last)


def has_transformers(model):
    """Whether ``model`` is a Pipeline with at least one step before its model."""
    return is_pipeline(model) and bool(_steps(model)[0])


def transform(model, X):
    """The rows X through every step of the Pipeline ``model`` but the last."""
    transformers, _ = _steps(model)
    if transformers and _dask.is_dask_collection(X):
        raise ValueError(
            "A Pipeline with transforming steps cannot explain a dask collection directly: "
            "transform it first (e.g. X.map_partitions(pipeline[:-1].transform) or "
            "dask_ml), then explain the last step on the transformed collection."
        )
    for name, step in transformers:
        _check_transformer(name, step)
        X = step.transform(X)
    return X


def transformed_names(model, X=None):
    """Names of the last step's input features: ``get_feature_names_out`` of the
    steps before it (given X's column names), else the last step's own
    ``feature_names_in_``, else None."""
    transformers, (_, last) = _steps(model)
    names = column_names(X) if X is not None else None
    if not transformers:
        return names if names is not None else getattr(last, "feature_names_in_", None)
    try:
        for _, step in transformers:
            names = step.get_feature_names_out(names)
        return np.asarray(names, dtype=object)
    except Exception:  # a step without get_feature_names_out, or names it refuses
        names = getattr(last, "feature_names_in_", None)
        return None if names is None else np.asarray(names, dtype=object)


def explained_model(model):
    """What a prepared explainer (:class:`~sklearn_r2shap.TreeExplainer`, known
    by its ``__sklearn_r2shap_model__`` method) explains -- its ensemble, or a
    Pipeline ending in it -- else ``model``."""
    prepared = getattr(model, "__sklearn_r2shap_model__", None)
    return model if prepared is None else prepared()


def with_last_step(pipeline, step):
    """A Pipeline of copies of ``pipeline``'s transformers (nested ones
    flattened) and ``step`` as its last step."""
    transformers, (name, _) = _steps(pipeline)
    return Pipeline([(n, copy.deepcopy(t)) for n, t in transformers] + [(name, step)])


def unwrap(model, X):
    """``(last step, transformed X, names)`` of a Pipeline, ``(model, X, None)`` else.

    ``names`` are the names of the transformed columns
    (:func:`transformed_names`), or None for a Pipeline of the model alone
    given rows without column names.
    """
    if not is_pipeline(model):
        return model, X, None
    last = final_step(model)
    return last, transform(model, X), transformed_names(model, X)
