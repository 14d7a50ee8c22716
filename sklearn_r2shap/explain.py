"""Per-row attributions of tree models: SHAP, Saabas, Banzhaf, Beta Shapley.

Every function returns the attributions of the path-dependent game
(DESIGN.md sections 1-2) as a float64 array of shape
``(n_rows, n_features + 1)``, the last column the expected value
``v_x(empty)`` with the model's base value included, or
``(n_rows, n_outputs, n_features + 1)`` for models with several outputs
(multiclass). Values are in the model's raw (margin) space.
"""
import math

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.special import betaln

from ._kernels import _predict, _saabas, _semivalues
from ._model import to_ensemble
from ._validation import check_rows, resolve_n_jobs

__all__ = ["shap_values", "saabas_values", "banzhaf_values", "beta_shapley_values"]


def beta_quadrature(alpha, beta, degree):
    """Nodes and weights integrating ``g(t) Beta(t; beta, alpha)`` exactly on [0, 1].

    Exact for polynomials ``g`` of degree ``<= degree``: Gauss-Legendre with
    ``ceil((degree + alpha + beta - 1) / 2)`` nodes, the Beta density
    ``t^(beta-1) (1-t)^(alpha-1) / B(alpha, beta)`` folded into the weights
    (TreeGrad-Shap, Algorithm 7; DESIGN.md section 2).
    """
    total_degree = degree + (alpha - 1) + (beta - 1)
    n_nodes = max(1, math.ceil((total_degree + 1) / 2))
    nodes, weights = leggauss(n_nodes)
    t = (nodes + 1.0) / 2.0
    log_density = (beta - 1) * np.log(t) + (alpha - 1) * np.log1p(-t) - betaln(alpha, beta)
    return t, weights / 2.0 * np.exp(log_density)


def _check_beta_parameter(name, value):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


def _prepare(model, X):
    ensemble = to_ensemble(model)
    if ensemble.has_linear_leaves:
        from ._model import UnsupportedModelError

        raise UnsupportedModelError(
            f"{ensemble.model_type} has linear leaves (linear_tree=True); use "
            "PiecewiseLinearExplainer to explain it."
        )
    return ensemble, check_rows(ensemble, X)


def _with_expected_value(ensemble, contributions):
    """Append v_x(empty) = base + sum of tree means as the last column."""
    n_rows = contributions.shape[0]
    expected = expected_value(ensemble)
    out = np.empty((n_rows, ensemble.n_outputs, ensemble.n_features + 1))
    out[:, :, :-1] = contributions
    out[:, :, -1] = expected
    return out[:, 0, :] if ensemble.n_outputs == 1 else out


def expected_value(model):
    """v_x(empty): the base value plus each tree's cover-weighted mean, per output."""
    ensemble = to_ensemble(model)
    means = _predict.node_means(ensemble)[ensemble.tree_start[:-1]]
    expected = ensemble.base_value.copy()
    if ensemble.n_values == 1:
        np.add.at(expected, ensemble.tree_output, means[:, 0])
    else:
        expected += means.sum(axis=0)
    return expected


def _uniform_semivalues(model, X, points_weights, n_jobs):
    ensemble, X = _prepare(model, X)
    points, weights = points_weights(ensemble)
    phi = _semivalues.semivalues_uniform(
        ensemble, X, np.ascontiguousarray(points), np.ascontiguousarray(weights),
        resolve_n_jobs(n_jobs),
    )
    return _with_expected_value(ensemble, phi)


def shap_values(model, X, *, n_jobs=None):
    """Exact path-dependent SHAP values (TreeSHAP's game) of every row.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like or DataFrame of shape (n_rows, n_features)
        Rows to explain. NaN is allowed where the model accepts it.
    n_jobs : int, default=None
        Threads; None uses all cores.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Shapley values, the expected value last; a row sums to the model's
        raw prediction.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import shap_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> phi = shap_values(model, X[:5])
    >>> phi.shape
    (5, 11)
    >>> bool(np.allclose(phi.sum(axis=1), model.predict(X[:5])))
    True
    """
    return beta_shapley_values(model, X, alpha=1, beta=1, n_jobs=n_jobs)


def beta_shapley_values(model, X, *, alpha=1, beta=1, n_jobs=None):
    """Exact Beta(alpha, beta) Shapley values of the path-dependent game.

    The semivalue with weights ``w(s) = B(s + beta, n - 1 - s + alpha) / B(alpha, beta)``
    (DESIGN.md section 2): (1, 1) is Shapley, (16, 1) weights small
    coalitions, (1, 16) large ones. Computed by TreeGrad-Shap: Gauss-Legendre
    quadrature of the multilinear extension's gradient, stable at any depth.

    Parameters
    ----------
    model : fitted tree model
    X : array-like or DataFrame of shape (n_rows, n_features)
    alpha, beta : int >= 1, default=1
    n_jobs : int, default=None

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the expected value ``v_x(empty)`` last.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from sklearn_r2shap import beta_shapley_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    >>> beta_shapley_values(model, X[:3], alpha=16, beta=1).shape
    (3, 11)
    """
    alpha = _check_beta_parameter("alpha", alpha)
    beta = _check_beta_parameter("beta", beta)
    return _uniform_semivalues(
        model, X, lambda ens: beta_quadrature(alpha, beta, ens.n_path_features - 1), n_jobs
    )


def banzhaf_values(model, X, *, q=0.5, n_jobs=None):
    """Exact weighted Banzhaf values ``grad F(q 1)`` of the path-dependent game.

    Weights ``w(s) = q^s (1 - q)^(n - 1 - s)``; ``q = 0.5`` is the Banzhaf value.

    Parameters
    ----------
    model : fitted tree model
    X : array-like or DataFrame of shape (n_rows, n_features)
    q : float in (0, 1), default=0.5
    n_jobs : int, default=None

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the expected value ``v_x(empty)`` last (Banzhaf values
        need not add up to the prediction).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import banzhaf_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=2, random_state=0).fit(X, y)
    >>> banzhaf_values(model, X[:2], q=0.2).shape
    (2, 11)
    """
    q = float(q)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in the open interval (0, 1), got {q}.")
    return _uniform_semivalues(model, X, lambda ens: (np.array([q]), np.array([1.0])), n_jobs)


def saabas_values(model, X, *, n_jobs=None):
    """Saabas path contributions (XGBoost's ``approx_contribs``).

    Along the row's decision path, the change of the node's cover-weighted
    mean is credited to the node's split feature.

    Parameters
    ----------
    model : fitted tree model
    X : array-like or DataFrame of shape (n_rows, n_features)
    n_jobs : int, default=None

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Contributions, the expected value last; a row sums to the raw prediction.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import saabas_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> bool(np.allclose(saabas_values(model, X[:4]).sum(axis=1), model.predict(X[:4])))
    True
    """
    ensemble, X = _prepare(model, X)
    means = _predict.node_means(ensemble)
    phi = _saabas.saabas(ensemble, X, means, resolve_n_jobs(n_jobs))
    return _with_expected_value(ensemble, phi)


def predict_raw(model, X, *, n_jobs=None):
    """The ensemble's raw (margin) prediction, shape (n_rows, n_outputs).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from sklearn_r2shap import predict_raw
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, y)
    >>> bool(np.allclose(predict_raw(model, X)[:, 0], model.predict(X)))
    True
    """
    ensemble, X = _prepare(model, X)
    return _predict.predict_raw(ensemble, X, resolve_n_jobs(n_jobs))
