"""R^2 shares of any regressor from its SHAP values (shapFlex; doc/shapflex.rst).

The shapFlex method (Redell, "Shapley decomposition of R-squared in machine
learning models") removes one feature's SHAP values from the predictions and
measures how much the residual variance grows. It needs nothing but a SHAP
matrix, so it serves regressors that are not trees. It is **not** a Shapley
decomposition of R^2: the shares add up to Gelman's R^2,
``var(yhat) / (var(yhat) + var(e))``, and only the residual variance that each
feature explains uniquely enters them (``sigma_unique`` reports how much that
is). :func:`r2_decomposition` (Q-SHAP) gives the Shapley values of R^2 itself
for tree models.

Where the SHAP values come from (:func:`model_shap_values`): a callable given
by the user; otherwise this package's exact kernels for tree models (the
piecewise-linear kernel for trees with linear leaves; at the end of a
:class:`~sklearn.pipeline.Pipeline`, the SHAP values of the game whose
players are the input columns, ``feature_groups="input"``); otherwise the exact
SHAP values of a scikit-learn linear regressor, ``coef_ * (x - mean(x))``,
also at the end of a :class:`~sklearn.pipeline.Pipeline`; otherwise an error
that says how to supply them.

Layer: public functions. Imports ``_model``, ``_scores``, ``_pipeline`` (the
one Pipeline unwrapper), the ground floor and the public SHAP functions
(``attributions``, ``piecewise``).
"""
import warnings

import numpy as np
import scipy.sparse
from sklearn.base import is_classifier, is_regressor
from sklearn.utils import check_array

from . import _pipeline
from ._execution.run import engine_of
from ._model import UnsupportedModelError, is_tree_model, to_ensemble
from ._scores import ShapFlexDecomposition, check_target
from ._validation import column_names, n_rows_features
from .attributions import shap_values as tree_shap_values
from .explanation import explain
from .piecewise import piecewise_shap_values

__all__ = ["shapflex_decomposition", "model_shap_values", "ShapFlexDecomposition"]

# |sum_j phi_j + phi_0 - predict(X)| allowed, relative to the scale of the predictions
_ADDITIVITY_RTOL = 1e-5


def _weighted_variance(values, weight):
    """Column variances with frequency weights; shapFlex uses only ratios of
    variances, so the normalisation (ddof) cancels."""
    total = weight.sum()
    mean = weight @ values / total
    return weight @ (values - mean) ** 2 / total


def shapflex_shares(phi, prediction, y, weight):
    """The shapFlex formula (doc/shapflex.rst; the paper's equations 4-7).

    Returns
    -------
    importances : ndarray of shape (n_features,)
        R2_j = R2 (1 - ratio_j) / sum_k (1 - ratio_k), all zero when every
        ratio is 1.
    r2 : float
        Gelman's R^2, var(yhat) / (var(yhat) + var(e)).
    sigma_unique : float
        sum_j [var(e + phi_j) - var(e)] / (var(y) - var(e)); NaN, with a
        warning, when var(e) >= var(y) (the model predicts y no better than
        its mean, so there is no explained variance to share).
    ratios : ndarray of shape (n_features,)
        min(var(e) / var(e + phi_j), 1), with 0/0 taken as 1.
    """
    residual = y - prediction
    var_residual = float(_weighted_variance(residual, weight))
    var_prediction = float(_weighted_variance(prediction, weight))
    var_y = float(_weighted_variance(y, weight))
    r2 = var_prediction / (var_prediction + var_residual)
    # var(e + phi_j) - var(e) = var(phi_j) + 2 cov(e, phi_j), computed as such so
    # that a feature with phi_j = 0 gains exactly 0 (no rounding noise to normalise)
    total = weight.sum()
    centred_phi = phi - weight @ phi / total
    centred_residual = residual - weight @ residual / total
    increase = weight @ (centred_phi * (centred_phi + 2.0 * centred_residual[:, None])) / total
    var_removed = var_residual + increase
    # removing a feature that does not raise the residual variance: ratio 1, share 0
    raises = increase > 0
    ratios = np.ones(phi.shape[1])
    ratios[raises] = var_residual / var_removed[raises]
    gains = np.zeros(phi.shape[1])
    gains[raises] = increase[raises] / var_removed[raises]  # 1 - ratio_j
    total_gain = gains.sum()
    importances = r2 * gains / total_gain if total_gain > 0 else np.zeros_like(gains)
    if var_y > var_residual:
        sigma_unique = float(np.sum(increase)) / (var_y - var_residual)
    else:
        warnings.warn(
            f"The residual variance ({var_residual:.6g}) is not below the variance of y "
            f"({var_y:.6g}): the model predicts y no better than its mean on these data, "
            "so sigma_unique is undefined (NaN) and Gelman's R^2 and its shares overstate "
            "what the model explains here.", UserWarning, stacklevel=3)
        sigma_unique = np.nan
    return importances, r2, sigma_unique, ratios


def _parse_user_shap(result, n_rows, n_features):
    """(phi, phi_0 or None) from a callable's (n, p) / (n, p + 1) output or a
    shap Explanation (``.values``, ``.base_values``)."""
    base = None
    if hasattr(result, "values") and hasattr(result, "base_values") and not callable(
            result.values):
        base = np.asarray(result.base_values, dtype=np.float64)
        result = result.values
    values = np.asarray(result, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != n_rows or values.shape[1] not in (
            n_features, n_features + 1):
        raise ValueError(
            f"shap_values(estimator, X) must return an array of shape ({n_rows}, {n_features}) "
            f"or ({n_rows}, {n_features + 1}) (the last column the expected value), got "
            f"shape {values.shape}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("shap_values(estimator, X) returned NaN or infinite values.")
    if values.shape[1] == n_features + 1:
        return values[:, :-1], values[:, -1]
    if base is not None:
        return values, np.broadcast_to(base, (n_rows,)).astype(np.float64)
    return values, None


def _input_column_values(model, X, n_rows, n_features, n_jobs, verbose):
    """``(phi, phi_0)`` of a Pipeline ending in a tree model: the exact SHAP
    values of the game whose players are the input columns (each playing the
    transformed columns made from it), in X's column order; an input column
    the Pipeline drops is a null player (0)."""
    explanation = explain(model, X, feature_groups="input", n_jobs=n_jobs, verbose=verbose)
    values = np.asarray(explanation.values, dtype=np.float64)
    if values.ndim != 2:
        raise UnsupportedModelError(
            f"{type(_pipeline.last_step(model)).__name__} at the end of the Pipeline has "
            f"{values.shape[2]} outputs; shapFlex decomposes the R^2 of a single-output "
            "regressor.")
    names = column_names(X)
    names = [f"x{j}" for j in range(n_features)] if names is None else [str(c) for c in names]
    column_of = {name: j for j, name in enumerate(names)}
    phi = np.zeros((n_rows, n_features))
    for k, name in enumerate(explanation.feature_names):
        if str(name) not in column_of:
            raise UnsupportedModelError(
                f"The Pipeline's player {name!r} is not a column of X; pass "
                "shap_values=f(estimator, X) returning an (n_samples, n_features) array.")
        phi[:, column_of[str(name)]] = values[:, k]
    return phi, np.asarray(explanation.base_values, dtype=np.float64).reshape(n_rows)


def _is_linear_regressor(model):
    final = _pipeline.last_step(model)
    return (is_regressor(final) and hasattr(final, "coef_") and hasattr(final, "intercept_")
            and type(final).__module__.startswith("sklearn.linear_model"))


def _feature_owners(model, X, Z):
    """The input feature each column of ``Z``, the rows X through the steps of the
    Pipeline ``model`` before its last, depends on.

    Each input column in turn is given the values of other rows (rows sorted
    by it, shifted by half); the output columns that change depend on it. A
    column that depends on two inputs makes the model non-additive in its
    inputs, and its SHAP values are not ``coef_ * (z - mean(z))`` per input.
    """
    n_rows, n_inputs = X.shape
    owners = np.full(Z.shape[1], -1)
    for j in range(n_inputs):
        column = X.iloc[:, j].to_numpy() if hasattr(X, "iloc") else X[:, j]
        try:
            order = np.argsort(column, kind="mergesort")
        except TypeError:  # mixed types: sort by their text
            order = np.argsort(column.astype(str), kind="mergesort")
        source = np.empty(n_rows, dtype=np.intp)
        source[order] = order[(np.arange(n_rows) + n_rows // 2) % n_rows]
        if hasattr(X, "iloc"):
            shifted = X.copy()
            shifted.iloc[:, j] = column[source]
        else:
            shifted = X.copy()
            shifted[:, j] = column[source]
        changed_z = _dense(_pipeline.transform(model, shifted))
        changed = ~((changed_z == Z) | (np.isnan(changed_z) & np.isnan(Z))).all(axis=0)
        shared = changed & (owners >= 0)
        if shared.any():
            c = int(np.flatnonzero(shared)[0])
            raise UnsupportedModelError(
                f"Transformed column {c} of the pipeline depends on input features "
                f"{owners[c]} and {j}: the model is not additive in its inputs, so its exact "
                "SHAP values are not coef_ * (z - mean(z)). Pass shap_values=f(estimator, X)."
            )
        owners[changed] = j
    unowned = (owners < 0) & (np.ptp(Z, axis=0) > 0)
    if unowned.any():
        raise UnsupportedModelError(
            f"Transformed column {int(np.flatnonzero(unowned)[0])} of the pipeline varies "
            "but depends on no single input feature; pass shap_values=f(estimator, X)."
        )
    return owners


def _dense(Z):
    if scipy.sparse.issparse(Z):
        Z = Z.toarray()
    return np.asarray(Z, dtype=np.float64)


def _linear_shap(model, X, n_features):
    """Exact SHAP values of a linear regressor, grouped by input feature."""
    final = _pipeline.last_step(model)
    coef = np.asarray(final.coef_, dtype=np.float64)
    if coef.ndim == 2 and coef.shape[0] == 1:
        coef = coef[0]
    if coef.ndim != 1:
        raise UnsupportedModelError(
            f"{type(final).__name__} has {coef.shape[0]} outputs; shapFlex decomposes the "
            "R^2 of a single-output regressor."
        )
    if not _pipeline.has_transformers(model):  # a sparse X: absent entries are 0 here
        Z = check_array(_dense(X), dtype=np.float64)
        owners = np.arange(n_features)
    else:
        Z = check_array(_dense(_pipeline.transform(model, X)), dtype=np.float64,
                        ensure_all_finite="allow-nan")
        owners = _feature_owners(model, X, Z)
    if Z.shape[1] != coef.shape[0]:
        raise ValueError(f"{type(final).__name__} has {coef.shape[0]} coefficients but "
                         f"receives {Z.shape[1]} columns.")
    terms = (Z - Z.mean(axis=0)) * coef
    phi = np.zeros((Z.shape[0], n_features))
    owned = owners >= 0
    np.add.at(phi.T, owners[owned], terms[:, owned].T)
    phi_0 = float(np.ravel(final.intercept_)[0]) + float(Z.mean(axis=0) @ coef)
    return phi, np.full(Z.shape[0], phi_0)


def model_shap_values(model, X, *, shap_values=None, n_jobs=None, verbose="auto"):
    """SHAP values of a regressor for shapFlex, from the first source that applies.

    1. ``shap_values(model, X)`` when given.
    2. Tree models: this package's exact path-dependent SHAP values
       (:func:`~sklearn_r2shap.shap_values`; trees with linear leaves:
       :func:`~sklearn_r2shap.piecewise_shap_values` with ``X`` as the
       background).
    3. scikit-learn linear regressors, alone or at the end of a Pipeline:
       ``coef_ * (z - mean(z))`` summed over the transformed columns of each
       input feature (the preprocessing must act on each feature separately,
       e.g. scaling, one-hot encoding, splines).

    Parameters
    ----------
    model : fitted regressor
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
    shap_values : callable, default=None
        ``shap_values(model, X)`` returning an array of shape (n_rows,
        n_features) or (n_rows, n_features + 1) (last column the expected
        value), or a ``shap.Explanation``.
    n_jobs : int, default=None
        Threads of the tree kernels.
    verbose : "auto" or int, default="auto"
        Progress of the tree kernels, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    phi : ndarray of shape (n_rows, n_features)
    phi_0 : ndarray of shape (n_rows,) or None
        The expected value per row, None when a callable gave none.
    source : str
        "callable", "tree", "piecewise-linear tree" or "linear".

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn_r2shap.shapflex import model_shap_values
    >>> X = np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 2.0]])
    >>> model = LinearRegression().fit(X, [1.0, 2.0, 4.0])
    >>> phi, phi_0, source = model_shap_values(model, X)
    >>> source, bool(np.allclose(phi.sum(axis=1) + phi_0, model.predict(X)))
    ('linear', True)
    """
    n_rows, n_features = n_rows_features(X)
    if is_classifier(model):
        raise UnsupportedModelError(
            f"{type(model).__name__} is a classifier; shapFlex decomposes the R^2 of a regressor."
        )
    if shap_values is not None:
        if not callable(shap_values):
            raise ValueError(f"shap_values must be a callable f(estimator, X), got "
                             f"{type(shap_values).__name__}.")
        phi, phi_0 = _parse_user_shap(shap_values(model, X), n_rows, n_features)
        return phi, phi_0, "callable"
    if _pipeline.ends_in_tree_model(model):
        return (*_input_column_values(model, X, n_rows, n_features, n_jobs, verbose), "tree")
    try:
        ensemble = to_ensemble(model)
    except UnsupportedModelError as error:
        if is_tree_model(model):  # a tree model whose configuration we cannot read exactly
            raise UnsupportedModelError(
                f"{error} shapFlex can use SHAP values of your own instead: pass "
                "shap_values=f(estimator, X) returning an (n_samples, n_features) array."
            ) from error
        ensemble = None
    if ensemble is not None:
        if ensemble.n_outputs != 1 or ensemble.n_values != 1:
            raise UnsupportedModelError(
                f"{ensemble.model_type} has {ensemble.n_outputs} outputs; shapFlex decomposes "
                "the R^2 of a single-output regressor."
            )
        if ensemble.has_linear_leaves:
            values = piecewise_shap_values(ensemble, X, background=X, n_jobs=n_jobs,
                                           verbose=verbose)
            source = "piecewise-linear tree"
        else:
            values = tree_shap_values(ensemble, X, n_jobs=n_jobs, verbose=verbose)
            source = "tree"
        return values[:, :-1], values[:, -1], source
    if _is_linear_regressor(model):
        phi, phi_0 = _linear_shap(model, X, n_features)
        return phi, phi_0, "linear"
    raise UnsupportedModelError(
        f"shapFlex needs SHAP values of {type(model).__name__}, which is neither a tree model "
        "this package explains exactly nor a scikit-learn linear regressor. Pass "
        "shap_values=f(estimator, X) returning an (n_samples, n_features) array, e.g. with "
        "the shap package: lambda est, X: shap.Explainer(est.predict, X)(X).values"
    )


def shapflex_decomposition(model, X, y, *, shap_values=None, sample_weight=None, n_jobs=None,
                           verbose="auto"):
    """shapFlex R^2 shares of a fitted regressor on (X, y) from its SHAP values.

    With ``phi`` the SHAP matrix of the model on X (:func:`model_shap_values`),
    ``yhat = sum_j phi_j + phi_0`` and ``e = y - yhat``:
    R2 = var(yhat) / (var(yhat) + var(e)) (Gelman's R^2),
    ratio_j = min(var(e) / var(e + phi_j), 1),
    R2_j = R2 (1 - ratio_j) / sum_k (1 - ratio_k) and
    sigma_unique = sum_j [var(e + phi_j) - var(e)] / (var(y) - var(e)).
    The shares are not Shapley values of R^2 (see the documentation page
    "shapFlex": they differ from Q-SHAP and LMG when features are
    correlated or the model is shrunken).

    Parameters
    ----------
    model : fitted regressor
        Anything with ``predict``: tree models and scikit-learn linear
        regressors are explained exactly; other models need ``shap_values``.
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
    y : array-like of shape (n_rows,)
    shap_values : callable, default=None
        ``shap_values(model, X) -> (n_rows, n_features)`` or ``(n_rows,
        n_features + 1)`` array; used instead of the exact sources when given.
    sample_weight : array-like of shape (n_rows,), optional
        Weighted variances.
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        The tree kernels' threads and progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    ShapFlexDecomposition
        ``shares`` the shares R2_j, ``score`` Gelman's R^2, ``sigma_unique``,
        ``residual_variance_ratios``, ``source`` (where the SHAP values came
        from) and NaN standard errors (the shares are not sums of per-row
        terms).

    Raises
    ------
    ValueError
        If y is constant, or if the SHAP values do not add up to
        ``model.predict(X)`` (up to a constant when no expected value is
        given).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn_r2shap import shapflex_decomposition
    >>> model = Ridge(alpha=0.1)
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> result = shapflex_decomposition(model.fit(X, y), X, y)
    >>> bool(np.isclose(result.shares.sum(), result.score))
    True
    >>> result.feature_names[np.argmax(result.shares)]
    'bmi'
    """
    if engine_of(X) != "local":
        raise ValueError(
            "shapflex_decomposition needs X in memory (it regresses y on every row's SHAP "
            "values); pass the rows in memory (a dask collection: X.compute(); a Spark "
            "DataFrame: a sample collected with toPandas()), or use r2_decomposition, which "
            "decomposes dask collections and Spark DataFrames where they are.")
    names = column_names(X)
    n_rows, n_features = n_rows_features(X)
    y, weight, _ = check_target(y, n_rows, sample_weight)
    phi, phi_0, source = model_shap_values(model, X, shap_values=shap_values, n_jobs=n_jobs,
                                           verbose=verbose)
    prediction = _checked_prediction(model, X, phi, phi_0, y, source)
    importances, r2, sigma_unique, ratios = shapflex_shares(phi, prediction, y, weight)
    if names is None:
        names = np.array([f"x{j}" for j in range(n_features)], dtype=object)
    return ShapFlexDecomposition(
        shares=importances, score=r2, unattributed=r2 - float(importances.sum()),
        feature_names=names, source=source, n_rows=n_rows, sigma_unique=sigma_unique,
        residual_variance_ratios=ratios, model_name=type(model).__name__,
    )


def _checked_prediction(model, X, phi, phi_0, y, source):
    """yhat = sum_j phi_j + phi_0, after checking it is ``model.predict(X)``."""
    summed = phi.sum(axis=1)
    if not hasattr(model, "predict"):
        if phi_0 is None:
            raise ValueError("Without model.predict the SHAP values must include the "
                             "expected value as their last column.")
        return summed + phi_0
    prediction = np.asarray(model.predict(X), dtype=np.float64)
    if prediction.ndim == 2 and prediction.shape[1] == 1:
        prediction = prediction[:, 0]
    if prediction.shape != (len(y),):
        raise UnsupportedModelError(
            f"{type(model).__name__}.predict returns shape {prediction.shape}; shapFlex "
            "decomposes the R^2 of a single-output regressor."
        )
    if phi_0 is None:
        phi_0 = np.full(len(y), np.mean(prediction - summed))
    gap = np.abs(summed + phi_0 - prediction)
    scale = max(float(np.max(np.abs(prediction))), float(np.std(y)), 1e-300)
    if gap.max() > _ADDITIVITY_RTOL * scale:
        row = int(np.argmax(gap))
        raise ValueError(
            f"The {source} SHAP values of {type(model).__name__} do not add up to its "
            f"predictions (row {row}: sum of SHAP values + expected value = "
            f"{summed[row] + phi_0[row]:.6g}, predict = {prediction[row]:.6g}). shapFlex needs "
            "SHAP values on the scale of predict (no link function) that add up to it "
            "(up to one constant when no expected value is given)."
        )
    return summed + phi_0
